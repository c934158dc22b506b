/* Memory Management, the deprecated 1D copies into and out of arrays:
 * cudaMemcpyToArray*, cudaMemcpyFromArray*, cudaMemcpyArrayToArray*,
 * split into 2D copies along the array's rows.
 * Calls: memcpy_2d.c (the 2D copy). */
#include "memcpy.h"

#include "memory.h"

/* The deprecated 1D array copies: an empty copy succeeds, and so (doing
 * nothing) does a kind past cudaMemcpyDefault when one side is a pointer:
 * NVIDIA's runtime returns cudaSuccess for it. A kind 0..4 that does not
 * fit is a wrong direction. */
static cudaError_t pre1d(size_t count, enum cudaMemcpyKind kind, unsigned kinds, bool has_ptr,
                         bool *done) {
  *done = count == 0 || (has_ptr && (unsigned)kind > cudaMemcpyDefault);
  if (*done) return cudaSuccess;
  return kind_in(kind, kinds) ? cudaSuccess : cudaErrorInvalidMemcpyDirection;
}

static cudaError_t row_bytes(CUarray a, size_t *out) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  CUresult r = cudaev__drv.cuArray3DGetDescriptor(&d, a);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  *out = d.Width * cudaev__format_elem_size(d.Format, d.NumChannels);
  return cudaSuccess;
}

/* count bytes that run along the rows of an array side (wrapping to the
 * next row at the end of one), as cudaMemcpyToArray & co. copy: split into
 * 2D copies, whole rows in one copy where every array side starts a row
 * and all rows are the same length. */
static cudaError_t copy_linear(struct side2d dst, struct side2d src, size_t count,
                               enum cudaMemcpyKind kind, enum how h, CUstream s) {
  CUmemorytype st, dt;
  cudaError_t e = cudaev__memcpy_kind_types(kind, &st, &dt);
  if (e != cudaSuccess || count == 0) return e;
  size_t drow = 0, srow = 0;
  if (dst.array != NULL && (e = row_bytes(dst.array, &drow)) != cudaSuccess) return e;
  if (src.array != NULL && (e = row_bytes(src.array, &srow)) != cudaSuccess) return e;
  while (count > 0) {
    size_t n = count, rows = 1, row = 0;
    if (dst.array != NULL) row = drow;
    if (src.array != NULL) {
      if (row != 0 && row != srow)
        row = SIZE_MAX; /* rows of different lengths */
      else
        row = srow;
    }
    if (row != 0 && row != SIZE_MAX && (dst.array == NULL || dst.x == 0) &&
        (src.array == NULL || src.x == 0) && count >= row) {
      n = row;
      rows = count / row;
    } else {
      if (dst.array != NULL) n = dst.x < drow ? (n < drow - dst.x ? n : drow - dst.x) : 0;
      if (src.array != NULL) n = src.x < srow ? (n < srow - src.x ? n : srow - src.x) : 0;
      if (n == 0) return cudaErrorInvalidValue;
    }
    struct side2d d = dst, sr = src;
    if (d.array == NULL) d.pitch = n;
    if (sr.array == NULL) sr.pitch = n;
    e = cudaev__memcpy_copy2d(d, sr, n, rows, kind, h, s);
    if (e != cudaSuccess) return e;
    size_t done = n * rows;
    count -= done;
    if (dst.array == NULL)
      dst.ptr = (const char *)dst.ptr + done;
    else if (rows > 1 || dst.x + n == drow)
      dst.x = 0, dst.y += rows;
    else
      dst.x += n;
    if (src.array == NULL)
      src.ptr = (const char *)src.ptr + done;
    else if (rows > 1 || src.x + n == srow)
      src.x = 0, src.y += rows;
    else
      src.x += n;
  }
  return cudaSuccess;
}

static cudaError_t memcpy_to_array(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                   size_t count, enum cudaMemcpyKind kind, enum how h, CUstream s) {
  bool done;
  cudaError_t e = pre1d(count, kind, KINDS_TO_ARRAY, true, &done);
  if (e == cudaSuccess && !done) e = need_array(dst);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {(CUarray)dst, NULL, 0, wOffset, hOffset}, sr = {NULL, src, 0, 0, 0};
  return copy_linear(d, sr, count, kind, h, s);
}

static cudaError_t memcpy_from_array(void *dst, cudaArray_const_t src, size_t wOffset,
                                     size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                     enum how h, CUstream s) {
  bool done;
  cudaError_t e = pre1d(count, kind, KINDS_FROM_ARRAY, true, &done);
  if (e == cudaSuccess && !done) e = need_array(src);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {NULL, dst, 0, 0, 0}, sr = {(CUarray)src, NULL, 0, wOffset, hOffset};
  return copy_linear(d, sr, count, kind, h, s);
}

