// async_pipeline: a single-threaded libev program that keeps many GPU
// requests in flight without blocking and without burning a core.
//
// Each "request" is a chain of futures on its own stream:
//   H2D copy -> kernel -> D2H copy -> loop-thread host function (which may
//   call CUDA: here it checks the result with cudaMemcpy) -> then() callback
// while an ev_timer keeps ticking on the same loop, proving the loop never
// blocks on the GPU. Built with `nvcc -cudart shared` against cudaev's
// libcudart.so.13 (cudaev_* is our API; NVIDIA's library does not have it).
#include <cuda_runtime_api.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>

#include "cudaev.h"

#define REQUESTS 64
#define N (1 << 16)

__global__ void scale(float *x, int n, float k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * k + 1.0f;
}

struct request {
  int id;
  cudaStream_t stream;
  float *host, *dev;
  int ok;
};

static int done, failed, ticks;
static cudaev_loop_t *loop;

// Runs on the loop thread when the stream reaches it; CUDA calls allowed.
static cudaError_t verify(void *user) {
  struct request *r = (struct request *)user;
  float first = 0;
  cudaError_t e = cudaMemcpy(&first, r->dev, sizeof first, cudaMemcpyDeviceToHost);
  r->ok = e == cudaSuccess && first == r->host[0];
  return e;
}

static void finished(cudaev_future_t *f, cudaError_t status, void *user) {
  struct request *r = (struct request *)user;
  int good = status == cudaSuccess && r->ok;
  for (int i = 0; good && i < N; i++) good = r->host[i] == (float)(i % 97) * 2.0f + 1.0f;
  done++;
  failed += !good;
  cudaev_future_release(f);
  if (done == REQUESTS) ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static void tick(struct ev_loop *evl, ev_timer *t, int revents) {
  (void)evl, (void)t, (void)revents;
  ticks++;
}

static int submit(struct request *r) {
  cudaev_future_t *f[3];
  float k = 2.0f;
  int n = N;
  void *args[] = {&r->dev, &n, &k};
  if (cudaev_memcpy_async(loop, r->dev, r->host, N * sizeof(float), cudaMemcpyHostToDevice,
                          r->stream, &f[0]) != cudaSuccess ||
      cudaev_launch_kernel_async(loop, (const void *)scale, dim3((N + 255) / 256), dim3(256),
                                 args, 0, r->stream, &f[1]) != cudaSuccess ||
      cudaev_memcpy_async(loop, r->host, r->dev, N * sizeof(float), cudaMemcpyDeviceToHost,
                          r->stream, &f[2]) != cudaSuccess)
    return -1;
  for (int i = 0; i < 3; i++) cudaev_future_release(f[i]);  // the chain's end says it all
  cudaev_future_t *last;
  if (cudaev_host_func(loop, r->stream, verify, r, &last) != cudaSuccess) return -1;
  return cudaev_future_then(last, finished, r) == cudaSuccess ? 0 : -1;
}

int main(void) {
  struct ev_loop *evl = EV_DEFAULT;
  cudaError_t e = cudaev_loop_new_ev(evl, &loop);
  if (e != cudaSuccess) {
    printf("no GPU loop: %s\n", cudaGetErrorName(e));
    return 1;
  }
  static struct request req[REQUESTS];
  for (int i = 0; i < REQUESTS; i++) {
    struct request *r = &req[i];
    r->id = i;
    if (cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMallocHost(&r->host, N * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&r->dev, N * sizeof(float)) != cudaSuccess) {
      printf("allocation failed: %s\n", cudaGetErrorName(cudaGetLastError()));
      return 1;
    }
    for (int j = 0; j < N; j++) r->host[j] = (float)(j % 97);
    if (submit(r) != 0) {
      printf("submit failed: %s\n", cudaGetErrorName(cudaGetLastError()));
      return 1;
    }
  }
  ev_timer timer;
  ev_timer_init(&timer, tick, 0.0001, 0.0001);
  ev_timer_start(evl, &timer);
  ev_run(evl, 0);
  ev_timer_stop(evl, &timer);
  printf("%d requests done, %d failed; the loop ticked %d times meanwhile\n", done, failed, ticks > 0 ? ticks : 0);
  for (int i = 0; i < REQUESTS; i++) {
    cudaStreamDestroy(req[i].stream);
    cudaFreeHost(req[i].host);
    cudaFree(req[i].dev);
  }
  cudaev_loop_destroy(loop);
  return failed != 0 || done != REQUESTS;
}
