/* Execution Control: kernel launches and kernel attributes.
 *
 * The launch fast path is shared with nvcc's __cudaLaunchKernel
 * (src/nvcc_abi.c) and lives in launch.h, which says what a launch costs;
 * its slow path is here. */
#include "launch.h"
#include "handle.h"
#include "register.h"

/* ---- launch ---------------------------------------------------------------- */

CUDAEV_DECLARE_VARIANT(cudaLaunchKernel, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaLaunchKernelExC, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaLaunchCooperativeKernel, _ptsz);

/* Reached from cudaev__launch (launch.h) only when something is missing or
 * failed. */
cudaError_t cudaev__launch_slow(enum cudaev__launch_kind kind, const void *func,
                                struct cudaev__kfunc *f, CUkernel k, CUresult r, dim3 g, dim3 b,
                                void **args, size_t smem, CUstream s) {
  /* A stream destroyed through this runtime, or a value no object can have
   * (src/handle.h): the driver would crash on it, as NVIDIA's runtime does. */
  if (CUDAEV_UNLIKELY(cudaev__handle_dead(s))) return cudaev__ret(cudaErrorInvalidResourceHandle);
  if (k == NULL) {
    /* Unknown pointers go through cudaev__kernel_lookup's rules (NULL ->
     * invalid device function; anything else is validated by the driver as
     * a CUkernel -> invalid resource handle). */
    cudaError_t e = f != NULL ? cudaev__kfunc_kernel(f, &k) : cudaev__kernel_lookup(func, &k);
    if (e != cudaSuccess) return cudaev__ret(e);
    if (smem > 0xffffffffu) return cudaev__ret(cudaErrorInvalidValue);
    r = cudaev__launch_drv(kind, k, g, b, args, smem, s);
  }
  if (r == CUDA_ERROR_INVALID_CONTEXT) {
    /* No context current yet: make the device's primary context current,
     * as every runtime call does, and try again. */
    cudaError_t c = cudaev__ctx();
    if (c != cudaSuccess) return cudaev__ret(c);
    r = cudaev__launch_drv(kind, k, g, b, args, smem, s);
  }
  return cudaev__ret_cu(r);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                             size_t sharedMem, cudaStream_t stream) {
  return cudaev__launch(CUDAEV__LAUNCH_PLAIN, func, cudaev__kfunc_find(func), gridDim, blockDim,
                        args, sharedMem, stream, false);
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                  size_t sharedMem, cudaStream_t stream) {
  return cudaev__launch(CUDAEV__LAUNCH_PLAIN, func, cudaev__kfunc_find(func), gridDim, blockDim,
                        args, sharedMem, stream, true);
}

cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                        size_t sharedMem, cudaStream_t stream) {
  return cudaev__launch(CUDAEV__LAUNCH_COOPERATIVE, func, cudaev__kfunc_find(func), gridDim,
                        blockDim, args, sharedMem, stream, false);
}

cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                             void **args, size_t sharedMem, cudaStream_t stream) {
  return cudaev__launch(CUDAEV__LAUNCH_COOPERATIVE, func, cudaev__kfunc_find(func), gridDim,
                        blockDim, args, sharedMem, stream, true);
}

