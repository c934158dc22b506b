/* Graph Management, nodes: the generic cudaGraphAddNode and
 * cudaGraph[Exec]NodeSetParams, the empty node, and every node type whose
 * parameters have the same layout in both APIs (abi_asserts.c): memset,
 * host, child graph, event record/wait, external semaphores, memory
 * allocation and free, conditional handles.
 * Calls: graph_kernel.c, graph_memcpy.c (parameter conversions), graph.c. */
#include "graph.h"

#include <string.h>

/* GRAPH_CALL_ON for the cudaGraphAdd*Node functions: the new node,
 * *pGraphNode, is handed out. */
#define ADD_CALL_ON(handles, expr)                       \
  do {                                                   \
    CUDAEV_CTX_OR_RETURN();                              \
    GRAPH_LIVE_OR_RETURN handles;                        \
    return cudaev__graph_nodes_out(expr, pGraphNode, 1); \
  } while (0)

/* cudaGraphNodeParams -> CUgraphNodeParams. The unions share their layout
 * except where the driver wants a CUfunction, a CUDA_MEMCPY3D or a context:
 * copy everything, then fix those. */
static cudaError_t node_params_to_cu(const struct cudaGraphNodeParams *in, CUgraphNodeParams *out) {
  if (in == NULL) return cudaErrorInvalidValue;
  memcpy(out, in, sizeof *out);
  switch (in->type) {
  case cudaGraphNodeTypeKernel: {
    CUDA_KERNEL_NODE_PARAMS k;
    cudaError_t e =
        cudaev__graph_kernel_to_cu((const struct cudaKernelNodeParams *)&in->kernel, &k);
    if (e != cudaSuccess) return e;
    memcpy(&out->kernel, &k, sizeof k);
    break;
  }
  case cudaGraphNodeTypeMemcpy: {
    memset(&out->memcpy, 0, sizeof out->memcpy);
    out->memcpy.flags = in->memcpy.flags;
    out->memcpy.copyCtx = cudaev__graph_ctx();
    cudaError_t e = cudaev__graph_memcpy3d_to_cu(&in->memcpy.copyParams, &out->memcpy.copyParams);
    if (e != cudaSuccess) return e;
    break;
  }
  case cudaGraphNodeTypeMemset: out->memset.ctx = cudaev__graph_ctx(); break;
  case cudaGraphNodeTypeConditional: out->conditional.ctx = cudaev__graph_ctx(); break;
  default: break;
  }
  return cudaSuccess;
}

/* Outputs the driver wrote into the parameters (allocation address,
 * conditional body graphs) travel back to the caller's structure. */
static void node_params_out(const CUgraphNodeParams *c, struct cudaGraphNodeParams *p) {
  switch (p->type) {
  case cudaGraphNodeTypeMemAlloc: p->alloc.dptr = (void *)c->alloc.dptr; break;
  case cudaGraphNodeTypeConditional:
    p->conditional.phGraph_out = (cudaGraph_t *)c->conditional.phGraph_out;
    break;
  default: break;
  }
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                  const cudaGraphNode_t *pDependencies, size_t numDependencies) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddEmptyNode(NODE_ARGS));
}

cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                             const cudaGraphNode_t *pDependencies,
                             const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                             struct cudaGraphNodeParams *nodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUgraphNodeParams c;
  cudaError_t e = node_params_to_cu(nodeParams, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(graph);
  CUresult r = cudaev__drv.cuGraphAddNode(
      (CUgraphNode *)pGraphNode, (CUgraph)graph, (const CUgraphNode *)pDependencies,
      (const CUgraphEdgeData *)dependencyData, numDependencies, &c);
  if (r == CUDA_SUCCESS) node_params_out(&c, nodeParams);
  return cudaev__graph_nodes_out(r, pGraphNode, 1);
}

cudaError_t cudaGraphNodeSetParams(cudaGraphNode_t node, struct cudaGraphNodeParams *nodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUgraphNodeParams c;
  cudaError_t e = node_params_to_cu(nodeParams, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(node);
  return cudaev__ret_cu(cudaev__drv.cuGraphNodeSetParams((CUgraphNode)node, &c));
}

cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t graphExec, cudaGraphNode_t node,
                                       struct cudaGraphNodeParams *nodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUgraphNodeParams c;
  cudaError_t e = node_params_to_cu(nodeParams, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(graphExec, node);
  return cudaev__ret_cu(
      cudaev__drv.cuGraphExecNodeSetParams((CUgraphExec)graphExec, (CUgraphNode)node, &c));
}

/* memset: same layout as CUDA_MEMSET_NODE_PARAMS; the node runs in the
 * current context. */

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                   const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                   const struct cudaMemsetParams *pMemsetParams) {
  ADD_CALL_ON((graph),
              cudaev__drv.cuGraphAddMemsetNode(
                  NODE_ARGS, (const CUDA_MEMSET_NODE_PARAMS *)pMemsetParams, cudaev__graph_ctx()));
}

cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node,
                                         struct cudaMemsetParams *pNodeParams) {
  GRAPH_CALL_ON((node), cudaev__drv.cuGraphMemsetNodeGetParams(
                            (CUgraphNode)node, (CUDA_MEMSET_NODE_PARAMS *)pNodeParams));
}

cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node,
                                         const struct cudaMemsetParams *pNodeParams) {
  GRAPH_CALL_ON((node), cudaev__drv.cuGraphMemsetNodeSetParams(
                            (CUgraphNode)node, (const CUDA_MEMSET_NODE_PARAMS *)pNodeParams));
}

cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const struct cudaMemsetParams *pNodeParams) {
  GRAPH_CALL_ON((hGraphExec, node),
                cudaev__drv.cuGraphExecMemsetNodeSetParams(
                    (CUgraphExec)hGraphExec, (CUgraphNode)node,
                    (const CUDA_MEMSET_NODE_PARAMS *)pNodeParams, cudaev__graph_ctx()));
}

/* host */

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                 const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                 const struct cudaHostNodeParams *pNodeParams) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddHostNode(NODE_ARGS,
                                                      (const CUDA_HOST_NODE_PARAMS *)pNodeParams));
}

cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node,
                                       struct cudaHostNodeParams *pNodeParams) {
  GRAPH_CALL_ON((node), cudaev__drv.cuGraphHostNodeGetParams((CUgraphNode)node,
                                                             (CUDA_HOST_NODE_PARAMS *)pNodeParams));
}

cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node,
                                       const struct cudaHostNodeParams *pNodeParams) {
  GRAPH_CALL_ON((node), cudaev__drv.cuGraphHostNodeSetParams(
                            (CUgraphNode)node, (const CUDA_HOST_NODE_PARAMS *)pNodeParams));
}

cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                           const struct cudaHostNodeParams *pNodeParams) {
  GRAPH_CALL_ON((hGraphExec, node), cudaev__drv.cuGraphExecHostNodeSetParams(
                                        (CUgraphExec)hGraphExec, (CUgraphNode)node,
                                        (const CUDA_HOST_NODE_PARAMS *)pNodeParams));
}

/* child graph */

cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                       const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                       cudaGraph_t childGraph) {
  /* A graph cannot contain itself: the driver, asked to, recurses until
   * it crashes (NVIDIA's runtime with it). */
  if (graph != NULL && graph == childGraph) {
    CUDAEV_CTX_OR_RETURN();
    return cudaev__ret(cudaErrorInvalidValue);
  }
  ADD_CALL_ON((graph, childGraph),
              cudaev__drv.cuGraphAddChildGraphNode(NODE_ARGS, (CUgraph)childGraph));
}

cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t *pGraph) {
  GRAPH_CALL_ON((node),
                cudaev__drv.cuGraphChildGraphNodeGetGraph((CUgraphNode)node, (CUgraph *)pGraph));
}

cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                 cudaGraph_t childGraph) {
  GRAPH_CALL_ON((hGraphExec, node, childGraph),
                cudaev__drv.cuGraphExecChildGraphNodeSetParams(
                    (CUgraphExec)hGraphExec, (CUgraphNode)node, (CUgraph)childGraph));
}

/* events: the event is only stored in the node, and NVIDIA's runtime
 * hands any value to the driver (a destroyed or bogus event adds a node,
 * cudaSuccess), so it is not checked here; the launch meets it. */

cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                        const cudaGraphNode_t *pDependencies,
                                        size_t numDependencies, cudaEvent_t event) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddEventRecordNode(NODE_ARGS, (CUevent)event));
}

cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t *event_out) {
  GRAPH_CALL_ON(
      (node), cudaev__drv.cuGraphEventRecordNodeGetEvent((CUgraphNode)node, (CUevent *)event_out));
}

cudaError_t cudaGraphEventRecordNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  GRAPH_CALL_ON((node),
                cudaev__drv.cuGraphEventRecordNodeSetEvent((CUgraphNode)node, (CUevent)event));
}

cudaError_t cudaGraphExecEventRecordNodeSetEvent(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                                 cudaEvent_t event) {
  GRAPH_CALL_ON((hGraphExec, hNode),
                cudaev__drv.cuGraphExecEventRecordNodeSetEvent((CUgraphExec)hGraphExec,
                                                               (CUgraphNode)hNode, (CUevent)event));
}

cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                      const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                      cudaEvent_t event) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddEventWaitNode(NODE_ARGS, (CUevent)event));
}

cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t *event_out) {
  GRAPH_CALL_ON((node),
                cudaev__drv.cuGraphEventWaitNodeGetEvent((CUgraphNode)node, (CUevent *)event_out));
}

cudaError_t cudaGraphEventWaitNodeSetEvent(cudaGraphNode_t node, cudaEvent_t event) {
  GRAPH_CALL_ON((node),
                cudaev__drv.cuGraphEventWaitNodeSetEvent((CUgraphNode)node, (CUevent)event));
}

