/* Graph Management, memcpy nodes: cudaMemcpy3DParms (positions and widths
 * in elements, a cudaMemcpyKind) to the driver's CUDA_MEMCPY3D (bytes,
 * memory types) and back, 1D and symbol copies as cudaMemcpy3DParms, and
 * the memcpy node calls.
 * Calls: graph.c (graph.h's helpers). */
#include "graph.h"

#include <string.h>

#include "register.h"

/* driver_functions.h's make_cuda* helpers, which cuda_runtime_api.h lacks. */
static struct cudaPitchedPtr pitched(void *p, size_t pitch, size_t xsize, size_t ysize) {
  return (struct cudaPitchedPtr){.ptr = p, .pitch = pitch, .xsize = xsize, .ysize = ysize};
}
static struct cudaPos pos3(size_t x, size_t y, size_t z) { return (struct cudaPos){x, y, z}; }
static struct cudaExtent extent3(size_t w, size_t h, size_t d) {
  return (struct cudaExtent){.width = w, .height = h, .depth = d};
}

/* Bytes of one element of a CUDA array in *out, 0 when the format has no
 * byte-addressable element (block-compressed and planar video formats).
 * Returns the driver's error when it cannot describe the array. */
static CUresult array_element_size(CUarray a, size_t *out) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  *out = 0;
  CUresult r = cudaev__drv.cuArray3DGetDescriptor(&d, a);
  if (r != CUDA_SUCCESS) return r;
  size_t chan;
  switch (d.Format) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8:
  case CU_AD_FORMAT_UNORM_INT8X1:
  case CU_AD_FORMAT_UNORM_INT8X2:
  case CU_AD_FORMAT_UNORM_INT8X4:
  case CU_AD_FORMAT_SNORM_INT8X1:
  case CU_AD_FORMAT_SNORM_INT8X2:
  case CU_AD_FORMAT_SNORM_INT8X4: chan = 1; break;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF:
  case CU_AD_FORMAT_UNORM_INT16X1:
  case CU_AD_FORMAT_UNORM_INT16X2:
  case CU_AD_FORMAT_UNORM_INT16X4:
  case CU_AD_FORMAT_SNORM_INT16X1:
  case CU_AD_FORMAT_SNORM_INT16X2:
  case CU_AD_FORMAT_SNORM_INT16X4: chan = 2; break;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT:
  case CU_AD_FORMAT_UNORM_INT_101010_2: chan = 4; break;
  default: return CUDA_SUCCESS;
  }
  *out = chan * d.NumChannels;
  return CUDA_SUCCESS;
}

/* One side of a copy: an array, or a pointer whose memory type the kind
 * names (cudaMemcpyDefault: unified addressing decides). */
static cudaError_t side_to_cu(cudaArray_t arr, struct cudaPos pos, struct cudaPitchedPtr ptr,
                              bool host, bool unified, size_t *elem, CUmemorytype *type,
                              const void **hostp, CUdeviceptr *devp, CUarray *arrp, size_t *x,
                              size_t *y, size_t *z, size_t *pitch, size_t *height) {
  if (arr != NULL) {
    if (ptr.ptr != NULL) return cudaErrorInvalidValue;
    CUresult r = array_element_size((CUarray)arr, elem);
    if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
    if (*elem == 0) return cudaErrorInvalidValue;
    *type = CU_MEMORYTYPE_ARRAY;
    *arrp = (CUarray)arr;
  } else {
    if (ptr.ptr == NULL) return cudaErrorInvalidValue;
    *elem = 1;
    *pitch = ptr.pitch;
    *height = ptr.ysize;
    if (unified) {
      *type = CU_MEMORYTYPE_UNIFIED;
      *devp = (CUdeviceptr)ptr.ptr;
    } else if (host) {
      *type = CU_MEMORYTYPE_HOST;
      *hostp = ptr.ptr;
    } else {
      *type = CU_MEMORYTYPE_DEVICE;
      *devp = (CUdeviceptr)ptr.ptr;
    }
  }
  *x = pos.x * *elem;
  *y = pos.y;
  *z = pos.z;
  return cudaSuccess;
}

