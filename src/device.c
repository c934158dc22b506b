/* Device Management: device selection, flags, properties, attributes,
 * limits, cache configuration, PCI ids, IPC handles, memory pools of a
 * device, P2P attributes. */
#include "internal.h"
#include "handle.h"
#include "hostpool.h"
#include "staging.h"
#include "wait.h"

#include <stdlib.h>
#include <string.h>

/* Shorthand for the functions that take a device ordinal: initialise, check
 * the ordinal, and give the driver's CUdevice. */
#define CUDAEV_DEVICE_OR_RETURN(ordinal, out)                                       \
  do {                                                                              \
    CUDAEV_INIT_OR_RETURN();                                                        \
    if (!cudaev__device_valid(ordinal)) return cudaev__ret(cudaErrorInvalidDevice); \
    (out) = cudaev__rt.devices[(ordinal)].dev;                                      \
  } while (0)

/* The same for the calls where NVIDIA's runtime answers a bad ordinal with
 * cudaErrorInvalidValue (cudaDeviceGetMemPool, cudaDeviceSetMemPool;
 * measured on an H100). */
#define CUDAEV_DEVICE_OR_VALUE(ordinal, out)                                       \
  do {                                                                             \
    CUDAEV_INIT_OR_RETURN();                                                       \
    if (!cudaev__device_valid(ordinal)) return cudaev__ret(cudaErrorInvalidValue); \
    (out) = cudaev__rt.devices[(ordinal)].dev;                                     \
  } while (0)

static int ordinal_of(CUdevice d) {
  for (int i = 0; i < cudaev__rt.device_count; i++)
    if (cudaev__rt.devices[i].dev == d) return i;
  return -1;
}

cudaError_t cudaGetDeviceCount(int *count) {
  CUDAEV_INIT_OR_RETURN();
  if (count == NULL) return cudaev__ret(cudaErrorInvalidValue);
  *count = cudaev__rt.device_count;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  CUDAEV_INIT_OR_RETURN();
  if (device == NULL) return cudaev__ret(cudaErrorInvalidValue);
  *device = cudaev__current_device();
  return cudaSuccess;
}

/* Since CUDA 12.0 cudaSetDevice initialises the device: the primary context
 * is retained and made current on the calling thread at once. */
cudaError_t cudaSetDevice(int device) {
  CUDAEV_INIT_OR_RETURN();
  if (!cudaev__device_valid(device)) return cudaev__ret(cudaErrorInvalidDevice);
  CUcontext c;
  cudaError_t e = cudaev__primary_ctx(device, &c);
  if (e != cudaSuccess) return cudaev__ret(e);
  cudaev__thread.device = device;
  CUresult r = cudaev__drv.cuCtxSetCurrent(c);
  /* The hot paths' record of the current context (internal.h). */
  cudaev__thread.ctx = r == CUDA_SUCCESS ? c : NULL;
  return cudaev__ret_cu(r);
}

static int *valid_devices;
static int valid_len;

cudaError_t cudaSetValidDevices(int *device_arr, int len) {
  CUDAEV_INIT_OR_RETURN();
  if (len < 0 || (len > 0 && device_arr == NULL)) return cudaev__ret(cudaErrorInvalidValue);
  /* A list longer than the devices there are is an invalid value, before
   * its entries are read; a device listed twice is not (measured: {0, 0}
   * is cudaErrorInvalidValue on one H100 and cudaSuccess on two H200s, and
   * an all-zero list of INT_MAX entries is cudaErrorInvalidValue). */
  if (len > cudaev__rt.device_count) return cudaev__ret(cudaErrorInvalidValue);
  for (int i = 0; i < len; i++)
    if (!cudaev__device_valid(device_arr[i])) return cudaev__ret(cudaErrorInvalidDevice);
  int *copy = NULL;
  if (len > 0) {
    copy = malloc(sizeof *copy * (size_t)len);
    if (copy == NULL) return cudaev__ret(cudaErrorMemoryAllocation);
    memcpy(copy, device_arr, sizeof *copy * (size_t)len);
  }
  free(valid_devices);
  valid_devices = copy;
  valid_len = len;
  return cudaSuccess;
}

