// The servers' own kernels (kernels.h). The GEMMs are cuBLAS's; the bias and
// the activation are this kernel, so that a batch runs code from both
// runtimes' registrations: cuBLAS's (its static runtime) and ours (the
// process's libcudart.so.13).
#include <stdint.h>

#include "kernels.h"

__global__ void bias_act(float *y, const float *bias, int rows, int cols, int relu) {
  size_t total = (size_t)rows * (size_t)cols;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    float v = y[i] + bias[i % cols];
    y[i] = relu && v < 0.0f ? 0.0f : v;
  }
}

__global__ void fault(int *where) { *where = 1; }

// cudaLaunchKernel rather than <<<>>> + cudaGetLastError: it returns this
// launch's error, not whatever an earlier call left as the last error.
extern "C" cudaError_t infer_bias_act(float *y, const float *bias, int rows, int cols, int relu,
                                      cudaStream_t stream) {
  size_t total = (size_t)rows * (size_t)cols;
  unsigned blocks = (unsigned)((total + 255) / 256);
  if (blocks > 1024) blocks = 1024;
  if (blocks == 0) return cudaSuccess;
  void *args[] = {&y, &bias, &rows, &cols, &relu};
  return cudaLaunchKernel((const void *)bias_act, dim3(blocks), dim3(256), args, 0, stream);
}

extern "C" cudaError_t infer_fault(cudaStream_t stream) {
  // Page 0 is never mapped on the device: the write faults.
  int *where = (int *)(uintptr_t)0x40;
  void *args[] = {&where};
  return cudaLaunchKernel((const void *)fault, dim3(1), dim3(1), args, 0, stream);
}
