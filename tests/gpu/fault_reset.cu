// A device fault, then cudaDeviceReset, then everything made again — what a
// service does to keep serving after a GPU fault (examples/inference_server).
// The transcript shows the sticky error, what each call returns before the
// reset, and that after it allocation, pinned memory, streams, launches and
// copies work again.
#include "common.h"

__global__ void fault_k(int *where) { *where = 1; }
__global__ void fill_k(int *p, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v + i;
}

static void round_trip(const char *when) {
  enum { N = 4096 };
  int *d = NULL, *h = NULL;
  cudaStream_t s = NULL;
  printf("-- %s\n", when);
  TN(cudaStreamCreate(&s));
  TN(cudaMalloc((void **)&d, N * sizeof(int)));
  TN(cudaMallocHost((void **)&h, N * sizeof(int)));
  fill_k<<<(N + 255) / 256, 256, 0, s>>>(d, N, 7);
  T(cudaGetLastError());
  T(cudaMemcpyAsync(h, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
  T(cudaStreamSynchronize(s));
  int ok = 1;
  for (int i = 0; i < N; i++) ok &= h[i] == 7 + i;
  printf("data back: %d\n", ok);
  T(cudaFreeHost(h));
  T(cudaFree(d));
  T(cudaStreamDestroy(s));
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("SKIP: no device\n");
    return 77;
  }
  round_trip("before the fault");
  int *pinned = NULL;
  T(cudaMallocHost((void **)&pinned, 4096));
  cudaStream_t s = NULL;
  T(cudaStreamCreate(&s));
  // Page 0 is never mapped on the device: the write faults.
  fault_k<<<1, 1, 0, s>>>((int *)0);
  T(cudaGetLastError());
  TC(cudaStreamSynchronize(s));
  TC(cudaDeviceSynchronize());
  int *d = NULL;
  TC(cudaMalloc((void **)&d, 64));
  int *h = NULL;
  TC(cudaMallocHost((void **)&h, 64));
  TC(cudaStreamDestroy(s));
  TC(cudaFreeHost(pinned));
  T(cudaDeviceReset());
  T(cudaGetLastError());
  round_trip("after the reset");
  round_trip("and again");
  return 0;
}
