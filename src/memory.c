/* Memory Management (linear memory): device, pinned host, registered host
 * and managed allocations, 1D copies and memsets, peer copies, prefetch,
 * advice and range attributes.
 *
 * NVIDIA's runtime asks the driver for the typed copy entry points
 * (cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuMemcpyDtoD_v2 and their Async and
 * per-thread forms) besides the unified cuMemcpy, so an explicit
 * cudaMemcpyKind goes to the typed call and only cudaMemcpyDefault (and
 * host to host, which has no typed call) to cuMemcpy: a kind that does not
 * match the pointers is then judged by the driver exactly as under NVIDIA's
 * runtime. The synchronisation rules of the runtime's "API synchronization
 * behavior" page are the driver's rules for the same calls, so nothing is
 * added around them, except for large copies between pageable host memory
 * and device memory: those go through the pinned staging ring
 * (src/staging.h), which keeps the same rules at several times the
 * driver's bandwidth. */
#include "internal.h"
#include "handle.h"
#include "hostpool.h"
#include "memory.h"
#include "staging.h"

/* ---- allocation ---------------------------------------------------------- */

/* cuMemAlloc refuses a size of 0; cudaMalloc succeeds with a NULL pointer. */
cudaError_t cudaMalloc(void **devPtr, size_t size) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (size == 0) {
    *devPtr = NULL;
    return cudaSuccess;
  }
  return cudaev__ret_cu(cudaev__drv.cuMemAlloc((CUdeviceptr *)devPtr, size));
}

/* cuMemFree synchronises as cudaFree documents (not for stream-ordered
 * allocations, which it frees at once) and rejects pointers it does not
 * know, freed ones included, with CUDA_ERROR_INVALID_VALUE. cudaFree(0) is
 * the traditional way to initialise the runtime: the context is made
 * current first. */
cudaError_t cudaFree(void *devPtr) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL) return cudaSuccess;
  return cudaev__ret_cu(cudaev__drv.cuMemFree((CUdeviceptr)devPtr));
}

#define HOST_ALLOC_FLAGS (cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined)

/* Pinned memory comes from the pool (src/hostpool.h) unless it declines
 * the request. */
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (pHost == NULL || (flags & ~(unsigned)HOST_ALLOC_FLAGS))
    return cudaev__ret(cudaErrorInvalidValue);
  if (size == 0) {
    *pHost = NULL;
    return cudaSuccess;
  }
  CUresult r;
  if (cudaev__hostpool_alloc(pHost, size, flags, &r)) return cudaev__ret_cu(r);
  return cudaev__ret_cu(cudaev__drv.cuMemHostAlloc(pHost, size, flags));
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

/* A pointer the pool did not hand out goes to cuMemFreeHost, which refuses
 * pointers it does not know, freed ones included, with
 * CUDA_ERROR_INVALID_VALUE. */
cudaError_t cudaFreeHost(void *ptr) {
  CUDAEV_CTX_OR_RETURN();
  if (ptr == NULL) return cudaSuccess;
  cudaError_t e;
  if (cudaev__hostpool_free(ptr, &e)) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuMemFreeHost(ptr));
}

#define HOST_REGISTER_FLAGS                                                       \
  (cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory | \
   cudaHostRegisterReadOnly)

/* A range registered twice comes back from the driver as
 * CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = cudaErrorHostMemoryAlreadyRegistered. */
cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (flags & ~(unsigned)HOST_REGISTER_FLAGS) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuMemHostRegister(ptr, size, flags));
}

cudaError_t cudaHostUnregister(void *ptr) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuMemHostUnregister(ptr));
}

cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags) {
  /* Arguments before the context: NVIDIA's runtime answers bad flags as a
   * process's first call without making one (measured on an H100). */
  CUDAEV_INIT_OR_RETURN();
  if (pDevice == NULL || flags != 0) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuMemHostGetDevicePointer((CUdeviceptr *)pDevice, pHost, 0));
}

cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost) {
  CUDAEV_CTX_OR_RETURN();
  if (pFlags == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUresult r = cudaev__drv.cuMemHostGetFlags(pFlags, pHost);
  if (r == CUDA_SUCCESS) cudaev__hostpool_flags(pHost, pFlags);
  return cudaev__ret_cu(r);
}

/* The flags must be exactly cudaMemAttachGlobal or cudaMemAttachHost (the
 * driver's rule too). A size of 0 is refused by cuMemAllocManaged with
 * CUDA_ERROR_INVALID_VALUE, but NVIDIA's cudaMallocManaged succeeds with a
 * NULL pointer, as cudaMalloc and cudaHostAlloc do (measured on the GPU). */
cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* Size 0 succeeds before the flags are looked at, as NVIDIA's does
   * (measured: flags 0, which it refuses with a size, succeed). */
  if (size == 0) {
    *devPtr = NULL;
    return cudaSuccess;
  }
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
    return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuMemAllocManaged((CUdeviceptr *)devPtr, size, flags));
}

