/* Graph Management: graphs, nodes of every type, instantiation, executable
 * graph updates, launch, user objects.
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
 */
#include "internal.h"

#include <string.h>

#include "handle.h"
#include "register.h"
#include "stream.h"

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

/* A node handle the driver hands out through this runtime is live again
 * (it may reuse the address of a destroyed one): the first `n` of `nodes`,
 * and leaves through the driver's result `r`. */
static cudaError_t nodes_out(CUresult r, const cudaGraphNode_t *nodes, size_t n) {
  if (r == CUDA_SUCCESS && nodes != NULL)
    for (size_t i = 0; i < n; i++) cudaev__handle_revive(nodes[i]);
  return cudaev__ret_cu(r);
}

/* For the queries that fill an array with room for `room` nodes and write
 * the count to *count: the entries written, min(room, *count), are handed
 * out (nodes_out). `room` is read before the driver overwrites *count. */
static size_t room_of(const size_t *count) { return count != NULL ? *count : 0; }
static cudaError_t listed_out(CUresult r, const cudaGraphNode_t *nodes, size_t room,
                              const size_t *count) {
  return nodes_out(r, nodes, r == CUDA_SUCCESS && *count < room ? *count : room);
}

/* GRAPH_CALL_ON for the cudaGraphAdd*Node functions: the new node,
 * *pGraphNode, is handed out. */
#define ADD_CALL_ON(handles, expr)         \
  do {                                     \
    CUDAEV_CTX_OR_RETURN();                \
    GRAPH_LIVE_OR_RETURN handles;          \
    return nodes_out(expr, pGraphNode, 1); \
  } while (0)

static CUcontext current_ctx(void) {
  CUcontext c = NULL;
  cudaev__drv.cuCtxGetCurrent(&c);
  return c;
}

/* ---- kernel parameters ----------------------------------------------------- */

/* cudaKernelNodeParams (func = host stub or cudaKernel_t) -> the driver's
 * CUDA_KERNEL_NODE_PARAMS_v2. The node names the CUkernel (func NULL, ctx
 * NULL = the current context), so the driver loads it where the node
 * runs and GetParams can map it back to the stub. Not recorded. */
