/* Built with --default-stream per-thread: <<<>>> calls
 * __cudaLaunchKernel_ptsz, and cudaLaunchKernel, cudaLaunchKernelExC,
 * cudaLaunchCooperativeKernel and the symbol copies resolve to their
 * _ptsz / _ptds exports. Two host threads each run a chain of work on
 * their own default stream. */
#include "common.h"

#include <pthread.h>

__device__ int ptsz_slots[2][256];

__global__ void ptsz_step(int *p, int n, int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 2 + add;
}

__global__ void ptsz_to_slot(const int *p, int slot) {
  ptsz_slots[slot][threadIdx.x] = p[threadIdx.x];
}

struct job {
  int slot;
  long long sum;
  cudaError_t err;
};

static void *worker(void *arg) {
  struct job *j = (struct job *)arg;
  const int n = 256;
  int *d = NULL;
  int h[256];
  for (int k = 0; k < n; k++) h[k] = k + j->slot;
  cudaError_t e = cudaMalloc(&d, n * sizeof(int));
  if (e == cudaSuccess) e = cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, 0);
  for (int r = 0; r < 10 && e == cudaSuccess; r++) {
    ptsz_step<<<2, 128>>>(d, n, r);
    e = cudaGetLastError();
  }
  int add = 100;
  void *args[] = {&d, (void *)&n, &add};
  if (e == cudaSuccess)
    e = cudaLaunchKernel((const void *)ptsz_step, dim3(2), dim3(128), args, 0, 0);
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = dim3(2);
  cfg.blockDim = dim3(128);
  if (e == cudaSuccess) e = cudaLaunchKernelExC(&cfg, (const void *)ptsz_step, args);
  if (e == cudaSuccess)
    e = cudaLaunchCooperativeKernel((const void *)ptsz_step, dim3(2), dim3(128), args, 0, 0);
  int slot = j->slot;
  if (e == cudaSuccess) {
    ptsz_to_slot<<<1, 256>>>(d, slot);
    e = cudaGetLastError();
  }
  int back[256];
  if (e == cudaSuccess)
    e = cudaMemcpyFromSymbolAsync(back, ptsz_slots, sizeof back, slot * sizeof back,
                                  cudaMemcpyDeviceToHost, 0);
  if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
  j->sum = 0;
  for (int k = 0; k < n && e == cudaSuccess; k++) j->sum += (long long)back[k] * (k + 1);
  int seven[256];
  for (int k = 0; k < n; k++) seven[k] = 7;
  if (e == cudaSuccess)
    e = cudaMemcpyToSymbol(ptsz_slots, seven, sizeof seven, slot * sizeof seven);
  if (e == cudaSuccess) e = cudaMemcpyFromSymbol(back, ptsz_slots, sizeof back, slot * sizeof back);
  if (e == cudaSuccess && back[255] != 7) e = cudaErrorUnknown;
  if (d != NULL) cudaFree(d);
  j->err = e;
  return NULL;
}

int main() {
  CHECK(cudaFree(0));
  struct job jobs[2] = {{0, 0, cudaSuccess}, {1, 0, cudaSuccess}};
  pthread_t t[2];
  for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, worker, &jobs[k]);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  for (int k = 0; k < 2; k++)
    printf("thread %d: %s weighted sum %lld\n", k, cudaGetErrorName(jobs[k].err), jobs[k].sum);
  ptsz_step<<<0, 1>>>(NULL, 0, 0);
  TC(cudaGetLastError());
  T(cudaStreamSynchronize(0));
  T(cudaDeviceSynchronize());
  printf("done\n");
  return 0;
}
