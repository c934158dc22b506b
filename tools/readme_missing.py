#!/usr/bin/env python3
"""Write or check README's "Not yet implemented" list.

The list lives between the markers <!-- missing:begin --> and
<!-- missing:end --> and is the build's missing.txt (tools/gen_stubs.py), one
`name` per bullet.

usage: readme_missing.py README MISSING_TXT [--check]
"""
import sys

readme, missing_txt = sys.argv[1], sys.argv[2]
check = "--check" in sys.argv[3:]
names = [l.strip() for l in open(missing_txt) if l.strip()]
body = "".join("- `%s`\n" % n for n in names) if names else "Nothing: all exports are implemented.\n"
block = "<!-- missing:begin -->\n%d of 422 exports:\n\n%s<!-- missing:end -->" % (len(names), body)
text = open(readme).read()
b, e = text.find("<!-- missing:begin -->"), text.find("<!-- missing:end -->")
if b < 0 or e < 0:
    sys.exit("readme_missing: markers not found in " + readme)
new = text[:b] + block + text[e + len("<!-- missing:end -->"):]
if check:
    if new != text:
        sys.exit("README's 'Not yet implemented' list differs from the build's "
                 "missing.txt: run tools/readme_missing.py README.md build/missing.txt")
    print("README list matches the build (%d missing)" % len(names))
else:
    open(readme, "w").write(new)
