"""The runtime layer's files call each other without a circle (house style 13).

Reads the core archive with nm: for each src/ object, the functions it
defines and those it leaves undefined. An undefined function another src/
file defines is an edge "calls". Fails on a circle among src/ files other
than the one listed in KNOWN, and when a family of files split from one
(graph*, memcpy*/memset*, hostpool*, device*) calls in another direction
than its private header documents (ORDER). Prints each family's edges.
Usage: src_graph.py NM ARCHIVE
"""
import os
import subprocess
import sys

# Circles that predate this check, each a set of files: error.c initialises
# the runtime to answer cudaGetLastError (cudaev__init_slow), and runtime.c
# maps the driver's errors through error.c's cudaev__error_from_cu. New
# ones fail.
KNOWN = [{'error.c', 'runtime.c'}]

# Within a family, the files a file may call (its header says why).
ORDER = {
    'graph.c': set(),
    'graph_exec.c': set(),
    'graph_kernel.c': {'graph.c'},
    'graph_memcpy.c': {'graph.c'},
    'graph_node.c': {'graph.c', 'graph_kernel.c', 'graph_memcpy.c'},
    'memcpy_2d.c': set(),
    'memcpy_array.c': {'memcpy_2d.c'},
    'memcpy_3d.c': {'memcpy_2d.c'},
    'memcpy_batch.c': set(),
    'memset_2d.c': set(),
    'hostpool.c': {'hostpool_reaper.c', 'hostpool_held.c', 'hostpool_arena.c',
                   'hostpool_chunk.c', 'hostpool_live.c'},
    'hostpool_reaper.c': {'hostpool_held.c', 'hostpool_arena.c'},
    'hostpool_held.c': {'hostpool_arena.c'},
    'hostpool_arena.c': {'hostpool_chunk.c'},
    'hostpool_chunk.c': set(),
    'hostpool_live.c': set(),
    'device.c': set(),
    'device_props.c': set(),
    'device_ipc.c': set(),
}
FAMILIES = ('graph', 'memcpy', 'memset', 'hostpool', 'device')


def family(f):
    for p in FAMILIES:
        if f.startswith(p):
            return 'memcpy' if p == 'memset' else p
    return None


def read(nm, archive):
    out = subprocess.run([nm, archive], capture_output=True, text=True, check=True).stdout
    defs, undefs, member = {}, {}, None
    for line in out.splitlines():
        if line.endswith(':'):
            name = os.path.basename(line[:-1])  # a thin archive names paths
            member = name[len('src_'):-len('.o')] if name.startswith('src_') else None
            if member:
                defs[member], undefs[member] = set(), set()
            continue
        if member is None:
            continue
        p = line.split()
        if len(p) == 2 and p[0] == 'U':
            undefs[member].add(p[1])
        elif len(p) == 3 and p[1] == 'T':
            defs[member].add(p[2])
    return defs, undefs


def circles(calls):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(calls[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(calls):
        if v not in index:
            visit(v)
    return out


def main():
    nm, archive = sys.argv[1], sys.argv[2]
    defs, undefs = read(nm, archive)
    owner = {s: f for f, d in defs.items() for s in d}
    calls = {f: {owner[s] for s in u if s in owner and owner[s] != f} for f, u in undefs.items()}
    bad = 0
    for comp in circles(calls):
        if comp not in KNOWN:
            print('CIRCLE:', ' '.join(sorted(comp)))
            bad += 1
    for f in sorted(calls):
        fam = family(f)
        if fam is None:
            continue
        same = {g for g in calls[f] if family(g) == fam}
        print(f, '->', ' '.join(sorted(same)) or '(none of its family)')
        if f not in ORDER:
            print(f'FAIL: {f} is not in ORDER')
            bad += 1
        elif not same <= ORDER[f]:
            print(f'FAIL: {f} calls', ' '.join(sorted(same - ORDER[f])), 'against ORDER')
            bad += 1
    missing = [f for f in ORDER if f not in defs]
    if missing:
        print('FAIL: no object for', ' '.join(missing), 'in', archive)
        bad += 1
    if bad == 0:
        print('ok: no new circle among the', len(defs), 'src/ files')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
