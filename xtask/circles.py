#!/usr/bin/env python3
"""Lists pairs of product .c files that call each other (A calls a function B defines and B one
A defines), the circles docs/architecture.md rules out. A text heuristic, not a compiler: a
definition is a non-static function at column 0, a use is NAME( or NAME taken as a value, outside
comments. Usage: xtask/circles.py [ROOT] (default: the repository). Exits 1 when a pair exists."""
import glob
import os
import re
import sys

SKIP = ('tests', 'bench', 'guest', 'build')


def product_files(root):
    return [f for f in glob.glob(os.path.join(root, '*', '*.c'))
            if not os.path.relpath(f, root).startswith(SKIP)]


def definitions(files):
    defs = {}
    head = re.compile(r'^(?!static\b|typedef\b|return\b|struct\s+\w+\s*\{)[A-Za-z_][\w \*]*?\b(\w+)\(')
    for f in files:
        for line in open(f, errors='replace'):
            m = head.match(line)
            if m and not line.rstrip().endswith(';'):
                defs.setdefault(m.group(1), f)
    return defs


def calls(files, defs):
    out = {}
    for f in files:
        text = re.sub(r'/\*.*?\*/', '', open(f, errors='replace').read(), flags=re.S)
        names = set(re.findall(r'\b(\w+)\s*\(', text)) | set(re.findall(r'=\s*(\w+)\s*[,;}]', text))
        out[f] = {defs[n] for n in names if n in defs and defs[n] != f}
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = product_files(root)
    uses = calls(files, definitions(files))
    pairs = sorted({tuple(sorted((a, b))) for a in files for b in uses[a] if a in uses.get(b, ())})
    for a, b in pairs:
        print(os.path.relpath(a, root), '<->', os.path.relpath(b, root))
    print(len(pairs), 'pairs of files calling each other')
    return 1 if pairs else 0


if __name__ == '__main__':
    sys.exit(main())