/* Contract: graph.h. */
cudaError_t cudaev__graph_memcpy3d_to_cu(const struct cudaMemcpy3DParms *p, CUDA_MEMCPY3D *c) {
  if (p == NULL) return cudaErrorInvalidValue;
  bool src_host, dst_host, unified = false;
  switch (p->kind) {
  case cudaMemcpyHostToHost: src_host = true, dst_host = true; break;
  case cudaMemcpyHostToDevice: src_host = true, dst_host = false; break;
  case cudaMemcpyDeviceToHost: src_host = false, dst_host = true; break;
  case cudaMemcpyDeviceToDevice: src_host = false, dst_host = false; break;
  case cudaMemcpyDefault: src_host = false, dst_host = false, unified = true; break;
  default: return cudaErrorInvalidMemcpyDirection;
  }
  memset(c, 0, sizeof *c);
  size_t selem, delem;
  void *dst_host_ptr = NULL;
  cudaError_t e = side_to_cu(p->srcArray, p->srcPos, p->srcPtr, src_host, unified, &selem,
                             &c->srcMemoryType, &c->srcHost, &c->srcDevice, &c->srcArray,
                             &c->srcXInBytes, &c->srcY, &c->srcZ, &c->srcPitch, &c->srcHeight);
  if (e != cudaSuccess) return e;
  e = side_to_cu(p->dstArray, p->dstPos, p->dstPtr, dst_host, unified, &delem, &c->dstMemoryType,
                 (const void **)&dst_host_ptr, &c->dstDevice, &c->dstArray, &c->dstXInBytes,
                 &c->dstY, &c->dstZ, &c->dstPitch, &c->dstHeight);
  if (e != cudaSuccess) return e;
  c->dstHost = dst_host_ptr;
  c->WidthInBytes = p->extent.width * (p->srcArray != NULL ? selem : delem);
  c->Height = p->extent.height;
  c->Depth = p->extent.depth;
  return cudaSuccess;
}

static bool type_is_host(CUmemorytype t) { return t == CU_MEMORYTYPE_HOST; }

/* CUDA_MEMCPY3D -> cudaMemcpy3DParms: the kind from the memory types
 * (unified -> cudaMemcpyDefault), bytes back to elements. */
static void memcpy3d_from_cu(const CUDA_MEMCPY3D *c, struct cudaMemcpy3DParms *p) {
  memset(p, 0, sizeof *p);
  size_t selem = 1, delem = 1;
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY) {
    p->srcArray = (cudaArray_t)c->srcArray;
    if (array_element_size(c->srcArray, &selem) != CUDA_SUCCESS || selem == 0) selem = 1;
  } else {
    p->srcPtr = pitched(type_is_host(c->srcMemoryType) ? (void *)c->srcHost : (void *)c->srcDevice,
                        c->srcPitch, c->WidthInBytes, c->srcHeight);
  }
  if (c->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
    p->dstArray = (cudaArray_t)c->dstArray;
    if (array_element_size(c->dstArray, &delem) != CUDA_SUCCESS || delem == 0) delem = 1;
  } else {
    p->dstPtr = pitched(type_is_host(c->dstMemoryType) ? c->dstHost : (void *)c->dstDevice,
                        c->dstPitch, c->WidthInBytes, c->dstHeight);
  }
  p->srcPos = pos3(c->srcXInBytes / selem, c->srcY, c->srcZ);
  p->dstPos = pos3(c->dstXInBytes / delem, c->dstY, c->dstZ);
  size_t welem = c->srcMemoryType == CU_MEMORYTYPE_ARRAY ? selem : delem;
  p->extent = extent3(c->WidthInBytes / welem, c->Height, c->Depth);
  if (c->srcMemoryType == CU_MEMORYTYPE_UNIFIED || c->dstMemoryType == CU_MEMORYTYPE_UNIFIED)
    p->kind = cudaMemcpyDefault;
  else if (type_is_host(c->srcMemoryType))
    p->kind = type_is_host(c->dstMemoryType) ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice;
  else
    p->kind = type_is_host(c->dstMemoryType) ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}

