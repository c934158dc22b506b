/* External Resource Interoperability and the API-independent part of
 * Graphics Interoperability (map/unmap/query of registered resources).
 * The OpenGL, EGL and VDPAU functions are in src/interop_{gl,egl,vdpau}.c. */
#include "internal.h"

#include <string.h>

#include "array.h"
#include "handle.h"
#include "interop.h"

CUDAEV_DECLARE_VARIANT(cudaSignalExternalSemaphoresAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaWaitExternalSemaphoresAsync, _ptsz);

/* The runtime's descriptors are the driver's, field for field
 * (abi_asserts.c): they are passed on cast. */
cudaError_t cudaImportExternalMemory(cudaExternalMemory_t *extMem_out,
                                     const struct cudaExternalMemoryHandleDesc *memHandleDesc) {
  CUDAEV_CTX_OR_RETURN();
  if (extMem_out == NULL || memHandleDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuImportExternalMemory(
      (CUexternalMemory *)extMem_out, (const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *)memHandleDesc));
}

cudaError_t cudaExternalMemoryGetMappedBuffer(
    void **devPtr, cudaExternalMemory_t extMem,
    const struct cudaExternalMemoryBufferDesc *bufferDesc) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL || bufferDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(extMem);
  return cudaev__ret_cu(cudaev__drv.cuExternalMemoryGetMappedBuffer(
      (CUdeviceptr *)devPtr, (CUexternalMemory)extMem,
      (const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *)bufferDesc));
}

/* The runtime's descriptor gives the format as a cudaChannelFormatDesc and
 * the size as a cudaExtent; the driver's as a CUDA_ARRAY3D_DESCRIPTOR. The
 * cudaArray* flags are the driver's CUDA_ARRAY3D_* flags (src/array.c checks
 * it); which ones an external mipmapped array accepts is the driver's call. */
cudaError_t cudaExternalMemoryGetMappedMipmappedArray(
    cudaMipmappedArray_t *mipmap, cudaExternalMemory_t extMem,
    const struct cudaExternalMemoryMipmappedArrayDesc *mipmapDesc) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's order: the descriptor, its channel format, then the output
   * (an all-zero descriptor is an invalid channel descriptor, even with a
   * NULL output or a bad handle). */
  if (mipmapDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC d;
  memset(&d, 0, sizeof d);
  cudaError_t e = cudaev__channel_to_format(&mipmapDesc->formatDesc, &d.arrayDesc.Format,
                                            &d.arrayDesc.NumChannels);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (mipmap == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* The driver aborts the process on zero levels (so does NVIDIA's runtime,
   * measured on an H200); refuse it. */
  if (mipmapDesc->numLevels == 0) return cudaev__ret(cudaErrorInvalidValue);
  d.offset = mipmapDesc->offset;
  d.arrayDesc.Width = mipmapDesc->extent.width;
  d.arrayDesc.Height = mipmapDesc->extent.height;
  d.arrayDesc.Depth = mipmapDesc->extent.depth;
  d.arrayDesc.Flags = mipmapDesc->flags;
  d.numLevels = mipmapDesc->numLevels;
  CUDAEV_LIVE_OR_RETURN(extMem);
  CUresult r = cudaev__drv.cuExternalMemoryGetMappedMipmappedArray((CUmipmappedArray *)mipmap,
                                                                   (CUexternalMemory)extMem, &d);
  if (r == CUDA_SUCCESS) cudaev__handle_revive(*mipmap);
  return cudaev__ret_cu(r);
}

/* External memory and semaphores the driver would crash on (handle.h: a
 * value where no object can be) are refused with
 * cudaErrorInvalidResourceHandle, the driver's answer to an invalid one. */
cudaError_t cudaDestroyExternalMemory(cudaExternalMemory_t extMem) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(extMem);
  return cudaev__ret_cu(cudaev__drv.cuDestroyExternalMemory((CUexternalMemory)extMem));
}

cudaError_t cudaImportExternalSemaphore(
    cudaExternalSemaphore_t *extSem_out,
    const struct cudaExternalSemaphoreHandleDesc *semHandleDesc) {
  CUDAEV_CTX_OR_RETURN();
  if (extSem_out == NULL || semHandleDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuImportExternalSemaphore(
      (CUexternalSemaphore *)extSem_out,
      (const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *)semHandleDesc));
}

