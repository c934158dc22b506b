"""The loop layer's files call each other without a circle (house style 13).

Reads the core archive with nm: for each loop/ object, the cudaev symbols it
defines and those it leaves undefined. An undefined function another loop/
file defines is an edge "calls". Checks that the graph of loop/ files has no
cycle, and that the future core (future.c), the promise source (promise.c)
and the loop (loop.c) call no function of the GPU source: they reach it only
through cudaev__source_gpu.
Prints the graph. Usage: loop_graph.py NM ARCHIVE
"""
import os
import subprocess
import sys

GPU_SOURCE = ('gpu.c', 'gpu_ctx.c', 'gpu_marker.c', 'gpu_stream.c', 'gpu_poll.c', 'gpu_wake.c',
              'gpu_submit.c', 'gpu_done.c', 'hostfn.c')


def read(nm, archive):
    out = subprocess.run([nm, archive], capture_output=True, text=True, check=True).stdout
    defs, undefs, member = {}, {}, None
    for line in out.splitlines():
        if line.endswith(':'):
            name = os.path.basename(line[:-1])  # a thin archive names paths
            member = name[len('loop_'):-len('.o')] if name.startswith('loop_') else None
            if member:
                defs[member], undefs[member] = {}, set()
            continue
        if member is None:
            continue
        p = line.split()
        if len(p) == 2 and p[0] == 'U':
            undefs[member].add(p[1])
        elif len(p) == 3 and p[1] in 'TDBRV':
            defs[member][p[2]] = p[1]
    return defs, undefs


def main():
    nm, archive = sys.argv[1], sys.argv[2]
    defs, undefs = read(nm, archive)
    owner = {s: (f, t) for f, d in defs.items() for s, t in d.items()}
    calls = {f: {} for f in defs}
    data = {f: {} for f in defs}
    for f, u in undefs.items():
        for s in sorted(u):
            if s in owner and owner[s][0] != f:
                g, kind = owner[s]
                (calls if kind == 'T' else data)[f].setdefault(g, []).append(s)
    for f in sorted(defs):
        print(f)
        for g in sorted(calls[f]):
            print('  calls', g + ':', ' '.join(calls[f][g]))
        for g in sorted(data[f]):
            print('  reads', g + ':', ' '.join(data[f][g]))
    bad = 0
    # No cycle: depth-first search for a back edge.
    state, stack = {}, []

    def visit(f):
        nonlocal bad
        state[f] = 1
        stack.append(f)
        for g in sorted(calls[f]):
            if state.get(g) == 1:
                print('CYCLE:', ' -> '.join(stack[stack.index(g):] + [g]))
                bad += 1
            elif g not in state:
                visit(g)
        stack.pop()
        state[f] = 2

    for f in sorted(defs):
        if f not in state:
            visit(f)
    for f in ('future.c', 'promise.c', 'loop.c'):
        for g in calls.get(f, {}):
            if g in GPU_SOURCE:
                print(f'FAIL: {f} calls {g} by name:', ' '.join(calls[f][g]))
                bad += 1
    if not defs.get('future.c') or not defs.get('gpu.c'):
        print('FAIL: no loop objects found in', archive)
        bad += 1
    if bad == 0:
        print('ok: no cycle among the', len(defs), 'loop/ files')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
