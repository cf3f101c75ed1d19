// Runs the flame graph's own script in jsdom and uses it as a person would: hover, click every
// box to zoom, reset the zoom, search with Ctrl-F, clear with Escape; after each step the
// boxes must be where the layout says.
// Usage: node svg_viewer.js NODE_MODULES DIR (run by node_test.sh on DIR/*.svg).
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, dir] = process.argv.slice(2);
const {JSDOM} = require(path.join(modules, 'jsdom'));
const W = 1200, XPAD = 10, MATCH_FILL = 'rgb(230,0,230)';
let failures = 0, checks = 0;

function check(ok, message) {
    checks++;
    if (!ok) {
        console.error(`FAIL ${message}`);
        failures++;
    }
}
const near = (a, b, tolerance) => Math.abs(a - b) <= tolerance;

function open(file) {
    const dom = new JSDOM(fs.readFileSync(file, 'utf8'),
                          {contentType: 'image/svg+xml', runScripts: 'outside-only'});
    const w = dom.window, d = w.document;
    const scripts = d.getElementsByTagName('script');
    check(scripts.length === 1, `${file}: ${scripts.length} scripts`);
    // jsdom does not run SVG scripts by itself; the browser calls init from the onload attribute
    check(d.documentElement.getAttribute('onload') === 'init(evt)', 'onload calls init');
    w.eval(scripts[0].textContent + '\n;init(null);');
    return {w, d};
}

// The boxes with their layout as written, and the tree their geometry implies.
function boxes(d) {
    const list = [...d.getElementsByClassName('frame')].map((g) => {
        const r = g.getElementsByTagName('rect')[0], title = g.getElementsByTagName('title')[0].textContent;
        const open = title.lastIndexOf(' (');
        return {g, r, text: g.getElementsByTagName('text')[0], title, name: title.substring(0, open),
                count: parseInt(title.substring(open + 2), 10), x: +r.getAttribute('x'),
                width: +r.getAttribute('width'), y: +r.getAttribute('y'), fill: r.getAttribute('fill'),
                xText: r.getAttribute('x'), widthText: r.getAttribute('width'), label: null};
    });
    for (const b of list) {
        b.label = b.text.textContent;
        b.parent = list.find((up) => up.y === b.y + 16 && up.x <= b.x + 0.001 &&
                                     b.x + b.width <= up.x + up.width + 0.001) || null;
    }
    return list;
}
const isUnder = (b, a) => { for (let p = b.parent; p; p = p.parent) if (p === a) return true; return false; };
const classes = (b) => b.g.getAttribute('class').split(/\s+/).sort().join(' ');

function click(w, el) { el.dispatchEvent(new w.MouseEvent('click', {bubbles: true})); }

function checkZoomedOn(t, list, d, file) {
    const scale = (W - 2 * XPAD) / t.width;
    for (const b of list) {
        const x = +b.r.getAttribute('x'), width = +b.r.getAttribute('width');
        const what = `${file}: zoomed on ${t.title}, box ${b.title}`;
        if (b === t || isUnder(b, t)) {
            check(classes(b) === 'frame', `${what}: class ${classes(b)}`);
            check(near(x, XPAD + (b.x - t.x) * scale, 0.02 * scale + 0.01) &&
                      near(width, b.width * scale, 0.02 * scale + 0.01),
                  `${what}: at ${x} ${width}`);
            const fit = Math.floor((width - 3) / (12 * 0.59)), label = b.text.textContent;
            check(fit < 3 ? label === '' : label === b.name || (label.endsWith('..') &&
                  label.length === fit && b.name.startsWith(label.slice(0, -2))),
                  `${what}: label "${label}" in ${width} px`);
        } else if (isUnder(t, b)) {
            check(classes(b) === 'frame parent', `${what}: class ${classes(b)}`);
            check(x === XPAD && width === W - 2 * XPAD, `${what}: ancestor at ${x} ${width}`);
        } else {
            check(classes(b) === 'frame hide', `${what}: class ${classes(b)}`);
        }
    }
    check(!d.getElementById('unzoom').classList.contains('hide'), 'Reset Zoom shows when zoomed');
}

