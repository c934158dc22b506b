// async_pipeline: a single-threaded libev program that keeps many GPU
// requests in flight without blocking and without burning a core.
//
// Each "request" is a chain of futures on its own stream:
//   H2D copy -> kernel -> D2H copy -> loop-thread host function -> then()
// while an ev_timer keeps ticking on the same loop, proving the loop never
// blocks on the GPU. The host function runs on the loop thread while its
// stream waits for it: it checks the copied-back data and may call CUDA to
// enqueue more work (here: clearing the device buffer on the same stream,
// which runs after it returns). It must not make a call that waits for the
// GPU (a synchronous copy, cudaMalloc, a stream or device synchronize):
// the GPU is waiting for it. For the same reason everything is allocated
// before the first request is submitted. Built with `nvcc -cudart shared` against cudaev's
// libcudart.so.13 (cudaev_* is our API; NVIDIA's library does not have it).
#include <cuda_runtime_api.h>
#include <ev.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "cudaev.h"

#define MAX_REQUESTS 1024
#define N            (1 << 16)

// async_pipeline [REQUESTS [MODE]]: MODE 0 = the full chain (default),
// 1 = no loop-thread host function, 2 = a host function that makes no CUDA
// call. A watchdog ends a run that takes over 20 s with exit code 3.
static int requests = 64, mode = 0;

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
  int good = 1;
  for (int i = 0; good && i < N; i++) good = r->host[i] == (float)(i % 97) * 2.0f + 1.0f;
  r->ok = good;
  if (mode == 2) return cudaSuccess;
  return cudaMemsetAsync(r->dev, 0, N * sizeof(float), r->stream);
}

static void finished(cudaev_future_t *f, cudaError_t status, void *user) {
  struct request *r = (struct request *)user;
  int good = status == cudaSuccess && r->ok;
  done++;
  failed += !good;
  // A future's status may be one of cudaev's own outcomes (CUDAEV_ERROR_*),
  // which cudaGetErrorName does not know: cudaev_error_name names both.
  if (status != cudaSuccess && failed == 1)
    printf("request %d: %s (%s)\n", r->id, cudaev_error_name(status), cudaev_error_string(status));
  cudaev_future_release(f);
  if (done == requests) ev_break(EV_DEFAULT, EVBREAK_ALL);
}

static void tick(struct ev_loop *evl, ev_timer *t, int revents) {
  (void)evl, (void)t, (void)revents;
  ticks++;
}

// Returns what the failed submission returned, else cudaSuccess.
static cudaError_t submit(struct request *r) {
  cudaev_future_t *f[3];
  float k = 2.0f;
  int n = N;
  void *args[] = {&r->dev, &n, &k};
  cudaError_t e;
  if ((e = cudaev_memcpy_async(loop, r->dev, r->host, N * sizeof(float), cudaMemcpyHostToDevice,
                               r->stream, &f[0])) != cudaSuccess)
    return e;
  if ((e = cudaev_launch_kernel_async(loop, (const void *)scale, dim3((N + 255) / 256), dim3(256),
                                      args, 0, r->stream, &f[1])) != cudaSuccess)
    return e;
  if ((e = cudaev_memcpy_async(loop, r->host, r->dev, N * sizeof(float), cudaMemcpyDeviceToHost,
                               r->stream, &f[2])) != cudaSuccess)
    return e;
  for (int i = 0; i < 2; i++) cudaev_future_release(f[i]);  // the chain's end says it all
  cudaev_future_t *last = f[2];
  if (mode == 1) {
    r->ok = 1;
  } else {
    cudaev_future_release(f[2]);
    if ((e = cudaev_launch_host_func_async(loop, r->stream, verify, r, &last)) != cudaSuccess) return e;
  }
  return cudaev_future_then(last, finished, r);
}

static void on_alarm(int sig) {
  (void)sig;
  char msg[96];
  int n = snprintf(msg, sizeof msg, "async_pipeline: stuck: %d of %d requests done, %d ticks\n",
                   done, requests, ticks);
  (void)!write(2, msg, (size_t)n);
  _exit(3);
}

int main(int argc, char **argv) {
  if (argc > 1) requests = atoi(argv[1]);
  if (argc > 2) mode = atoi(argv[2]);
  if (requests < 1 || requests > MAX_REQUESTS) requests = 64;
  signal(SIGALRM, on_alarm);
  alarm(20);
  struct ev_loop *evl = EV_DEFAULT;
  cudaError_t e = cudaev_loop_new_ev(evl, &loop);
  if (e != cudaSuccess) {
    printf("no GPU loop: %s (%s)\n", cudaev_error_name(e), cudaev_error_string(e));
    return 1;
  }
  static struct request req[MAX_REQUESTS];
  for (int i = 0; i < requests; i++) {
    struct request *r = &req[i];
    r->id = i;
    if (cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMallocHost(&r->host, N * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&r->dev, N * sizeof(float)) != cudaSuccess) {
      printf("allocation failed: %s\n", cudaGetErrorName(cudaGetLastError()));
      return 1;
    }
    for (int j = 0; j < N; j++) r->host[j] = (float)(j % 97);
  }
  for (int i = 0; i < requests; i++) {
    if ((e = submit(&req[i])) != cudaSuccess) {
      printf("submit failed: %s (%s)\n", cudaev_error_name(e), cudaev_error_string(e));
      return 1;
    }
  }
  ev_timer timer;
  ev_timer_init(&timer, tick, 0.0001, 0.0001);
  ev_timer_start(evl, &timer);
  ev_run(evl, 0);
  ev_timer_stop(evl, &timer);
  printf("%d requests done, %d failed; the loop ticked %d times meanwhile\n", done, failed, ticks);
  for (int i = 0; i < requests; i++) {
    cudaStreamDestroy(req[i].stream);
    cudaFreeHost(req[i].host);
    cudaFree(req[i].dev);
  }
  cudaev_loop_destroy(loop);
  return failed != 0 || done != requests;
}
