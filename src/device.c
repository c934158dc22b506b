/* Device Management: device selection, flags, reset, synchronisation,
 * limits, cache configuration, PCI ids, attributes, memory pools of a
 * device, P2P attributes, notifications (the section's files: device.h).
 * Calls no other device file. */
#include "device.h"
#include "handle.h"
#include "hostpool.h"
#include "staging.h"
#include "wait.h"

#include <stdlib.h>
#include <string.h>

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
