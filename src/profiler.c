/* Profiler Control. */
#include "internal.h"

cudaError_t cudaProfilerStart(void) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuProfilerStart());
}

cudaError_t cudaProfilerStop(void) {
  CUDAEV_CTX_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuProfilerStop());
}