cudaError_t cudaev__mem_info(size_t *free, size_t *total) {
  return cudaev__error_from_cu(cudaev__drv.cuMemGetInfo(free, total));
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret(cudaev__mem_info(free, total));
}

/* ---- copies and memsets --------------------------------------------------- */

CUDAEV_DECLARE_VARIANT(cudaMemcpy, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemset, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemsetAsync, _ptsz);

/* Synchronous copy on the legacy default stream (per_thread: on the
 * calling thread's default stream, the driver's _ptds entry points).
 * A count of 0 succeeds before the kind is looked at: NVIDIA's cudaMemcpy
 * returns cudaSuccess for (dst, src, 0, (cudaMemcpyKind)9) (measured).
 * A pointer where no memory can be (handle.h) is an invalid value here,
 * in both copies: the driver faults on it (NVIDIA's runtime with it). */
static cudaError_t memcpy_sync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                               bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  if (count == 0) return cudaSuccess;
  if (CUDAEV_UNLIKELY((unsigned)kind > (unsigned)cudaMemcpyDefault))
    return cudaev__ret(cudaErrorInvalidMemcpyDirection);
  if (CUDAEV_UNLIKELY(cudaev__ptr_impossible(dst) || cudaev__ptr_impossible(src)))
    return cudaev__ret(cudaErrorInvalidValue);
  CUdeviceptr d = (CUdeviceptr)dst, s = (CUdeviceptr)src;
  CUresult r;
  if (count > CUDAEV_STAGING_MIN && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyHostToHost &&
      cudaev__staged_copy(dst, src, count, kind,
                          per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY, true, &r))
    return cudaev__ret_cu(r);
  switch (kind) {
  case cudaMemcpyHostToDevice:
    r = per_thread ? cudaev__drv.cuMemcpyHtoD_ptds(d, src, count)
                   : cudaev__drv.cuMemcpyHtoD(d, src, count);
    break;
  case cudaMemcpyDeviceToHost:
    r = per_thread ? cudaev__drv.cuMemcpyDtoH_ptds(dst, s, count)
                   : cudaev__drv.cuMemcpyDtoH(dst, s, count);
    break;
  case cudaMemcpyDeviceToDevice:
    r = per_thread ? cudaev__drv.cuMemcpyDtoD_ptds(d, s, count)
                   : cudaev__drv.cuMemcpyDtoD(d, s, count);
    break;
  default: /* cudaMemcpyHostToHost, cudaMemcpyDefault */
    r = per_thread ? cudaev__drv.cuMemcpy_ptds(d, s, count) : cudaev__drv.cuMemcpy(d, s, count);
    break;
  }
  return cudaev__ret_cu(r);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  return memcpy_sync(dst, src, count, kind, false);
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  return memcpy_sync(dst, src, count, kind, true);
}

static inline CUresult memcpy_async_drv(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind, CUstream st) {
  CUdeviceptr d = (CUdeviceptr)dst, s = (CUdeviceptr)src;
  switch (kind) {
  case cudaMemcpyHostToDevice: return cudaev__drv.cuMemcpyHtoDAsync(d, src, count, st);
  case cudaMemcpyDeviceToHost: return cudaev__drv.cuMemcpyDtoHAsync(dst, s, count, st);
  case cudaMemcpyDeviceToDevice: return cudaev__drv.cuMemcpyDtoDAsync(d, s, count, st);
  default: return cudaev__drv.cuMemcpyAsync(d, s, count, st);
  }
}

/* The enqueue hot path: the context check of the hot paths (internal.h),
 * one destroyed-stream check (an atomic load), one switch, one driver
 * call. Size 0 is checked before the kind, as in memcpy_sync. Large copies
 * may go through the staging ring. */
