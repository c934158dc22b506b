/* The timer source (loop/timer.c): cudaev_future_new_timer and
 * cudaev_future_new_timeout in the three run modes, deadline order, cancel,
 * destroy, and spurious cudaev_loop_process calls. CPU only. */
#include <criterion/criterion.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "cudaev.h"
#include "told_deadline.h"

#define MS 1000000ull

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void flag_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  atomic_store((atomic_int *)u, 1);
}

/* Drives a foreign loop with epoll, honouring cudaev_loop_prepare, until
 * *flag is set. */
static void drive_epoll(cudaev_loop_t *loop, atomic_int *flag) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  cr_assert(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN};
  cr_assert(epoll_ctl(ep, EPOLL_CTL_ADD, cudaev_loop_fd(loop), &ev) == 0);
  while (!atomic_load(flag)) {
    int t = cudaev_loop_prepare(loop);
    struct epoll_event got;
    epoll_wait(ep, &got, 1, t < 0 || t > 1000 ? 1000 : t);
    cudaev_loop_process(loop);
  }
  close(ep);
}

Test(loop_timer, thread_mode_not_early) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  uint64_t t0 = now_ns();
  cudaev_future_t *f;
  cr_assert_eq(cudaev_future_new_timer(loop, 20 * MS, &f), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(f, 2000 * (int64_t)MS), cudaSuccess);
  uint64_t dt = now_ns() - t0;
  cr_expect_geq(dt, 20 * MS);
  cr_expect_lt(dt, 1000 * MS, "the loop slept past the deadline: %llu ns", (unsigned long long)dt);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

/* Foreign mode: the timeout says when; 1000 spurious process calls before
 * it neither break anything nor complete the timer early. */
Test(loop_timer, foreign_mode_timeout_and_spurious_process) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_loop_process(loop);
  cr_expect_eq(cudaev_loop_prepare(loop), -1);
  uint64_t t0 = now_ns();
  cudaev_future_t *f;
  cr_assert_eq(cudaev_future_new_timer(loop, 30 * MS, &f), cudaSuccess);
  atomic_int done = 0;
  cudaev_future_then(f, flag_cb, &done);
  for (int i = 0; i < 1000; i++) {
    cudaev_loop_process(loop);
    if (now_ns() - t0 < 30 * MS) cr_assert_eq(atomic_load(&done), 0, "completed early");
  }
  int ms = cudaev_loop_prepare(loop);
  cr_expect(ms > 0 && ms <= 30, "timeout %d ms", ms);
  cr_expect_eq(cudaev_loop_pending(loop), 1);
  drive_epoll(loop, &done);
  cr_expect_geq(now_ns() - t0, 30 * MS);
  cr_expect_eq(cudaev_future_result(f), cudaSuccess);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  struct cudaev_loop_stats st;
  cr_assert_eq(cudaev_loop_stats(loop, &st, sizeof st), cudaSuccess);
  cr_expect_eq(st.timers_fired, 1);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

/* ev mode: a pending timer alone keeps ev_run alive until it fires. */
Test(loop_timer, ev_mode_keeps_ev_run) {
  struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_ev(evl, &loop), cudaSuccess);
  uint64_t t0 = now_ns();
  cudaev_future_t *f;
  cr_assert_eq(cudaev_future_new_timer(loop, 20 * MS, &f), cudaSuccess);
  atomic_int done = 0;
  cudaev_future_then(f, flag_cb, &done);
  ev_run(evl, 0);
  cr_expect_eq(atomic_load(&done), 1);
  cr_expect_geq(now_ns() - t0, 20 * MS);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  ev_loop_destroy(evl);
}

/* A timer's deadline as the test knows it: the library read the same
 * clock (CLOCK_MONOTONIC) between the test's reads `lo` and `hi`, so its
 * deadline lies in [lo + ns, hi + ns]. No tolerance is needed, and a
 * preempted test thread widens only its own bracket. */
struct span {
  uint64_t lo, hi;
};
struct order {
  uint64_t max_lo, bad;
  int n;
};
static void order_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  struct order *o = u;
  const struct span *d = cudaev_future_user(f);
  o->n++;
  if (s != cudaSuccess) return;
  /* Fired in deadline order: no earlier-fired timer's deadline is later
   * than this one's, so none's lower bound exceeds this one's upper. */
  if (d->hi < o->max_lo) o->bad++;
  if (d->lo > o->max_lo) o->max_lo = d->lo;
}

