#!/usr/bin/env python3
"""Runs the bad-input harness on NVIDIA's libcudart.so.13 and on ours and
compares the return codes case by case (docs/bad-input.md).

    compare.py --harness BADINPUT --nvidia NVIDIA_LIBCUDART --ours OURS_LIBDIR
               [--out DIR] [--check] [--min-identical PCT] [--jobs N]
    compare.py --nvidia-out FILE --ours-out FILE [...]      (compare saved runs)

Prints: identical codes, differing codes grouped by kind of bad argument and
by the pair of codes, the crashes and hangs of each side, and the percentage
of identical codes among the cases where NVIDIA's runtime did not crash.
Differences listed in docs/bad-input.md (the "| `function` | `variant` |" rows
under "## Accepted differences"; '*' matches any text) are shown as accepted.

With --check, exits 1 if ours crashed or hung in any case, or the identical
share is below --min-identical (99). Exits 77 (skipped) when NVIDIA's library
is not there.
"""
import argparse
import collections
import fnmatch
import os
import re
import subprocess
import sys

BAD_STATUS = ("crash", "hang", "exit", "batchcrash", "batchhang", "batchexit")


def run(harness, libdir, expect, jobs, timeout, outfile, extra):
    env = dict(os.environ)
    old = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = ":".join([libdir] + ([extra] if extra else []) + ([old] if old else []))
    # In a sanitized build a crash of NVIDIA's library stays a signal (ASan's
    # own SEGV report would make it "exit:1"); a memory error or undefined
    # behaviour in ours ends the child ("exit:N"), so it counts as a crash.
    env.setdefault("ASAN_OPTIONS", "handle_segv=0:handle_sigbus=0:handle_abort=0:detect_leaks=0")
    env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    cmd = [harness, "-e", expect, "-t", str(timeout)] + (["-j", str(jobs)] if jobs else [])
    with open(outfile, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} (LD_LIBRARY_PATH={libdir}) failed "
                 f"({p.returncode}):\n{p.stderr}")
    return outfile


def load(path, expect=None):
    lib, device, cases = None, None, collections.OrderedDict()
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("# cudart "):
            lib = line[len("# cudart "):]
            continue
        if line.startswith("# device "):
            device = line[len("# device "):]
            continue
        if not line or line.startswith("#"):
            continue
        name, variant, code, status = line.split("|")
        cases[(name, variant)] = (code, status)
    if expect is not None and lib != os.path.realpath(expect):
        sys.exit(f"compare.py: {path} was made with {lib}, not {os.path.realpath(expect)}: "
                 "refusing to compare")
    return lib, device, cases


def accepted_rules(doc):
    """(function glob, variant glob) rows of the accepted-differences table."""
    rules, inside = [], False
    if doc and os.path.exists(doc):
        for line in open(doc):
            if line.startswith("## "):
                inside = line.strip() == "## Accepted differences"
            m = inside and re.match(r"\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|", line)
            if m:
                rules.append((m.group(1), m.group(2)))
    return rules


def is_accepted(rules, name, variant):
    return any(fnmatch.fnmatchcase(name, f) and fnmatch.fnmatchcase(variant, v)
               for f, v in rules)


def bad(status):
    return status.split(":")[0] in BAD_STATUS


