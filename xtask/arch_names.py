#!/usr/bin/env python3
"""Lines of C code that name an architecture, outside the files whose job that is.

Usage: xtask/arch_names.py [--allow REGEX]... [--fail] [PATH...]

Every architecture fact lives in arch/arch_<name>.c (and arch_<name>.h) and
linux/lx_arch_<name>.c (docs/architecture.md, "Where each architecture fact lives"); this
lists the other .c and .h files under PATH (default: the repository's product folders) whose
code, comments and preprocessor lines aside from `#include`, names one: x86/riscv/aarch64/arm64
spelled any way, prof_arch_<name>, QPR_ARCH_, X86_ and friends. Comments are left out (they may
give an architecture as an example); string literals count. A line matching an --allow REGEX is
not listed. Prints file:line: code, then the number of files; with --fail, exits 1 when any
line is listed.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ["arch", "cli", "common", "gdb", "linux", "os", "output", "plugin", "qmp", "sampler",
           "symbols", "target", "unwind"]
NAMES = re.compile(r"x86|X86|i386|riscv|RISCV|rv64|RV64|aarch64|AARCH64|arm64|ARM64|a64_|A64_")
OWN = re.compile(r"^(arch/arch_[a-z0-9_]+\.[ch]|linux/lx_arch_[a-z0-9_]+\.c)$")


def code_lines(text):
    """(line number, code) with comments blanked, strings kept."""
    out, i, n, line, cur = [], 0, len(text), 1, []
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for ch in text[i:end]:
                if ch == "\n":
                    out.append((line, "".join(cur)))
                    cur, line = [], line + 1
            i = end
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "\n":
            out.append((line, "".join(cur)))
            cur, line = [], line + 1
        else:
            cur.append(c)
        i += 1
    out.append((line, "".join(cur)))
    return out


def files(paths):
    for p in paths:
        full = os.path.join(ROOT, p)
        if os.path.isfile(full):
            yield p
            continue
        for d, _, names in os.walk(full):
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, name), ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--allow", action="append", default=[])
    ap.add_argument("--fail", action="store_true")
    ap.add_argument("paths", nargs="*", default=PRODUCT)
    a = ap.parse_args()
    allow = [re.compile(r) for r in a.allow]
    named = 0
    for f in sorted(set(files(a.paths))):
        if OWN.match(f):
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        hits = [(n, l.strip()) for n, l in code_lines(text)
                if NAMES.search(l) and not l.lstrip().startswith("#include")
                and not any(r.search(l) for r in allow)]
        for n, l in hits:
            print(f"{f}:{n}: {l}")
        named += bool(hits)
    print(f"{named} files name an architecture in code")
    return 1 if a.fail and named else 0


if __name__ == "__main__":
    sys.exit(main())
