/* Stream Ordered Memory Allocator: cudaMallocAsync/cudaFreeAsync, memory
 * pools (create, destroy, attributes, access, trim), sharing pools and
 * their allocations between processes, and the current/default pools of a
 * memory location.
 *
 * A cudaMemPool_t is the driver's CUmemoryPool, and the runtime's pool
 * structures mirror the driver's (abi_asserts.c checks it), so every function
 * here is a check of what only the runtime checks and one driver call. */
#include "internal.h"
#include "handle.h"
#include "memory.h"

#include <string.h>

/* A pool the driver would crash on (handle.h: a value where no pool can
 * be) is refused with cudaErrorInvalidValue, NVIDIA's answer to a NULL
 * one, right before the driver call. Pools need no table of their own:
 * the driver answers a destroyed one. */
#define POOL_LIVE_OR_RETURN(p) CUDAEV_LIVE_OR_RETURN_ERR(p, cudaErrorInvalidValue)

CUDAEV_DECLARE_VARIANT(cudaMallocAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaFreeAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMallocFromPoolAsync, _ptsz);

/* ---- stream-ordered allocation (enqueue hot paths) ------------------------ */

static inline cudaError_t malloc_async(void **devPtr, size_t size, cudaStream_t stream,
                                       bool per_thread) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(stream);
  CUstream st = cudaev__stream(stream, per_thread);
  CUresult r = cudaev__drv.cuMemAllocAsync((CUdeviceptr *)devPtr, size, st);
  CUDAEV_CTX_HOT_RETRY(known, r, cudaev__drv.cuMemAllocAsync((CUdeviceptr *)devPtr, size, st));
  return cudaev__ret_cu(r);
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream) {
  return malloc_async(devPtr, size, hStream, false);
}

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream) {
  return malloc_async(devPtr, size, hStream, true);
}

static inline cudaError_t free_async(void *devPtr, cudaStream_t stream, bool per_thread) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(stream);
  CUstream st = cudaev__stream(stream, per_thread);
  CUresult r = cudaev__drv.cuMemFreeAsync((CUdeviceptr)devPtr, st);
  CUDAEV_CTX_HOT_RETRY(known, r, cudaev__drv.cuMemFreeAsync((CUdeviceptr)devPtr, st));
  return cudaev__ret_cu(r);
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream) {
  return free_async(devPtr, hStream, false);
}

cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream) {
  return free_async(devPtr, hStream, true);
}

static inline cudaError_t malloc_from_pool(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t stream, bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  if (ptr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (pool == NULL) {
    /* NVIDIA's runtime clears the output first (measured: a pointer
     * passed in was NULL after the refused call, on an H200). */
    *ptr = NULL;
    return cudaev__ret(cudaErrorInvalidValue);
  }
  POOL_LIVE_OR_RETURN(pool);
  return cudaev__ret_cu(cudaev__drv.cuMemAllocFromPoolAsync(
      (CUdeviceptr *)ptr, size, (CUmemoryPool)pool, cudaev__stream(stream, per_thread)));
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream) {
  return malloc_from_pool(ptr, size, memPool, stream, false);
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream) {
  return malloc_from_pool(ptr, size, memPool, stream, true);
}

/* ---- pools ---------------------------------------------------------------- */

cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps) {
  CUDAEV_CTX_OR_RETURN();
  if (memPool == NULL || poolProps == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* The device ordinal of the location is the runtime's; translate it in a
   * copy so the caller's reserved bytes still reach the driver's checks. */
  CUmemPoolProps p;
  memcpy(&p, poolProps, sizeof p);
  struct cudaMemLocation l = poolProps->location;
  p.location = cudaev__mem_location(l);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolCreate((CUmemoryPool *)memPool, &p));
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  CUDAEV_CTX_OR_RETURN();
  if (memPool == NULL) return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolDestroy((CUmemoryPool)memPool));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  CUDAEV_CTX_OR_RETURN();
  if (memPool == NULL) return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolTrimTo((CUmemoryPool)memPool, minBytesToKeep));
}

