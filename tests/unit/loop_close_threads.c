/* cudaev_loop_close on thread-mode loops as a plain program (no Criterion),
 * so that it also runs under ThreadSanitizer: loops closed from their own
 * callback (the loop thread tears down and leaves, detached) and from
 * another thread while 4 threads complete promises on them. Every promise
 * completes once (cudaSuccess or CUDAEV_ERROR_LOOP_DESTROYED), each close
 * callback runs once. And waiters racing a destroy. Exit 0 = pass. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "cudaev.h"
#include "../check.h"

#define N 256

static atomic_int closed, calls, bad;

static void closed_cb(cudaev_loop_t *loop, void *u) { atomic_fetch_add(&closed, 1); }
static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  if (s != cudaSuccess && s != CUDAEV_ERROR_LOOP_DESTROYED) atomic_fetch_add(&bad, 1);
  atomic_fetch_add(&calls, 1);
}
static void close_cb_in(cudaev_future_t *f, cudaError_t s, void *u) {
  if (cudaev_loop_close(u, closed_cb, NULL) != cudaSuccess) atomic_fetch_add(&bad, 1);
}

struct setter {
  cudaev_future_t **fs;
  int from, to;
};
static void *set_range(void *arg) {
  struct setter *s = arg;
  for (int i = s->from; i < s->to; i++) cudaev_promise_set(s->fs[i], cudaSuccess);
  return NULL;
}

static void round_(int inside) {
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess);
  cudaev_future_t *fs[N], *trigger;
  for (int i = 0; i < N; i++) {
    cudaev_promise_new(loop, &fs[i]);
    cudaev_future_then(fs[i], count_cb, NULL);
  }
  cudaev_promise_new(loop, &trigger);
  if (inside) cudaev_future_then(trigger, close_cb_in, loop);
  pthread_t th[4];
  struct setter st[4];
  for (int t = 0; t < 4; t++) {
    st[t] = (struct setter){fs, t * N / 4, (t + 1) * N / 4};
    pthread_create(&th[t], NULL, set_range, &st[t]);
  }
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  int before = atomic_load(&closed);
  if (inside)
    cudaev_promise_set(trigger, cudaSuccess);
  else
    CHECK(cudaev_loop_close(loop, closed_cb, NULL) == cudaSuccess);
  for (int i = 0; i < 5000 && atomic_load(&closed) == before; i++) usleep(1000);
  CHECK(atomic_load(&closed) == before + 1);
  for (int i = 0; i < N; i++) {
    CHECK(cudaev_future_ready(fs[i]));
    cudaev_future_release(fs[i]);
  }
  cudaev_future_release(trigger);
}

/* A waiter racing the loop's destroy on another thread: it wakes with
 * CUDAEV_ERROR_LOOP_DESTROYED and never reads the freed loop. */
static void *waiter(void *arg) {
  cudaError_t e = cudaev_future_wait(arg, 10000000000LL);
  if (e != CUDAEV_ERROR_LOOP_DESTROYED) atomic_fetch_add(&bad, 1);
  return NULL;
}
static void wait_races_destroy(void) {
  for (int r = 0; r < 50; r++) {
    cudaev_loop_t *loop;
    CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess);
    cudaev_future_t *f;
    cudaev_promise_new(loop, &f);
    pthread_t th;
    pthread_create(&th, NULL, waiter, f);
    if (r & 1) usleep(100);
    cudaev_loop_destroy(loop);
    pthread_join(th, NULL);
    cudaev_future_release(f);
  }
}

int main(void) {
  wait_races_destroy();
  for (int r = 0; r < 20; r++) round_(r & 1);
  CHECK(atomic_load(&calls) == 20 * N);
  CHECK(atomic_load(&bad) == 0);
  if (failures) fprintf(stderr, "loop_close_threads: %d failures\n", failures);
  return failures != 0;
}
