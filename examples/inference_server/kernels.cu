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

extern "C" cudaError_t infer_bias_act(float *y, const float *bias, int rows, int cols, int relu,
                                      cudaStream_t stream) {
  size_t total = (size_t)rows * (size_t)cols;
  unsigned blocks = (unsigned)((total + 255) / 256);
  if (blocks > 1024) blocks = 1024;
  if (blocks == 0) return cudaSuccess;
  bias_act<<<blocks, 256, 0, stream>>>(y, bias, rows, cols, relu);
  return cudaGetLastError();
}

extern "C" cudaError_t infer_fault(cudaStream_t stream) {
  // Page 0 is never mapped on the device: the write faults.
  fault<<<1, 1, 0, stream>>>((int *)(uintptr_t)0x40);
  return cudaGetLastError();
}
