/* Graph Management: graphs, their edges and node queries, user objects;
 * the helpers every graph file uses (the section's files: graph.h).
 * Calls no other graph file. */
#include "graph.h"

#include <string.h>

cudaError_t cudaev__graph_nodes_out(CUresult r, const cudaGraphNode_t *nodes, size_t n) {
  if (r == CUDA_SUCCESS && nodes != NULL)
    for (size_t i = 0; i < n; i++) cudaev__handle_revive(nodes[i]);
  return cudaev__ret_cu(r);
}

/* For the queries that fill an array with room for `room` nodes and write
 * the count to *count: the entries written, min(room, *count), are handed
 * out (cudaev__graph_nodes_out). `room` is read before the driver overwrites *count. */
static size_t room_of(const size_t *count) { return count != NULL ? *count : 0; }
static cudaError_t listed_out(CUresult r, const cudaGraphNode_t *nodes, size_t room,
                              const size_t *count) {
  return cudaev__graph_nodes_out(r, nodes, r == CUDA_SUCCESS && *count < room ? *count : room);
}

CUcontext cudaev__graph_ctx(void) {
  CUcontext c = NULL;
  cudaev__drv.cuCtxGetCurrent(&c);
  return c;
}

/* ---- graphs ------------------------------------------------------------------------ */

cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags) {
  GRAPH_CALL(cudaev__drv.cuGraphCreate((CUgraph *)pGraph, flags));
}

cudaError_t cudaGraphClone(cudaGraph_t *pGraphClone, cudaGraph_t originalGraph) {
  GRAPH_CALL_ON((originalGraph),
                cudaev__drv.cuGraphClone((CUgraph *)pGraphClone, (CUgraph)originalGraph));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  GRAPH_CALL_ON((graph), cudaev__drv.cuGraphDestroy((CUgraph)graph));
}

/* The runtime prints the runtime's names for types (cudaMemcpy3DParms...),
 * which the driver does with CU_GRAPH_DEBUG_DOT_FLAGS_RUNTIME_TYPES. */
cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path, unsigned int flags) {
  GRAPH_CALL_ON((graph), cudaev__drv.cuGraphDebugDotPrint(
                             (CUgraph)graph, path, flags | CU_GRAPH_DEBUG_DOT_FLAGS_RUNTIME_TYPES));
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes) {
  CUDAEV_CTX_OR_RETURN();
  GRAPH_LIVE_OR_RETURN(graph);
  size_t room = room_of(numNodes);
  CUresult r = cudaev__drv.cuGraphGetNodes((CUgraph)graph, (CUgraphNode *)nodes, numNodes);
  return listed_out(r, nodes, room, numNodes);
}

cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *pRootNodes,
                                  size_t *pNumRootNodes) {
  CUDAEV_CTX_OR_RETURN();
  GRAPH_LIVE_OR_RETURN(graph);
  size_t room = room_of(pNumRootNodes);
  CUresult r =
      cudaev__drv.cuGraphGetRootNodes((CUgraph)graph, (CUgraphNode *)pRootNodes, pNumRootNodes);
  return listed_out(r, pRootNodes, room, pNumRootNodes);
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t *from, cudaGraphNode_t *to,
                              cudaGraphEdgeData *edgeData, size_t *numEdges) {
  CUDAEV_CTX_OR_RETURN();
  GRAPH_LIVE_OR_RETURN(graph);
  size_t room = room_of(numEdges);
  CUresult r = cudaev__drv.cuGraphGetEdges((CUgraph)graph, (CUgraphNode *)from, (CUgraphNode *)to,
                                           (CUgraphEdgeData *)edgeData, numEdges);
  listed_out(r, from, room, numEdges);
  return listed_out(r, to, room, numEdges);
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *pDependencies,
                                         cudaGraphEdgeData *edgeData, size_t *pNumDependencies) {
  CUDAEV_CTX_OR_RETURN();
  GRAPH_LIVE_OR_RETURN(node);
  size_t room = room_of(pNumDependencies);
  CUresult r =
      cudaev__drv.cuGraphNodeGetDependencies((CUgraphNode)node, (CUgraphNode *)pDependencies,
                                             (CUgraphEdgeData *)edgeData, pNumDependencies);
  return listed_out(r, pDependencies, room, pNumDependencies);
}

cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t *pDependentNodes,
                                           cudaGraphEdgeData *edgeData,
                                           size_t *pNumDependentNodes) {
  CUDAEV_CTX_OR_RETURN();
  GRAPH_LIVE_OR_RETURN(node);
  size_t room = room_of(pNumDependentNodes);
  CUresult r =
      cudaev__drv.cuGraphNodeGetDependentNodes((CUgraphNode)node, (CUgraphNode *)pDependentNodes,
                                               (CUgraphEdgeData *)edgeData, pNumDependentNodes);
  return listed_out(r, pDependentNodes, room, pNumDependentNodes);
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                     const cudaGraphNode_t *to, const cudaGraphEdgeData *edgeData,
                                     size_t numDependencies) {
  GRAPH_CALL_ON((graph), cudaev__drv.cuGraphAddDependencies(
                             (CUgraph)graph, (const CUgraphNode *)from, (const CUgraphNode *)to,
                             (const CUgraphEdgeData *)edgeData, numDependencies));
}

cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                        const cudaGraphNode_t *to,
                                        const cudaGraphEdgeData *edgeData, size_t numDependencies) {
  GRAPH_CALL_ON((graph), cudaev__drv.cuGraphRemoveDependencies(
                             (CUgraph)graph, (const CUgraphNode *)from, (const CUgraphNode *)to,
                             (const CUgraphEdgeData *)edgeData, numDependencies));
}

/* A destroyed node is remembered (handle.h): the driver crashes on one
 * (cudaGraphDestroyNode again, the kernel node attributes,
 * cudaGraphNodeFindInClone), NVIDIA's runtime with it. */
cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
  CUDAEV_CTX_OR_RETURN();
  GRAPH_LIVE_OR_RETURN(node);
  cudaev__handle_bury(node);
  CUresult r = cudaev__drv.cuGraphDestroyNode((CUgraphNode)node);
  if (r != CUDA_SUCCESS) cudaev__handle_revive(node);
  return cudaev__ret_cu(r);
}

cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t *pNode, cudaGraphNode_t originalNode,
                                     cudaGraph_t clonedGraph) {
  CUDAEV_CTX_OR_RETURN();
  GRAPH_LIVE_OR_RETURN(originalNode, clonedGraph);
  return cudaev__graph_nodes_out(
      cudaev__drv.cuGraphNodeFindInClone((CUgraphNode *)pNode, (CUgraphNode)originalNode,
                                         (CUgraph)clonedGraph),
      pNode, 1);
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType) {
  GRAPH_CALL_ON((node),
                cudaev__drv.cuGraphNodeGetType((CUgraphNode)node, (CUgraphNodeType *)pType));
}

/* ---- user objects ------------------------------------------------------------------ */

cudaError_t cudaUserObjectCreate(cudaUserObject_t *object_out, void *ptr, cudaHostFn_t destroy,
                                 unsigned int initialRefcount, unsigned int flags) {
  GRAPH_CALL(cudaev__drv.cuUserObjectCreate((CUuserObject *)object_out, ptr, destroy,
                                            initialRefcount, flags));
}

cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count) {
  GRAPH_CALL_ON((object), cudaev__drv.cuUserObjectRetain((CUuserObject)object, count));
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  GRAPH_CALL_ON((object), cudaev__drv.cuUserObjectRelease((CUuserObject)object, count));
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                      unsigned int count, unsigned int flags) {
  GRAPH_CALL_ON((graph, object), cudaev__drv.cuGraphRetainUserObject(
                                     (CUgraph)graph, (CUuserObject)object, count, flags));
}

cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                       unsigned int count) {
  GRAPH_CALL_ON((graph, object),
                cudaev__drv.cuGraphReleaseUserObject((CUgraph)graph, (CUuserObject)object, count));
}
