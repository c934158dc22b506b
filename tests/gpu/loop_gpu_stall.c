/* GPU test of the stall monitor (loop/stall.c): a loop-thread host function
 * queued on a foreign loop that nobody drives holds its stream at the gate,
 * and another thread that synchronizes (cudaMallocHost, then
 * cudaDeviceSynchronize) waits for it. Checks that the log hook gets one
 * CUDAEV_LOG_WARN message naming the stream within the threshold
 * (CUDAEV_HOSTFN_STALL_MS=200, set here) plus a margin, that the other
 * thread is still waiting then, and that once the loop is driven the host
 * function runs, the other thread returns, and no second message comes.
 * Never hangs: the loop is driven after 10 s whether the message came or
 * not, and a thread that does not return within 10 s after that fails the
 * test (_exit, the thread left behind). Linked with our libcudart.so.13.
 * Exit 0 pass, 1 fail, 77 skipped (no GPU). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../check.h"
#include "cudaev.h"

/* A call that must succeed for the test to go on. */
#define RT(expr)                                                                                 \
  do {                                                                                           \
    cudaError_t rt_e_ = (expr);                                                                  \
    if (rt_e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, cudaev_error_name(rt_e_)); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int nmsg, nwarn;
static char first[512];

static void hook(int level, const char *msg, void *user) {
  (void)user;
  pthread_mutex_lock(&log_mu);
  if (nmsg++ == 0) snprintf(first, sizeof first, "%s", msg);
  if (level == CUDAEV_LOG_WARN) nwarn++;
  pthread_mutex_unlock(&log_mu);
}
static int messages(void) {
  pthread_mutex_lock(&log_mu);
  int n = nmsg;
  pthread_mutex_unlock(&log_mu);
  return n;
}

static atomic_int fn_ran;
static cudaError_t host_fn(void *u) {
  (void)u;
  atomic_store(&fn_ran, 1);
  return cudaSuccess;
}

/* The other thread: what an application's worker would do meanwhile. */
static atomic_uint_fast64_t malloc_done_ns, sync_done_ns;
static atomic_int sync_result = -1;
static void *other_main(void *arg) {
  (void)arg;
  void *p = NULL;
  cudaError_t e = cudaMallocHost(&p, 1 << 20);
  atomic_store(&malloc_done_ns, now_ns());
  if (e == cudaSuccess) cudaFreeHost(p);
  atomic_store(&sync_result, (int)cudaDeviceSynchronize());
  atomic_store(&sync_done_ns, now_ns());
  return NULL;
}

int main(void) {
  if (access("/dev/nvidia0", F_OK) != 0) {
    printf("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)\n");
    return 77;
  }
  setenv("CUDAEV_HOSTFN_STALL_MS", "200", 1);
  cudaev_log_set(hook, NULL);
  cudaev_loop_t *loop;
  RT(cudaev_loop_new_foreign(&loop));
  cudaStream_t s;
  RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  RT(cudaDeviceSynchronize()); /* nothing pending but the gate, below */

  uint64_t t0 = now_ns();
  cudaev_future_t *f;
  RT(cudaev_launch_host_func_async(loop, s, host_fn, NULL, &f));
  pthread_t other;
  CHECK(pthread_create(&other, NULL, other_main, NULL) == 0);

  /* Nobody drives the loop: the message must come. */
  while (messages() == 0 && now_ns() - t0 < 10000000000ull) usleep(1000);
  uint64_t t_msg = now_ns();
  int n = messages();
  CHECK(n == 1);
  char want[64];
  snprintf(want, sizeof want, "on stream %#llx ", (unsigned long long)(uintptr_t)s);
  pthread_mutex_lock(&log_mu);
  printf("message after %.0f ms: %s\n", (double)(t_msg - t0) / 1e6, n ? first : "(none)");
  CHECK(n == 0 || strstr(first, want) != NULL);
  CHECK(n == 0 || strstr(first, "has not run a pass for") != NULL);
  CHECK(nwarn == nmsg);
  pthread_mutex_unlock(&log_mu);
  /* 200 ms threshold, looks every 50 ms: well inside 2 s. */
  CHECK(n == 0 || t_msg - t0 < 2000000000ull);
  CHECK(atomic_load(&fn_ran) == 0);
  uint64_t m = atomic_load(&malloc_done_ns);
  printf("cudaMallocHost on the other thread: %s\n",
         m ? "returned while the gate was closed (served without a device synchronization)"
           : "waiting for the gate");
  CHECK(atomic_load(&sync_done_ns) == 0); /* cudaDeviceSynchronize waits for the gate */

  /* Drive the loop: the host function runs, the stream and the other
   * thread go on. */
  uint64_t t_drive = now_ns();
  while (!cudaev_future_ready(f) && now_ns() - t_drive < 10000000000ull) {
    cudaev_loop_process(loop);
    usleep(100);
  }
  CHECK(cudaev_future_ready(f) && cudaev_future_result(f) == cudaSuccess);
  CHECK(atomic_load(&fn_ran) == 1);
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += 10;
  if (pthread_timedjoin_np(other, NULL, &dl) != 0) {
    fprintf(stderr, "the other thread still waits 10 s after the loop was driven\nFAIL\n");
    fflush(stdout);
    _exit(1);
  }
  CHECK(atomic_load(&sync_result) == cudaSuccess);
  CHECK(atomic_load(&sync_done_ns) >= t_drive);
  printf("cudaDeviceSynchronize returned %.1f ms after the loop was driven\n",
         (double)(atomic_load(&sync_done_ns) - t_drive) / 1e6);
  usleep(500000);
  CHECK(messages() == 1); /* once per stall */
  cudaev_future_release(f);
  RT(cudaStreamDestroy(s));
  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) > 0; i++) {
    cudaev_loop_process(loop);
    usleep(1000);
  }
  CHECK(cudaev_loop_pending(loop) == 0);
  cudaev_loop_destroy(loop);
  cudaev_log_set(NULL, NULL);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