/* A 1D copy of `count` bytes as a cudaMemcpy3DParms. */
static struct cudaMemcpy3DParms memcpy1d(void *dst, const void *src, size_t count,
                                         enum cudaMemcpyKind kind) {
  struct cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  p.srcPtr = pitched((void *)src, count, count, 1);
  p.dstPtr = pitched(dst, count, count, 1);
  p.extent = extent3(count, 1, 1);
  p.kind = kind;
  return p;
}

/* Symbol copies: the symbol's device address plus offset, bounds-checked
 * as cudaMemcpyToSymbol does; then the kind, which must leave device
 * memory on the symbol's side (NVIDIA's runtime looks the symbol up before
 * the kind, as cudaMemcpyToSymbol does). */
static cudaError_t symbol_addr(const void *symbol, size_t count, size_t offset, void **out) {
  CUdeviceptr base;
  size_t size;
  cudaError_t e = cudaev__symbol_lookup(symbol, &base, &size);
  if (e != cudaSuccess) return e;
  if (offset > size || count > size - offset) return cudaErrorInvalidValue;
  *out = (void *)(base + offset);
  return cudaSuccess;
}

static cudaError_t to_symbol_params(const void *symbol, const void *src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind,
                                    struct cudaMemcpy3DParms *p) {
  void *dst;
  cudaError_t e = symbol_addr(symbol, count, offset, &dst);
  if (e != cudaSuccess) return e;
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  *p = memcpy1d(dst, src, count, kind);
  return cudaSuccess;
}

static cudaError_t from_symbol_params(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, struct cudaMemcpy3DParms *p) {
  void *src;
  cudaError_t e = symbol_addr(symbol, count, offset, &src);
  if (e != cudaSuccess) return e;
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return cudaErrorInvalidMemcpyDirection;
  *p = memcpy1d(dst, src, count, kind);
  return cudaSuccess;
}

/* memcpy */

static cudaError_t add_memcpy(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                              const cudaGraphNode_t *pDependencies, size_t numDependencies,
                              const struct cudaMemcpy3DParms *p) {
  CUDA_MEMCPY3D c;
  cudaError_t e = cudaev__graph_memcpy3d_to_cu(p, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(graph);
  return cudaev__graph_nodes_out(
      cudaev__drv.cuGraphAddMemcpyNode(NODE_ARGS, &c, cudaev__graph_ctx()), pGraphNode, 1);
}

static cudaError_t set_memcpy(cudaGraphNode_t node, const struct cudaMemcpy3DParms *p) {
  CUDA_MEMCPY3D c;
  cudaError_t e = cudaev__graph_memcpy3d_to_cu(p, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(node);
  return cudaev__ret_cu(cudaev__drv.cuGraphMemcpyNodeSetParams((CUgraphNode)node, &c));
}

static cudaError_t exec_set_memcpy(cudaGraphExec_t exec, cudaGraphNode_t node,
                                   const struct cudaMemcpy3DParms *p) {
  CUDA_MEMCPY3D c;
  cudaError_t e = cudaev__graph_memcpy3d_to_cu(p, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(exec, node);
  return cudaev__ret_cu(cudaev__drv.cuGraphExecMemcpyNodeSetParams(
      (CUgraphExec)exec, (CUgraphNode)node, &c, cudaev__graph_ctx()));
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                   const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                   const struct cudaMemcpy3DParms *pCopyParams) {
  CUDAEV_CTX_OR_RETURN();
  return add_memcpy(pGraphNode, graph, pDependencies, numDependencies, pCopyParams);
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                     const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                     void *dst, const void *src, size_t count,
                                     enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p = memcpy1d(dst, src, count, kind);
  return add_memcpy(pGraphNode, graph, pDependencies, numDependencies, &p);
}

cudaError_t cudaGraphAddMemcpyNodeToSymbol(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                           const cudaGraphNode_t *pDependencies,
                                           size_t numDependencies, const void *symbol,
                                           const void *src, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p;
  cudaError_t e = to_symbol_params(symbol, src, count, offset, kind, &p);
  if (e != cudaSuccess) return cudaev__ret(e);
  return add_memcpy(pGraphNode, graph, pDependencies, numDependencies, &p);
}

cudaError_t cudaGraphAddMemcpyNodeFromSymbol(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                             const cudaGraphNode_t *pDependencies,
                                             size_t numDependencies, void *dst, const void *symbol,
                                             size_t count, size_t offset,
                                             enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p;
  cudaError_t e = from_symbol_params(dst, symbol, count, offset, kind, &p);
  if (e != cudaSuccess) return cudaev__ret(e);
  return add_memcpy(pGraphNode, graph, pDependencies, numDependencies, &p);
}

cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node,
                                         struct cudaMemcpy3DParms *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  if (pNodeParams == NULL) return cudaev__ret(cudaErrorInvalidValue);
  GRAPH_LIVE_OR_RETURN(node);
  CUDA_MEMCPY3D c;
  CUresult r = cudaev__drv.cuGraphMemcpyNodeGetParams((CUgraphNode)node, &c);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  memcpy3d_from_cu(&c, pNodeParams);
  return cudaSuccess;
}

cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node,
                                         const struct cudaMemcpy3DParms *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  return set_memcpy(node, pNodeParams);
}

cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void *dst, const void *src,
                                           size_t count, enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p = memcpy1d(dst, src, count, kind);
  return set_memcpy(node, &p);
}