/* The checks both semaphore calls make before the driver: the stream
 * first (NVIDIA's runtime reaches it before anything else, and crashes on
 * a bad one), then the lists, then each semaphore: the driver refuses a
 * NULL one when waiting but crashes on it when signalling (NVIDIA's runtime
 * with it), and crashes on one where no object can be in both. The scan
 * stops at the first bad entry, so a count past the list's end is read no
 * further than that. */
static cudaError_t sems_check(const cudaExternalSemaphore_t *sems, const void *params,
                              unsigned int n, cudaStream_t stream) {
  CUDAEV_LIVE_OR_RETURN(stream);
  if (n > 0 && (sems == NULL || params == NULL)) return cudaev__ret(cudaErrorInvalidValue);
  for (unsigned int i = 0; i < n; i++)
    if (sems[i] == NULL || cudaev__handle_dead(sems[i])) return cudaev__ret(cudaErrorInvalidValue);
  return cudaSuccess;
}

static cudaError_t signal_sems(const cudaExternalSemaphore_t *sems,
                               const struct cudaExternalSemaphoreSignalParams *params,
                               unsigned int n, cudaStream_t stream, bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  cudaError_t e = sems_check(sems, params, n, stream);
  if (e != cudaSuccess) return e;
  return cudaev__ret_cu(cudaev__drv.cuSignalExternalSemaphoresAsync(
      (const CUexternalSemaphore *)sems, (const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)params, n,
      cudaev__stream(stream, per_thread)));
}

static cudaError_t wait_sems(const cudaExternalSemaphore_t *sems,
                             const struct cudaExternalSemaphoreWaitParams *params, unsigned int n,
                             cudaStream_t stream, bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  cudaError_t e = sems_check(sems, params, n, stream);
  if (e != cudaSuccess) return e;
  return cudaev__ret_cu(cudaev__drv.cuWaitExternalSemaphoresAsync(
      (const CUexternalSemaphore *)sems, (const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *)params, n,
      cudaev__stream(stream, per_thread)));
}

cudaError_t cudaSignalExternalSemaphoresAsync(
    const cudaExternalSemaphore_t *extSemArray,
    const struct cudaExternalSemaphoreSignalParams *paramsArray, unsigned int numExtSems,
    cudaStream_t stream) {
  return signal_sems(extSemArray, paramsArray, numExtSems, stream, false);
}

cudaError_t cudaSignalExternalSemaphoresAsync_ptsz(
    const cudaExternalSemaphore_t *extSemArray,
    const struct cudaExternalSemaphoreSignalParams *paramsArray, unsigned int numExtSems,
    cudaStream_t stream) {
  return signal_sems(extSemArray, paramsArray, numExtSems, stream, true);
}

cudaError_t cudaWaitExternalSemaphoresAsync(
    const cudaExternalSemaphore_t *extSemArray,
    const struct cudaExternalSemaphoreWaitParams *paramsArray, unsigned int numExtSems,
    cudaStream_t stream) {
  return wait_sems(extSemArray, paramsArray, numExtSems, stream, false);
}

cudaError_t cudaWaitExternalSemaphoresAsync_ptsz(
    const cudaExternalSemaphore_t *extSemArray,
    const struct cudaExternalSemaphoreWaitParams *paramsArray, unsigned int numExtSems,
    cudaStream_t stream) {
  return wait_sems(extSemArray, paramsArray, numExtSems, stream, true);
}

cudaError_t cudaDestroyExternalSemaphore(cudaExternalSemaphore_t extSem) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(extSem);
  return cudaev__ret_cu(cudaev__drv.cuDestroyExternalSemaphore((CUexternalSemaphore)extSem));
}

/* ---- graphics resources (registered through an API-specific call) ------ */

cudaError_t cudaev__interop_device_fresh(int device) {
  if (!cudaev__device_valid(device)) return cudaErrorInvalidDevice;
  unsigned flags = 0;
  int active = 0;
  CUresult r =
      cudaev__drv.cuDevicePrimaryCtxGetState(cudaev__rt.devices[device].dev, &flags, &active);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  return active ? cudaErrorSetOnActiveProcess : cudaSuccess;
}

cudaError_t cudaev__gfx_registered(CUresult r, cudaGraphicsResource_t *resource) {
  if (r == CUDA_SUCCESS) cudaev__handle_revive(*resource);
  return cudaev__ret_cu(r);
}

