/* Graph Management's private contract, shared by the files of the section:
 *
 *   graph.c         graphs, their edges and node queries, user objects
 *   graph_node.c    the generic cudaGraphAddNode / *SetParams, and every node
 *                   type whose parameters have the driver's layout (memset,
 *                   host, child graph, events, external semaphores,
 *                   allocations, conditional handles)
 *   graph_kernel.c  kernel nodes and their parameter conversion
 *   graph_memcpy.c  memcpy nodes and their parameter conversion
 *   graph_exec.c    executable graphs: instantiate, update, enable, launch
 *
 * Calls go one way: graph_node.c -> graph_kernel.c, graph_memcpy.c ->
 * graph.c; graph_exec.c calls none of them. No file keeps state.
 *
 * cudaGraph_t, cudaGraphNode_t, cudaGraphExec_t and cudaUserObject_t are
 * the driver's handles and most functions pass them through. Parameter
 * structures are converted where the runtime's differ from the driver's:
 * kernel nodes name a host stub or a CUkernel (cudaev__kernel_lookup gives
 * the CUkernel, with NVIDIA's errors for unknown pointers),
 * memcpy nodes use cudaMemcpy3DParms (positions and widths in elements,
 * a cudaMemcpyKind) where the driver takes CUDA_MEMCPY3D (bytes, memory
 * types), memset/memcpy/conditional nodes take the current context. The
 * other structures have the same layout in both APIs (abi_asserts.c).

 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_GRAPH_H
#define CUDAEV_GRAPH_H

#include "internal.h"

#include "handle.h"

/* Every function makes a context current first, as NVIDIA's runtime does,
 * then leaves through the driver's result. */
#define GRAPH_CALL(expr)         \
  do {                           \
    CUDAEV_CTX_OR_RETURN();      \
    return cudaev__ret_cu(expr); \
  } while (0)

/* Graphs, nodes, executable graphs and user objects the driver would crash
 * on (handle.h: values where no object can be, nodes destroyed through
 * cudaGraphDestroyNode) are refused with cudaErrorInvalidValue, NVIDIA's
 * answer to a NULL one. The check comes right before the driver call,
 * after the parameter conversions, whose errors NVIDIA's runtime reports
 * first (a bad kernel or symbol before a bad graph). */
#define GRAPH_LIVE_1(a) CUDAEV_LIVE_OR_RETURN_ERR(a, cudaErrorInvalidValue)
#define GRAPH_LIVE_2(a, b) \
  do {                     \
    GRAPH_LIVE_1(a);       \
    GRAPH_LIVE_1(b);       \
  } while (0)
#define GRAPH_LIVE_3(a, b, c) \
  do {                        \
    GRAPH_LIVE_2(a, b);       \
    GRAPH_LIVE_1(c);          \
  } while (0)
#define GRAPH_LIVE_PICK(_1, _2, _3, name, ...) name
/* Each handle is checked as its own kind (handle.h). */
#define GRAPH_LIVE_OR_RETURN(...) \
  GRAPH_LIVE_PICK(__VA_ARGS__, GRAPH_LIVE_3, GRAPH_LIVE_2, GRAPH_LIVE_1, none)(__VA_ARGS__)

/* GRAPH_CALL for a call naming graph handles: `handles` is their list in
 * parentheses. */
#define GRAPH_CALL_ON(handles, expr) \
  do {                               \
    CUDAEV_CTX_OR_RETURN();          \
    GRAPH_LIVE_OR_RETURN handles;    \
    return cudaev__ret_cu(expr);     \
  } while (0)

#define NODE_ARGS \
  (CUgraphNode *)pGraphNode, (CUgraph)graph, (const CUgraphNode *)pDependencies, numDependencies

/* ---- helpers (graph.c) ---- */

/* A node handle the driver hands out through this runtime is live again
 * (it may reuse the address of a destroyed one): the first `n` of `nodes`,
 * and leaves through the driver's result `r`. */
cudaError_t cudaev__graph_nodes_out(CUresult r, const cudaGraphNode_t *nodes, size_t n);

/* The current context (NULL when none): memset, memcpy and conditional
 * nodes run in it. */
CUcontext cudaev__graph_ctx(void);

/* ---- parameter conversions (graph_kernel.c, graph_memcpy.c) ---- */

/* cudaKernelNodeParams (func = host stub or cudaKernel_t) -> the driver's
 * CUDA_KERNEL_NODE_PARAMS_v2. The node names the CUkernel (func NULL, ctx
 * NULL = the current context), so the driver loads it where the node
 * runs and GetParams can map it back to the stub. Not recorded. */
cudaError_t cudaev__graph_kernel_to_cu(const struct cudaKernelNodeParams *in,
                                       CUDA_KERNEL_NODE_PARAMS *out);

/* cudaMemcpy3DParms -> CUDA_MEMCPY3D, as the runtime reference defines the
 * former: exactly one of array/pointer per side, positions and width in
 * elements of the array taking part (bytes otherwise). Not recorded. */
cudaError_t cudaev__graph_memcpy3d_to_cu(const struct cudaMemcpy3DParms *p, CUDA_MEMCPY3D *c);

#endif
