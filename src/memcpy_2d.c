/* Memory Management, 2D copies: cudaMemcpy2D*, cudaMemcpy2DToArray*,
 * cudaMemcpy2DFromArray*, cudaMemcpy2DArrayToArray*; the kind -> memory
 * types mapping (array.h) and the 2D copy (memcpy.h) the other array
 * copies end in (the section's files: memcpy.h).
 * Calls no other copy file. */
#include "memcpy.h"

#include <string.h>

static CUresult issue2d(const CUDA_MEMCPY2D *m, enum how h, CUstream s) {
  /* The unaligned variant: cuMemcpy2D may refuse device pitches that
   * cuMemAllocPitch would not have chosen, cudaMemcpy2D accepts any. */
  if (h == SYNC_LEGACY) return cudaev__drv.cuMemcpy2DUnaligned(m);
  if (h == SYNC_PTDS) return cudaev__drv.cuMemcpy2DUnaligned_ptds(m);
  return cudaev__drv.cuMemcpy2DAsync(m, s);
}

cudaError_t cudaev__memcpy_kind_types(enum cudaMemcpyKind kind, CUmemorytype *src,
                                      CUmemorytype *dst) {
  switch (kind) {
  case cudaMemcpyHostToHost:
    *src = CU_MEMORYTYPE_HOST, *dst = CU_MEMORYTYPE_HOST;
    return cudaSuccess;
  case cudaMemcpyHostToDevice:
    *src = CU_MEMORYTYPE_HOST, *dst = CU_MEMORYTYPE_DEVICE;
    return cudaSuccess;
  case cudaMemcpyDeviceToHost:
    *src = CU_MEMORYTYPE_DEVICE, *dst = CU_MEMORYTYPE_HOST;
    return cudaSuccess;
  case cudaMemcpyDeviceToDevice:
    *src = CU_MEMORYTYPE_DEVICE, *dst = CU_MEMORYTYPE_DEVICE;
    return cudaSuccess;
  case cudaMemcpyDefault:
    *src = CU_MEMORYTYPE_UNIFIED, *dst = CU_MEMORYTYPE_UNIFIED;
    return cudaSuccess;
  default: return cudaErrorInvalidMemcpyDirection;
  }
}

/* Contract: memcpy.h. */
cudaError_t cudaev__memcpy_copy2d(struct side2d dst, struct side2d src, size_t width, size_t height,
                                  enum cudaMemcpyKind kind, enum how h, CUstream s) {
  CUmemorytype st, dt;
  if (width == 0 || height == 0) return cudaSuccess;
  /* NVIDIA's runtime checks the pitches only when there is a second row;
   * a single row wider than its pitch goes to the driver. */
  if (height > 1 &&
      ((dst.array == NULL && width > dst.pitch) || (src.array == NULL && width > src.pitch)))
    return cudaErrorInvalidPitchValue;
  cudaError_t e = cudaev__memcpy_kind_types(kind, &st, &dt);
  if (e != cudaSuccess) return e;
  /* The driver faults on a pointer where no memory can be (handle.h). */
  if ((dst.array == NULL && cudaev__ptr_impossible(dst.ptr)) ||
      (src.array == NULL && cudaev__ptr_impossible(src.ptr)))
    return cudaErrorInvalidValue;
  CUDA_MEMCPY2D m;
  memset(&m, 0, sizeof m);
  if (src.array != NULL) {
    m.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    m.srcArray = src.array;
  } else {
    SET_PTR(&m, src, st, src.ptr);
    m.srcPitch = src.pitch;
  }
  m.srcXInBytes = src.x;
  m.srcY = src.y;
  if (dst.array != NULL) {
    m.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    m.dstArray = dst.array;
  } else {
    SET_PTR(&m, dst, dt, dst.ptr);
    m.dstPitch = dst.pitch;
  }
  m.dstXInBytes = dst.x;
  m.dstY = dst.y;
  m.WidthInBytes = width;
  m.Height = height;
  CUresult r = issue2d(&m, h, s);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaev__error_from_cu(r);
}

/* The 2D checks NVIDIA's runtime makes before it looks at the arrays:
 * empty copy, pitch (with a second row), kind. Sets *done for an empty
 * copy. */
static cudaError_t pre2d(size_t width, size_t height, size_t pitch, bool has_pitch,
                         enum cudaMemcpyKind kind, unsigned kinds, bool *done) {
  *done = width == 0 || height == 0;
  if (*done) return cudaSuccess;
  if (has_pitch && height > 1 && width > pitch) return cudaErrorInvalidPitchValue;
  return kind_in(kind, kinds) ? cudaSuccess : cudaErrorInvalidMemcpyDirection;
}

static cudaError_t memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                            size_t height, enum cudaMemcpyKind kind, enum how h, CUstream s) {
  struct side2d d = {NULL, dst, dpitch, 0, 0}, sr = {NULL, src, spitch, 0, 0};
  return cudaev__memcpy_copy2d(d, sr, width, height, kind, h, s);
}

static cudaError_t memcpy2d_to_array(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void *src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind, enum how h, CUstream s) {
  bool done;
  cudaError_t e = pre2d(width, height, spitch, true, kind, KINDS_TO_ARRAY, &done);
  if (e == cudaSuccess && !done) e = need_array(dst);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {(CUarray)dst, NULL, 0, wOffset, hOffset}, sr = {NULL, src, spitch, 0, 0};
  return cudaev__memcpy_copy2d(d, sr, width, height, kind, h, s);
}