static inline cudaError_t memcpy_async(void *dst, const void *src, size_t count,
                                       enum cudaMemcpyKind kind, cudaStream_t stream,
                                       bool per_thread) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(stream);
  if (CUDAEV_UNLIKELY(count == 0)) return cudaSuccess;
  if (CUDAEV_UNLIKELY((unsigned)kind > (unsigned)cudaMemcpyDefault))
    return cudaev__ret(cudaErrorInvalidMemcpyDirection);
  if (CUDAEV_UNLIKELY(cudaev__ptr_impossible(dst) || cudaev__ptr_impossible(src)))
    return cudaev__ret(cudaErrorInvalidValue);
  CUstream st = cudaev__stream(stream, per_thread);
  CUresult r;
  if (CUDAEV_UNLIKELY(count > CUDAEV_STAGING_MIN) && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyHostToHost && cudaev__staged_copy(dst, src, count, kind, st, false, &r))
    return cudaev__ret_cu(r);
  r = memcpy_async_drv(dst, src, count, kind, st);
  CUDAEV_CTX_HOT_RETRY(known, r, memcpy_async_drv(dst, src, count, kind, st));
  return cudaev__ret_cu(r);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return memcpy_async(dst, src, count, kind, stream, false);
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream) {
  return memcpy_async(dst, src, count, kind, stream, true);
}

/* cudaMemset's value is converted to unsigned char, as cuMemsetD8 takes it. */
cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuMemsetD8((CUdeviceptr)devPtr, (unsigned char)value, count));
}

cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(
      cudaev__drv.cuMemsetD8_ptds((CUdeviceptr)devPtr, (unsigned char)value, count));
}

static inline cudaError_t memset_async(void *devPtr, int value, size_t count, cudaStream_t stream,
                                       bool per_thread) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(stream);
  CUstream st = cudaev__stream(stream, per_thread);
  CUresult r = cudaev__drv.cuMemsetD8Async((CUdeviceptr)devPtr, (unsigned char)value, count, st);
  CUDAEV_CTX_HOT_RETRY(
      known, r, cudaev__drv.cuMemsetD8Async((CUdeviceptr)devPtr, (unsigned char)value, count, st));
  return cudaev__ret_cu(r);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  return memset_async(devPtr, value, count, stream, false);
}

cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream) {
  return memset_async(devPtr, value, count, stream, true);
}

/* ---- peer copies ---------------------------------------------------------- */

/* Both devices' primary contexts are what the driver's peer copy wants;
 * retaining them initialises those devices as NVIDIA's runtime does. */
static cudaError_t peer_contexts(int dstDevice, int srcDevice, CUcontext *dc, CUcontext *sc) {
  if (!cudaev__device_valid(dstDevice) || !cudaev__device_valid(srcDevice))
    return cudaErrorInvalidDevice;
  cudaError_t e = cudaev__primary_ctx(dstDevice, dc);
  if (e == cudaSuccess) e = cudaev__primary_ctx(srcDevice, sc);
  return e;
}

/* A count of 0 succeeds before the devices are checked: NVIDIA's
 * cudaMemcpyPeer(dst, n, src, 0, 0) with n = the device count returns
 * cudaSuccess (measured). */
cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count) {
  CUDAEV_CTX_OR_RETURN();
  if (count == 0) return cudaSuccess;
  CUcontext dc, sc;
  cudaError_t e = peer_contexts(dstDevice, srcDevice, &dc, &sc);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(
      cudaev__drv.cuMemcpyPeer((CUdeviceptr)dst, dc, (CUdeviceptr)src, sc, count));
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                size_t count, cudaStream_t stream) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  if (count == 0) return cudaSuccess;
  CUcontext dc, sc;
  cudaError_t e = peer_contexts(dstDevice, srcDevice, &dc, &sc);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuMemcpyPeerAsync((CUdeviceptr)dst, dc, (CUdeviceptr)src, sc,
                                                      count, cudaev__stream(stream, false)));
}

/* ---- managed memory: prefetch, discard, advice, range attributes ---------- */

CUDAEV_DECLARE_VARIANT(cudaMemPrefetchAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemPrefetchBatchAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemDiscardBatchAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemDiscardAndPrefetchBatchAsync, _ptsz);

static cudaError_t prefetch(const void *devPtr, size_t count, struct cudaMemLocation location,
                            unsigned int flags, cudaStream_t stream, bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  return cudaev__ret_cu(cudaev__drv.cuMemPrefetchAsync((CUdeviceptr)devPtr, count,
                                                       cudaev__mem_location(location), flags,
                                                       cudaev__stream(stream, per_thread)));
}

cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream) {
  return prefetch(devPtr, count, location, flags, stream, false);
}