static cudaError_t launch_ex(const cudaLaunchConfig_t *config, const void *func, void **args,
                             bool per_thread) {
  CUDAEV_INIT_OR_RETURN();
  if (config == NULL || (config->numAttrs != 0 && config->attrs == NULL))
    return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  cudaError_t e = cudaev__kernel_lookup(func, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  CUlaunchConfig c;
  if (!cudaev__launch_config(config, &c, per_thread)) return cudaev__ret(cudaErrorInvalidValue);
  CUresult r = cudaev__drv.cuLaunchKernelEx(&c, (CUfunction)k, args, NULL);
  if (CUDAEV_LIKELY(r == CUDA_SUCCESS)) return cudaSuccess;
  if (r == CUDA_ERROR_INVALID_CONTEXT) {
    e = cudaev__ctx();
    if (e != cudaSuccess) return cudaev__ret(e);
    r = cudaev__drv.cuLaunchKernelEx(&c, (CUfunction)k, args, NULL);
  }
  return cudaev__ret_cu(r);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
  return launch_ex(config, func, args, false);
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                     void **args) {
  return launch_ex(config, func, args, true);
}

/* ---- kernel attributes ------------------------------------------------------ */

/* cudaFuncAttribute and cudaFuncCache are the driver's enums (abi_asserts.c):
 * they are passed on cast. */

/* The kernel behind `func` and the CUdevice of the current context (made
 * current first, as NVIDIA's runtime does for these calls). */
static cudaError_t kernel_and_device(const void *func, CUkernel *k, CUdevice *dev) {
  cudaError_t e = cudaev__ctx();
  if (e != cudaSuccess) return e;
  e = cudaev__kernel_lookup(func, k);
  if (e != cudaSuccess) return e;
  return cudaev__error_from_cu(cudaev__drv.cuCtxGetDevice(dev, NULL));
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
  CUDAEV_INIT_OR_RETURN();
  if (attr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  CUdevice dev;
  cudaError_t e = kernel_and_device(func, &k, &dev);
  if (e != cudaSuccess) return cudaev__ret(e);
  int v[CU_FUNC_ATTRIBUTE_MAX];
  for (int a = 0; a < CU_FUNC_ATTRIBUTE_MAX; a++) {
    CUresult r = cudaev__drv.cuKernelGetAttribute(&v[a], (CUfunction_attribute)a, k, dev);
    if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  }
  struct cudaFuncAttributes out = {0};
  out.maxThreadsPerBlock = v[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
  out.sharedSizeBytes = (size_t)v[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
  out.constSizeBytes = (size_t)v[CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES];
  out.localSizeBytes = (size_t)v[CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES];
  out.numRegs = v[CU_FUNC_ATTRIBUTE_NUM_REGS];
  out.ptxVersion = v[CU_FUNC_ATTRIBUTE_PTX_VERSION];
  out.binaryVersion = v[CU_FUNC_ATTRIBUTE_BINARY_VERSION];
  out.cacheModeCA = v[CU_FUNC_ATTRIBUTE_CACHE_MODE_CA];
  out.maxDynamicSharedSizeBytes = v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
  out.preferredShmemCarveout = v[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT];
  out.clusterDimMustBeSet = v[CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET];
  out.requiredClusterWidth = v[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH];
  out.requiredClusterHeight = v[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT];
  out.requiredClusterDepth = v[CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH];
  out.clusterSchedulingPolicyPreference = v[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE];
  out.nonPortableClusterSizeAllowed = v[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED];
  *attr = out;
  return cudaSuccess;
}

/* Only the attributes cudaFuncSetAttribute documents are writable. */
static bool settable(enum cudaFuncAttribute attr) {
  return attr >= cudaFuncAttributeMaxDynamicSharedMemorySize && attr < cudaFuncAttributeMax;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
  CUDAEV_INIT_OR_RETURN();
  /* The attribute before the function, as NVIDIA's runtime checks them. */
  if (!settable(attr)) return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  CUdevice dev;
  cudaError_t e = kernel_and_device(func, &k, &dev);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(
      cudaev__drv.cuKernelSetAttribute((CUfunction_attribute)attr, value, k, dev));
}

cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute attr,
                                            int value, int device) {
  CUDAEV_INIT_OR_RETURN();
  /* The attribute before the device and the kernel, as NVIDIA's runtime
   * checks them (and as cudaFuncSetAttribute does). */
  if (!settable(attr)) return cudaev__ret(cudaErrorInvalidValue);
  if (!cudaev__device_valid(device)) return cudaev__ret(cudaErrorInvalidDevice);
  /* A kernel handle, not an entry address: NVIDIA's runtime answers NULL
   * as a handle and hands any other value to the driver unchecked (a
   * kernel whose library was unloaded still takes the attribute). Values
   * that can be no object are refused before the driver reads them. */
  if (kernel == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  if (cudaev__addr_impossible((uintptr_t)kernel))
    return cudaev__ret(cudaErrorInvalidResourceHandle);
  /* A kernel of an unloaded library: NVIDIA's runtime hands it to the
   * driver, which answers success for a settable attribute by reading the
   * freed kernel (and crashes when that memory was reused). Ours answers
   * the same without the read. */
  if (cudaev__handle_dead(kernel)) return cudaSuccess;
  CUkernel k = (CUkernel)kernel;
  struct cudaev__kfunc *f = cudaev__kfunc_find(kernel);
  if (f != NULL) {
    cudaError_t e = cudaev__kfunc_kernel(f, &k);
    if (e != cudaSuccess) return cudaev__ret(e);
  }
  return cudaev__ret_cu(cudaev__drv.cuKernelSetAttribute((CUfunction_attribute)attr, value, k,
                                                         cudaev__rt.devices[device].dev));
}

cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig) {
  CUDAEV_INIT_OR_RETURN();
  CUkernel k;
  CUdevice dev;
  cudaError_t e = kernel_and_device(func, &k, &dev);
  if (e != cudaSuccess) return cudaev__ret(e);
  if ((unsigned)cacheConfig > cudaFuncCachePreferEqual) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuKernelSetCacheConfig(k, (CUfunc_cache)cacheConfig, dev));
}

/* Deprecated: the bank size is fixed on every GPU CUDA 13 supports; the
 * driver's (also deprecated) call still validates it. */
cudaError_t cudaFuncSetSharedMemConfig(const void *func, enum cudaSharedMemConfig config) {
  CUDAEV_CTX_OR_RETURN();
  CUfunction fn;
  cudaError_t e = cudaev__func_lookup(func, &fn);
  if (e != cudaSuccess) return cudaev__ret(e);
  if ((unsigned)config > cudaSharedMemBankSizeEightByte) return cudaev__ret(cudaErrorInvalidValue);
  CUresult r = cudaev__drv.cuFuncSetSharedMemConfig(fn, (CUsharedconfig)config);
  return r == CUDA_ERROR_NOT_SUPPORTED ? cudaSuccess : cudaev__ret_cu(r);
}

cudaError_t cudaFuncGetName(const char **name, const void *func) {
  CUDAEV_INIT_OR_RETURN();
  if (name == NULL) return cudaev__ret(cudaErrorInvalidValue);
  struct cudaev__kfunc *f = cudaev__kfunc_find(func);
  if (f != NULL && f->name != NULL) {
    *name = f->name;
    return cudaSuccess;
  }
  CUkernel k;
  cudaError_t e = cudaev__kernel_lookup(func, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuKernelGetName(name, k));
}

cudaError_t cudaFuncGetParamInfo(const void *func, size_t paramIndex, size_t *paramOffset,
                                 size_t *paramSize) {
  CUDAEV_INIT_OR_RETURN();
  /* NVIDIA's order: a NULL function, the output, then the lookup of any
   * other function (an unregistered one with a NULL output is an invalid
   * value). */
  if (func == NULL) return cudaev__ret(cudaErrorInvalidDeviceFunction);
  if (paramOffset == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  cudaError_t e = cudaev__kernel_lookup(func, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuKernelGetParamInfo(k, paramIndex, paramOffset, paramSize));
}

cudaError_t cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr) {
  CUDAEV_INIT_OR_RETURN();
  if (kernelPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* An entry address only: an unknown pointer is an invalid device
   * function here, not a handle (as NVIDIA's runtime reports it). */
  CUkernel k;
  cudaError_t e = cudaev__kernel_lookup_registered(entryFuncAddr, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  *kernelPtr = (cudaKernel_t)k;
  return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr) {
  CUDAEV_CTX_OR_RETURN();
  /* An entry address only, as for cudaGetKernel; looked up before the
   * output is, as NVIDIA's runtime does. */
  CUkernel k;
  cudaError_t e = cudaev__kernel_lookup_registered(symbolPtr, &k);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (functionPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUfunction fn = NULL;
  CUresult r = cudaev__drv.cuKernelGetFunction(&fn, k);
  if (r == CUDA_ERROR_NOT_FOUND) return cudaev__ret(cudaErrorInvalidDeviceFunction);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *functionPtr = (cudaFunction_t)fn;
  return cudaSuccess;
}