#define DEVICE_FLAGS_VALID \
  (cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax | cudaDeviceSyncMemops)

static cudaError_t check_device_flags(unsigned int flags) {
  if (flags & ~(unsigned)DEVICE_FLAGS_VALID) return cudaErrorInvalidValue;
  switch (flags & cudaDeviceScheduleMask) {
  case cudaDeviceScheduleAuto:
  case cudaDeviceScheduleSpin:
  case cudaDeviceScheduleYield:
  case cudaDeviceScheduleBlockingSync: return cudaSuccess;
  default: return cudaErrorInvalidValue;
  }
}

/* cudaDeviceMapHost is always on since CUDA 12: the driver is given the
 * rest. */
static cudaError_t set_primary_flags(int device, unsigned int flags) {
  CUresult r = cudaev__drv.cuDevicePrimaryCtxSetFlags(cudaev__rt.devices[device].dev,
                                                      flags & ~(unsigned)cudaDeviceMapHost);
  atomic_fetch_add(&cudaev__rt.flags_gen, 1); /* wait.h caches the scheduling flags */
  return cudaev__error_from_cu(r);
}

/* Sets the flags of the current device's primary context and, as NVIDIA's
 * runtime does, initialises the device: its primary context is retained
 * and made current. */
cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  CUDAEV_INIT_OR_RETURN();
  cudaError_t e = check_device_flags(flags);
  if (e != cudaSuccess) return cudaev__ret(e);
  int d = cudaev__current_device();
  if ((e = set_primary_flags(d, flags)) != cudaSuccess) return cudaev__ret(e);
  CUcontext cur = NULL, c;
  if ((e = cudaev__primary_ctx(d, &c)) != cudaSuccess) return cudaev__ret(e);
  if (cudaev__drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != NULL) return cudaSuccess;
  return cudaev__ret_cu(cudaev__drv.cuCtxSetCurrent(c));
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags) {
  CUDAEV_INIT_OR_RETURN();
  if (flags == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUcontext c = NULL;
  unsigned int f = 0;
  CUresult r;
  /* A current context answers for itself (the driver includes
   * CU_CTX_MAP_HOST); without one, the primary context's recorded flags,
   * with cudaDeviceMapHost, which is always on. */
  if (cudaev__drv.cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != NULL) {
    r = cudaev__drv.cuCtxGetFlags(&f);
  } else {
    int active = 0;
    r = cudaev__drv.cuDevicePrimaryCtxGetState(cudaev__rt.devices[cudaev__current_device()].dev, &f,
                                               &active);
    f |= cudaDeviceMapHost;
  }
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *flags = f;
  return cudaSuccess;
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags) {
  CUDAEV_INIT_OR_RETURN();
  if (!cudaev__device_valid(device)) return cudaev__ret(cudaErrorInvalidDevice);
  (void)flags; /* NVIDIA's runtime accepts and ignores any value (measured) */
  /* Device flags cudaSetDeviceFlags would refuse are ignored here: NVIDIA's
   * cudaInitDevice answers 0x100, 0x80000000 and 0xffffffff with
   * cudaSuccess (measured on an H100). Valid ones are applied. */
  cudaError_t e;
  if (deviceFlags != 0 && check_device_flags(deviceFlags) == cudaSuccess &&
      (e = set_primary_flags(device, deviceFlags)) != cudaSuccess)
    return cudaev__ret(e);
  CUcontext c;
  return cudaev__ret(cudaev__primary_ctx(device, &c));
}

/* Destroys the primary context of the current device. Our reference is
 * given back, so the next call that needs the device retains it again.
 * Threads keep the (now inactive) primary context current, as with
 * NVIDIA's runtime; the reset generation sends their next call through
 * cudaev__ctx_slow, which re-initialises it. */
cudaError_t cudaDeviceReset(void) {
  CUDAEV_INIT_OR_RETURN();
  int d = cudaev__current_device();
  struct cudaev__device *dev = &cudaev__rt.devices[d];
  CUcontext primary = atomic_exchange(&dev->primary, NULL);
  CUresult r = cudaev__drv.cuDevicePrimaryCtxReset(dev->dev);
  if (primary != NULL) cudaev__drv.cuDevicePrimaryCtxRelease(dev->dev);
  /* The reset freed the context's pinned allocations, the pool's chunks
   * and the staging ring among them. */
  if (r == CUDA_SUCCESS) {
    cudaev__hostpool_reset(d);
    cudaev__staging_reset(d);
  }
  atomic_fetch_add(&cudaev__rt.reset_gen, 1);
  atomic_fetch_add(&cudaev__rt.flags_gen, 1);
  return cudaev__ret_cu(r);
}

/* Under blocking-sync scheduling wait.h spins briefly before the driver's
 * blocking wait. */
cudaError_t cudaDeviceSynchronize(void) {
  CUDAEV_CTX_OR_RETURN();
  if (CUDAEV_UNLIKELY(cudaev__ctx_blocking())) return cudaev__ret_cu(cudaev__wait_ctx());
  return cudaev__ret_cu(cudaev__drv.cuCtxSynchronize(NULL));
}

cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuCtxSetLimit((CUlimit)limit, value));
}

cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit) {
  CUDAEV_CTX_OR_RETURN();
  if (pValue == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuCtxGetLimit(pValue, (CUlimit)limit));
}

cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache *pCacheConfig) {
  CUDAEV_CTX_OR_RETURN();
  if (pCacheConfig == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUfunc_cache c;
  CUresult r = cudaev__drv.cuCtxGetCacheConfig(&c);
  if (r == CUDA_SUCCESS) *pCacheConfig = (enum cudaFuncCache)c;
  return cudaev__ret_cu(r);
}

cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuCtxSetCacheConfig((CUfunc_cache)cacheConfig));
}

cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig *pConfig) {
  CUDAEV_CTX_OR_RETURN();
  if (pConfig == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUsharedconfig c;
  CUresult r = cudaev__drv.cuCtxGetSharedMemConfig(&c);
  if (r == CUDA_SUCCESS) *pConfig = (enum cudaSharedMemConfig)c;
  return cudaev__ret_cu(r);
}

cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuCtxSetSharedMemConfig((CUsharedconfig)config));
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuCtxGetStreamPriorityRange(leastPriority, greatestPriority));
}

cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId) {
  CUDAEV_INIT_OR_RETURN();
  if (device == NULL || pciBusId == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUdevice d;
  CUresult r = cudaev__drv.cuDeviceGetByPCIBusId(&d, pciBusId);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  int o = ordinal_of(d);
  if (o < 0) return cudaev__ret(cudaErrorInvalidDevice);
  *device = o;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  if (pciBusId == NULL || len <= 0) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetPCIBusId(pciBusId, len, d));
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  if (value == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* cudaDeviceAttr values are the driver's CUdevice_attribute values. */
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetAttribute(value, (CUdevice_attribute)attr, d));
}

cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int srcDevice,
                                      int dstDevice) {
  CUdevice s, t;
  CUDAEV_DEVICE_OR_RETURN(srcDevice, s);
  CUDAEV_DEVICE_OR_RETURN(dstDevice, t);
  if (value == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(
      cudaev__drv.cuDeviceGetP2PAttribute(value, (CUdevice_P2PAttribute)attr, s, t));
}

cudaError_t cudaDeviceGetP2PAtomicCapabilities(unsigned int *capabilities,
                                               const enum cudaAtomicOperation *operations,
                                               unsigned int count, int srcDevice, int dstDevice) {
  CUdevice s, t;
  CUDAEV_DEVICE_OR_RETURN(srcDevice, s);
  CUDAEV_DEVICE_OR_RETURN(dstDevice, t);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetP2PAtomicCapabilities(
      capabilities, (const CUatomicOperation *)operations, count, s, t));
}

