/* The registry of what nvcc-built host code registered: fat binaries,
 * kernels (host stub -> device function), variables. Owned by
 * src/register.c; used by the execution, occupancy, symbol and graph
 * sections.
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_REGISTER_H
#define CUDAEV_REGISTER_H

#include "internal.h"

/* The CUfunction to launch for `func` in the current context: `func` is a
 * host stub registered through __cudaRegisterFunction, or a cudaKernel_t
 * (from cudaGetKernel / cudaLibraryGetKernel) cast to void*. Requires a
 * current context. Returns cudaErrorInvalidDeviceFunction for an unknown
 * pointer (not recorded as last error). */
cudaError_t cudaev__func_lookup(const void *func, CUfunction *out);

/* The device address and size of a registered __device__/__constant__/
 * __managed__ variable, given its host shadow's address, in the current
 * context. cudaErrorInvalidSymbol for an unknown pointer (not recorded). */
cudaError_t cudaev__symbol_lookup(const void *symbol, CUdeviceptr *ptr, size_t *size);

#endif
