/* Memory Management, 3D copies: cudaMemcpy3D*, cudaMemcpy3DPeer*, and
 * the cudaMemcpy3DParms -> CUDA_MEMCPY3D conversion (array.h).
 * Calls: memcpy_2d.c (the kind -> memory types mapping). */
#include "memcpy.h"

#include <string.h>

static CUresult issue3d(const CUDA_MEMCPY3D *m, enum how h, CUstream s) {
  if (h == SYNC_LEGACY) return cudaev__drv.cuMemcpy3D(m);
  if (h == SYNC_PTDS) return cudaev__drv.cuMemcpy3D_ptds(m);
  return cudaev__drv.cuMemcpy3DAsync(m, s);
}

/* Element size of one side of a 3D copy: the array's, or 1 (bytes) for a
 * pitched pointer. */
static cudaError_t side_elem(cudaArray_t arr, size_t *elem) {
  *elem = 1;
  if (arr == NULL) return cudaSuccess;
  cudaError_t e = cudaev__array_elem_size((CUarray)arr, elem);
  if (e == cudaSuccess && *elem == 0) e = cudaErrorInvalidValue;
  return e;
}

cudaError_t cudaev__memcpy3d_params(const struct cudaMemcpy3DParms *p, CUDA_MEMCPY3D *m) {
  CUmemorytype st, dt;
  size_t se, de;
  if (p == NULL) return cudaErrorInvalidValue;
  if ((p->srcArray != NULL) == (p->srcPtr.ptr != NULL) ||
      (p->dstArray != NULL) == (p->dstPtr.ptr != NULL))
    return cudaErrorInvalidValue;
  cudaError_t e = cudaev__memcpy_kind_types(p->kind, &st, &dt);
  if (e != cudaSuccess) return e;
  bool sa = p->srcArray != NULL, da = p->dstArray != NULL;
  if ((e = side_elem(p->srcArray, &se)) != cudaSuccess) return e;
  if ((e = side_elem(p->dstArray, &de)) != cudaSuccess) return e;
  if (sa && da && se != de) return cudaErrorInvalidValue;
  /* The driver faults on a pointer where no memory can be (handle.h). */
  if ((!sa && cudaev__ptr_impossible(p->srcPtr.ptr)) ||
      (!da && cudaev__ptr_impossible(p->dstPtr.ptr)))
    return cudaErrorInvalidValue;
  /* The extent counts elements of whichever array takes part, bytes when
   * none does, and so does a pointer side's x position when an array
   * takes part (measured on NVIDIA's: the documentation says bytes). */
  size_t unit = sa ? se : da ? de : 1;
  size_t width = p->extent.width * unit;
  if (!sa) se = unit;
  if (!da) de = unit;
  /* NVIDIA's runtime checks a pointer side's pitch only when the copy has
   * a second row or slice; a single row wider than its pitch goes to the
   * driver (which refuses it with CUDA_ERROR_INVALID_VALUE). */
  if ((p->extent.height > 1 || p->extent.depth > 1) &&
      ((!sa && width > p->srcPtr.pitch) || (!da && width > p->dstPtr.pitch)))
    return cudaErrorInvalidPitchValue;
  memset(m, 0, sizeof *m);
  if (sa) {
    m->srcMemoryType = CU_MEMORYTYPE_ARRAY;
    m->srcArray = (CUarray)p->srcArray;
  } else {
    SET_PTR(m, src, st, p->srcPtr.ptr);
    m->srcPitch = p->srcPtr.pitch;
    m->srcHeight = p->srcPtr.ysize;
  }
  m->srcXInBytes = p->srcPos.x * se;
  m->srcY = p->srcPos.y;
  m->srcZ = p->srcPos.z;
  if (da) {
    m->dstMemoryType = CU_MEMORYTYPE_ARRAY;
    m->dstArray = (CUarray)p->dstArray;
  } else {
    SET_PTR(m, dst, dt, p->dstPtr.ptr);
    m->dstPitch = p->dstPtr.pitch;
    m->dstHeight = p->dstPtr.ysize;
  }
  m->dstXInBytes = p->dstPos.x * de;
  m->dstY = p->dstPos.y;
  m->dstZ = p->dstPos.z;
  m->WidthInBytes = width;
  m->Height = p->extent.height;
  m->Depth = p->extent.depth;
  return cudaSuccess;
}

