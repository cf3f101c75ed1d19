// Checks speedscope files against speedscope's published JSON schema, then against what its
// importer (importSpeedscopeProfile) needs that the schema cannot say: frame indexes in range,
// as many weights as samples, no negative weight.
// Usage: node speedscope_schema.js NODE_MODULES DIR (run by node_test.sh: it checks every
// DIR/*.speedscope.json with the schema found in NODE_MODULES/speedscope).
// With ajv in NODE_MODULES the schema is checked by ajv; without it by the small validator
// below, which refuses any schema keyword it does not implement rather than pass it silently.
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, dir] = process.argv.slice(2);
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.speedscope.json')).sort()
    .map((f) => path.join(dir, f));

// Where the package keeps it (dist/release/ in 1.x), found rather than assumed.
function findSchema(at) {
    for (const entry of fs.readdirSync(at, {withFileTypes: true})) {
        const full = path.join(at, entry.name);
        if (entry.isFile() && entry.name === 'file-format-schema.json') return full;
        if (entry.isDirectory() && entry.name !== 'node_modules') {
            const found = findSchema(full);
            if (found) return found;
        }
    }
    return null;
}
const schemaPath = findSchema(path.join(modules, 'speedscope'));
if (!schemaPath) {
    console.error('SKIP: the speedscope npm package has no file-format-schema.json');
    process.exit(77);
}
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
let failures = 0;

function fail(file, message) {
    console.error(`FAIL ${path.basename(file)}: ${message}`);
    failures++;
}

function loadAjv() {
    try {
        const Ajv = require(path.join(modules, 'ajv'));
        const ajv = new (Ajv.default || Ajv)({allErrors: true, strict: false});
        const validate = ajv.compile(schema);
        const version = require(path.join(modules, 'ajv', 'package.json')).version;
        return {
            name: `ajv ${version}`,
            check: (doc) => (validate(doc) ? [] : validate.errors.map(
                (e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`)),
        };
    } catch (e) {
        console.log(`ajv not usable (${e.message.split('\n')[0]}): using the built-in checks`);
        return null;
    }
}

// The draft-07 keywords speedscope's schema uses, and nothing more.
const ignored = new Set(['title', 'description', '$schema', 'definitions']);
function typeOk(type, v) {
    switch (type) {
    case 'object': return v !== null && typeof v === 'object' && !Array.isArray(v);
    case 'array': return Array.isArray(v);
    case 'string': return typeof v === 'string';
    case 'number': return typeof v === 'number' && Number.isFinite(v);
    case 'integer': return Number.isInteger(v);
    case 'boolean': return typeof v === 'boolean';
    default: throw new Error(`schema type ${type} not implemented`);
    }
}
function resolve(ref) {
    if (!ref.startsWith('#/')) throw new Error(`$ref ${ref} not implemented`);
    return ref.slice(2).split('/').reduce((node, key) => node[key], schema);
}
function validateBy(s, v, where, errors) {
    for (const key of Object.keys(s)) {
        if (ignored.has(key)) continue;
        const arg = s[key];
        switch (key) {
        case '$ref': validateBy(resolve(arg), v, where, errors); break;
        case 'type':
            if (!typeOk(arg, v)) errors.push(`${where} is not of type ${arg}`);
            break;
        case 'const':
            if (v !== arg) errors.push(`${where} is not ${JSON.stringify(arg)}`);
            break;
        case 'enum':
            if (!arg.includes(v)) errors.push(`${where} is not one of ${JSON.stringify(arg)}`);
            break;
        case 'required':
            if (typeOk('object', v))
                for (const k of arg)
                    if (!(k in v)) errors.push(`${where} lacks required "${k}"`);
            break;
        case 'properties':
            if (typeOk('object', v))
                for (const [k, sub] of Object.entries(arg))
                    if (k in v) validateBy(sub, v[k], `${where}/${k}`, errors);
            break;
        case 'items':
            if (Array.isArray(v)) v.forEach((item, i) => validateBy(arg, item, `${where}/${i}`, errors));
            break;
        case 'anyOf': {
            const branches = arg.map((sub) => {
                const e = [];
                validateBy(sub, v, where, e);
                return e;
            });
            if (!branches.some((e) => e.length === 0))
                errors.push(`${where} matches no anyOf branch: ${branches.map((e) => e.join('; ')).join(' | ')}`);
            break;
        }
        default: throw new Error(`schema keyword ${key} not implemented`);
        }
    }
}
const builtIn = {name: 'built-in draft-07 subset', check: (doc) => {
    const errors = [];
    validateBy(schema, doc, '', errors);
    return errors;
}};

// What speedscope's importer throws on or silently mis-draws.
function importerChecks(doc) {
    const errors = [];
    const frames = doc.shared.frames.length;
    if (doc.profiles.length > 0 &&
        !(Number.isInteger(doc.activeProfileIndex) && doc.activeProfileIndex >= 0 &&
          doc.activeProfileIndex < doc.profiles.length))
        errors.push(`activeProfileIndex ${doc.activeProfileIndex} is not a profile`);
    doc.profiles.forEach((p, i) => {
        if (p.type !== 'sampled') return;
        if (p.samples.length !== p.weights.length)
            errors.push(`profile ${i}: ${p.samples.length} samples but ${p.weights.length} weights`);
        if (p.endValue < p.startValue) errors.push(`profile ${i}: endValue before startValue`);
        p.samples.forEach((stack, k) => {
            if (stack.length === 0) errors.push(`profile ${i} sample ${k}: empty stack`);
            for (const f of stack)
                if (!Number.isInteger(f) || f < 0 || f >= frames)
                    errors.push(`profile ${i} sample ${k}: frame ${f} not among ${frames} frames`);
        });
        p.weights.forEach((w, k) => {
            if (!(w >= 0)) errors.push(`profile ${i} weight ${k}: ${w}`);
        });
    });
    return errors;
}

const validator = loadAjv() || builtIn;
let speedscopeVersion = '?';
try {
    speedscopeVersion = require(path.join(modules, 'speedscope', 'package.json')).version;
} catch (e) {}
console.log(`schema ${schemaPath} (speedscope ${speedscopeVersion}), validator: ${validator.name}`);
if (files.length === 0) {
    console.error('FAIL: no speedscope files to validate');
    process.exit(1);
}
for (const file of files) {
    let doc;
    try {
        doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
        fail(file, `not JSON: ${e.message}`);
        continue;
    }
    let errors = validator.check(doc).map((e) => `schema: ${e}`);
    if (errors.length === 0) errors = importerChecks(doc);
    errors.forEach((e) => fail(file, e));
    const samples = (doc.profiles || []).reduce((n, p) => n + (p.samples || []).length, 0);
    console.log(`${path.basename(file)}: ${doc.profiles ? doc.profiles.length : 0} profiles, ` +
                `${samples} samples: ${errors.length ? 'INVALID' : 'valid'}`);
}
process.exit(failures ? 1 : 0);