cudaError_t cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count,
                                      struct cudaMemLocation location, unsigned int flags,
                                      cudaStream_t stream) {
  return prefetch(devPtr, count, location, flags, stream, true);
}

/* The location arrays are the caller's and are handed over as they are
 * (cudaMemLocation is CUmemLocation, memory.h): device ids in them are the
 * driver's ordinals, which cudart's and the driver's device numbering share
 * (cuDeviceGet(i) = i). */
static cudaError_t prefetch_batch(void **dptrs, size_t *sizes, size_t count,
                                  struct cudaMemLocation *locs, size_t *locIdxs, size_t numLocs,
                                  unsigned long long flags, cudaStream_t stream, bool per_thread,
                                  bool discard) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  CUstream st = cudaev__stream(stream, per_thread);
  CUresult r = discard ? cudaev__drv.cuMemDiscardAndPrefetchBatchAsync((CUdeviceptr *)dptrs, sizes,
                                                                       count, (CUmemLocation *)locs,
                                                                       locIdxs, numLocs, flags, st)
                       : cudaev__drv.cuMemPrefetchBatchAsync((CUdeviceptr *)dptrs, sizes, count,
                                                             (CUmemLocation *)locs, locIdxs,
                                                             numLocs, flags, st);
  return cudaev__ret_cu(r);
}

cudaError_t cudaMemPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                      struct cudaMemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                      size_t numPrefetchLocs, unsigned long long flags,
                                      cudaStream_t stream) {
  return prefetch_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                        stream, false, false);
}

cudaError_t cudaMemPrefetchBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count,
                                           struct cudaMemLocation *prefetchLocs,
                                           size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                           unsigned long long flags, cudaStream_t stream) {
  return prefetch_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                        stream, true, false);
}

cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                                struct cudaMemLocation *prefetchLocs,
                                                size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                                unsigned long long flags, cudaStream_t stream) {
  return prefetch_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                        stream, false, true);
}

cudaError_t cudaMemDiscardAndPrefetchBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count,
                                                     struct cudaMemLocation *prefetchLocs,
                                                     size_t *prefetchLocIdxs,
                                                     size_t numPrefetchLocs,
                                                     unsigned long long flags,
                                                     cudaStream_t stream) {
  return prefetch_batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                        stream, true, true);
}

static cudaError_t discard_batch(void **dptrs, size_t *sizes, size_t count,
                                 unsigned long long flags, cudaStream_t stream, bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  return cudaev__ret_cu(cudaev__drv.cuMemDiscardBatchAsync(
      (CUdeviceptr *)dptrs, sizes, count, flags, cudaev__stream(stream, per_thread)));
}

cudaError_t cudaMemDiscardBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                     unsigned long long flags, cudaStream_t stream) {
  return discard_batch(dptrs, sizes, count, flags, stream, false);
}

cudaError_t cudaMemDiscardBatchAsync_ptsz(void **dptrs, size_t *sizes, size_t count,
                                          unsigned long long flags, cudaStream_t stream) {
  return discard_batch(dptrs, sizes, count, flags, stream, true);
}

cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation location) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuMemAdvise((CUdeviceptr)devPtr, count, (CUmem_advise)advice,
                                                cudaev__mem_location(location)));
}

/* The two range queries use the calling thread's current context and make
 * none current, as NVIDIA's do: on a thread where no call has made one
 * current yet (cudaSetDevice does; cudaGetDevice does not) they answer
 * cudaErrorDeviceUninitialized, also for a good managed pointer that
 * another thread allocated (measured on an H200). */
cudaError_t cudaMemRangeGetAttribute(void *data, size_t dataSize,
                                     enum cudaMemRangeAttribute attribute, const void *devPtr,
                                     size_t count) {
  CUDAEV_INIT_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuMemRangeGetAttribute(
      data, dataSize, (CUmem_range_attribute)attribute, (CUdeviceptr)devPtr, count));
}

/* The attribute array is passed as it is (the enums are the same size,
 * abi_asserts.c). */
cudaError_t cudaMemRangeGetAttributes(void **data, size_t *dataSizes,
                                      enum cudaMemRangeAttribute *attributes, size_t numAttributes,
                                      const void *devPtr, size_t count) {
  CUDAEV_INIT_OR_RETURN();
  return cudaev__ret_cu(
      cudaev__drv.cuMemRangeGetAttributes(data, dataSizes, (CUmem_range_attribute *)attributes,
                                          numAttributes, (CUdeviceptr)devPtr, count));
}
