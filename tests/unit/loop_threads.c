/* The loop core's concurrent paths as a plain program (no Criterion), so
 * that it also runs under ThreadSanitizer: Criterion's fork arena cannot
 * start under TSan (docs/design.md, Tests, names the upstream bug). Exit 0 = pass.
 * CUDAEV_TEST_FUTURES sets the number of futures of the 32-thread test
 * (default 64k; the unit suite's 10M: CUDAEV_TEST_FUTURES=10000000). */
#include <ev.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "cudaev.h"
#include "../check.h"

/* loop/loop_internal.h's allocator (hidden in the library, linked here). */
void *cudaev__alloc(size_t size);
void cudaev__free(void *p, size_t size);

#define THREADS 32

struct stress {
  cudaev_loop_t *loop;
  long per_thread;
  atomic_long callbacks, wins, bad;
};

struct item {
  atomic_int seen;
  struct stress *s;
};

static void stress_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  struct item *it = u;
  if (atomic_fetch_add(&it->seen, 1) != 0) atomic_fetch_add(&it->s->bad, 1);
  if (st != cudaSuccess && st != CUDAEV_ERROR_CANCELLED) atomic_fetch_add(&it->s->bad, 1);
  atomic_fetch_add(&it->s->callbacks, 1);
  free(it);
}

static void *stress_thread(void *arg) {
  struct stress *s = arg;
  for (long i = 0; i < s->per_thread; i++) {
    cudaev_future_t *f;
    if (cudaev_promise_new(s->loop, &f) != cudaSuccess) {
      atomic_fetch_add(&s->bad, 1);
      continue;
    }
    struct item *it = malloc(sizeof *it);
    atomic_init(&it->seen, 0);
    it->s = s;
    cudaev_future_then(f, stress_cb, it);
    int a, b;
    if (i & 1) {
      a = cudaev_promise_set(f, cudaSuccess) == cudaSuccess;
      b = cudaev_future_cancel(f);
    } else {
      b = cudaev_future_cancel(f);
      a = cudaev_promise_set(f, cudaSuccess) == cudaSuccess;
    }
    atomic_fetch_add(&s->wins, a + b);
    cudaev_future_release(f);
  }
  return NULL;
}

/* Half the completers are other threads than the creators: futures are
 * handed over through this ring. */
static void test_exactly_once(long total) {
  static struct stress s;
  CHECK(cudaev_loop_new_thread(&s.loop) == cudaSuccess);
  s.per_thread = total / THREADS;
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, stress_thread, &s);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  long want = s.per_thread * THREADS;
  CHECK(atomic_load(&s.wins) == want);
  for (int i = 0; i < 30000 && atomic_load(&s.callbacks) < want; i++) usleep(1000);
  CHECK(atomic_load(&s.callbacks) == want);
  CHECK(atomic_load(&s.bad) == 0);
  /* The count drops when the pass that ran the last callbacks ends. */
  for (int i = 0; i < 5000 && cudaev_loop_pending(s.loop) != 0; i++) usleep(1000);
  CHECK(cudaev_loop_pending(s.loop) == 0);
  cudaev_loop_destroy(s.loop);
}

/* then() from several threads racing completion from another. */
struct then_race {
  cudaev_future_t **fs;
  long n;
  atomic_long calls;
};
static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  atomic_fetch_add(&((struct then_race *)u)->calls, 1);
}
static void *then_thread(void *arg) {
  struct then_race *r = arg;
  for (long i = 0; i < r->n; i++) cudaev_future_then(r->fs[i], count_cb, r);
  return NULL;
}
static void *set_thread(void *arg) {
  struct then_race *r = arg;
  for (long i = 0; i < r->n; i++) cudaev_promise_set(r->fs[i], cudaSuccess);
  return NULL;
}
static void test_then_race(void) {
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess);
  struct then_race r = {.n = 5000};
  r.fs = calloc((size_t)r.n, sizeof *r.fs);
  for (long i = 0; i < r.n; i++) cudaev_promise_new(loop, &r.fs[i]);
  pthread_t a[3], b;
  for (int i = 0; i < 3; i++) pthread_create(&a[i], NULL, then_thread, &r);
  pthread_create(&b, NULL, set_thread, &r);
  for (int i = 0; i < 3; i++) pthread_join(a[i], NULL);
  pthread_join(b, NULL);
  for (int i = 0; i < 20000 && atomic_load(&r.calls) < 3 * r.n; i++) usleep(1000);
  CHECK(atomic_load(&r.calls) == 3 * r.n);
  for (long i = 0; i < r.n; i++) {
    CHECK(cudaev_future_wait(r.fs[i], -1) == cudaSuccess);
    cudaev_future_release(r.fs[i]);
  }
  free(r.fs);
  cudaev_loop_destroy(loop);
}