cudaError_t cudaGraphExecEventWaitNodeSetEvent(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                               cudaEvent_t event) {
  GRAPH_CALL_ON((hGraphExec, hNode),
                cudaev__drv.cuGraphExecEventWaitNodeSetEvent((CUgraphExec)hGraphExec,
                                                             (CUgraphNode)hNode, (CUevent)event));
}

/* external semaphores: same layouts */

cudaError_t cudaGraphAddExternalSemaphoresSignalNode(
    cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
    size_t numDependencies, const struct cudaExternalSemaphoreSignalNodeParams *nodeParams) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddExternalSemaphoresSignalNode(
                           NODE_ARGS, (const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)nodeParams));
}

cudaError_t cudaGraphExternalSemaphoresSignalNodeGetParams(
    cudaGraphNode_t hNode, struct cudaExternalSemaphoreSignalNodeParams *params_out) {
  GRAPH_CALL_ON((hNode), cudaev__drv.cuGraphExternalSemaphoresSignalNodeGetParams(
                             (CUgraphNode)hNode, (CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)params_out));
}

cudaError_t cudaGraphExternalSemaphoresSignalNodeSetParams(
    cudaGraphNode_t hNode, const struct cudaExternalSemaphoreSignalNodeParams *nodeParams) {
  GRAPH_CALL_ON((hNode),
                cudaev__drv.cuGraphExternalSemaphoresSignalNodeSetParams(
                    (CUgraphNode)hNode, (const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)nodeParams));
}

cudaError_t cudaGraphExecExternalSemaphoresSignalNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
    const struct cudaExternalSemaphoreSignalNodeParams *nodeParams) {
  GRAPH_CALL_ON((hGraphExec, hNode), cudaev__drv.cuGraphExecExternalSemaphoresSignalNodeSetParams(
                                         (CUgraphExec)hGraphExec, (CUgraphNode)hNode,
                                         (const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)nodeParams));
}

cudaError_t cudaGraphAddExternalSemaphoresWaitNode(
    cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
    size_t numDependencies, const struct cudaExternalSemaphoreWaitNodeParams *nodeParams) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddExternalSemaphoresWaitNode(
                           NODE_ARGS, (const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)nodeParams));
}

cudaError_t cudaGraphExternalSemaphoresWaitNodeGetParams(
    cudaGraphNode_t hNode, struct cudaExternalSemaphoreWaitNodeParams *params_out) {
  GRAPH_CALL_ON((hNode), cudaev__drv.cuGraphExternalSemaphoresWaitNodeGetParams(
                             (CUgraphNode)hNode, (CUDA_EXT_SEM_WAIT_NODE_PARAMS *)params_out));
}

cudaError_t cudaGraphExternalSemaphoresWaitNodeSetParams(
    cudaGraphNode_t hNode, const struct cudaExternalSemaphoreWaitNodeParams *nodeParams) {
  GRAPH_CALL_ON((hNode),
                cudaev__drv.cuGraphExternalSemaphoresWaitNodeSetParams(
                    (CUgraphNode)hNode, (const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)nodeParams));
}

cudaError_t cudaGraphExecExternalSemaphoresWaitNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
    const struct cudaExternalSemaphoreWaitNodeParams *nodeParams) {
  GRAPH_CALL_ON((hGraphExec, hNode), cudaev__drv.cuGraphExecExternalSemaphoresWaitNodeSetParams(
                                         (CUgraphExec)hGraphExec, (CUgraphNode)hNode,
                                         (const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)nodeParams));
}

/* stream-ordered allocation nodes: same layouts */

cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                     const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                     struct cudaMemAllocNodeParams *nodeParams) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddMemAllocNode(
                           NODE_ARGS, (CUDA_MEM_ALLOC_NODE_PARAMS *)nodeParams));
}

cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node,
                                           struct cudaMemAllocNodeParams *params_out) {
  GRAPH_CALL_ON((node), cudaev__drv.cuGraphMemAllocNodeGetParams(
                            (CUgraphNode)node, (CUDA_MEM_ALLOC_NODE_PARAMS *)params_out));
}

cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                    const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                    void *dptr) {
  ADD_CALL_ON((graph), cudaev__drv.cuGraphAddMemFreeNode(NODE_ARGS, (CUdeviceptr)dptr));
}

cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void *dptr_out) {
  GRAPH_CALL_ON(
      (node), cudaev__drv.cuGraphMemFreeNodeGetParams((CUgraphNode)node, (CUdeviceptr *)dptr_out));
}

/* conditional handles belong to the current context */

cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *pHandle_out,
                                             cudaGraph_t graph, unsigned int defaultLaunchValue,
                                             unsigned int flags) {
  GRAPH_CALL_ON((graph), cudaev__drv.cuGraphConditionalHandleCreate(
                             (CUgraphConditionalHandle *)pHandle_out, (CUgraph)graph,
                             cudaev__graph_ctx(), defaultLaunchValue, flags));
}
