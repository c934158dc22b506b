/* Memory Management, the 2D / 3D / array copies and sets: cudaMemcpy2D*,
 * cudaMemcpy*Array*, cudaMemcpy3D*, the CUDA 13 batch copies and
 * cudaMemset2D/3D. (1D copies and sets live in memory.c.)
 *
 * Synchronous variants call the driver's synchronous copies, which follow
 * the same "API synchronization behavior" rules as the runtime's (pageable
 * staging, D2D without host sync...), on the legacy default stream, or the
 * driver's _ptds entry points for the per-thread-default-stream exports.
 * Async variants enqueue on cudaev__stream(stream, per_thread). */
#include "internal.h"

#include "array.h"
#include "handle.h"
#include "memory.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* How a copy is issued: which default stream a synchronous call uses, or
 * asynchronously on a given stream. */
enum how { SYNC_LEGACY, SYNC_PTDS, ASYNC };

static CUresult issue2d(const CUDA_MEMCPY2D *m, enum how h, CUstream s) {
  /* The unaligned variant: cuMemcpy2D may refuse device pitches that
   * cuMemAllocPitch would not have chosen, cudaMemcpy2D accepts any. */
  if (h == SYNC_LEGACY) return cudaev__drv.cuMemcpy2DUnaligned(m);
  if (h == SYNC_PTDS) return cudaev__drv.cuMemcpy2DUnaligned_ptds(m);
  return cudaev__drv.cuMemcpy2DAsync(m, s);
}

static CUresult issue3d(const CUDA_MEMCPY3D *m, enum how h, CUstream s) {
  if (h == SYNC_LEGACY) return cudaev__drv.cuMemcpy3D(m);
  if (h == SYNC_PTDS) return cudaev__drv.cuMemcpy3D_ptds(m);
  return cudaev__drv.cuMemcpy3DAsync(m, s);
}

