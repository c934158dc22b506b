/* Version Management. */
#include "internal.h"

/* Answers without a driver: 0 when none is installed, as NVIDIA's does. */
cudaError_t cudaDriverGetVersion(int *driverVersion) {
  if (driverVersion == NULL) return cudaev__ret(cudaErrorInvalidValue);
  *driverVersion = cudaev__driver_version();
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) {
  if (runtimeVersion == NULL) return cudaev__ret(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}