/* The driver frees a resource that is still mapped even as it refuses to
 * unregister it with CUDA_ERROR_ALREADY_MAPPED: on an H100 (driver 580) the
 * unmap after it "succeeds" and a second unregister crashes in the driver,
 * under NVIDIA's runtime too. So the resource counts as gone after that
 * answer as after success, and later calls with it are refused. */
cudaError_t cudaGraphicsUnregisterResource(cudaGraphicsResource_t resource) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(resource);
  cudaev__handle_bury(resource);
  CUresult r = cudaev__drv.cuGraphicsUnregisterResource((CUgraphicsResource)resource);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_ALREADY_MAPPED) cudaev__handle_revive(resource);
  return cudaev__ret_cu(r);
}

/* The checks of a list of resources to map or unmap, in NVIDIA's order:
 * an empty or missing list is an invalid value; then each resource, where
 * NULL or one the driver would crash on (handle.h) is an invalid handle.
 * A negative count names more resources than the list can hold, and NVIDIA's
 * runtime answers it as an invalid handle too. The scan stops at the first
 * bad entry. */
static cudaError_t map_list_check(int count, const cudaGraphicsResource_t *resources) {
  if (count == 0 || resources == NULL) return cudaErrorInvalidValue;
  if (count < 0) return cudaErrorInvalidResourceHandle;
  for (int i = 0; i < count; i++)
    if (resources[i] == NULL || cudaev__handle_dead(resources[i]))
      return cudaErrorInvalidResourceHandle;
  return cudaSuccess;
}

cudaError_t cudaGraphicsResourceSetMapFlags(cudaGraphicsResource_t resource, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(resource);
  /* cudaGraphicsMapFlags{None,ReadOnly,WriteDiscard} are the driver's
   * CU_GRAPHICS_MAP_RESOURCE_FLAGS_* values. Other bits are not passed on:
   * NVIDIA's runtime accepts 0x10 where the driver refuses it (measured on
   * an H100, driver 580). */
  return cudaev__ret_cu(cudaev__drv.cuGraphicsResourceSetMapFlags(
      (CUgraphicsResource)resource,
      flags & (unsigned)(cudaGraphicsMapFlagsReadOnly | cudaGraphicsMapFlagsWriteDiscard)));
}

cudaError_t cudaGraphicsMapResources(int count, cudaGraphicsResource_t *resources,
                                     cudaStream_t stream) {
  CUDAEV_CTX_OR_RETURN();
  cudaError_t e = map_list_check(count, resources);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuGraphicsMapResources(
      (unsigned)count, (CUgraphicsResource *)resources, (CUstream)stream));
}

cudaError_t cudaGraphicsUnmapResources(int count, cudaGraphicsResource_t *resources,
                                       cudaStream_t stream) {
  CUDAEV_CTX_OR_RETURN();
  cudaError_t e = map_list_check(count, resources);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuGraphicsUnmapResources(
      (unsigned)count, (CUgraphicsResource *)resources, (CUstream)stream));
}

cudaError_t cudaGraphicsResourceGetMappedPointer(void **devPtr, size_t *size,
                                                 cudaGraphicsResource_t resource) {
  CUDAEV_CTX_OR_RETURN();
  RESOURCE_OR_RETURN(resource);
  if (devPtr == NULL || size == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuGraphicsResourceGetMappedPointer(
      (CUdeviceptr *)devPtr, size, (CUgraphicsResource)resource));
}

cudaError_t cudaGraphicsSubResourceGetMappedArray(cudaArray_t *array,
                                                  cudaGraphicsResource_t resource,
                                                  unsigned int arrayIndex, unsigned int mipLevel) {
  CUDAEV_CTX_OR_RETURN();
  RESOURCE_OR_RETURN(resource);
  if (array == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuGraphicsSubResourceGetMappedArray(
      (CUarray *)array, (CUgraphicsResource)resource, arrayIndex, mipLevel));
}

cudaError_t cudaGraphicsResourceGetMappedMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
                                                        cudaGraphicsResource_t resource) {
  CUDAEV_CTX_OR_RETURN();
  RESOURCE_OR_RETURN(resource);
  if (mipmappedArray == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuGraphicsResourceGetMappedMipmappedArray(
      (CUmipmappedArray *)mipmappedArray, (CUgraphicsResource)resource));
}
