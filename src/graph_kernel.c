/* Graph Management, kernel nodes: cudaKernelNodeParams (a host stub or a
 * cudaKernel_t) to the driver's CUDA_KERNEL_NODE_PARAMS and back, the
 * kernel node calls and their launch attributes.
 * Calls: graph.c (graph.h's helpers). */
#include "graph.h"

#include <string.h>

#include "register.h"
#include "stream.h"

/* Contract: graph.h. */
cudaError_t cudaev__graph_kernel_to_cu(const struct cudaKernelNodeParams *in,
                                       CUDA_KERNEL_NODE_PARAMS *out) {
  if (in == NULL) return cudaErrorInvalidValue;
  CUkernel k;
  cudaError_t e = cudaev__kernel_lookup(in->func, &k);
  if (e != cudaSuccess) return e;
  memset(out, 0, sizeof *out);
  out->kern = k;
  out->gridDimX = in->gridDim.x;
  out->gridDimY = in->gridDim.y;
  out->gridDimZ = in->gridDim.z;
  out->blockDimX = in->blockDim.x;
  out->blockDimY = in->blockDim.y;
  out->blockDimZ = in->blockDim.z;
  out->sharedMemBytes = in->sharedMemBytes;
  out->kernelParams = in->kernelParams;
  out->extra = in->extra;
  return cudaSuccess;
}

/* The driver hands back the CUkernel (and/or a CUfunction): a registered
 * kernel becomes its host stub again, as NVIDIA's runtime reports it; a
 * node that only names a CUfunction (added through the driver API) gives
 * that handle. */
static void kernel_from_cu(const CUDA_KERNEL_NODE_PARAMS *in, struct cudaKernelNodeParams *out) {
  const void *f = in->func != NULL ? (const void *)in->func : (const void *)in->kern;
  if (in->kern != NULL) {
    struct cudaev__kfunc *kf = cudaev__kfunc_find((const void *)in->kern);
    f = kf != NULL && kf->stub != NULL ? kf->stub : (const void *)in->kern;
  }
  out->func = (void *)f;
  out->gridDim = (dim3){in->gridDimX, in->gridDimY, in->gridDimZ};
  out->blockDim = (dim3){in->blockDimX, in->blockDimY, in->blockDimZ};
  out->sharedMemBytes = in->sharedMemBytes;
  out->kernelParams = in->kernelParams;
  out->extra = in->extra;
}

/* kernel */

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                   const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                   const struct cudaKernelNodeParams *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUDA_KERNEL_NODE_PARAMS k;
  cudaError_t e = cudaev__graph_kernel_to_cu(pNodeParams, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(graph);
  return cudaev__graph_nodes_out(cudaev__drv.cuGraphAddKernelNode(NODE_ARGS, &k), pGraphNode, 1);
}

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
                                         struct cudaKernelNodeParams *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  if (pNodeParams == NULL) return cudaev__ret(cudaErrorInvalidValue);
  GRAPH_LIVE_OR_RETURN(node);
  CUDA_KERNEL_NODE_PARAMS k;
  CUresult r = cudaev__drv.cuGraphKernelNodeGetParams((CUgraphNode)node, &k);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  kernel_from_cu(&k, pNodeParams);
  return cudaSuccess;
}

cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                         const struct cudaKernelNodeParams *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUDA_KERNEL_NODE_PARAMS k;
  cudaError_t e = cudaev__graph_kernel_to_cu(pNodeParams, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(node);
  return cudaev__ret_cu(cudaev__drv.cuGraphKernelNodeSetParams((CUgraphNode)node, &k));
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const struct cudaKernelNodeParams *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUDA_KERNEL_NODE_PARAMS k;
  cudaError_t e = cudaev__graph_kernel_to_cu(pNodeParams, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(hGraphExec, node);
  return cudaev__ret_cu(
      cudaev__drv.cuGraphExecKernelNodeSetParams((CUgraphExec)hGraphExec, (CUgraphNode)node, &k));
}

cudaError_t cudaGraphKernelNodeCopyAttributes(cudaGraphNode_t hDst, cudaGraphNode_t hSrc) {
  GRAPH_CALL_ON((hDst, hSrc),
                cudaev__drv.cuGraphKernelNodeCopyAttributes((CUgraphNode)hDst, (CUgraphNode)hSrc));
}

cudaError_t cudaGraphKernelNodeGetAttribute(cudaGraphNode_t hNode, cudaLaunchAttributeID attr,
                                            cudaLaunchAttributeValue *value_out) {
  CUDAEV_CTX_OR_RETURN();
  if (value_out == NULL) return cudaev__ret(cudaErrorInvalidValue);
  GRAPH_LIVE_OR_RETURN(hNode);
  CUlaunchAttributeValue v;
  memset(&v, 0, sizeof v);
  CUresult r =
      cudaev__drv.cuGraphKernelNodeGetAttribute((CUgraphNode)hNode, (CUkernelNodeAttrID)attr, &v);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__attr_value_from_cu(attr, &v, value_out);
  return cudaSuccess;
}

cudaError_t cudaGraphKernelNodeSetAttribute(cudaGraphNode_t hNode, cudaLaunchAttributeID attr,
                                            const cudaLaunchAttributeValue *value) {
  CUDAEV_CTX_OR_RETURN();
  CUlaunchAttributeValue v;
  if (!cudaev__attr_value_to_cu(attr, value, &v)) return cudaev__ret(cudaErrorInvalidValue);
  GRAPH_LIVE_OR_RETURN(hNode);
  return cudaev__ret_cu(
      cudaev__drv.cuGraphKernelNodeSetAttribute((CUgraphNode)hNode, (CUkernelNodeAttrID)attr, &v));
}