cudaError_t cudaDeviceGetHostAtomicCapabilities(unsigned int *capabilities,
                                                const enum cudaAtomicOperation *operations,
                                                unsigned int count, int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  /* A list longer than there are operations can only repeat one; the
   * driver reads and writes all `count` entries, and crashed on 2^31 of
   * them (NVIDIA's runtime with it). */
  if (count > CU_ATOMIC_OPERATION_MAX) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetHostAtomicCapabilities(
      capabilities, (const CUatomicOperation *)operations, count, d));
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  if (memPool == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetDefaultMemPool((CUmemoryPool *)memPool, d));
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_VALUE(device, d);
  if (memPool == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetMemPool((CUmemoryPool *)memPool, d));
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  CUdevice d;
  CUDAEV_DEVICE_OR_VALUE(device, d);
  if (memPool == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN_ERR(memPool, cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuDeviceSetMemPool(d, (CUmemoryPool)memPool));
}

cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget target,
                                               enum cudaFlushGPUDirectRDMAWritesScope scope) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuFlushGPUDirectRDMAWrites(
      (CUflushGPUDirectRDMAWritesTarget)target, (CUflushGPUDirectRDMAWritesScope)scope));
}

cudaError_t cudaDeviceRegisterAsyncNotification(int device, cudaAsyncCallback callbackFunc,
                                                void *userData,
                                                cudaAsyncCallbackHandle_t *callback) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  if (callbackFunc == NULL || callback == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* cudaAsyncNotificationInfo_t and the callback type are laid out as the
   * driver's CUasyncNotificationInfo / CUasyncCallback. */
  CUresult r = cudaev__drv.cuDeviceRegisterAsyncNotification(
      d, (CUasyncCallback)(void (*)(void))callbackFunc, userData,
      (CUasyncCallbackHandle *)callback);
  if (r == CUDA_SUCCESS) cudaev__handle_revive(*callback);
  return cudaev__ret_cu(r);
}

/* An unregistered callback handle is remembered (handle.h): the driver
 * crashes on a second unregister, and on a bogus handle (NVIDIA's runtime
 * with it); ours answers cudaErrorInvalidValue, NVIDIA's answer to NULL. */
cudaError_t cudaDeviceUnregisterAsyncNotification(int device, cudaAsyncCallbackHandle_t callback) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  CUDAEV_LIVE_OR_RETURN_ERR(callback, cudaErrorInvalidValue);
  cudaev__handle_bury(callback);
  CUresult r = cudaev__drv.cuDeviceUnregisterAsyncNotification(d, (CUasyncCallbackHandle)callback);
  if (r != CUDA_SUCCESS) cudaev__handle_revive(callback);
  return cudaev__ret_cu(r);
}

cudaError_t cudaDeviceGetNvSciSyncAttributes(void *nvSciSyncAttrList, int device, int flags) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetNvSciSyncAttributes(nvSciSyncAttrList, d, flags));
}

cudaError_t cudaDeviceGraphMemTrim(int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGraphMemTrim(d));
}

cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                           void *value) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  return cudaev__ret_cu(
      cudaev__drv.cuDeviceGetGraphMemAttribute(d, (CUgraphMem_attribute)attr, value));
}

cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                           void *value) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  return cudaev__ret_cu(
      cudaev__drv.cuDeviceSetGraphMemAttribute(d, (CUgraphMem_attribute)attr, value));
}

/* ---- cudaChooseDevice ---------------------------------------------------- */

