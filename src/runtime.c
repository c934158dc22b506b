/* Process-wide runtime state: lazy initialisation, per-thread state and the
 * primary-context rules of the runtime reference's "Interactions with the
 * CUDA Driver API" section. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

_Thread_local struct cudaev__thread_state cudaev__thread = {.last_error = cudaSuccess,
                                                            .device = -1};

struct cudaev__runtime cudaev__rt;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static cudaError_t init_error(void) {
  switch (cudaev__driver_load()) {
  case CUDAEV__DRIVER_OK: break;
  case CUDAEV__DRIVER_NOT_FOUND:
  case CUDAEV__DRIVER_TOO_OLD: return cudaErrorInsufficientDriver;
  case CUDAEV__DRIVER_INIT_FAILED: return cudaev__error_from_cu(cudaev__driver_error());
  }
  CUresult r = cudaev__drv.cuInit(0);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  int n = 0;
  r = cudaev__drv.cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  if (n <= 0) return cudaErrorNoDevice;
  struct cudaev__device *devs = calloc((size_t)n, sizeof *devs);
  if (devs == NULL) return cudaErrorMemoryAllocation;
  for (int i = 0; i < n; i++) {
    r = cudaev__drv.cuDeviceGet(&devs[i].dev, i);
    if (r != CUDA_SUCCESS) {
      free(devs);
      return cudaev__error_from_cu(r);
    }
  }
  cudaev__rt.devices = devs;
  cudaev__rt.device_count = n;
  return cudaSuccess;
}

static void init(void) {
  cudaev__rt.init_error = init_error();
  atomic_store_explicit(&cudaev__rt.ready, 1, memory_order_release);
}

cudaError_t cudaev__init_slow(void) {
  pthread_once(&init_once, init);
  return cudaev__rt.init_error;
}

/* After a sticky fault the driver refuses every new context of the device
 * with the fault's own code, reset or not (measured on driver 580: the
 * retain answers CUDA_ERROR_ILLEGAL_ADDRESS). NVIDIA's runtime reports the
 * device as unavailable then, not the old fault. */
static cudaError_t primary_error(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_ECC_UNCORRECTABLE: return cudaErrorDevicesUnavailable;
  default: return cudaev__error_from_cu(r);
  }
}

cudaError_t cudaev__primary_ctx(int d, CUcontext *out) {
  struct cudaev__device *dev = &cudaev__rt.devices[d];
  CUcontext c = atomic_load_explicit(&dev->primary, memory_order_acquire);
  if (c != NULL) {
    *out = c;
    return cudaSuccess;
  }
  /* No lock across the driver call: retain, then publish; a thread that
   * loses the race gives its extra reference back. */
  CUresult r = cudaev__drv.cuDevicePrimaryCtxRetain(&c, dev->dev);
  if (r != CUDA_SUCCESS) return primary_error(r);
  CUcontext expected = NULL;
  if (!atomic_compare_exchange_strong(&dev->primary, &expected, c)) {
    cudaev__drv.cuDevicePrimaryCtxRelease(dev->dev);
    c = expected;
  }
  atomic_store(&dev->handle, c);
  *out = c;
  return cudaSuccess;
}

int cudaev__current_device(void) {
  CUcontext c = NULL;
  CUdevice d;
  if (cudaev__drv.cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != NULL &&
      cudaev__drv.cuCtxGetDevice(&d, NULL) == CUDA_SUCCESS) {
    for (int i = 0; i < cudaev__rt.device_count; i++)
      if (cudaev__rt.devices[i].dev == d) return i;
  }
  int t = cudaev__thread.device;
  return t < 0 ? 0 : t;
}

/* The context this thread's next call runs in. A primary context that
 * cudaDeviceReset reset (still current here, the driver keeps its handle)
 * is retained again and made current again. It is known by its handle,
 * not by asking the driver: a reset or faulted context may not answer
 * cuCtxGetDevice, and using it as it is would send every later call to
 * the dead context. A context of the application's, or a live primary
 * one, is used as it is. */
static cudaError_t ctx_check(void) {
  CUcontext cur = NULL;
  int d = cudaev__thread.device < 0 ? 0 : cudaev__thread.device;
  if (cudaev__drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != NULL) {
    for (int i = 0; i < cudaev__rt.device_count; i++) {
      struct cudaev__device *dev = &cudaev__rt.devices[i];
      if (atomic_load(&dev->handle) != cur || atomic_load(&dev->primary) != NULL) continue;
      CUcontext p;
      cudaError_t e = cudaev__primary_ctx(i, &p);
      if (e != cudaSuccess) return e;
      return cudaev__error_from_cu(cudaev__drv.cuCtxSetCurrent(p));
    }
    return cudaSuccess;
  }
  CUcontext c;
  cudaError_t e = cudaev__primary_ctx(d, &c);
  if (e != cudaSuccess) return e;
  return cudaev__error_from_cu(cudaev__drv.cuCtxSetCurrent(c));
}

/* The thread's context after a reset, or its first one. The reset
 * generation is taken as seen only once the context answers: while the
 * device refuses a new context every call asks again, as with NVIDIA's
 * runtime. */
cudaError_t cudaev__ctx_slow(void) {
  cudaev__thread.ctx = NULL;
  unsigned gen = atomic_load_explicit(&cudaev__rt.reset_gen, memory_order_relaxed);
  cudaError_t e = ctx_check();
  if (e == cudaSuccess) cudaev__thread.reset_gen = gen;
  return e;
}

/* Called by the generated stubs of exports not implemented yet
 * (tools/gen_stubs.py). */
int cudaev__not_implemented(void);
int cudaev__not_implemented(void) { return cudaev__ret(cudaErrorNotSupported); }
