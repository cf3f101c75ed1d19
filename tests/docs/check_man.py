#!/usr/bin/env python3
"""The man pages were built, and each holds every long option its --help lists.

Usage: check_man.py QPROF PAGE.1... (qprof-SUB.1 is `qprof SUB --help`'s page). Exits 77 when
no page was configured (no help2man), 1 with one line per problem.
"""
import os
import re
import subprocess
import sys


def check(qprof, page):
    name = os.path.basename(page)[:-2]
    sub = name[len("qprof-"):] if name.startswith("qprof-") else ""
    if not os.path.isfile(page) or os.path.getsize(page) == 0:
        return ["%s: missing or empty" % page]
    with open(page, encoding="utf-8") as f:
        text = f.read()
    problems = []
    if not re.search(r'^\.TH "?%s"? "?1' % re.escape(name.upper()), text, re.M):
        problems.append("%s: no .TH %s 1 line" % (page, name.upper()))
    cmd = [qprof] + ([sub] if sub else []) + ["--help"]
    helptext = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    opts = sorted(set(re.findall(r"--[a-z][a-z0-9-]*", helptext)))
    if not opts:
        problems.append("%s: `qprof %s --help` lists no option" % (page, sub))
    for opt in opts:
        # help2man writes each - as \- (but in section titles, which it copies as they are)
        if opt.replace("-", "\\-") not in text and opt not in text:
            problems.append("%s: %s of `qprof %s --help` missing" % (page, opt, sub))
    print("%s: %d options" % (page, len(opts)))
    return problems


def main():
    qprof, pages = sys.argv[1], sys.argv[2:]
    if not pages:
        print("no man pages configured (help2man missing?)")
        return 77
    problems = [p for page in pages for p in check(qprof, page)]
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
