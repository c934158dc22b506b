#!/usr/bin/env python3
"""Check the relative links of Markdown files: every [text](path#anchor)
must name a file of the tree and, with an anchor, a heading of that file.

Anchors are computed as GitHub writes them: the heading lowercased, every
character that is not a letter, digit, space, '-' or '_' dropped, spaces
made '-', and a repeated anchor numbered (-1, -2, ...). Links to http(s)
and mailto are not followed.

usage: check_doc_links.py FILE.md...
"""
import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def strip_code(text):
    """The text with fenced blocks and inline code spans blanked out."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "``", line))
    return "\n".join(out)


def anchors(path):
    seen, out, fenced = {}, set(), False
    for line in open(path, encoding="utf-8").read().split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6} (.*)$", line)
        if m:
            a = slug(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else "%s-%d" % (a, n))
    return out


def main(files):
    bad = checked = 0
    cache = {}
    for f in files:
        text = strip_code(open(f, encoding="utf-8").read())
        for lineno, line in enumerate(text.split("\n"), 1):
            for target in LINK.findall(line):
                if re.match(r"^(https?|mailto):", target):
                    continue
                checked += 1
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
                if not os.path.exists(dest):
                    print("%s:%d: %s: no such file" % (f, lineno, target))
                    bad += 1
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        print("%s:%d: %s: no heading with that anchor in %s" % (f, lineno, target, dest))
                        bad += 1
    print("%d links checked in %d files, %d broken" % (checked, len(files), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
