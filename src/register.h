/* The registry of what nvcc-built host code registered: fat binaries,
 * kernels (host stub -> device function), variables. Owned by
 * src/register.c; used by the execution, occupancy, symbol and graph
 * sections.
 *
 * Every fat binary becomes one CUlibrary, loaded with cuLibraryLoadData on
 * first use (context independent; the driver applies CUDA_MODULE_LOADING).
 * A kernel is found by its host stub or its CUkernel (once resolved, or
 * adopted from cudaLibraryGetKernel); the record itself (magic first) is
 * the handle __cudaGetKernel gives the generated launch code.
 * Lookups take no lock and allocate nothing; registration, resolution and
 * unregistration serialise on one mutex, never held across a driver call.
 * Records are retired, never freed, so a lookup racing an unregistration
 * never reads freed memory.
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_REGISTER_H
#define CUDAEV_REGISTER_H

#include "internal.h"

#include <stdint.h>

#define CUDAEV_KFUNC_MAGIC UINT64_C(0x63756465766b666e) /* "cudevkfn" */

struct cudaev_fatbin;

/* One kernel: a registration by __cudaRegisterFunction, or a kernel of a
 * library the program loaded itself (fb == NULL, kernel set from the
 * start). Read-only after registration except `kernel`, which goes from
 * NULL to the resolved CUkernel once. */
struct cudaev_kfunc {
  uint64_t magic;            /* CUDAEV_KFUNC_MAGIC */
  _Atomic(CUkernel) kernel;  /* NULL until the fat binary is loaded */
  const void *stub;          /* host stub; NULL for library kernels */
  const char *name;          /* device (mangled) name; NULL for library kernels */
  struct cudaev_fatbin *fb;  /* owner; NULL for library kernels */
  CUlibrary lib;             /* library kernels: their library */
  struct cudaev_kfunc *dup;  /* next registration of the same stub (other TUs) */
  struct cudaev_kfunc *next; /* next kernel of the same fat binary */
};

/* The record registered for `func`: a host stub, or a resolved or adopted
 * CUkernel cast to void*. NULL when unknown. Takes no lock. */
struct cudaev_kfunc *cudaev__kfunc_find(const void *func);

/* Loads the record's fat binary if needed and returns its CUkernel.
 * Initialises the runtime, needs no context. Errors are not recorded. */
cudaError_t cudaev__kfunc_resolve(struct cudaev_kfunc *f, CUkernel *out);

static inline cudaError_t cudaev__kfunc_kernel(struct cudaev_kfunc *f, CUkernel *out) {
  CUkernel k = atomic_load_explicit(&f->kernel, memory_order_acquire);
  if (CUDAEV_LIKELY(k != NULL)) {
    *out = k;
    return cudaSuccess;
  }
  return cudaev__kfunc_resolve(f, out);
}

/* The CUkernel for `func` (host stub or cudaKernel_t cast to void*).
 * Initialises the runtime, needs no context. Errors (not recorded), as
 * NVIDIA's runtime reports them:
 *   NULL                                 -> cudaErrorInvalidDeviceFunction
 *   a pointer the registry does not know -> taken for a CUkernel of a
 *     library loaded outside the runtime and validated by the driver
 *     (cuKernelGetLibrary): accepted as it is if the driver knows it, else
 *     cudaErrorInvalidResourceHandle (a host function, an unregistered
 *     stub, any other pointer; never dereferenced here)
 *   a registered stub whose device function is missing -> cudaErrorInvalidDeviceFunction
 *   or the runtime's initialisation error.
 * For the calls that take a function's *entry address* only (cudaGetKernel,
 * cudaGetFuncBySymbol), use cudaev__kernel_lookup_registered. */
cudaError_t cudaev__kernel_lookup(const void *func, CUkernel *out);

/* As cudaev__kernel_lookup, but only what the registry knows (registered
 * stubs, their resolved CUkernels, adopted library kernels); any other
 * pointer -> cudaErrorInvalidDeviceFunction. */
cudaError_t cudaev__kernel_lookup_registered(const void *func, CUkernel *out);

/* The CUfunction to launch for `func` in the current context: `func` as for
 * cudaev__kernel_lookup (same errors). Requires a current context. */
cudaError_t cudaev__func_lookup(const void *func, CUfunction *out);

/* The device address and size of a registered __device__/__constant__/
 * __managed__ variable, given its host shadow's address (or, for a managed
 * variable, its managed address), in the current context.
 * cudaErrorInvalidSymbol for an unknown pointer (not recorded). */
cudaError_t cudaev__symbol_lookup(const void *symbol, CUdeviceptr *ptr, size_t *size);

/* Makes a kernel of a program-loaded library (cudaLibraryGetKernel,
 * cudaLibraryEnumerateKernels) acceptable wherever a cudaKernel_t cast to
 * void* is. Returns true on error (out of memory). */
bool cudaev__kernel_adopt(CUkernel k, CUlibrary lib);

/* Forgets the kernels adopted from `lib` (before it is unloaded). */
void cudaev__library_forget(CUlibrary lib);

/* cudaLaunchAttribute is CUlaunchAttribute bit for bit (checked by static
 * assertions in src/execution.c), so the attribute array is passed on as
 * it is. Fills *out from *in; false when the shared memory size does not
 * fit the driver's 32 bits. */
static inline bool cudaev__launch_config(const cudaLaunchConfig_t *in, CUlaunchConfig *out,
                                         bool per_thread) {
  out->gridDimX = in->gridDim.x;
  out->gridDimY = in->gridDim.y;
  out->gridDimZ = in->gridDim.z;
  out->blockDimX = in->blockDim.x;
  out->blockDimY = in->blockDim.y;
  out->blockDimZ = in->blockDim.z;
  out->sharedMemBytes = (unsigned)in->dynamicSmemBytes;
  out->hStream = cudaev__stream(in->stream, per_thread);
  out->attrs = (CUlaunchAttribute *)in->attrs;
  out->numAttrs = in->numAttrs;
  return in->dynamicSmemBytes <= 0xffffffffu;
}

#endif
