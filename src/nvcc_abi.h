/* nvcc's ABI: the __cuda* functions that the host code nvcc generates
 * calls, all defined in src/nvcc_abi.c. They are exports of
 * libcudart.so.13 that no header of the toolkit declares for C: static
 * constructors register fat binaries, kernels and variables (the registry:
 * src/register.h), each <<<>>> pushes and pops its configuration and
 * launches through a kernel handle (the launch path: src/launch.h), and
 * exit handlers unregister.
 *
 * The prototypes are those of crt/host_runtime.h and crt/device_functions.h
 * of CUDA 13.0; the three without a public prototype (__cudaRegisterHostVar,
 * __cudaRegisterUnifiedTable, __cudaGetProcAddress) were read from the
 * argument registers NVIDIA's libcudart.so.13 forwards. Unit tests include
 * this header to call them as generated code does.
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_NVCC_ABI_H
#define CUDAEV_NVCC_ABI_H

#include "internal.h"

/* ---- registration (static constructors) and unregistration (exit) -------- */

/* Records the fat binary behind nvcc's wrapper (fatbinary_section.h) and
 * returns the handle the other calls take. Touches no driver: it may run
 * before anything else in the process. NULL when out of memory. */
CUDAEV_EXPORT void **__cudaRegisterFatBinary(void *fatCubin);

/* Ends a fat binary's registrations. Nothing to do. */
CUDAEV_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);

/* From exit handlers, and when a library is dlclose()d: forgets the fat
 * binary's kernels and variables. A second call or NULL does nothing. */
CUDAEV_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle);

/* A __global__ function: host stub `hostFun`, device name `deviceName`
 * (or `deviceFun` when that is NULL). The other arguments are unused. */
CUDAEV_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                                          char *deviceFun, const char *deviceName, int thread_limit,
                                          uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim,
                                          int *wSize);

/* A __device__ or __constant__ variable, named by its host shadow. */
CUDAEV_EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                     const char *deviceName, int ext, size_t size, int constant,
                                     int global);

/* A __managed__ variable: *hostVarPtrAddress receives its address when the
 * fat binary is loaded (__cudaInitModule or first use). */
CUDAEV_EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                            char *deviceAddress, const char *deviceName, int ext,
                                            size_t size, int constant, int global);

/* A host variable the device reaches through unified memory. */
CUDAEV_EXPORT void __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName,
                                         char *hostVar, size_t size);

/* The host universal function and data table (unified function pointers). */
CUDAEV_EXPORT void __cudaRegisterUnifiedTable(void **fatCubinHandle, void *functionTable,
                                              size_t functionWindowSize, void *dataTable,
                                              size_t dataWindowSize);

/* Makes a context current and loads the fat binary, which writes its
 * managed variables' shadows. Nonzero on success; errors are not recorded
 * (NVIDIA's does not record them either). */
CUDAEV_EXPORT char __cudaInitModule(void **fatCubinHandle);

/* Returns NULL, as NVIDIA's does. */
CUDAEV_EXPORT void *__cudaGetProcAddress(void);

/* ---- <<<grid, block, shmem, stream>>> --------------------------------------- */

/* Pushes a launch configuration on the calling thread's stack. Nonzero
 * (cudaErrorMemoryAllocation, recorded) when the stack is full, which makes
 * the generated code skip the launch. Needs no driver. */
CUDAEV_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                   struct CUstream_st *stream);

/* Pops the configuration the last push left (`stream` points at a
 * cudaStream_t). cudaErrorMissingConfiguration (recorded) when none. */
CUDAEV_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                                     size_t *sharedMem, void *stream);

/* Writes the handle the generated code launches `hostFun` with (our record
 * of the kernel, or the stub itself when unknown) and initialises the
 * runtime. cudaErrorInvalidValue, cudaErrorInvalidDeviceFunction or the
 * initialisation error, recorded. */
CUDAEV_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);

/* Launches through a handle __cudaGetKernel wrote, as cudaLaunchKernel
 * does; _ptsz: a NULL stream is the per-thread default stream. */
CUDAEV_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                             void **args, size_t sharedMem, cudaStream_t stream);
CUDAEV_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                                  void **args, size_t sharedMem,
                                                  cudaStream_t stream);

#endif