Test(loop_timer, deadline_order_and_cancel) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  enum { N = 1000 };
  static cudaev_future_t *fs[N];
  static struct span spans[N];
  struct order o = {0};
  srand(7);
  int cancelled = 0;
  for (int i = 0; i < N; i++) {
    uint64_t ns = (uint64_t)(rand() % 20000) * 1000;
    spans[i].lo = now_ns() + ns;
    cr_assert_eq(cudaev_future_new_timer(loop, ns, &fs[i]), cudaSuccess);
    spans[i].hi = now_ns() + ns;
    cudaev_future_set_user(fs[i], &spans[i], NULL);
    cudaev_future_then(fs[i], order_cb, &o);
  }
  /* A third cancelled before the loop saw them (registration and firing
   * come in one message): they leave the heap, the rest keep order. */
  for (int i = 0; i < N; i += 3) cancelled += cudaev_future_cancel(fs[i]);
  for (uint64_t t0 = now_ns(); o.n < N && now_ns() - t0 < 2000 * MS;) {
    int t = cudaev_loop_prepare(loop);
    if (t > 0) usleep(200);
    cudaev_loop_process(loop);
  }
  cr_expect_eq(o.n, N);
  cr_expect_eq(o.bad, 0, "%llu out of deadline order", (unsigned long long)o.bad);
  cr_expect_eq(cancelled, (N + 2) / 3);
  for (int i = 0; i < N; i++) {
    cr_expect_eq(cudaev_future_result(fs[i]), i % 3 == 0 ? CUDAEV_ERROR_CANCELLED : cudaSuccess);
    cudaev_future_release(fs[i]);
  }
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

Test(loop_timer, future_timeout) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  /* The deadline first: TIMEOUT; the input is not cancelled. */
  cudaev_future_t *p, *g;
  cudaev_promise_new(loop, &p);
  cr_assert_eq(cudaev_future_new_timeout(p, 10 * MS, &g), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(g, 2000 * (int64_t)MS), CUDAEV_ERROR_TIMEOUT);
  cr_expect_eq(cudaev_future_ready(p), 0);
  cr_expect_eq(cudaev_promise_set(p, cudaErrorInvalidValue), cudaSuccess);
  cr_expect_eq(cudaev_future_result(g), CUDAEV_ERROR_TIMEOUT);
  cudaev_future_release(p);
  cudaev_future_release(g);
  /* The input first: its outcome; the timer leaves (nothing pending). */
  cudaev_promise_new(loop, &p);
  cr_assert_eq(cudaev_future_new_timeout(p, 60000 * MS, &g), cudaSuccess);
  cudaev_promise_set(p, cudaErrorInvalidValue);
  cr_expect_eq(cudaev_future_wait(g, 2000 * (int64_t)MS), cudaErrorInvalidValue);
  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) != 0; i++) usleep(1000);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_future_release(p);
  cudaev_future_release(g);
  cr_expect_eq(cudaev_future_new_timeout(NULL, 1, &g), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_future_new_timer(NULL, 1, &g), cudaErrorInvalidValue);
  cudaev_loop_destroy(loop);
}

Test(loop_timer, destroy_fails_pending_timers) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *t, *p, *g;
  cudaev_future_new_timer(loop, 60000 * MS, &t);
  cudaev_promise_new(loop, &p);
  cudaev_future_new_timeout(p, 60000 * MS, &g);
  atomic_int done = 0;
  cudaev_future_then(t, flag_cb, &done);
  cudaev_loop_destroy(loop);
  cr_expect_eq(atomic_load(&done), 1);
  cr_expect_eq(cudaev_future_result(t), CUDAEV_ERROR_LOOP_DESTROYED);
  cr_expect_eq(cudaev_future_result(g), CUDAEV_ERROR_LOOP_DESTROYED);
  cudaev_future_release(t);
  cudaev_future_release(p);
  cudaev_future_release(g);
}

/* Push-style deadlines: the application never asks cudaev_loop_prepare;
 * it waits as long as the last callback said. */
Test(loop_timer, foreign_timer_cb) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_loop_process(loop);
  struct told_deadline t = {0};
  cudaev_loop_set_timer_cb(loop, told_deadline_cb, &t);
  cr_expect_eq(t.calls, 1);
  cr_expect_eq(t.ns, -1);
  cr_expect_eq(cudaev_loop_prepare_ns(loop), -1);
  uint64_t t0 = now_ns();
  cudaev_future_t *f;
  cr_assert_eq(cudaev_future_new_timer(loop, 25 * MS, &f), cudaSuccess);
  atomic_int done = 0;
  cudaev_future_then(f, flag_cb, &done);
  cudaev_loop_process(loop); /* the fd said so: the submission */
  cr_expect_eq(t.calls, 2);
  cr_expect(t.ns > 20 * (int64_t)MS && t.ns <= 25 * (int64_t)MS, "told %lld", (long long)t.ns);
  int64_t ns = cudaev_loop_prepare_ns(loop);
  cr_expect(ns > 0 && ns <= 25 * (int64_t)MS);
  /* Spurious calls: no early completion, no new deadline. */
  for (int i = 0; i < 1000; i++) cudaev_loop_process(loop);
  if (now_ns() - t0 < 25 * MS) cr_expect_eq(atomic_load(&done), 0);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, cudaev_loop_fd(loop), &ev);
  while (!atomic_load(&done)) {
    struct epoll_event got;
    int ms = t.ns < 0 ? 1000 : (int)((t.ns + 999999) / 1000000);
    epoll_wait(ep, &got, 1, ms);
    cudaev_loop_process(loop);
  }
  close(ep);
  cr_expect_geq(now_ns() - t0, 25 * MS);
  cr_expect_eq(t.ns, -1); /* nothing left: no deadline */
  cudaev_loop_set_timer_cb(loop, NULL, NULL);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}