cudaError_t cudaGraphMemcpyNodeSetParamsToSymbol(cudaGraphNode_t node, const void *symbol,
                                                 const void *src, size_t count, size_t offset,
                                                 enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p;
  cudaError_t e = to_symbol_params(symbol, src, count, offset, kind, &p);
  if (e != cudaSuccess) return cudaev__ret(e);
  return set_memcpy(node, &p);
}

cudaError_t cudaGraphMemcpyNodeSetParamsFromSymbol(cudaGraphNode_t node, void *dst,
                                                   const void *symbol, size_t count, size_t offset,
                                                   enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p;
  cudaError_t e = from_symbol_params(dst, symbol, count, offset, kind, &p);
  if (e != cudaSuccess) return cudaev__ret(e);
  return set_memcpy(node, &p);
}

cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const struct cudaMemcpy3DParms *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  return exec_set_memcpy(hGraphExec, node, pNodeParams);
}

cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                               void *dst, const void *src, size_t count,
                                               enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p = memcpy1d(dst, src, count, kind);
  return exec_set_memcpy(hGraphExec, node, &p);
}

cudaError_t cudaGraphExecMemcpyNodeSetParamsToSymbol(cudaGraphExec_t hGraphExec,
                                                     cudaGraphNode_t node, const void *symbol,
                                                     const void *src, size_t count, size_t offset,
                                                     enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p;
  cudaError_t e = to_symbol_params(symbol, src, count, offset, kind, &p);
  if (e != cudaSuccess) return cudaev__ret(e);
  return exec_set_memcpy(hGraphExec, node, &p);
}

cudaError_t cudaGraphExecMemcpyNodeSetParamsFromSymbol(cudaGraphExec_t hGraphExec,
                                                       cudaGraphNode_t node, void *dst,
                                                       const void *symbol, size_t count,
                                                       size_t offset, enum cudaMemcpyKind kind) {
  CUDAEV_CTX_OR_RETURN();
  struct cudaMemcpy3DParms p;
  cudaError_t e = from_symbol_params(dst, symbol, count, offset, kind, &p);
  if (e != cudaSuccess) return cudaev__ret(e);
  return exec_set_memcpy(hGraphExec, node, &p);
}