/* Combinators whose inputs complete on other threads. */
static void *set_all(void *arg) {
  cudaev_future_t **in = arg;
  for (int i = 0; i < 64; i++)
    cudaev_promise_set(in[i], i == 40 ? cudaErrorInvalidValue : cudaSuccess);
  return NULL;
}
static void test_combinators_threads(void) {
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess);
  cudaev_future_t *in[64], *all, *any;
  for (int i = 0; i < 64; i++) cudaev_promise_new(loop, &in[i]);
  CHECK(cudaev_future_new_all(loop, in, 64, &all) == cudaSuccess);
  CHECK(cudaev_future_new_any(loop, in, 64, &any) == cudaSuccess);
  pthread_t t;
  pthread_create(&t, NULL, set_all, in);
  CHECK(cudaev_future_wait(all, 5000000000LL) == cudaErrorInvalidValue);
  CHECK(cudaev_future_wait(any, 5000000000LL) == cudaSuccess);
  CHECK(cudaev_future_any_index(any) == 0);
  pthread_join(t, NULL);
  for (int i = 0; i < 64; i++) cudaev_future_release(in[i]);
  cudaev_future_release(all);
  cudaev_future_release(any);
  cudaev_loop_destroy(loop);
}

/* Waiters on many threads. */
static void *waiter(void *arg) { return (void *)(intptr_t)cudaev_future_wait(arg, 5000000000LL); }
static void test_waiters(void) {
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  pthread_t w[8];
  for (int i = 0; i < 8; i++) pthread_create(&w[i], NULL, waiter, f);
  usleep(20000);
  cudaev_promise_set(f, cudaErrorNotReady);
  for (int i = 0; i < 8; i++) {
    void *rv;
    pthread_join(w[i], &rv);
    CHECK((cudaError_t)(intptr_t)rv == cudaErrorNotReady);
  }
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

/* Foreign mode driven by raw epoll while other threads submit. */
struct feed {
  cudaev_loop_t *loop;
  atomic_long done;
};
static void feed_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  atomic_fetch_add(&((struct feed *)u)->done, 1);
}
static void *feeder(void *arg) {
  struct feed *fd = arg;
  for (int i = 0; i < 2000; i++) {
    cudaev_future_t *f;
    cudaev_promise_new(fd->loop, &f);
    cudaev_future_then(f, feed_cb, fd);
    cudaev_promise_set(f, cudaSuccess);
    cudaev_future_release(f);
  }
  return NULL;
}
static void test_foreign_epoll(void) {
  struct feed fd = {0};
  CHECK(cudaev_loop_new_foreign(&fd.loop) == cudaSuccess);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, cudaev_loop_fd(fd.loop), &ev);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, feeder, &fd);
  for (int spins = 0; atomic_load(&fd.done) < 8000 && spins < 100000; spins++) {
    int to = cudaev_loop_prepare(fd.loop);
    struct epoll_event got;
    epoll_wait(ep, &got, 1, to < 0 || to > 100 ? 100 : to);
    cudaev_loop_process(fd.loop);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK(atomic_load(&fd.done) == 8000);
  close(ep);
  cudaev_loop_destroy(fd.loop);
}

/* Attached to a libev loop run by this thread, submissions from others. */
static void stop_when_done(struct ev_loop *evl, ev_timer *w, int revents) {
  if (atomic_load(&((struct feed *)w->data)->done) >= 8000) ev_break(evl, EVBREAK_ALL);
}
static void test_ev(void) {
  struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);
  struct feed fd = {0};
  CHECK(cudaev_loop_new_ev(evl, &fd.loop) == cudaSuccess);
  ev_timer tm;
  ev_timer_init(&tm, stop_when_done, 0.001, 0.001);
  tm.data = &fd;
  ev_timer_start(evl, &tm);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, feeder, &fd);
  ev_run(evl, 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK(atomic_load(&fd.done) == 8000);
  ev_timer_stop(evl, &tm);
  cudaev_loop_destroy(fd.loop);
  ev_loop_destroy(evl);
}

