#!/usr/bin/env python3
"""Every relative link and anchor in README.md and docs/*.md resolves.

Usage: check_links.py ROOT. Checks [text](target) and ![alt](target) links outside code
blocks and code spans: a relative target must name an existing file or folder, and a #anchor
must be a heading of the target file, spelled as GitHub spells heading anchors. Prints one
line per broken link and exits 1 if there is any.
"""
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)", re.S)


def prose(text):
    """The text without fenced code blocks and code spans, which hold no links."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation gone."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    heading = heading.replace("`", "").strip().lower()
    heading = re.sub(r"[^\w\- ]", "", heading)
    return heading.replace(" ", "-")


def anchors(path):
    found, counts = set(), {}
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```[^\n]*$", "", f.read(), flags=re.S | re.M)
    for m in re.finditer(r"^#{1,6} +(.+?) *#* *$", text, flags=re.M):
        base = slug(m.group(1))
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else "%s-%d" % (base, n))
    return found


def check(root, md):
    broken = []
    with open(md, encoding="utf-8") as f:
        text = prose(f.read())
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:: not checked offline
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not os.path.exists(dest):
            broken.append("%s: %s: no such file" % (os.path.relpath(md, root), target))
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            broken.append("%s: %s: no heading with that anchor" % (os.path.relpath(md, root), target))
    return broken


def main():
    root = sys.argv[1]
    docs = os.path.join(root, "docs")
    files = [os.path.join(root, "README.md")]
    files += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    broken = [line for md in files for line in check(root, md)]
    for line in broken:
        print(line)
    print("%d links broken in %d files" % (len(broken), len(files)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
