/* The timer source's concurrent paths as a plain program (no Criterion), so
 * that it also runs under ThreadSanitizer: 8 threads make timers and
 * deadlines on one thread-mode loop, cancel a third of the timers while
 * the loop may be firing them, and wait; every continuation runs once,
 * every outcome is one of the allowed, and nothing stays pending. Exit 0 =
 * pass. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cudaev.h"
#include "../check.h"

#define THREADS 8
#define PER     2000

static cudaev_loop_t *loop;
static atomic_long calls, bad;

static void once_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  atomic_int *seen = u;
  if (atomic_fetch_add(seen, 1) != 0) atomic_fetch_add(&bad, 1);
  atomic_fetch_add(&calls, 1);
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  static _Thread_local atomic_int seen[2 * PER];
  cudaev_future_t *t[PER], *g[PER], *p[PER];
  for (int i = 0; i < PER; i++) {
    atomic_init(&seen[2 * i], 0);
    atomic_init(&seen[2 * i + 1], 0);
    /* 0..2 ms: many fire while others are cancelled. */
    if (cudaev_future_new_timer(loop, (uint64_t)(rand_r(&seed) % 2000) * 1000, &t[i]) != cudaSuccess)
      atomic_fetch_add(&bad, 1);
    cudaev_future_then(t[i], once_cb, &seen[2 * i]);
    cudaev_promise_new(loop, &p[i]);
    cudaev_future_new_timeout(p[i], (uint64_t)(rand_r(&seed) % 2000) * 1000, &g[i]);
    cudaev_future_then(g[i], once_cb, &seen[2 * i + 1]);
    if (i % 3 == 0) cudaev_future_cancel(t[i]);
    if (i % 2 == 0) cudaev_promise_set(p[i], cudaErrorInvalidValue);
  }
  for (int i = 0; i < PER; i++) {
    cudaError_t a = cudaev_future_wait(t[i], 10000000000LL);
    CHECK(a == cudaSuccess || a == CUDAEV_ERROR_CANCELLED);
    cudaError_t b = cudaev_future_wait(g[i], 10000000000LL);
    CHECK(b == CUDAEV_ERROR_TIMEOUT || b == cudaErrorInvalidValue);
    if (i % 2 != 0) CHECK(b == CUDAEV_ERROR_TIMEOUT);
    cudaev_promise_set(p[i], cudaSuccess);
    cudaev_future_release(t[i]);
    cudaev_future_release(g[i]);
    cudaev_future_release(p[i]);
  }
  /* The continuations may still be on their way: wait for ours. */
  for (int i = 0; i < 10000; i++) {
    int all = 1;
    for (int j = 0; j < 2 * PER && all; j++) all = atomic_load(&seen[j]) == 1;
    if (all) break;
    usleep(1000);
  }
  for (int j = 0; j < 2 * PER; j++) CHECK(atomic_load(&seen[j]) == 1);
  return NULL;
}

int main(void) {
  if (cudaev_loop_new_thread(&loop) != cudaSuccess) {
    fprintf(stderr, "no loop\n");
    return 1;
  }
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  CHECK(atomic_load(&calls) == 2L * THREADS * PER);
  CHECK(atomic_load(&bad) == 0);
  for (int i = 0; i < 5000 && cudaev_loop_pending(loop) != 0; i++) usleep(1000);
  CHECK(cudaev_loop_pending(loop) == 0);
  cudaev_loop_destroy(loop);
  if (failures) fprintf(stderr, "loop_timer_threads: %d failures\n", failures);
  return failures != 0;
}