/* A NULL value crashes NVIDIA's runtime (measured: cudaMemPoolSetAttribute
 * with NULL); ours refuses it, like every NULL in/out pointer of the pool
 * calls below, with cudaErrorInvalidValue before the driver sees it. */
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value) {
  CUDAEV_CTX_OR_RETURN();
  if (memPool == NULL || value == NULL) return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(
      cudaev__drv.cuMemPoolSetAttribute((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value) {
  CUDAEV_CTX_OR_RETURN();
  if (memPool == NULL || value == NULL) return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(
      cudaev__drv.cuMemPoolGetAttribute((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

/* The descriptors are handed over as they are (cudaMemAccessDesc is
 * CUmemAccessDesc, memory.h): no copy, whatever count the caller gives. */
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc *descList,
                                 size_t count) {
  CUDAEV_CTX_OR_RETURN();
  if (memPool == NULL || (descList == NULL && count != 0))
    return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  /* NVIDIA's runtime copies the list before the driver sees it, and a copy
   * that cannot be allocated is cudaErrorMemoryAllocation (measured on an
   * H200 host: counts of 2^50 and more; from 2^30 to 2^40, where the
   * allocation succeeded, it read past the caller's list and crashed). A
   * list larger than the user address space (handle.h) has no room
   * anywhere; smaller ones go to the driver as they are. */
  if (count > CUDAEV_HANDLE_END / sizeof(CUmemAccessDesc))
    return cudaev__ret(cudaErrorMemoryAllocation);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolSetAccess((CUmemoryPool)memPool,
                                                       (const CUmemAccessDesc *)descList, count));
}

cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t memPool,
                                 struct cudaMemLocation *location) {
  CUDAEV_CTX_OR_RETURN();
  if (flags == NULL || memPool == NULL || location == NULL)
    return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolGetAccess(
      (CUmemAccess_flags *)flags, (CUmemoryPool)memPool, (CUmemLocation *)location));
}

/* ---- sharing between processes -------------------------------------------- */

/* With cudaMemHandleTypePosixFileDescriptor, shareableHandle points to an
 * int that receives the file descriptor on export, and on import it is the
 * descriptor itself cast to a pointer, as the driver takes it. */
cudaError_t cudaMemPoolExportToShareableHandle(void *shareableHandle, cudaMemPool_t memPool,
                                               enum cudaMemAllocationHandleType handleType,
                                               unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (shareableHandle == NULL || memPool == NULL) return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolExportToShareableHandle(
      shareableHandle, (CUmemoryPool)memPool, (CUmemAllocationHandleType)handleType, flags));
}

cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t *memPool, void *shareableHandle,
                                                 enum cudaMemAllocationHandleType handleType,
                                                 unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (memPool == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolImportFromShareableHandle(
      (CUmemoryPool *)memPool, shareableHandle, (CUmemAllocationHandleType)handleType, flags));
}

cudaError_t cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData *exportData, void *ptr) {
  CUDAEV_CTX_OR_RETURN();
  if (exportData == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(
      cudaev__drv.cuMemPoolExportPointer((CUmemPoolPtrExportData *)exportData, (CUdeviceptr)ptr));
}

cudaError_t cudaMemPoolImportPointer(void **ptr, cudaMemPool_t memPool,
                                     struct cudaMemPoolPtrExportData *exportData) {
  CUDAEV_CTX_OR_RETURN();
  if (ptr == NULL || memPool == NULL || exportData == NULL)
    return cudaev__ret(cudaErrorInvalidValue);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(cudaev__drv.cuMemPoolImportPointer(
      (CUdeviceptr *)ptr, (CUmemoryPool)memPool, (CUmemPoolPtrExportData *)exportData));
}

/* ---- current and default pools of a location ------------------------------ */

/* The location is an in/out argument of the driver's calls (it may be
 * normalised), so it is translated in a copy and the driver's answer is
 * given back in runtime terms. */
static cudaError_t with_location(struct cudaMemLocation *location, CUmemLocation *out) {
  if (location == NULL) return cudaErrorInvalidValue;
  *out = cudaev__mem_location(*location);
  return cudaSuccess;
}

static void location_back(struct cudaMemLocation *location, const CUmemLocation *l) {
  location->type = (enum cudaMemLocationType)l->type;
  location->id = l->type == CU_MEM_LOCATION_TYPE_DEVICE ? cudaev__ordinal_of(l->id) : l->id;
}

cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t *memPool, struct cudaMemLocation *location,
                                     enum cudaMemAllocationType type) {
  CUDAEV_CTX_OR_RETURN();
  CUmemLocation l;
  cudaError_t e = with_location(location, &l);
  if (e != cudaSuccess) return cudaev__ret(e);
  CUresult r =
      cudaev__drv.cuMemGetDefaultMemPool((CUmemoryPool *)memPool, &l, (CUmemAllocationType)type);
  if (r == CUDA_SUCCESS) location_back(location, &l);
  return cudaev__ret_cu(r);
}

cudaError_t cudaMemGetMemPool(cudaMemPool_t *memPool, struct cudaMemLocation *location,
                              enum cudaMemAllocationType type) {
  CUDAEV_CTX_OR_RETURN();
  CUmemLocation l;
  cudaError_t e = with_location(location, &l);
  if (e != cudaSuccess) return cudaev__ret(e);
  CUresult r = cudaev__drv.cuMemGetMemPool((CUmemoryPool *)memPool, &l, (CUmemAllocationType)type);
  if (r == CUDA_SUCCESS) location_back(location, &l);
  return cudaev__ret_cu(r);
}

cudaError_t cudaMemSetMemPool(struct cudaMemLocation *location, enum cudaMemAllocationType type,
                              cudaMemPool_t memPool) {
  CUDAEV_CTX_OR_RETURN();
  CUmemLocation l;
  cudaError_t e = with_location(location, &l);
  if (e != cudaSuccess) return cudaev__ret(e);
  POOL_LIVE_OR_RETURN(memPool);
  return cudaev__ret_cu(
      cudaev__drv.cuMemSetMemPool(&l, (CUmemAllocationType)type, (CUmemoryPool)memPool));
}
