/* The registry of what nvcc-built host code registered: fat binaries,
 * kernels (host stub -> device function), variables. Owned by
 * src/register.c; filled by nvcc's __cudaRegister* entry points
 * (src/nvcc_abi.c); used by the execution, occupancy, symbol, library and
 * graph sections.
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

/* One registered fat binary (opaque): the handle nvcc's generated code
 * keeps as `void **` and passes back to every __cudaRegister* call. Never
 * freed: unregistered ones are retired with their kernels and variables. */
struct cudaev__fatbin;

/* One kernel: a registration by __cudaRegisterFunction, or a kernel of a
 * library the program loaded itself (fb == NULL, kernel set from the
 * start). Read-only after registration except `kernel`, which goes from
 * NULL to the resolved CUkernel once. */
struct cudaev__kfunc {
  uint64_t magic;             /* CUDAEV_KFUNC_MAGIC */
  _Atomic(CUkernel) kernel;   /* NULL until the fat binary is loaded */
  const void *stub;           /* host stub; NULL for library kernels */
  const char *name;           /* device (mangled) name; NULL for library kernels */
  struct cudaev__fatbin *fb;  /* owner; NULL for library kernels */
  CUlibrary lib;              /* library kernels: their library */
  struct cudaev__kfunc *dup;  /* next registration of the same stub (other TUs) */
  struct cudaev__kfunc *next; /* next kernel of the same fat binary */
};

/* The record registered for `func`: a host stub, or a resolved or adopted
 * CUkernel cast to void*. NULL when unknown. Takes no lock. */
struct cudaev__kfunc *cudaev__kfunc_find(const void *func);

/* Loads the record's fat binary if needed and returns its CUkernel.
 * Initialises the runtime, needs no context. Errors are not recorded. */
cudaError_t cudaev__kfunc_resolve(struct cudaev__kfunc *f, CUkernel *out);

static inline cudaError_t cudaev__kfunc_kernel(struct cudaev__kfunc *f, CUkernel *out) {
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

/* ---- registration: the bodies of nvcc's __cudaRegister* (src/nvcc_abi.c) ---- */

/* Records a fat binary without touching the driver: these run from static
 * constructors, possibly before anything else in the process. `image` is
 * NULL when nvcc's wrapper was not recognised (a later load then fails
 * with cudaErrorInvalidKernelImage). Returns NULL when out of memory. */
struct cudaev__fatbin *cudaev__fatbin_new(const void *image);

/* True for a record cudaev__fatbin_new returned (checks its magic): the
 * functions below ignore anything else, as NVIDIA's runtime does. */
bool cudaev__fatbin_valid(const struct cudaev__fatbin *fb);

/* Forgets the fat binary's kernels and variables (another translation
 * unit's registration of the same kernel takes over) and unloads its
 * library if one was loaded, except at process exit. A second call, or an
 * invalid `fb`, does nothing. */
void cudaev__fatbin_unregister(struct cudaev__fatbin *fb);

/* Registers kernel `name` (the device name) under its host stub. A stub
 * registered before (by another translation unit) keeps its first
 * registration; this one waits in line behind it. Out of memory drops it. */
void cudaev__fatbin_add_kernel(struct cudaev__fatbin *fb, const void *stub, const char *name);

enum cudaev__var_kind {
  CUDAEV__VAR_DEVICE,  /* __device__ / __constant__: looked up in the library */
  CUDAEV__VAR_MANAGED, /* __managed__: its address is written to *shadow at load */
  CUDAEV__VAR_HOST,    /* a host variable the device reaches through unified memory */
};

/* Registers variable `name` under its host shadow `host`; a shadow
 * registered before keeps its first registration. */
void cudaev__fatbin_add_var(struct cudaev__fatbin *fb, const void *host, const char *name,
                            size_t size, enum cudaev__var_kind kind, void **shadow);

/* The host universal function and data table, handed to cuLibraryLoadData
 * as CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE. */
void cudaev__fatbin_set_unified_table(struct cudaev__fatbin *fb, void *functionTable,
                                      size_t functionWindowSize, void *dataTable,
                                      size_t dataWindowSize);

/* The fat binary's library, loaded on first use (cuLibraryLoadData, which
 * needs no context), with its managed variables' shadows written.
 * Initialises the runtime. Errors are not recorded. */
cudaError_t cudaev__fatbin_library(struct cudaev__fatbin *fb, CUlibrary *out);

#endif