cudaError_t cudaev__memcpy3d_peer_params(const struct cudaMemcpy3DPeerParms *p,
                                         CUDA_MEMCPY3D_PEER *m) {
  if (p == NULL) return cudaErrorInvalidValue;
  if (!cudaev__device_valid(p->srcDevice) || !cudaev__device_valid(p->dstDevice))
    return cudaErrorInvalidDevice;
  struct cudaMemcpy3DParms q = {p->srcArray, p->srcPos, p->srcPtr, p->dstArray,
                                p->dstPos,   p->dstPtr, p->extent, cudaMemcpyDeviceToDevice};
  CUDA_MEMCPY3D c;
  cudaError_t e = cudaev__memcpy3d_params(&q, &c);
  if (e != cudaSuccess) return e;
  CUcontext sc, dc;
  if ((e = cudaev__primary_ctx(p->srcDevice, &sc)) != cudaSuccess) return e;
  if ((e = cudaev__primary_ctx(p->dstDevice, &dc)) != cudaSuccess) return e;
  memset(m, 0, sizeof *m);
  m->srcXInBytes = c.srcXInBytes, m->srcY = c.srcY, m->srcZ = c.srcZ;
  m->srcMemoryType = c.srcMemoryType, m->srcDevice = c.srcDevice, m->srcArray = c.srcArray;
  m->srcContext = sc, m->srcPitch = c.srcPitch, m->srcHeight = c.srcHeight;
  m->dstXInBytes = c.dstXInBytes, m->dstY = c.dstY, m->dstZ = c.dstZ;
  m->dstMemoryType = c.dstMemoryType, m->dstDevice = c.dstDevice, m->dstArray = c.dstArray;
  m->dstContext = dc, m->dstPitch = c.dstPitch, m->dstHeight = c.dstHeight;
  m->WidthInBytes = c.WidthInBytes, m->Height = c.Height, m->Depth = c.Depth;
  return cudaSuccess;
}

/* An empty extent is a successful no-op before any other part of the
 * parameters is looked at: NVIDIA's runtime returns cudaSuccess for an
 * all-zero cudaMemcpy3DParms (no array, no pointer, no kind), on a device
 * (measured on an H100); only a NULL one is an invalid value. */
static bool empty_extent(struct cudaExtent e) {
  return e.width == 0 || e.height == 0 || e.depth == 0;
}

static cudaError_t memcpy3d(const struct cudaMemcpy3DParms *p, enum how h, CUstream s) {
  if (p != NULL && empty_extent(p->extent)) return cudaSuccess;
  CUDA_MEMCPY3D m;
  cudaError_t e = cudaev__memcpy3d_params(p, &m);
  if (e != cudaSuccess) return e;
  if (m.WidthInBytes == 0 || m.Height == 0 || m.Depth == 0) return cudaSuccess;
  CUresult r = issue3d(&m, h, s);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaev__error_from_cu(r);
}

static cudaError_t memcpy3d_peer(const struct cudaMemcpy3DPeerParms *p, enum how h, CUstream s) {
  if (p != NULL && empty_extent(p->extent)) return cudaSuccess;
  CUDA_MEMCPY3D_PEER m;
  cudaError_t e = cudaev__memcpy3d_peer_params(p, &m);
  if (e != cudaSuccess) return e;
  if (m.WidthInBytes == 0 || m.Height == 0 || m.Depth == 0) return cudaSuccess;
  CUresult r = h == SYNC_LEGACY ? cudaev__drv.cuMemcpy3DPeer(&m)
               : h == SYNC_PTDS ? cudaev__drv.cuMemcpy3DPeer_ptds(&m)
                                : cudaev__drv.cuMemcpy3DPeerAsync(&m, s);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaev__error_from_cu(r);
}

CUDAEV_DECLARE_VARIANT(cudaMemcpy3D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DPeer, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DPeerAsync, _ptsz);

static cudaError_t memcpy3d_export(const struct cudaMemcpy3DParms *p, cudaStream_t stream,
                                   bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memcpy3d(p, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p) {
  return memcpy3d_export(p, NULL, false, false);
}
cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p) {
  return memcpy3d_export(p, NULL, false, true);
}
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream) {
  return memcpy3d_export(p, stream, true, false);
}
cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t stream) {
  return memcpy3d_export(p, stream, true, true);
}

static cudaError_t memcpy3d_peer_export(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream,
                                        bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memcpy3d_peer(p, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p) {
  return memcpy3d_peer_export(p, NULL, false, false);
}
cudaError_t cudaMemcpy3DPeer_ptds(const struct cudaMemcpy3DPeerParms *p) {
  return memcpy3d_peer_export(p, NULL, false, true);
}
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream) {
  return memcpy3d_peer_export(p, stream, true, false);
}
cudaError_t cudaMemcpy3DPeerAsync_ptsz(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream) {
  return memcpy3d_peer_export(p, stream, true, true);
}
