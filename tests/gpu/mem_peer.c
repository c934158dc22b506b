/* gpu suite, Peer Device Memory Access and peer copies, written for any
 * number of GPUs: cudaDeviceCanAccessPeer for every pair (and bad
 * ordinals), enabling and disabling access (twice, to itself, with bad
 * flags), cudaMemcpyPeer / cudaMemcpyPeerAsync between every pair (a
 * device with itself on one GPU) with odd sizes, and bad devices. */
#include "common.h"

#include <stdint.h>

#define SIZE 100003

static uint32_t sum(const void *p, size_t n) {
  const unsigned char *b = p;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

int main(void) {
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  int can = -1;
  TC(cudaDeviceCanAccessPeer(NULL, 0, 0));
  TC(cudaDeviceCanAccessPeer(&can, -1, 0));
  TC(cudaDeviceCanAccessPeer(&can, 0, n));
  TC(cudaDeviceCanAccessPeer(&can, 0, 0));
  printf("can access self: %d\n", can);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      can = -1;
      cudaError_t e = cudaDeviceCanAccessPeer(&can, a, b);
      printf("can %d->%d: %d %s\n", a, b, can, cudaGetErrorName(e));
    }
  cudaGetLastError();

  TC(cudaDeviceEnablePeerAccess(0, 0));
  TC(cudaDeviceEnablePeerAccess(n, 0));
  TC(cudaDeviceEnablePeerAccess(-1, 0));
  TC(cudaDeviceDisablePeerAccess(0));
  TC(cudaDeviceDisablePeerAccess(n));
  if (n > 1) {
    TC(cudaDeviceEnablePeerAccess(1, 1));
    TC(cudaDeviceDisablePeerAccess(1));
    TC(cudaDeviceEnablePeerAccess(1, 0));
    TC(cudaDeviceEnablePeerAccess(1, 0));
    TC(cudaDeviceDisablePeerAccess(1));
    TC(cudaDeviceDisablePeerAccess(1));
    TC(cudaSetDevice(1));
    TC(cudaDeviceEnablePeerAccess(0, 0));
    TC(cudaSetDevice(0));
  }

  unsigned char *h = malloc(SIZE), *back = malloc(SIZE);
  for (size_t i = 0; i < SIZE; i++) h[i] = (unsigned char)(i * 31 + 7);
  /* d[i]: the data; x[i]: a second buffer on device i that the copies
   * go through, so no copy has overlapping source and destination (the
   * result of an overlapping copy is undefined, and did differ between
   * NVIDIA's runtime and ours for a device with itself). */
  void **d = calloc((size_t)n, sizeof *d), **x = calloc((size_t)n, sizeof *x);
  for (int i = 0; i < n; i++) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaMalloc(&d[i], SIZE + 16));
    CHECK(cudaMemset(d[i], 0, SIZE + 16));
    CHECK(cudaMalloc(&x[i], SIZE + 16));
    CHECK(cudaMemset(x[i], 0, SIZE + 16));
  }
  CHECK(cudaSetDevice(0));
  CHECK(cudaMemcpy(d[0], h, SIZE, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b && n > 1) continue;
      size_t len = SIZE - 3 - (size_t)(a + b);
      cudaError_t e1 = cudaMemcpyPeer((char *)x[b] + 1, b, d[a], a, len);
      cudaError_t e2 = cudaMemcpyPeerAsync((char *)d[a] + 2, a, (char *)x[b] + 1, b, len, s);
      cudaError_t e3 = cudaStreamSynchronize(s);
      memset(back, 0, SIZE);
      cudaError_t e4 = cudaMemcpy(back, d[a], SIZE, cudaMemcpyDefault);
      printf("peer %d<->%d: %s %s %s %s sum=%08x\n", a, b, cudaGetErrorName(e1),
             cudaGetErrorName(e2), cudaGetErrorName(e3), cudaGetErrorName(e4), sum(back, SIZE));
    }
  TC(cudaMemcpyPeer(d[0], n, d[0], 0, 16));
  TC(cudaMemcpyPeer(d[0], 0, d[0], -1, 16));
  TC(cudaMemcpyPeer(d[0], 0, d[0], 0, 0));
  TC(cudaMemcpyPeer(d[0], n, d[0], 0, 0));
  TC(cudaMemcpyPeer(NULL, 0, d[0], 0, 16));
  TC(cudaMemcpyPeer(d[0], 0, d[0], 0, SIZE + 17));
  TC(cudaMemcpyPeer(h, 0, d[0], 0, 16));
  TC(cudaMemcpyPeerAsync(d[0], 0, d[0], n, 16, s));
  TC(cudaMemcpyPeerAsync(d[0], 0, d[0], n, 0, s));
  TC(cudaMemcpyPeerAsync(d[0], 0, d[0], 0, 16, cudaStreamPerThread));
  TC(cudaStreamSynchronize(s));
  TC(cudaStreamDestroy(s));
  for (int i = 0; i < n; i++) TC(cudaFree(d[i]));
  for (int i = 0; i < n; i++) TC(cudaFree(x[i]));
  free(d);
  free(x);
  free(h);
  free(back);
  return 0;
}
