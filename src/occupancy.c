/* Occupancy: the driver's calculators, given the CUkernel cast to
 * CUfunction (which they accept; the current context supplies the device).
 * The C++ templates of cuda_runtime.h (cudaOccupancyMaxPotentialBlockSize*
 * and the *VariableSMem ones) are built on these in the program itself. */
#include "launch.h"
#include "register.h"

/* The occupancy flags are the driver's (abi_asserts.c). */
/* Finds the kernel; the error is recorded. The context comes first, before
 * the output pointers are checked (internal.h: initialisation before
 * arguments). */
static cudaError_t occupancy_kernel(const void *func, CUkernel *k) {
  cudaError_t e = cudaev__kernel_lookup(func, k);
  return e == cudaSuccess ? e : cudaev__ret(e);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func,
                                                                   int blockSize,
                                                                   size_t dynamicSMemSize,
                                                                   unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's order: a NULL function, the output, the flags, then the
   * lookup of any other function. */
  if (func == NULL) return cudaev__ret(cudaErrorInvalidDeviceFunction);
  if (numBlocks == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (flags & ~(unsigned)cudaOccupancyDisableCachingOverride)
    return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  cudaError_t e = occupancy_kernel(func, &k);
  if (e != cudaSuccess) return e;
  return cudaev__ret_cu(cudaev__drv.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      numBlocks, (CUfunction)k, blockSize, dynamicSMemSize, flags));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func,
                                                          int blockSize, size_t dynamicSMemSize) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
      numBlocks, func, blockSize, dynamicSMemSize, cudaOccupancyDefault);
}

cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, const void *func,
                                                      int numBlocks, int blockSize) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's order: the block count, the function, then the output. */
  if (numBlocks <= 0) return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  cudaError_t e = occupancy_kernel(func, &k);
  if (e != cudaSuccess) return e;
  if (dynamicSmemSize == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuOccupancyAvailableDynamicSMemPerBlock(
      dynamicSmemSize, (CUfunction)k, numBlocks, blockSize));
}

cudaError_t cudaOccupancyMaxActiveClusters(int *numClusters, const void *func,
                                           const cudaLaunchConfig_t *launchConfig) {
  CUDAEV_CTX_OR_RETURN();
  if (numClusters == NULL || launchConfig == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  cudaError_t e = occupancy_kernel(func, &k);
  if (e != cudaSuccess) return e;
  CUlaunchConfig c;
  if (!cudaev__launch_config(launchConfig, &c, false)) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuOccupancyMaxActiveClusters(numClusters, (CUfunction)k, &c));
}

cudaError_t cudaOccupancyMaxPotentialClusterSize(int *clusterSize, const void *func,
                                                 const cudaLaunchConfig_t *launchConfig) {
  CUDAEV_CTX_OR_RETURN();
  if (clusterSize == NULL || launchConfig == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUkernel k;
  cudaError_t e = occupancy_kernel(func, &k);
  if (e != cudaSuccess) return e;
  CUlaunchConfig c;
  if (!cudaev__launch_config(launchConfig, &c, false)) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(
      cudaev__drv.cuOccupancyMaxPotentialClusterSize(clusterSize, (CUfunction)k, &c));
}
