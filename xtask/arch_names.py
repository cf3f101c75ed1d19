#!/usr/bin/env python3
"""Lists the files of the core folders (target, os, sampler, unwind, cli by default) whose code,
comments left out, names an architecture: a table by name (prof_arch_x86_64, ...), an
architecture's register constant (X86_..., RISCV_..., AARCH64_...) or its name as a string.
Architecture facts belong in arch/arch_<name>.c and linux/lx_arch_<name>.c (docs/architecture.md,
"Where each architecture fact lives"). A text heuristic, as circles.py is.
Usage: xtask/arch_names.py [ROOT [FOLDER...]] (default: the repository). Prints each file with its
lines, then the count; exits 0 either way."""
import os
import re
import sys

PATTERN = re.compile(r'prof_arch_(x86_64|riscv64|aarch64)|X86_|RISCV_|AARCH64_|'
                     r'"x86_64"|"riscv64"|"aarch64"')
FOLDERS = ['target', 'os', 'sampler', 'unwind', 'cli']


def without_comments(src):
    """src with /* */ and // comments blanked (their newlines kept), string literals kept."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * src.count('\n', i, j))
            i = j
        elif src.startswith('//', i):
            j = src.find('\n', i)
            i = n if j < 0 else j
        elif src[i] in '"\'':
            j = i + 1
            while j < n and src[j] != src[i]:
                j += 2 if src[j] == '\\' else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return ''.join(out)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    folders = sys.argv[2:] or FOLDERS
    hits = []
    for folder in folders:
        for dirpath, _, names in sorted(os.walk(os.path.join(root, folder))):
            for name in sorted(names):
                if not name.endswith(('.c', '.h')):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, errors='replace') as f:
                    code = without_comments(f.read())
                lines = [line.strip() for line in code.splitlines() if PATTERN.search(line)]
                if lines:
                    hits.append((os.path.relpath(path, root), lines))
    for path, lines in hits:
        print(path)
        for line in lines:
            print('    ' + line)
    print(f'{len(hits)} files name an architecture in code')


if __name__ == '__main__':
    main()