static cudaError_t memcpy_array_to_array(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                         cudaArray_const_t src, size_t wOffsetSrc,
                                         size_t hOffsetSrc, size_t count, enum cudaMemcpyKind kind,
                                         enum how h) {
  bool done;
  cudaError_t e = pre1d(count, kind, KINDS_ARRAY_TO_ARRAY, false, &done);
  if (e == cudaSuccess && !done) e = need_array(dst);
  if (e == cudaSuccess && !done) e = need_array(src);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {(CUarray)dst, NULL, 0, wOffsetDst, hOffsetDst};
  struct side2d sr = {(CUarray)src, NULL, 0, wOffsetSrc, hOffsetSrc};
  e = copy_linear(d, sr, count, kind, h, NULL);
  if (e != cudaErrorInvalidValue) return e;
  /* NVIDIA's runtime stages this copy through count bytes of device memory
   * that it allocates before it looks at the arrays' extents, so a count
   * the device cannot hold is cudaErrorMemoryAllocation, not the
   * cudaErrorInvalidValue of a count past the arrays (measured on an H200
   * with 149 GB free: 70 GB and more, up to SIZE_MAX, against 68 GB and
   * less; cudaMalloc of 74 GB failed there too). Counts above the free
   * memory are mirrored; the band between the driver's largest single
   * allocation and the free memory is not. */
  size_t free_mem = 0, total_mem = 0;
  cudaError_t m = cudaev__mem_info(&free_mem, &total_mem);
  if (m != cudaSuccess) return m;
  return count > free_mem ? cudaErrorMemoryAllocation : e;
}

CUDAEV_DECLARE_VARIANT(cudaMemcpyToArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyToArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpyFromArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyFromArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpyArrayToArray, _ptds);

static cudaError_t to_array1d_export(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void *src, size_t count, enum cudaMemcpyKind kind,
                                     cudaStream_t stream, bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(
      memcpy_to_array(dst, wOffset, hOffset, src, count, kind, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                              size_t count, enum cudaMemcpyKind kind) {
  return to_array1d_export(dst, wOffset, hOffset, src, count, kind, NULL, false, false);
}
cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                   size_t count, enum cudaMemcpyKind kind) {
  return to_array1d_export(dst, wOffset, hOffset, src, count, kind, NULL, false, true);
}
cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                   size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return to_array1d_export(dst, wOffset, hOffset, src, count, kind, stream, true, false);
}
cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                        const void *src, size_t count, enum cudaMemcpyKind kind,
                                        cudaStream_t stream) {
  return to_array1d_export(dst, wOffset, hOffset, src, count, kind, stream, true, true);
}

static cudaError_t from_array1d_export(void *dst, cudaArray_const_t src, size_t wOffset,
                                       size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                       cudaStream_t stream, bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(
      memcpy_from_array(dst, src, wOffset, hOffset, count, kind, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemcpyFromArray(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                size_t count, enum cudaMemcpyKind kind) {
  return from_array1d_export(dst, src, wOffset, hOffset, count, kind, NULL, false, false);
}
cudaError_t cudaMemcpyFromArray_ptds(void *dst, cudaArray_const_t src, size_t wOffset,
                                     size_t hOffset, size_t count, enum cudaMemcpyKind kind) {
  return from_array1d_export(dst, src, wOffset, hOffset, count, kind, NULL, false, true);
}
cudaError_t cudaMemcpyFromArrayAsync(void *dst, cudaArray_const_t src, size_t wOffset,
                                     size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                     cudaStream_t stream) {
  return from_array1d_export(dst, src, wOffset, hOffset, count, kind, stream, true, false);
}
cudaError_t cudaMemcpyFromArrayAsync_ptsz(void *dst, cudaArray_const_t src, size_t wOffset,
                                          size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                          cudaStream_t stream) {
  return from_array1d_export(dst, src, wOffset, hOffset, count, kind, stream, true, true);
}

static cudaError_t a2a1d_export(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                size_t count, enum cudaMemcpyKind kind, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret(memcpy_array_to_array(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc,
                                           count, kind, SYNC_HOW(pt)));
}

cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                   cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                   size_t count, enum cudaMemcpyKind kind) {
  return a2a1d_export(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, false);
}
cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst,
                                        cudaArray_const_t src, size_t wOffsetSrc, size_t hOffsetSrc,
                                        size_t count, enum cudaMemcpyKind kind) {
  return a2a1d_export(dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind, true);
}
