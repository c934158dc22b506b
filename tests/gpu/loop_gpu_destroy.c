/* GPU test of loop destroy racing the threads that wait on its GPU
 * futures (each waiter reads the completion word or queries the pooled
 * event itself) and the continuations that submit again while destroy
 * fails their futures: every wait ends with success or
 * CUDAEV_ERROR_LOOP_DESTROYED, every submission made by such a
 * continuation succeeds or is refused with CUDAEV_ERROR_LOOP_DESTROYED,
 * and nothing crashes (on the real driver a query of a destroyed event, or
 * a read of freed pinned memory, would). Then cudaev_loop_stats on real
 * completions: the counter, words + events, and the histogram agree.
 * Linked with our libcudart.so.13 directly. Exit 0 pass, 1 fail, 77
 * skipped (no GPU). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "../../bench/loop_common.h"
#include "../check.h"

enum { ROUNDS = 50, FUTURES = 16, WAITERS = 4 };

static CUstream streams[2];
static atomic_int bad_wait, bad_submit, refused;

struct waiter {
  pthread_t th;
  cudaev_future_t *f[FUTURES / WAITERS];
};
static void *wait_main(void *arg) {
  struct waiter *w = arg;
  for (int i = 0; i < FUTURES / WAITERS; i++) {
    cudaError_t e = cudaev_future_wait(w->f[i], -1);
    if (e != cudaSuccess && e != CUDAEV_ERROR_LOOP_DESTROYED) atomic_fetch_add(&bad_wait, 1);
  }
  return NULL;
}

static void resubmit_cb(cudaev_future_t *f, cudaError_t s, void *user) {
  (void)s;
  cudaev_future_t *g = NULL;
  cudaError_t e = cudaev_future_new_stream(cudaev_future_loop(f), (cudaStream_t)user, &g);
  if (e == cudaSuccess && g != NULL)
    cudaev_future_release(g);
  else if (e == CUDAEV_ERROR_LOOP_DESTROYED && g == NULL)
    atomic_fetch_add(&refused, 1);
  else
    atomic_fetch_add(&bad_submit, 1);
}

static void round_once(unsigned r) {
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  cudaev_future_t *f[FUTURES];
  for (int i = 0; i < FUTURES; i++) {
    CUstream s = streams[i % 2];
    /* 20-400 us of work before each marker: words first, then events
     * behind the futures outstanding on the stream. */
    lc_spin_on(s, 20000ull + (r * 7919u + (unsigned)i * 104729u) % 380000u);
    LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)s, &f[i]));
    if (i % 4 == 0) LC_RT(cudaev_future_then(f[i], resubmit_cb, s));
  }
  struct waiter w[WAITERS];
  for (int k = 0; k < WAITERS; k++) {
    for (int i = 0; i < FUTURES / WAITERS; i++) w[k].f[i] = f[k + i * WAITERS];
    pthread_create(&w[k].th, NULL, wait_main, &w[k]);
  }
  usleep(r % 8 * 150); /* destroy at different points of the waits */
  cudaev_loop_destroy(loop);
  for (int k = 0; k < WAITERS; k++) pthread_join(w[k].th, NULL);
  for (int i = 0; i < FUTURES; i++) {
    CHECK(cudaev_future_ready(f[i]));
    cudaev_future_release(f[i]);
  }
}

static void stats(void) {
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  enum { N = 200 };
  cudaev_future_t *f[N];
  for (int i = 0; i < N; i++) {
    lc_spin_on(streams[i % 2], 10000);
    LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)streams[i % 2], &f[i]));
  }
  cudaev_future_t *all;
  LC_RT(cudaev_future_new_all(loop, f, N, &all));
  CHECK(cudaev_future_wait(all, 10000000000LL) == cudaSuccess);
  struct cudaev_loop_stats st;
  /* The last completions are counted at the end of their pass. */
  for (int i = 0; i < 1000; i++) {
    LC_RT(cudaev_loop_stats(loop, &st, sizeof st));
    if (st.gpu_completions == N) break;
    usleep(1000);
  }
  uint64_t hist = 0;
  for (int i = 0; i < CUDAEV_LOOP_LATENCY_BUCKETS; i++) hist += st.gpu_latency_log2_ns[i];
  printf(
      "stats: %llu GPU completions (%llu words, %llu events), histogram %llu, %llu wakeups "
      "armed, %llu ns spun\n",
      (unsigned long long)st.gpu_completions, (unsigned long long)st.gpu_word_markers,
      (unsigned long long)st.gpu_event_markers, (unsigned long long)hist,
      (unsigned long long)st.gpu_wakeups_armed, (unsigned long long)st.spin_ns);
  CHECK(st.gpu_completions == N);
  CHECK(st.gpu_word_markers + st.gpu_event_markers == N);
  CHECK(hist == N);
  CHECK(st.gpu_failed == 0);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_future_release(all);
  cudaev_loop_destroy(loop);
}

int main(void) {
  if (access("/dev/nvidia0", F_OK) != 0) {
    printf("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)\n");
    return 77;
  }
  cudaev_loop_t *first;
  LC_RT(cudaev_loop_new_thread(&first)); /* makes the context current for lc_init */
  lc_init();
  for (int i = 0; i < 2; i++) LC_CU(d_cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
  for (unsigned r = 0; r < ROUNDS; r++) round_once(r);
  printf("destroy racing waiters: %d rounds, %d resubmissions refused during destroy\n", ROUNDS,
         atomic_load(&refused));
  CHECK(atomic_load(&bad_wait) == 0);
  CHECK(atomic_load(&bad_submit) == 0);
  stats();
  for (int i = 0; i < 2; i++) {
    LC_CU(d_cuStreamSynchronize(streams[i]));
    LC_CU(d_cuStreamDestroy(streams[i]));
  }
  cudaev_loop_destroy(first);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