static inline CUstream stream_of(enum how h, cudaStream_t s, bool per_thread) {
  return h == ASYNC ? cudaev__stream(s, per_thread) : NULL;
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

/* Points one side of a driver copy at a pointer of memory type t. */
#define SET_PTR(m, side, t, p)                         \
  do {                                                 \
    (m)->side##MemoryType = (t);                       \
    if ((t) == CU_MEMORYTYPE_HOST)                     \
      (m)->side##Host = (void *)(uintptr_t)(p);        \
    else                                               \
      (m)->side##Device = (CUdeviceptr)(uintptr_t)(p); \
  } while (0)

/* ---- 2D ------------------------------------------------------------------ */

/* One 2D copy where either side may be an array (array != NULL) or a
 * pitched pointer; x offsets in bytes. */
struct side2d {
  CUarray array;
  const void *ptr;
  size_t pitch, x, y;
};

static cudaError_t copy2d(struct side2d dst, struct side2d src, size_t width, size_t height,
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

/* Array handles as the deprecated and 2D array copies receive them: NULL
 * is an invalid handle, not "no array" (as NVIDIA's runtime answers); so is
 * an array freed through this runtime (the driver would crash on it). */
static inline cudaError_t need_array(cudaArray_const_t a) {
  return a == NULL || cudaev__handle_dead(a) ? cudaErrorInvalidResourceHandle : cudaSuccess;
}

/* The kinds each array copy accepts, as NVIDIA's runtime checks them
 * (after the empty-copy and pitch checks, before the array handles): the
 * array side is device memory, so a kind that says that side is host memory
 * is a wrong direction. */
#define KIND_BIT(k) (1u << (k))
#define KINDS_TO_ARRAY                                                     \
  (KIND_BIT(cudaMemcpyHostToDevice) | KIND_BIT(cudaMemcpyDeviceToDevice) | \
   KIND_BIT(cudaMemcpyDefault))
#define KINDS_FROM_ARRAY                                                   \
  (KIND_BIT(cudaMemcpyDeviceToHost) | KIND_BIT(cudaMemcpyDeviceToDevice) | \
   KIND_BIT(cudaMemcpyDefault))
#define KINDS_ARRAY_TO_ARRAY (KIND_BIT(cudaMemcpyDeviceToDevice) | KIND_BIT(cudaMemcpyDefault))

static inline bool kind_in(enum cudaMemcpyKind kind, unsigned kinds) {
  return (unsigned)kind <= cudaMemcpyDefault && (kinds & KIND_BIT((unsigned)kind)) != 0;
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

static cudaError_t memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                            size_t height, enum cudaMemcpyKind kind, enum how h, CUstream s) {
  struct side2d d = {NULL, dst, dpitch, 0, 0}, sr = {NULL, src, spitch, 0, 0};
  return copy2d(d, sr, width, height, kind, h, s);
}

static cudaError_t memcpy2d_to_array(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                     const void *src, size_t spitch, size_t width, size_t height,
                                     enum cudaMemcpyKind kind, enum how h, CUstream s) {
  bool done;
  cudaError_t e = pre2d(width, height, spitch, true, kind, KINDS_TO_ARRAY, &done);
  if (e == cudaSuccess && !done) e = need_array(dst);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {(CUarray)dst, NULL, 0, wOffset, hOffset}, sr = {NULL, src, spitch, 0, 0};
  return copy2d(d, sr, width, height, kind, h, s);
}

static cudaError_t memcpy2d_from_array(void *dst, size_t dpitch, cudaArray_const_t src,
                                       size_t wOffset, size_t hOffset, size_t width, size_t height,
                                       enum cudaMemcpyKind kind, enum how h, CUstream s) {
  bool done;
  cudaError_t e = pre2d(width, height, dpitch, true, kind, KINDS_FROM_ARRAY, &done);
  if (e == cudaSuccess && !done) e = need_array(src);
  if (e != cudaSuccess || done) return e;
  struct side2d d = {NULL, dst, dpitch, 0, 0}, sr = {(CUarray)src, NULL, 0, wOffset, hOffset};
  return copy2d(d, sr, width, height, kind, h, s);
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
  return copy2d(d, sr, width, height, kind, h, NULL);
}

/* ---- deprecated 1D-into-array copies -------------------------------------- */

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
    e = copy2d(d, sr, n, rows, kind, h, s);
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

/* ---- 3D ------------------------------------------------------------------- */

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

/* ---- memset 2D/3D --------------------------------------------------------- */

static cudaError_t memset2d(void *p, size_t pitch, int value, size_t width, size_t height,
                            enum how h, CUstream s) {
  if (width == 0 || height == 0) return cudaSuccess;
  /* Rows that reach past the end of the address space cannot all be
   * memory: the driver, asked for 2^62 of them, does not return within
   * 30 s instead of refusing (nor does NVIDIA's runtime). The driver takes
   * the pitch as signed (NVIDIA's runtime refuses a pitch of 2^62 and
   * accepts SIZE_MAX, rows one byte apart going down), so its rows span
   * |pitch| bytes each. */
  size_t step = (intptr_t)pitch < 0 ? (size_t)0 - pitch : pitch;
  if (step != 0 && height > CUDAEV_HANDLE_END / step) return cudaErrorInvalidValue;
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
  unsigned char v = (unsigned char)value;
  CUresult r = h == SYNC_LEGACY ? cudaev__drv.cuMemsetD2D8(d, pitch, v, width, height)
               : h == SYNC_PTDS ? cudaev__drv.cuMemsetD2D8_ptds(d, pitch, v, width, height)
                                : cudaev__drv.cuMemsetD2D8Async(d, pitch, v, width, height, s);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaev__error_from_cu(r);
}

static cudaError_t memset3d(struct cudaPitchedPtr p, int value, struct cudaExtent ext, enum how h,
                            CUstream s) {
  if (ext.width == 0 || ext.height == 0 || ext.depth == 0) return cudaSuccess;
  if (ext.depth > 1 && ext.height > p.ysize) return cudaErrorInvalidValue;
  /* Slices that follow each other without a gap are one 2D set. */
  if (ext.depth == 1 || ext.height == p.ysize)
    return memset2d(p.ptr, p.pitch, value, ext.width, ext.height * ext.depth, h, s);
  size_t slice = p.pitch * p.ysize;
  for (size_t z = 0; z < ext.depth; z++) {
    cudaError_t e =
        memset2d((char *)p.ptr + z * slice, p.pitch, value, ext.width, ext.height, h, s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

/* ---- exports ---------------------------------------------------------------- */

/* Base export + per-thread variant sharing one body: SYNC picks the legacy
 * or per-thread default stream, ASYNC maps a NULL stream per variant. An
 * async call refuses a dead stream (handle.h) first: NVIDIA's runtime
 * reaches the stream before any other argument, even for an empty copy,
 * and crashes on one. */
#define SYNC_HOW(pt) ((pt) ? SYNC_PTDS : SYNC_LEGACY)

CUDAEV_DECLARE_VARIANT(cudaMemcpy2D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DToArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DToArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DFromArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DFromArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy2DArrayToArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyToArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyToArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpyFromArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyFromArrayAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpyArrayToArray, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DPeer, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DPeerAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpyBatchAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DBatchAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemset2D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemset2DAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemset3D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemset3DAsync, _ptsz);

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

/* ---- batches ---------------------------------------------------------------- */

/* The runtime's batch structures are the driver's, field for field
 * (abi_asserts.c; cudaMemLocation ids are device ordinals in both, and
 * cudart's ordinal i is the driver's CUdevice i), so the lists pass through
 * without a copy: the batch is an enqueue path and must not allocate. */
static cudaError_t batch_export(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                size_t numAttrs, cudaStream_t stream, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  return cudaev__ret_cu(cudaev__drv.cuMemcpyBatchAsync(
      (CUdeviceptr *)(uintptr_t)dsts, (CUdeviceptr *)(uintptr_t)srcs, (size_t *)(uintptr_t)sizes,
      count, (CUmemcpyAttributes *)attrs, attrsIdxs, numAttrs, cudaev__stream(stream, pt)));
}

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                 size_t count, struct cudaMemcpyAttributes *attrs,
                                 size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream) {
  return batch_export(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, false);
}
cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs,
                                      const size_t *sizes, size_t count,
                                      struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                      size_t numAttrs, cudaStream_t stream) {
  return batch_export(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, true);
}

static cudaError_t batch3d_export(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                  unsigned long long flags, cudaStream_t stream, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  return cudaev__ret_cu(cudaev__drv.cuMemcpy3DBatchAsync(numOps, (CUDA_MEMCPY3D_BATCH_OP *)opList,
                                                         flags, cudaev__stream(stream, pt)));
}

cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                   unsigned long long flags, cudaStream_t stream) {
  return batch3d_export(numOps, opList, flags, stream, false);
}
cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                        unsigned long long flags, cudaStream_t stream) {
  return batch3d_export(numOps, opList, flags, stream, true);
}

/* ---- memset exports ----------------------------------------------------------- */

static cudaError_t memset2d_export(void *devPtr, size_t pitch, int value, size_t width,
                                   size_t height, cudaStream_t stream, bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memset2d(devPtr, pitch, value, width, height, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height) {
  return memset2d_export(devPtr, pitch, value, width, height, NULL, false, false);
}
cudaError_t cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width, size_t height) {
  return memset2d_export(devPtr, pitch, value, width, height, NULL, false, true);
}
cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  return memset2d_export(devPtr, pitch, value, width, height, stream, true, false);
}
cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width,
                                   size_t height, cudaStream_t stream) {
  return memset2d_export(devPtr, pitch, value, width, height, stream, true, true);
}

static cudaError_t memset3d_export(struct cudaPitchedPtr p, int value, struct cudaExtent extent,
                                   cudaStream_t stream, bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memset3d(p, value, extent, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent) {
  return memset3d_export(pitchedDevPtr, value, extent, NULL, false, false);
}
cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr pitchedDevPtr, int value,
                              struct cudaExtent extent) {
  return memset3d_export(pitchedDevPtr, value, extent, NULL, false, true);
}
cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value,
                              struct cudaExtent extent, cudaStream_t stream) {
  return memset3d_export(pitchedDevPtr, value, extent, stream, true, false);
}
cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr pitchedDevPtr, int value,
                                   struct cudaExtent extent, cudaStream_t stream) {
  return memset3d_export(pitchedDevPtr, value, extent, stream, true, true);
}