def kind(variant):
    """The kind of bad argument: null, bogus, destroyed, SIZE_MAX, -1, ..."""
    variant = variant.split(":", 1)[1]
    if variant == "base" or variant.startswith("code="):
        return variant.split("=")[0]
    return variant.split("=", 1)[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness")
    ap.add_argument("--nvidia", required=True, help="NVIDIA's libcudart.so.13")
    ap.add_argument("--ours", help="directory of our libcudart.so.13")
    ap.add_argument("--nvidia-out")
    ap.add_argument("--ours-out")
    ap.add_argument("--out", default=".")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--min-identical", type=float, default=99.0)
    ap.add_argument("--jobs", type=int, default=0, help="children at a time (default: CPUs)")
    ap.add_argument("--timeout", type=float, default=5,
                    help="seconds a child may go without finishing a case")
    ap.add_argument("--libcuda", help="a libcuda.so to load as libcuda.so.1 on both sides "
                    "(the toolkit's stub: both runtimes then fail to initialise differently)")
    ap.add_argument("--doc", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "..", "docs", "bad-input.md"))
    a = ap.parse_args()
    if not os.path.exists(a.nvidia):
        print(f"SKIP: NVIDIA's runtime not found at {a.nvidia}")
        return 77
    os.makedirs(a.out, exist_ok=True)
    ours_lib = os.path.join(a.ours, "libcudart.so.13") if a.ours else None
    extra = None
    if a.libcuda:
        extra = os.path.join(os.path.abspath(a.out), "libcuda")
        os.makedirs(extra, exist_ok=True)
        link = os.path.join(extra, "libcuda.so.1")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(a.libcuda), link)
    if a.nvidia_out and a.ours_out:
        nv_file, our_file = a.nvidia_out, a.ours_out
    else:
        nv_file = run(a.harness, os.path.dirname(os.path.abspath(a.nvidia)), a.nvidia, a.jobs,
                      a.timeout, os.path.join(a.out, "nvidia.txt"), extra)
        our_file = run(a.harness, os.path.abspath(a.ours), ours_lib, a.jobs,
                       a.timeout, os.path.join(a.out, "ours.txt"), extra)
    nv_lib, nv_dev, nv = load(nv_file, a.nvidia)
    our_lib, our_dev, ours = load(our_file, ours_lib)
    rules = accepted_rules(a.doc)

    out = []
    p = out.append
    p(f"NVIDIA: {nv_lib} ({len(nv)} runs, device: {nv_dev})")
    p(f"ours:   {our_lib} ({len(ours)} runs, device: {our_dev})")
    only = sorted(set(nv) ^ set(ours))
    if nv_dev != our_dev:
        p(f"the runs disagree on whether there is a device: NVIDIA {nv_dev}, ours {our_dev}")
    if only:
        p(f"case lists differ in {len(only)} cases, e.g. {only[:5]}")
    keys = [k for k in nv if k in ours]
    nv_crash = [k for k in keys if bad(nv[k][1])]
    our_crash = [k for k in keys if bad(ours[k][1])]
    skipped = [k for k in keys if "SKIP" in (nv[k][0], ours[k][0])
               and k not in nv_crash and k not in our_crash]
    nosym = [k for k in keys if "NOSYM" in (nv[k][0], ours[k][0])]
    judged = [k for k in keys if k not in nv_crash and k not in skipped and k not in our_crash]
    same = [k for k in judged if nv[k][0] == ours[k][0]]
    differ = [k for k in judged if nv[k][0] != ours[k][0]]
    # Where ours crashed but NVIDIA's did not, the case counts as differing.
    denom = len(judged) + len([k for k in our_crash if k not in nv_crash])
    pct = 100.0 * len(same) / denom if denom else 100.0
    funcs = {k[0] for k in keys}

    distinct = {(k[0], k[1].split(":", 1)[1]) for k in keys}
    p(f"functions: {len(funcs)}   cases: {len(distinct)}   runs (warm and cold): {len(keys)}")
    p(f"identical codes: {len(same)}")
    p(f"differing codes: {len(differ)} "
      f"({sum(is_accepted(rules, *k) for k in differ)} accepted in docs/bad-input.md)")
    p(f"skipped (no object to destroy without a device): {len(skipped)}")
    p(f"NVIDIA crashed or hung: {len(nv_crash)}")
    p(f"ours crashed or hung: {len(our_crash)} "
      f"(NVIDIA's too in {len([k for k in our_crash if k in nv_crash])})")
    p(f"identical where NVIDIA's does not crash: {len(same)}/{denom} = {pct:.2f} %")
    if nosym:
        p(f"missing exports: {sorted({k[0] for k in nosym})}")

    if differ:
        p("")
        p("differing codes by kind of argument:")
        by_kind = collections.Counter(kind(k[1]) for k in differ)
        for kk, n in by_kind.most_common():
            p(f"  {n:5d}  {kk}")
        p("")
        p("differing codes by pair (NVIDIA -> ours):")
        by_pair = collections.defaultdict(list)
        for k in differ:
            by_pair[(nv[k][0], ours[k][0])].append(k)
        for (c1, c2), ks in sorted(by_pair.items(), key=lambda x: -len(x[1])):
            p(f"  {len(ks):5d}  {c1} -> {c2}")
            for k in ks:
                tag = "  (accepted)" if is_accepted(rules, *k) else ""
                p(f"           {k[0]} | {k[1]}{tag}")
    for title, crashed, other in (("NVIDIA", nv_crash, nv), ("ours", our_crash, ours)):
        if not crashed:
            continue
        p("")
        p(f"{title} crashed or hung ({len(crashed)}), by kind of argument:")
        for kk, n in collections.Counter(kind(k[1]) for k in crashed).most_common():
            p(f"  {n:5d}  {kk}")
        by_status = collections.Counter(other[k][1] for k in crashed)
        p("  statuses: " + ", ".join(f"{s} {n}" for s, n in by_status.most_common()))
        if title == "ours" or len(crashed) <= 60:
            for k in crashed:
                p(f"           {k[0]} | {k[1]} -> {other[k][1]}"
                  + (f" (NVIDIA: {nv[k][0]} {nv[k][1]})" if title == "ours"
                     else f" (ours: {ours[k][0]})"))
    text = "\n".join(out) + "\n"
    with open(os.path.join(a.out, "report.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)

    if a.check:
        fail = []
        if our_crash:
            fail.append(f"ours crashed or hung in {len(our_crash)} cases")
        if pct < a.min_identical:
            fail.append(f"identical {pct:.2f} % < {a.min_identical} %")
        if only:
            fail.append("the two runs did not run the same cases")
        if [k for k in nosym if ours[k][0] == "NOSYM"]:
            fail.append("ours lacks exports")
        if fail:
            print("FAIL: " + "; ".join(fail))
            return 1
        print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
