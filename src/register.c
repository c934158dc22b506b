/* nvcc's registration ABI (placeholder until the execution work lands). */
#include "register.h"

cudaError_t cudaev__func_lookup(const void *func, CUfunction *out) {
  (void)func;
  *out = NULL;
  return cudaErrorInvalidDeviceFunction;
}

cudaError_t cudaev__symbol_lookup(const void *symbol, CUdeviceptr *ptr, size_t *size) {
  (void)symbol;
  *ptr = 0;
  *size = 0;
  return cudaErrorInvalidSymbol;
}