/* NVIDIA documents "the device which has properties that best match": the
 * runtime compares compute capability. Pick the device whose capability is
 * the closest at or above the one asked for, else the highest below it. */
cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop) {
  CUDAEV_INIT_OR_RETURN();
  if (device == NULL || prop == NULL) return cudaev__ret(cudaErrorInvalidValue);
  int want = prop->major * 100 + prop->minor;
  int best = -1, best_cc = 0;
  for (int i = 0; i < cudaev__rt.device_count; i++) {
    int ma = 0, mi = 0;
    CUdevice d = cudaev__rt.devices[i].dev;
    if (cudaev__drv.cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) ||
        cudaev__drv.cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d))
      continue;
    int cc = ma * 100 + mi;
    bool better;
    if (best < 0)
      better = true;
    else if ((cc >= want) != (best_cc >= want))
      better = cc >= want;
    else if (cc >= want)
      better = cc < best_cc;
    else
      better = cc > best_cc;
    if (better) best = i, best_cc = cc;
  }
  *device = best < 0 ? 0 : best;
  return cudaSuccess;
}

/* ---- cudaGetDeviceProperties -------------------------------------------- */

enum prop_type { P_INT, P_UINT, P_SIZE };

struct prop_field {
  size_t offset;
  enum prop_type type;
  CUdevice_attribute attr;
};

