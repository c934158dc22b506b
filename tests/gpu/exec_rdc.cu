/* Relocatable device code (-rdc, nvcc's version-2 fat binary registered
 * through __cudaRegisterLinkedBinary) with CUDA dynamic parallelism
 * (-lcudadevrt): a kernel launches child kernels, calls a __device__
 * function defined in the other translation unit (exec_rdc_tu2.cu) and
 * uses a __device__ variable defined there (extern here). */
#include "common.h"

extern __device__ int rdc_total;
__device__ int rdc_mix(int a, int b);

__global__ void rdc_child(int *out, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[base + i] = rdc_mix(base, i);
  atomicAdd(&rdc_total, 1);
}

__global__ void rdc_parent(int *out, int children, int per_child) {
  if (threadIdx.x == 0) {
    for (int c = 0; c < children; c++) rdc_child<<<1, per_child>>>(out, c * per_child);
  }
}

/* Defined in exec_rdc_tu2.cu, launched from here. */
__global__ void rdc_tu2_kernel(int *out, int n);

int main() {
  const int children = 8, per = 64, n = children * per;
  int *out = NULL;
  CHECK(cudaMalloc(&out, n * sizeof(int)));
  CHECK(cudaMemset(out, 0, n * sizeof(int)));
  int zero = 0;
  T(cudaMemcpyToSymbol(rdc_total, &zero, sizeof zero));
  rdc_parent<<<1, 32>>>(out, children, per);
  TC(cudaGetLastError());
  T(cudaDeviceSynchronize());
  static int h[512];
  CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  long long s = 0;
  for (int k = 0; k < n; k++) s += (long long)h[k] * (k + 1);
  int total = -1;
  T(cudaMemcpyFromSymbol(&total, rdc_total, sizeof total));
  printf("dynamic parallelism: weighted sum %lld, children ran %d threads\n", s, total);

  rdc_tu2_kernel<<<2, 128>>>(out, n);
  TC(cudaGetLastError());
  CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  s = 0;
  for (int k = 0; k < n; k++) s += (long long)h[k] * (k + 1);
  printf("kernel of the other TU: weighted sum %lld\n", s);
  size_t sz = 0;
  T(cudaGetSymbolSize(&sz, rdc_total));
  printf("sizeof rdc_total %zu\n", sz);
  cudaFuncAttributes fa;
  T(cudaFuncGetAttributes(&fa, (const void *)rdc_parent));
  printf("rdc_parent binaryVersion %d\n", fa.binaryVersion);
  CHECK(cudaFree(out));
  printf("done\n");
  return 0;
}
