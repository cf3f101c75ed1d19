#!/usr/bin/env python3
"""Every qprof command shown in README.md and docs/*.md uses options that exist.

Usage: check_commands.py QPROF ROOT. In each code block, a line that runs qprof (`qprof ...`,
`$ qprof ...`, `build/qprof ...`, with its backslash-continued lines) is taken apart: its
subcommand (record, report, top, diff, annotate, or none) chooses whose --help is asked, and
every --option on the line must be listed there. Prints one line per unknown option and exits 1
if there is any. docs/options.md, which is --help itself, is skipped.
"""
import os
import re
import subprocess
import sys

SUBCOMMANDS = ("record", "report", "top", "diff", "annotate")
RUNS_QPROF = re.compile(r"^\s*(?:\$ )?(?:[\w./-]*/)?qprof(?= |$)(.*)$")


def help_options(qprof, sub):
    cmd = [qprof] + ([sub] if sub else []) + ["--help"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"--[a-z][a-z0-9-]*", text))


def commands(path):
    """(line number, command text) of each qprof command in the file's code blocks."""
    found, fence, pending = [], False, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("```"):
                fence = not fence
                continue
            if not fence:
                continue
            line = line.split(" #")[0].rstrip("\n")
            if pending is not None:
                pending[1] += " " + line
            else:
                m = RUNS_QPROF.match(line)
                if not m:
                    continue
                pending = [n, m.group(1)]
            if pending[1].rstrip().endswith("\\"):
                pending[1] = pending[1].rstrip()[:-1]
                continue
            found.append(tuple(pending))
            pending = None
    return found


def main():
    qprof, root = sys.argv[1], sys.argv[2]
    docs = os.path.join(root, "docs")
    files = [os.path.join(root, "README.md")]
    files += sorted(os.path.join(docs, n) for n in os.listdir(docs)
                    if n.endswith(".md") and n != "options.md")
    known, bad, checked = {}, [], 0
    for path in files:
        for n, cmd in commands(path):
            words = cmd.split()
            sub = words[0] if words and words[0] in SUBCOMMANDS else ""
            if sub not in known:
                known[sub] = help_options(qprof, sub)
            checked += 1
            for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", cmd):
                if opt not in known[sub]:
                    bad.append("%s:%d: qprof %s: %s is not in its --help"
                               % (os.path.relpath(path, root), n, sub or "", opt))
    for line in bad:
        print(line)
    print("%d qprof commands checked, %d unknown options" % (checked, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
