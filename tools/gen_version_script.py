#!/usr/bin/env python3
"""Write the linker version script: every reference export under the node
libcudart.so.13 (as NVIDIA's library has them), our own API under the
CUDAEV_<n> nodes of NODES, nothing else exported.

With --async-only, the script of the standalone async library
(libcudaev.so.1): the CUDAEV_<n> nodes alone, so that it exports the
cudaev_* API and not one cuda* name (it lives beside another runtime).
The nodes are the same in both libraries: a program binds to whichever
of the two the loader finds first, and gets one consistent set.

usage: gen_version_script.py [--async-only] EXPORTS OUT
"""
import sys

# The version nodes, oldest first: (node, parent node or None, names).
# A name is an exact symbol or a glob. The linker prefers an exact name to a
# glob, so a function listed by name in a later node leaves CUDAEV_0's glob.
#
# cudaev_ functions added after a release go into a new node that names
# them and inherits the one before, e.g.
#     ("CUDAEV_1", "CUDAEV_0", ["cudaev_loop_stats"]),
# then `tools/check-abi.py --update` records them (CONTRIBUTING.md).
# None stands for NVIDIA's 422 names from EXPORTS.
NODES = [
    ("libcudart.so.13", None, None),
    ("CUDAEV_0", None, ["cudaev_[a-z]*"]),
    # Version 1.0: the names that follow one rule (include/cudaev.h,
    # "Names"); CUDAEV_0 keeps the old ones as deprecated aliases.
    ("CUDAEV_1", "CUDAEV_0", [
        "cudaev_future_new_timer", "cudaev_future_new_stream", "cudaev_future_new_event",
        "cudaev_future_new_all", "cudaev_future_new_any", "cudaev_future_any_index",
        "cudaev_future_new_timeout", "cudaev_future_new_work_done",
        "cudaev_loop_prepare", "cudaev_loop_prepare_ns", "cudaev_log_set",
        "cudaev_launch_host_func_async", "cudaev_loop_set_markers",
    ]),
]


def script(exports, async_only=False):
    out = []
    nodes = [n for n in NODES if not (async_only and n[2] is None)]
    for i, (node, parent, names) in enumerate(nodes):
        if names is None:
            names = exports
        out.append("%s {\n  global:\n" % node)
        out.extend("    %s;\n" % n for n in names)
        # Anything no node names stays hidden (stated once, in the last node).
        if i == len(nodes) - 1:
            out.append("  local:\n    *;\n")
        out.append("}%s;\n" % (" " + parent if parent else ""))
        if i != len(nodes) - 1:
            out.append("\n")
    return "".join(out)


def main():
    args = sys.argv[1:]
    async_only = args[:1] == ["--async-only"]
    if async_only:
        args = args[1:]
    exports = [l.strip() for l in open(args[0]) if l.strip()]
    with open(args[1], "w") as f:
        f.write(script(exports, async_only))


if __name__ == "__main__":
    main()