#define F(field, type, attr) \
  { offsetof(struct cudaDeviceProp, field), type, CU_DEVICE_ATTRIBUTE_##attr }
static const struct prop_field prop_fields[] = {
    F(sharedMemPerBlock, P_SIZE, MAX_SHARED_MEMORY_PER_BLOCK),
    F(regsPerBlock, P_INT, MAX_REGISTERS_PER_BLOCK),
    F(warpSize, P_INT, WARP_SIZE),
    F(memPitch, P_SIZE, MAX_PITCH),
    F(maxThreadsPerBlock, P_INT, MAX_THREADS_PER_BLOCK),
    F(maxThreadsDim[0], P_INT, MAX_BLOCK_DIM_X),
    F(maxThreadsDim[1], P_INT, MAX_BLOCK_DIM_Y),
    F(maxThreadsDim[2], P_INT, MAX_BLOCK_DIM_Z),
    F(maxGridSize[0], P_INT, MAX_GRID_DIM_X),
    F(maxGridSize[1], P_INT, MAX_GRID_DIM_Y),
    F(maxGridSize[2], P_INT, MAX_GRID_DIM_Z),
    F(totalConstMem, P_SIZE, TOTAL_CONSTANT_MEMORY),
    F(major, P_INT, COMPUTE_CAPABILITY_MAJOR),
    F(minor, P_INT, COMPUTE_CAPABILITY_MINOR),
    F(textureAlignment, P_SIZE, TEXTURE_ALIGNMENT),
    F(texturePitchAlignment, P_SIZE, TEXTURE_PITCH_ALIGNMENT),
    F(multiProcessorCount, P_INT, MULTIPROCESSOR_COUNT),
    F(integrated, P_INT, INTEGRATED),
    F(canMapHostMemory, P_INT, CAN_MAP_HOST_MEMORY),
    F(maxTexture1D, P_INT, MAXIMUM_TEXTURE1D_WIDTH),
    F(maxTexture1DMipmap, P_INT, MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH),
    F(maxTexture2D[0], P_INT, MAXIMUM_TEXTURE2D_WIDTH),
    F(maxTexture2D[1], P_INT, MAXIMUM_TEXTURE2D_HEIGHT),
    F(maxTexture2DMipmap[0], P_INT, MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH),
    F(maxTexture2DMipmap[1], P_INT, MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT),
    F(maxTexture2DLinear[0], P_INT, MAXIMUM_TEXTURE2D_LINEAR_WIDTH),
    F(maxTexture2DLinear[1], P_INT, MAXIMUM_TEXTURE2D_LINEAR_HEIGHT),
    F(maxTexture2DLinear[2], P_INT, MAXIMUM_TEXTURE2D_LINEAR_PITCH),
    F(maxTexture2DGather[0], P_INT, MAXIMUM_TEXTURE2D_GATHER_WIDTH),
    F(maxTexture2DGather[1], P_INT, MAXIMUM_TEXTURE2D_GATHER_HEIGHT),
    F(maxTexture3D[0], P_INT, MAXIMUM_TEXTURE3D_WIDTH),
    F(maxTexture3D[1], P_INT, MAXIMUM_TEXTURE3D_HEIGHT),
    F(maxTexture3D[2], P_INT, MAXIMUM_TEXTURE3D_DEPTH),
    F(maxTexture3DAlt[0], P_INT, MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE),
    F(maxTexture3DAlt[1], P_INT, MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE),
    F(maxTexture3DAlt[2], P_INT, MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE),
    F(maxTextureCubemap, P_INT, MAXIMUM_TEXTURECUBEMAP_WIDTH),
    F(maxTexture1DLayered[0], P_INT, MAXIMUM_TEXTURE1D_LAYERED_WIDTH),
    F(maxTexture1DLayered[1], P_INT, MAXIMUM_TEXTURE1D_LAYERED_LAYERS),
    F(maxTexture2DLayered[0], P_INT, MAXIMUM_TEXTURE2D_LAYERED_WIDTH),
    F(maxTexture2DLayered[1], P_INT, MAXIMUM_TEXTURE2D_LAYERED_HEIGHT),
    F(maxTexture2DLayered[2], P_INT, MAXIMUM_TEXTURE2D_LAYERED_LAYERS),
    F(maxTextureCubemapLayered[0], P_INT, MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH),
    F(maxTextureCubemapLayered[1], P_INT, MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS),
    F(maxSurface1D, P_INT, MAXIMUM_SURFACE1D_WIDTH),
    F(maxSurface2D[0], P_INT, MAXIMUM_SURFACE2D_WIDTH),
    F(maxSurface2D[1], P_INT, MAXIMUM_SURFACE2D_HEIGHT),
    F(maxSurface3D[0], P_INT, MAXIMUM_SURFACE3D_WIDTH),
    F(maxSurface3D[1], P_INT, MAXIMUM_SURFACE3D_HEIGHT),
    F(maxSurface3D[2], P_INT, MAXIMUM_SURFACE3D_DEPTH),
    F(maxSurface1DLayered[0], P_INT, MAXIMUM_SURFACE1D_LAYERED_WIDTH),
    F(maxSurface1DLayered[1], P_INT, MAXIMUM_SURFACE1D_LAYERED_LAYERS),
    F(maxSurface2DLayered[0], P_INT, MAXIMUM_SURFACE2D_LAYERED_WIDTH),
    F(maxSurface2DLayered[1], P_INT, MAXIMUM_SURFACE2D_LAYERED_HEIGHT),
    F(maxSurface2DLayered[2], P_INT, MAXIMUM_SURFACE2D_LAYERED_LAYERS),
    F(maxSurfaceCubemap, P_INT, MAXIMUM_SURFACECUBEMAP_WIDTH),
    F(maxSurfaceCubemapLayered[0], P_INT, MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH),
    F(maxSurfaceCubemapLayered[1], P_INT, MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS),
    F(surfaceAlignment, P_SIZE, SURFACE_ALIGNMENT),
    F(concurrentKernels, P_INT, CONCURRENT_KERNELS),
    F(ECCEnabled, P_INT, ECC_ENABLED),
    F(pciBusID, P_INT, PCI_BUS_ID),
    F(pciDeviceID, P_INT, PCI_DEVICE_ID),
    F(pciDomainID, P_INT, PCI_DOMAIN_ID),
    F(tccDriver, P_INT, TCC_DRIVER),
    F(asyncEngineCount, P_INT, ASYNC_ENGINE_COUNT),
    F(unifiedAddressing, P_INT, UNIFIED_ADDRESSING),
    F(memoryBusWidth, P_INT, GLOBAL_MEMORY_BUS_WIDTH),
    F(l2CacheSize, P_INT, L2_CACHE_SIZE),
    F(persistingL2CacheMaxSize, P_INT, MAX_PERSISTING_L2_CACHE_SIZE),
    F(maxThreadsPerMultiProcessor, P_INT, MAX_THREADS_PER_MULTIPROCESSOR),
    F(streamPrioritiesSupported, P_INT, STREAM_PRIORITIES_SUPPORTED),
    F(globalL1CacheSupported, P_INT, GLOBAL_L1_CACHE_SUPPORTED),
    F(localL1CacheSupported, P_INT, LOCAL_L1_CACHE_SUPPORTED),
    F(sharedMemPerMultiprocessor, P_SIZE, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
    F(regsPerMultiprocessor, P_INT, MAX_REGISTERS_PER_MULTIPROCESSOR),
    F(managedMemory, P_INT, MANAGED_MEMORY),
    F(isMultiGpuBoard, P_INT, MULTI_GPU_BOARD),
    F(multiGpuBoardGroupID, P_INT, MULTI_GPU_BOARD_GROUP_ID),
    F(hostNativeAtomicSupported, P_INT, HOST_NATIVE_ATOMIC_SUPPORTED),
    F(pageableMemoryAccess, P_INT, PAGEABLE_MEMORY_ACCESS),
    F(concurrentManagedAccess, P_INT, CONCURRENT_MANAGED_ACCESS),
    F(computePreemptionSupported, P_INT, COMPUTE_PREEMPTION_SUPPORTED),
    F(canUseHostPointerForRegisteredMem, P_INT, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM),
    F(cooperativeLaunch, P_INT, COOPERATIVE_LAUNCH),
    F(sharedMemPerBlockOptin, P_SIZE, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
    F(pageableMemoryAccessUsesHostPageTables, P_INT, PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES),
    F(directManagedMemAccessFromHost, P_INT, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST),
    F(maxBlocksPerMultiProcessor, P_INT, MAX_BLOCKS_PER_MULTIPROCESSOR),
    F(accessPolicyMaxWindowSize, P_INT, MAX_ACCESS_POLICY_WINDOW_SIZE),
    F(reservedSharedMemPerBlock, P_SIZE, RESERVED_SHARED_MEMORY_PER_BLOCK),
    F(hostRegisterSupported, P_INT, HOST_REGISTER_SUPPORTED),
    F(sparseCudaArraySupported, P_INT, SPARSE_CUDA_ARRAY_SUPPORTED),
    F(hostRegisterReadOnlySupported, P_INT, READ_ONLY_HOST_REGISTER_SUPPORTED),
    F(timelineSemaphoreInteropSupported, P_INT, TIMELINE_SEMAPHORE_INTEROP_SUPPORTED),
    F(memoryPoolsSupported, P_INT, MEMORY_POOLS_SUPPORTED),
    F(gpuDirectRDMASupported, P_INT, GPU_DIRECT_RDMA_SUPPORTED),
    F(gpuDirectRDMAFlushWritesOptions, P_UINT, GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS),
    F(gpuDirectRDMAWritesOrdering, P_INT, GPU_DIRECT_RDMA_WRITES_ORDERING),
    F(memoryPoolSupportedHandleTypes, P_UINT, MEMPOOL_SUPPORTED_HANDLE_TYPES),
    F(deferredMappingCudaArraySupported, P_INT, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED),
    F(ipcEventSupported, P_INT, IPC_EVENT_SUPPORTED),
    F(clusterLaunch, P_INT, CLUSTER_LAUNCH),
    F(unifiedFunctionPointers, P_INT, UNIFIED_FUNCTION_POINTERS),
    F(deviceNumaConfig, P_INT, NUMA_CONFIG),
    F(deviceNumaId, P_INT, NUMA_ID),
    F(mpsEnabled, P_INT, MPS_ENABLED),
    F(hostNumaId, P_INT, HOST_NUMA_ID),
    F(gpuPciDeviceID, P_UINT, GPU_PCI_DEVICE_ID),
    F(gpuPciSubsystemID, P_UINT, GPU_PCI_SUBSYSTEM_ID),
    F(hostNumaMultinodeIpcSupported, P_INT, HOST_NUMA_MULTINODE_IPC_SUPPORTED),
};
#undef F

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  if (prop == NULL) return cudaev__ret(cudaErrorInvalidValue);
  struct cudaDeviceProp p;
  memset(&p, 0, sizeof p);
  CUresult r = cudaev__drv.cuDeviceGetName(p.name, (int)sizeof p.name, d);
  if (r == CUDA_SUCCESS) r = cudaev__drv.cuDeviceGetUuid((CUuuid *)&p.uuid, d);
  if (r == CUDA_SUCCESS) r = cudaev__drv.cuDeviceTotalMem(&p.totalGlobalMem, d);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  /* LUIDs exist on Windows only; the driver says so, and the fields stay 0. */
  (void)cudaev__drv.cuDeviceGetLuid(p.luid, &p.luidDeviceNodeMask, d);
  for (size_t i = 0; i < sizeof prop_fields / sizeof prop_fields[0]; i++) {
    const struct prop_field *f = &prop_fields[i];
    int v = 0;
    /* An attribute an older driver does not know reads as 0. */
    if (cudaev__drv.cuDeviceGetAttribute(&v, f->attr, d) != CUDA_SUCCESS) v = 0;
    char *dst = (char *)&p + f->offset;
    switch (f->type) {
    case P_INT: memcpy(dst, &v, sizeof v); break;
    case P_UINT: {
      unsigned u = (unsigned)v;
      memcpy(dst, &u, sizeof u);
      break;
    }
    case P_SIZE: {
      size_t z = (size_t)(unsigned)v;
      memcpy(dst, &z, sizeof z);
      break;
    }
    }
  }
  /* NVIDIA's runtime leaves reserved[] as the caller had it (measured). */
  memcpy(prop, &p, offsetof(struct cudaDeviceProp, reserved));
  return cudaSuccess;
}

/* ---- IPC ----------------------------------------------------------------- */

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's runtime lets the driver judge the event first: NULL is an
   * invalid value, an event made without cudaEventInterprocess an invalid
   * handle, even with a NULL `handle`. Ours asks the driver the same with a
   * handle of its own, then refuses the NULL one; an event the driver
   * would crash on (handle.h) never reaches it. */
  if (event == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(event);
  CUipcEventHandle own;
  CUresult r = cudaev__drv.cuIpcGetEventHandle(handle != NULL ? (CUipcEventHandle *)handle : &own,
                                               (CUevent)event);
  if (r == CUDA_SUCCESS && handle == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(r);
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle) {
  CUDAEV_CTX_OR_RETURN();
  if (event == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUipcEventHandle h;
  memcpy(&h, &handle, sizeof h);
  CUresult r = cudaev__drv.cuIpcOpenEventHandle((CUevent *)event, h);
  if (r == CUDA_SUCCESS) cudaev__handle_revive(*event);
  return cudaev__ret_cu(r);
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
  CUDAEV_CTX_OR_RETURN();
  if (handle == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(
      cudaev__drv.cuIpcGetMemHandle((CUipcMemHandle *)handle, (CUdeviceptr)devPtr));
}

cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUipcMemHandle h;
  memcpy(&h, &handle, sizeof h);
  return cudaev__ret_cu(cudaev__drv.cuIpcOpenMemHandle((CUdeviceptr *)devPtr, h, flags));
}

cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuIpcCloseMemHandle((CUdeviceptr)devPtr));
}