function checkAsWritten(list, d, what) {
    for (const b of list) {
        check(classes(b) === 'frame' && b.r.getAttribute('x') === b.xText &&
                  b.r.getAttribute('width') === b.widthText && b.text.textContent === b.label,
              `${what}: ${b.title} at ${b.r.getAttribute('x')} ${b.r.getAttribute('width')}`);
    }
    check(d.getElementById('unzoom').classList.contains('hide'), `${what}: Reset Zoom hidden`);
}

// Samples in matching boxes not under another matching box, as the share of the visible width.
function expectedShare(list, re, under) {
    const visible = under ? list.filter((b) => b === under || isUnder(b, under)) : list;
    const outer = visible.filter((b) => re.test(b.name) &&
                                      !visible.some((a) => a !== b && isUnder(b, a) && re.test(a.name)));
    const ancestorMatches = under && list.some((a) => isUnder(under, a) && re.test(a.name));
    if (ancestorMatches) return 100; // a stretched ancestor covers the whole view
    const total = under ? under.count : list.find((b) => !b.parent).count;
    return 100 * outer.reduce((n, b) => n + b.count, 0) / total;
}

function search(w, d, list, term, under, file) {
    w.prompt = () => term;
    w.dispatchEvent(new w.KeyboardEvent('keydown', {key: 'f', ctrlKey: true}));
    const re = new RegExp(term), what = `${file}: search /${term}/`;
    for (const b of list)
        check(b.r.getAttribute('fill') === (re.test(b.name) ? MATCH_FILL : b.fill), `${what}: ${b.title} fill`);
    const shown = d.getElementById('matched').textContent;
    const want = expectedShare(list, re, under);
    const got = parseFloat(shown.replace('Matched: ', ''));
    check(shown.startsWith('Matched: ') && near(got, want, 0.11), `${what}: "${shown}", want ${want.toFixed(2)}%`);
    check(d.getElementById('search').textContent === 'Reset Search', `${what}: button`);
}

function clearSearch(w, d, list, file) {
    w.dispatchEvent(new w.KeyboardEvent('keydown', {key: 'Escape'}));
    for (const b of list) check(b.r.getAttribute('fill') === b.fill, `${file}: Escape restores ${b.title}`);
    check(d.getElementById('matched').textContent === ' ', `${file}: matched cleared`);
    check(d.getElementById('search').textContent === 'Search', `${file}: button back`);
}

const files = fs.readdirSync(dir).filter((f) => f.endsWith('.svg')).sort();
if (files.length === 0) {
    console.error('FAIL: no SVG files to check');
    process.exit(1);
}
for (const file of files) {
    const {w, d} = open(path.join(dir, file));
    const list = boxes(d);
    check(list.length > 3 && list.filter((b) => !b.parent).length === 1, `${file}: one root`);

    list[1].r.dispatchEvent(new w.MouseEvent('mouseover', {bubbles: true}));
    check(d.getElementById('details').textContent === list[1].title, `${file}: hover shows the title`);
    list[1].r.dispatchEvent(new w.MouseEvent('mouseout', {bubbles: true}));

    for (const t of list) {
        click(w, t.text); // a click on the label zooms as one on the box
        checkZoomedOn(t, list, d, file);
        click(w, d.getElementById('unzoom'));
        checkAsWritten(list, d, `${file}: after zooming on ${t.title}`);
    }

    for (const term of ['^main$', '\\[truncated\\]', 'operator<<|sys_', '^cpu1$|^idle$', 'nothing matches this'])
        search(w, d, list, term, null, file);
    // zooming keeps the search and measures it against the zoomed view
    const deep = list.find((b) => b.name === 'main');
    search(w, d, list, 'operator|main', null, file);
    click(w, deep.r);
    search(w, d, list, 'operator', deep, file);
    click(w, d.getElementById('unzoom'));
    clearSearch(w, d, list, file);
    checkAsWritten(list, d, `${file}: at the end`);
    console.log(`${file}: ${list.length} boxes: zoom, reset, search and clear checked`);
}
console.log(`${checks} checks, ${failures} failed`);
process.exit(failures ? 1 : 0);
