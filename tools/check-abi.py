#!/usr/bin/env python3
"""Compare the dynamic symbols a built libcudart.so.13 exports, with their
version nodes, against the committed baseline (abi/libcudart.so.13.abi).

  tools/check-abi.py [LIBRARY] [--baseline FILE]            check (the `abi` unit test)
  tools/check-abi.py [LIBRARY] [--baseline FILE] --update   rewrite the baseline

LIBRARY defaults to build/libcudart.so.13. The check fails when a baseline
symbol is gone, when a symbol moved to another version node, when a version
node or its parent changed, and when the library exports a symbol the
baseline lacks (an addition is an ABI decision: record it with --update and
commit the baseline with the change). --update refuses to add symbols to a
node the baseline marks released; those go into a new node
(tools/gen_version_script.py, CONTRIBUTING.md "ABI policy").

Baseline lines: "released NODE" (written by hand when a release is tagged),
"node NAME [PARENT]" (the version definitions), "SYMBOL@@NODE" (one per
export), "#" comments. Prints "N passed, N failed" (one check).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_BASELINE = os.path.join(ROOT, "abi", "libcudart.so.13.abi")
HEADER = """\
# ABI baseline of {lib}: its version nodes and every exported
# dynamic symbol as SYMBOL@@NODE. Checked by the `abi` unit tests; rewritten
# by tools/check-abi.py --update (keeps the "released" lines, which are
# written by hand when a release is tagged). CONTRIBUTING.md: ABI policy.
"""


def run(tool, *args):
    tool = os.environ.get(tool.upper(), tool)
    try:
        return subprocess.run([tool, *args], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("check-abi: %s %s failed: %s" % (tool, " ".join(args), getattr(e, "stderr", e)))


def library_abi(lib):
    """({symbol: node}, {node: parent or None}) of a shared library."""
    nodes, base = {}, None
    lines = run("readelf", "-V", "-W", lib).splitlines()
    in_defs = False
    for i, line in enumerate(lines):
        if line.startswith("Version definition section"):
            in_defs = True
            continue
        if in_defs and not line.strip():
            break
        m = re.search(r"Flags: (\S+)\s+Index: \d+\s+Cnt: (\d+)\s+Name: (\S+)", line) if in_defs else None
        if not m:
            continue
        flags, cnt, name = m.group(1), int(m.group(2)), m.group(3)
        if flags == "BASE":  # the SONAME's own entry, not a node symbols use
            base = name
            continue
        parent = None
        if cnt > 1 and i + 1 < len(lines):
            p = re.search(r"Parent 1: (\S+)", lines[i + 1])
            parent = p.group(1) if p else None
        nodes[name] = parent
    syms = {}
    for line in run("nm", "-D", "--defined-only", "--with-symbol-versions", lib).splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        kind, sym = parts[1], parts[2]
        if kind == "A":  # the node names themselves
            continue
        name, sep, node = sym.partition("@@")
        if not sep:
            name, sep, node = sym.partition("@")  # a non-default (old) version
            node = "@" + node if sep else "(unversioned)"
        syms[name] = node
    return syms, nodes, base


def read_baseline(path):
    syms, nodes, released = {}, {}, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            words = line.split()
            if words[0] == "released" and len(words) == 2:
                released.append(words[1])
            elif words[0] == "node" and len(words) in (2, 3):
                nodes[words[1]] = words[2] if len(words) == 3 else None
            elif len(words) == 1 and "@@" in line:
                name, _, node = line.partition("@@")
                syms[name] = node
            else:
                sys.exit("check-abi: %s:%d: cannot read %r" % (path, n, line))
    return syms, nodes, released


def write_baseline(path, syms, nodes, released):
    with open(path, "w") as f:
        f.write(HEADER.format(lib=os.path.basename(path)[: -len(".abi")]))
        for r in released:
            f.write("released %s\n" % r)
        for node, parent in nodes.items():
            f.write("node %s%s\n" % (node, " " + parent if parent else ""))
        for name in sorted(syms, key=lambda s: (syms[s], s)):
            f.write("%s@@%s\n" % (name, syms[name]))


def shown(path):
    """A path as a reader can use it from the repository's root."""
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("library", nargs="?", default=os.path.join(ROOT, "build", "libcudart.so.13"))
    ap.add_argument("--baseline", default=DEFAULT_BASELINE)
    ap.add_argument("--update", action="store_true", help="rewrite the baseline from LIBRARY")
    a = ap.parse_args()
    lib, base = shown(a.library), shown(a.baseline)

    syms, nodes, _ = library_abi(a.library)
    have_baseline = os.path.exists(a.baseline)
    old_syms, old_nodes, released = read_baseline(a.baseline) if have_baseline else ({}, {}, [])

    # Each difference, and whether it touches a released node (only those
    # are frozen; unreleased nodes follow the library through --update).
    diffs = []
    for name, node in sorted(old_syms.items()):
        if name not in syms:
            diffs.append(("dropped: %s@@%s" % (name, node), node in released))
        elif syms[name] != node:
            diffs.append(("moved: %s from %s to %s" % (name, node, syms[name]),
                          node in released or syms[name] in released))
    for node, parent in old_nodes.items():
        if node not in nodes:
            diffs.append(("version node dropped: %s" % node, node in released))
        elif nodes[node] != parent:
            diffs.append(("version node %s: parent %s, baseline says %s" % (node, nodes[node], parent),
                          node in released))
    for name in sorted(set(syms) - set(old_syms)):
        diffs.append(("added: %s@@%s" % (name, syms[name]), syms[name] in released))
    for node in nodes:
        if node not in old_nodes:
            diffs.append(("added version node: %s%s" % (node, " (parent %s)" % nodes[node]
                                                         if nodes[node] else ""), False))
    frozen = [d for d, r in diffs if r]

    if a.update:
        if frozen:
            for d in frozen:
                print("check-abi: %s (released node)" % d)
            print("check-abi: not updating %s: a released node keeps its symbols; new functions "
                  "go into a new version node (tools/gen_version_script.py NODES), and dropping or "
                  "moving released symbols needs a new SONAME" % base)
            return 1
        os.makedirs(os.path.dirname(os.path.abspath(a.baseline)), exist_ok=True)
        write_baseline(a.baseline, syms, nodes, released)
        print("check-abi: wrote %s: %d symbols in %d version nodes, %d changes"
              % (base, len(syms), len(nodes), len(diffs)))
        return 0

    print("check-abi: %s: %d symbols in %d version nodes (%s); baseline %s"
          % (lib, len(syms), len(nodes), ", ".join(nodes), base))
    if not have_baseline:
        print("check-abi: no baseline at %s; write it with\n  tools/check-abi.py %s --update"
              % (base, lib))
        print("0 passed, 1 failed")
        return 1
    for d, r in diffs:
        print("check-abi: %s%s" % (d, " (released node)" if r else ""))
    if frozen:
        print("check-abi: a released node keeps its symbols: new functions go into a new version\n"
              "node (tools/gen_version_script.py NODES); dropping or moving a released symbol\n"
              "needs a new SONAME (CONTRIBUTING.md, ABI policy)")
    elif diffs:
        print("check-abi: the library's ABI differs from the baseline. If that is meant, run\n"
              "  tools/check-abi.py %s --update\n"
              "and commit abi/ with the change. A cudaev_ function added after a release goes\n"
              "into a new version node (tools/gen_version_script.py; CONTRIBUTING.md, ABI policy)."
              % lib)
    if diffs:
        print("0 passed, 1 failed")
        return 1
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