static cudaError_t memcpy2d_from_array(void *dst, size_t dpitch, cudaArray_const_t src,
                                       size_t wOffset, size_t hOffset, size_t width, size_t height,
                                       enum cudaMemcpyKind kind, enum how h, CUstream s) {
  bool done;
  cudaError_t e = pre2d(width, height, dpitch, true, kind, KINDS_FROM_ARRAY, &done);
  if (e == cudaSuccess && !done) e = need_array(src);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {NULL, dst, dpitch, 0, 0}, sr = {(CUarray)src, NULL, 0, wOffset, hOffset};
  return cudaev__memcpy_copy2d(d, sr, width, height, kind, h, s);
}

static cudaError_t memcpy2d_array_to_array(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                           cudaArray_const_t src, size_t wOffsetSrc,
                                           size_t hOffsetSrc, size_t width, size_t height,
                                           enum cudaMemcpyKind kind, enum how h) {
  bool done;
  cudaError_t e = pre2d(width, height, 0, false, kind, KINDS_ARRAY_TO_ARRAY, &done);
  /* Here a NULL destination is an invalid value, not an invalid handle
   * (NVIDIA's runtime answers it so; a NULL source is an invalid handle).
   * The source comes first: with both NULL, NVIDIA's answers the handle. */
  if (e == cudaSuccess && !done) e = need_array(src);
  if (e == cudaSuccess && !done) e = dst == NULL ? cudaErrorInvalidValue : need_array(dst);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {(CUarray)dst, NULL, 0, wOffsetDst, hOffsetDst};
  struct side2d sr = {(CUarray)src, NULL, 0, wOffsetSrc, hOffsetSrc};
  return cudaev__memcpy_copy2d(d, sr, width, height, kind, h, NULL);
}

CUDAEV_DECLARE_VARIANT(cudaMemcpy2D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DToArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DToArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DFromArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DFromArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DArrayToArray, _ptds);

static cudaError_t memcpy2d_export(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t stream, bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(
      memcpy2d(dst, dpitch, src, spitch, width, height, kind, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  return memcpy2d_export(dst, dpitch, src, spitch, width, height, kind, NULL, false, false);
}
cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind) {
  return memcpy2d_export(dst, dpitch, src, spitch, width, height, kind, NULL, false, true);
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
  return memcpy2d_export(dst, dpitch, src, spitch, width, height, kind, stream, true, false);
}
cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  return memcpy2d_export(dst, dpitch, src, spitch, width, height, kind, stream, true, true);
}

static cudaError_t to_array_export(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                   size_t spitch, size_t width, size_t height,
                                   enum cudaMemcpyKind kind, cudaStream_t stream, bool async,
                                   bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memcpy2d_to_array(dst, wOffset, hOffset, src, spitch, width, height, kind, h,
                                       stream_of(h, stream, pt)));
}

cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                size_t spitch, size_t width, size_t height,
                                enum cudaMemcpyKind kind) {
  return to_array_export(dst, wOffset, hOffset, src, spitch, width, height, kind, NULL, false,
                         false);
}
cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void *src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind) {
  return to_array_export(dst, wOffset, hOffset, src, spitch, width, height, kind, NULL, false,
                         true);
}
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void *src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind, cudaStream_t stream) {
  return to_array_export(dst, wOffset, hOffset, src, spitch, width, height, kind, stream, true,
                         false);
}
cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                          const void *src, size_t spitch, size_t width,
                                          size_t height, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return to_array_export(dst, wOffset, hOffset, src, spitch, width, height, kind, stream, true,
                         true);
}

static cudaError_t from_array_export(void *dst, size_t dpitch, cudaArray_const_t src,
                                     size_t wOffset, size_t hOffset, size_t width, size_t height,
                                     enum cudaMemcpyKind kind, cudaStream_t stream, bool async,
                                     bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memcpy2d_from_array(dst, dpitch, src, wOffset, hOffset, width, height, kind, h,
                                         stream_of(h, stream, pt)));
}

cudaError_t cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                  size_t hOffset, size_t width, size_t height,
                                  enum cudaMemcpyKind kind) {
  return from_array_export(dst, dpitch, src, wOffset, hOffset, width, height, kind, NULL, false,
                           false);
}
cudaError_t cudaMemcpy2DFromArray_ptds(void *dst, size_t dpitch, cudaArray_const_t src,
                                       size_t wOffset, size_t hOffset, size_t width, size_t height,
                                       enum cudaMemcpyKind kind) {
  return from_array_export(dst, dpitch, src, wOffset, hOffset, width, height, kind, NULL, false,
                           true);
}
cudaError_t cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch, cudaArray_const_t src,
                                       size_t wOffset, size_t hOffset, size_t width, size_t height,
                                       enum cudaMemcpyKind kind, cudaStream_t stream) {
  return from_array_export(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream, true,
                           false);
}
cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void *dst, size_t dpitch, cudaArray_const_t src,
                                            size_t wOffset, size_t hOffset, size_t width,
                                            size_t height, enum cudaMemcpyKind kind,
                                            cudaStream_t stream) {
  return from_array_export(dst, dpitch, src, wOffset, hOffset, width, height, kind, stream, true,
                           true);
}

static cudaError_t a2a_export(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                              cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                              size_t width, size_t height, enum cudaMemcpyKind kind, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret(memcpy2d_array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc,
                                             hOffsetSrc, width, height, kind, SYNC_HOW(pt)));
}

cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                     cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                     size_t width, size_t height, enum cudaMemcpyKind kind) {
  return a2a_export(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width, height, kind,
                    false);
}
cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                          cudaArray_const_t src, size_t wOffsetSrc,
                                          size_t hOffsetSrc, size_t width, size_t height,
                                          enum cudaMemcpyKind kind) {
  return a2a_export(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width, height, kind,
                    true);
}
