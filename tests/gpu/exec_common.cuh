/* Shared by the execution-section programs: a template kernel
 * instantiated in two translation units, and the checksum they print. */
#ifndef CUDAEV_TESTS_GPU_EXEC_COMMON_CUH
#define CUDAEV_TESTS_GPU_EXEC_COMMON_CUH

#include <stdint.h>

template <typename T>
__global__ void exec_scale(T *p, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * factor + (T)i;
}

/* Launches exec_scale<float> and exec_scale<int> from the other
 * translation unit (exec_launch_tu2.cu). */
cudaError_t exec_scale_from_tu2(float *f, int *i, int n);

static inline uint64_t exec_checksum(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t k = 0; k < n; k++) h = (h ^ b[k]) * 1099511628211ull;
  return h;
}

#endif