/* Destroy while other threads' futures are pending. */
static void test_destroy_pending(void) {
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess);
  struct feed fd = {.loop = loop};
  cudaev_future_t *f[200];
  for (int i = 0; i < 200; i++) {
    cudaev_promise_new(loop, &f[i]);
    cudaev_future_then(f[i], feed_cb, &fd);
  }
  cudaev_loop_destroy(loop);
  CHECK(atomic_load(&fd.done) == 200);
  for (int i = 0; i < 200; i++) {
    CHECK(cudaev_future_result(f[i]) == CUDAEV_ERROR_LOOP_DESTROYED);
    CHECK(cudaev_promise_set(f[i], cudaSuccess) == cudaErrorIllegalState);
    cudaev_future_release(f[i]);
  }
}

/* cudaev_loop_pending from several threads while the loop's thread takes
 * their futures in: each thread's own promise, not yet set, is always in
 * the count (the pass that takes it in subtracts it from the queued count
 * only after publishing its own). */
struct pending_race {
  cudaev_loop_t *loop;
  atomic_long misses;
};
static void *pending_thread(void *arg) {
  struct pending_race *r = arg;
  for (int i = 0; i < 20000; i++) {
    cudaev_future_t *p;
    if (cudaev_promise_new(r->loop, &p) != cudaSuccess) {
      atomic_fetch_add(&r->misses, 1);
      continue;
    }
    for (int k = 0; k < 4; k++)
      if (cudaev_loop_pending(r->loop) < 1) atomic_fetch_add(&r->misses, 1);
    cudaev_promise_set(p, cudaSuccess);
    cudaev_future_release(p);
  }
  return NULL;
}
static void test_pending_race(void) {
  struct pending_race r = {0};
  CHECK(cudaev_loop_new_thread(&r.loop) == cudaSuccess);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, pending_thread, &r);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  CHECK(atomic_load(&r.misses) == 0);
  for (int i = 0; i < 5000 && cudaev_loop_pending(r.loop) != 0; i++) usleep(1000);
  CHECK(cudaev_loop_pending(r.loop) == 0);
  cudaev_loop_destroy(r.loop);
}

/* Objects a thread keeps for reuse go back to malloc when it exits: 16
 * threads each fill their lists with 4,000 objects and exit; malloc's
 * bytes in use return to where they were (within 64 KiB). */
static void *fill_and_exit(void *arg) {
  (void)arg;
  enum { N = 4000 };
  void **p = malloc(N * sizeof *p);
  for (int i = 0; i < N; i++) p[i] = cudaev__alloc(128);
  for (int i = 0; i < N; i++) cudaev__free(p[i], 128);
  free(p);
  return NULL;
}

static void test_thread_exit_returns_lists(void) {
  size_t before = mallinfo2().uordblks;
  for (int round = 0; round < 4; round++) {
    pthread_t th[16];
    for (int i = 0; i < 16; i++) pthread_create(&th[i], NULL, fill_and_exit, NULL);
    for (int i = 0; i < 16; i++) pthread_join(th[i], NULL);
  }
  size_t after = mallinfo2().uordblks;
  CHECK(after < before + 65536);
  if (after >= before + 65536)
    fprintf(stderr, "thread exit: %zu bytes still in use (of 4 x 16 x 4000 x 144)\n",
            after - before);
}

int main(void) {
  const char *e = getenv("CUDAEV_TEST_FUTURES");
  long total = e ? atol(e) : 65536;
  test_thread_exit_returns_lists();
  test_exactly_once(total);
  test_then_race();
  test_combinators_threads();
  test_waiters();
  test_foreign_epoll();
  test_ev();
  test_destroy_pending();
  test_pending_race();
  printf("%s (%ld futures in the 32-thread test)\n", failures ? "FAIL" : "PASS", total);
  return failures ? 1 : 0;
}