static cudaError_t kernel_to_cu(const struct cudaKernelNodeParams *in,
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

/* ---- memcpy parameters -------------------------------------------------------- */

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

/* cudaMemcpy3DParms -> CUDA_MEMCPY3D, as the runtime reference defines the
 * former: exactly one of array/pointer per side, positions and width in
 * elements of the array taking part (bytes otherwise). Not recorded. */
static cudaError_t memcpy3d_to_cu(const struct cudaMemcpy3DParms *p, CUDA_MEMCPY3D *c) {
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

/* ---- generic node parameters --------------------------------------------------- */

/* cudaGraphNodeParams -> CUgraphNodeParams. The unions share their layout
 * except where the driver wants a CUfunction, a CUDA_MEMCPY3D or a context:
 * copy everything, then fix those. */
static cudaError_t node_params_to_cu(const struct cudaGraphNodeParams *in, CUgraphNodeParams *out) {
  if (in == NULL) return cudaErrorInvalidValue;
  memcpy(out, in, sizeof *out);
  switch (in->type) {
  case cudaGraphNodeTypeKernel: {
    CUDA_KERNEL_NODE_PARAMS k;
    cudaError_t e = kernel_to_cu((const struct cudaKernelNodeParams *)&in->kernel, &k);
    if (e != cudaSuccess) return e;
    memcpy(&out->kernel, &k, sizeof k);
    break;
  }
  case cudaGraphNodeTypeMemcpy: {
    memset(&out->memcpy, 0, sizeof out->memcpy);
    out->memcpy.flags = in->memcpy.flags;
    out->memcpy.copyCtx = current_ctx();
    cudaError_t e = memcpy3d_to_cu(&in->memcpy.copyParams, &out->memcpy.copyParams);
    if (e != cudaSuccess) return e;
    break;
  }
  case cudaGraphNodeTypeMemset: out->memset.ctx = current_ctx(); break;
  case cudaGraphNodeTypeConditional: out->conditional.ctx = current_ctx(); break;
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
  return nodes_out(cudaev__drv.cuGraphNodeFindInClone(
                       (CUgraphNode *)pNode, (CUgraphNode)originalNode, (CUgraph)clonedGraph),
                   pNode, 1);
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType) {
  GRAPH_CALL_ON((node),
                cudaev__drv.cuGraphNodeGetType((CUgraphNode)node, (CUgraphNodeType *)pType));
}

/* ---- nodes ------------------------------------------------------------------------- */

#define NODE_ARGS \
  (CUgraphNode *)pGraphNode, (CUgraph)graph, (const CUgraphNode *)pDependencies, numDependencies

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
  return nodes_out(r, pGraphNode, 1);
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

/* kernel */

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                   const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                   const struct cudaKernelNodeParams *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUDA_KERNEL_NODE_PARAMS k;
  cudaError_t e = kernel_to_cu(pNodeParams, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(graph);
  return nodes_out(cudaev__drv.cuGraphAddKernelNode(NODE_ARGS, &k), pGraphNode, 1);
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
  cudaError_t e = kernel_to_cu(pNodeParams, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(node);
  return cudaev__ret_cu(cudaev__drv.cuGraphKernelNodeSetParams((CUgraphNode)node, &k));
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                             const struct cudaKernelNodeParams *pNodeParams) {
  CUDAEV_CTX_OR_RETURN();
  CUDA_KERNEL_NODE_PARAMS k;
  cudaError_t e = kernel_to_cu(pNodeParams, &k);
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

/* memcpy */

static cudaError_t add_memcpy(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                              const cudaGraphNode_t *pDependencies, size_t numDependencies,
                              const struct cudaMemcpy3DParms *p) {
  CUDA_MEMCPY3D c;
  cudaError_t e = memcpy3d_to_cu(p, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(graph);
  return nodes_out(cudaev__drv.cuGraphAddMemcpyNode(NODE_ARGS, &c, current_ctx()), pGraphNode, 1);
}

static cudaError_t set_memcpy(cudaGraphNode_t node, const struct cudaMemcpy3DParms *p) {
  CUDA_MEMCPY3D c;
  cudaError_t e = memcpy3d_to_cu(p, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(node);
  return cudaev__ret_cu(cudaev__drv.cuGraphMemcpyNodeSetParams((CUgraphNode)node, &c));
}

static cudaError_t exec_set_memcpy(cudaGraphExec_t exec, cudaGraphNode_t node,
                                   const struct cudaMemcpy3DParms *p) {
  CUDA_MEMCPY3D c;
  cudaError_t e = memcpy3d_to_cu(p, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  GRAPH_LIVE_OR_RETURN(exec, node);
  return cudaev__ret_cu(cudaev__drv.cuGraphExecMemcpyNodeSetParams(
      (CUgraphExec)exec, (CUgraphNode)node, &c, current_ctx()));
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

/* memset: same layout as CUDA_MEMSET_NODE_PARAMS; the node runs in the
 * current context. */

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                   const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                   const struct cudaMemsetParams *pMemsetParams) {
  ADD_CALL_ON((graph),
              cudaev__drv.cuGraphAddMemsetNode(
                  NODE_ARGS, (const CUDA_MEMSET_NODE_PARAMS *)pMemsetParams, current_ctx()));
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
                    (const CUDA_MEMSET_NODE_PARAMS *)pNodeParams, current_ctx()));
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
                             (CUgraphConditionalHandle *)pHandle_out, (CUgraph)graph, current_ctx(),
                             defaultLaunchValue, flags));
}

/* ---- executable graphs ------------------------------------------------------------- */

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
