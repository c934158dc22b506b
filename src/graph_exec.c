/* Graph Management, executable graphs: instantiation, flags, whole-graph
 * update, enabling nodes, launch, upload, destroy.
 * Calls no other graph file. */
#include "graph.h"

#include <string.h>

#include "stream.h"

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long flags) {
  GRAPH_CALL_ON((graph), cudaev__drv.cuGraphInstantiateWithFlags((CUgraphExec *)pGraphExec,
                                                                 (CUgraph)graph, flags));
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                          unsigned long long flags) {
  GRAPH_CALL_ON((graph), cudaev__drv.cuGraphInstantiateWithFlags((CUgraphExec *)pGraphExec,
                                                                 (CUgraph)graph, flags));
}

/* The upload stream is a stream argument: NULL means the per-thread
 * stream in the _ptsz export. Outputs travel back to the caller's struct. */
static cudaError_t instantiate_params_impl(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams *p, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (p == NULL) return cudaev__ret(cudaErrorInvalidValue);
  GRAPH_LIVE_OR_RETURN(graph);
  CUDAEV_LIVE_OR_RETURN(p->uploadStream);
  CUDA_GRAPH_INSTANTIATE_PARAMS c;
  memcpy(&c, p, sizeof c);
  c.hUploadStream = cudaev__stream(p->uploadStream, pt);
  CUresult r =
      cudaev__drv.cuGraphInstantiateWithParams((CUgraphExec *)pGraphExec, (CUgraph)graph, &c);
  p->errNode_out = (cudaGraphNode_t)c.hErrNode_out;
  cudaev__handle_revive(p->errNode_out);
  p->result_out = (cudaGraphInstantiateResult)c.result_out;
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaGraphInstantiateWithParams, _ptsz);
cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams *instantiateParams) {
  return instantiate_params_impl(pGraphExec, graph, instantiateParams, false);
}
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                cudaGraphInstantiateParams *instantiateParams) {
  return instantiate_params_impl(pGraphExec, graph, instantiateParams, true);
}

cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t graphExec, unsigned long long *flags) {
  GRAPH_CALL_ON((graphExec),
                cudaev__drv.cuGraphExecGetFlags((CUgraphExec)graphExec, (cuuint64_t *)flags));
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                cudaGraphExecUpdateResultInfo *resultInfo) {
  GRAPH_CALL_ON((hGraphExec, hGraph),
                cudaev__drv.cuGraphExecUpdate((CUgraphExec)hGraphExec, (CUgraph)hGraph,
                                              (CUgraphExecUpdateResultInfo *)resultInfo));
}

cudaError_t cudaGraphNodeSetEnabled(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                    unsigned int isEnabled) {
  GRAPH_CALL_ON((hGraphExec, hNode), cudaev__drv.cuGraphNodeSetEnabled(
                                         (CUgraphExec)hGraphExec, (CUgraphNode)hNode, isEnabled));
}

cudaError_t cudaGraphNodeGetEnabled(cudaGraphExec_t hGraphExec, cudaGraphNode_t hNode,
                                    unsigned int *isEnabled) {
  GRAPH_CALL_ON((hGraphExec, hNode), cudaev__drv.cuGraphNodeGetEnabled(
                                         (CUgraphExec)hGraphExec, (CUgraphNode)hNode, isEnabled));
}

static cudaError_t launch_impl(cudaGraphExec_t exec, cudaStream_t s, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  GRAPH_LIVE_OR_RETURN(exec);
  return cudaev__ret_cu(cudaev__drv.cuGraphLaunch((CUgraphExec)exec, cudaev__stream(s, pt)));
}
CUDAEV_DECLARE_VARIANT(cudaGraphLaunch, _ptsz);
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return launch_impl(graphExec, stream, false);
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return launch_impl(graphExec, stream, true);
}

static cudaError_t upload_impl(cudaGraphExec_t exec, cudaStream_t s, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  GRAPH_LIVE_OR_RETURN(exec);
  return cudaev__ret_cu(cudaev__drv.cuGraphUpload((CUgraphExec)exec, cudaev__stream(s, pt)));
}
CUDAEV_DECLARE_VARIANT(cudaGraphUpload, _ptsz);
cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return upload_impl(graphExec, stream, false);
}
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return upload_impl(graphExec, stream, true);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  GRAPH_CALL_ON((graphExec), cudaev__drv.cuGraphExecDestroy((CUgraphExec)graphExec));
}
