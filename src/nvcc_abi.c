/* nvcc's ABI: every __cuda* function that nvcc-generated host code calls
 * (nvcc_abi.h lists them with their contracts). Each is a thin door: the
 * registrations go to the registry (register.c), the launches to the
 * launch path (launch.h); only the call configuration stack of <<<>>> lives
 * here, because nothing but the generated code uses it. */
#include "nvcc_abi.h"

#include "launch.h"
#include "register.h"

/* ---- registration ----------------------------------------------------------- */

#define FATBINC_MAGIC 0x466243B1

/* nvcc's fat binary wrapper (fatbinary_section.h). */
struct fatbin_wrapper {
  int magic;
  int version; /* 1, or 2 for a device-linked (-rdc) program */
  const unsigned long long *data;
  void *extra; /* version 2: NULL-terminated array of the prelinked fatbins */
};

/* Only the image is kept: a device-linked program's prelinked fat binaries
 * (version 2) would matter for linking at run time, which this runtime
 * does not do (README, known limitations). */
void **__cudaRegisterFatBinary(void *fatCubin) {
  const struct fatbin_wrapper *w = fatCubin;
  return (void **)cudaev__fatbin_new(w != NULL && w->magic == FATBINC_MAGIC ? w->data : NULL);
}

void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }

void __cudaUnregisterFatBinary(void **fatCubinHandle) {
  cudaev__fatbin_unregister((struct cudaev__fatbin *)fatCubinHandle);
}

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize) {
  cudaev__fatbin_add_kernel((struct cudaev__fatbin *)fatCubinHandle, hostFun,
                            deviceName != NULL ? deviceName : deviceFun);
}

void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global) {
  cudaev__fatbin_add_var((struct cudaev__fatbin *)fatCubinHandle, hostVar,
                         deviceName != NULL ? deviceName : deviceAddress, size, CUDAEV__VAR_DEVICE,
                         NULL);
}

void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global) {
  cudaev__fatbin_add_var((struct cudaev__fatbin *)fatCubinHandle, hostVarPtrAddress,
                         deviceName != NULL ? deviceName : deviceAddress, size, CUDAEV__VAR_MANAGED,
                         hostVarPtrAddress);
}

void __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName, char *hostVar,
                           size_t size) {
  cudaev__fatbin_add_var((struct cudaev__fatbin *)fatCubinHandle, hostVar, deviceName, size,
                         CUDAEV__VAR_HOST, NULL);
}

void __cudaRegisterUnifiedTable(void **fatCubinHandle, void *functionTable,
                                size_t functionWindowSize, void *dataTable, size_t dataWindowSize) {
  cudaev__fatbin_set_unified_table((struct cudaev__fatbin *)fatCubinHandle, functionTable,
                                   functionWindowSize, dataTable, dataWindowSize);
}

/* Host code reads a __managed__ variable through its shadow pointer after
 * calling this once: load the module, which writes the shadows. */
char __cudaInitModule(void **fatCubinHandle) {
  struct cudaev__fatbin *fb = (struct cudaev__fatbin *)fatCubinHandle;
  if (!cudaev__fatbin_valid(fb)) return 0;
  if (cudaev__ctx() != cudaSuccess) return 0;
  CUlibrary lib;
  return cudaev__fatbin_library(fb, &lib) == cudaSuccess;
}

void *__cudaGetProcAddress(void) { return NULL; }

/* ---- the call configuration stack (<<<grid, block, shmem, stream>>>) ------ */

#define CONFIG_STACK_DEPTH 32

struct call_config {
  dim3 grid, block;
  size_t shmem;
  struct CUstream_st *stream;
};

static _Thread_local struct {
  unsigned depth;
  struct call_config cfg[CONFIG_STACK_DEPTH];
} config_stack;

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream) {
  unsigned d = config_stack.depth;
  if (CUDAEV_UNLIKELY(d >= CONFIG_STACK_DEPTH))
    return (unsigned)cudaev__ret(cudaErrorMemoryAllocation);
  config_stack.cfg[d] = (struct call_config){gridDim, blockDim, sharedMem, stream};
  config_stack.depth = d + 1;
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream) {
  unsigned d = config_stack.depth;
  if (CUDAEV_UNLIKELY(d == 0)) return cudaev__ret(cudaErrorMissingConfiguration);
  const struct call_config *c = &config_stack.cfg[d - 1];
  config_stack.depth = d - 1;
  *gridDim = c->grid;
  *blockDim = c->block;
  *sharedMem = c->shmem;
  *(struct CUstream_st **)stream = c->stream;
  return cudaSuccess;
}

/* ---- kernel handles and launches ----------------------------------------- */

/* The handle written is our record of the kernel: __cudaLaunchKernel then
 * needs no lookup. Like NVIDIA's, it writes a usable handle (the stub)
 * before anything can fail, and initialises the runtime. */
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun) {
  if (kernel == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (hostFun == NULL) return cudaev__ret(cudaErrorInvalidDeviceFunction);
  *kernel = (cudaKernel_t)(uintptr_t)hostFun;
  struct cudaev__kfunc *f = cudaev__kfunc_find(hostFun);
  if (f != NULL) *kernel = (cudaKernel_t)f;
  cudaError_t e = cudaev__init();
  if (e != cudaSuccess) return cudaev__ret(e);
  return f != NULL ? cudaSuccess : cudaev__ret(cudaErrorInvalidDeviceFunction);
}

/* The record behind a handle from __cudaGetKernel: the record itself, or
 * (if __cudaGetKernel could not find one) the stub it wrote first. The
 * handle is never a user pointer: it is what __cudaGetKernel wrote (a
 * record, or a host stub, i.e. readable code), so reading its first 8
 * bytes is safe. */
static inline __attribute__((always_inline)) struct cudaev__kfunc *handle_kfunc(
    cudaKernel_t kernel) {
  struct cudaev__kfunc *f = (struct cudaev__kfunc *)kernel;
  if (CUDAEV_LIKELY(f != NULL && f->magic == CUDAEV_KFUNC_MAGIC)) return f;
  return cudaev__kfunc_find(kernel);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                               size_t sharedMem, cudaStream_t stream) {
  return cudaev__launch(CUDAEV__LAUNCH_PLAIN, kernel, handle_kfunc(kernel), gridDim, blockDim, args,
                        sharedMem, stream, false);
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream) {
  return cudaev__launch(CUDAEV__LAUNCH_PLAIN, kernel, handle_kfunc(kernel), gridDim, blockDim, args,
                        sharedMem, stream, true);
}
