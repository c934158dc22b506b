/* The future/loop core with synthetic completion sources (promises): no GPU
 * is needed; the runtime cannot start here, so loops run CPU-only. */
#include <criterion/criterion.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cudaev.h"

/* ---- helpers ----------------------------------------------------------- */

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Drives a foreign-mode loop with raw epoll until *flag becomes nonzero. */
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

/* Drives until nothing is left to do right now. */
static void drain(cudaev_loop_t *loop) {
  for (int i = 0; i < 1000; i++) {
    cudaev_loop_process(loop);
    if (cudaev_loop_prepare(loop) != 0) break;
  }
  cudaev_loop_process(loop);
}

struct rec {
  atomic_int calls;
  cudaError_t status;
  int order[8];
  atomic_int norder;
};

static void rec_cb(cudaev_future_t *f, cudaError_t st, void *user) {
  struct rec *r = user;
  r->status = st;
  atomic_fetch_add(&r->calls, 1);
}

static void dtor_count(void *u) { atomic_fetch_add((atomic_int *)u, 1); }

/* ---- futures ----------------------------------------------------------- */

Test(loop_future, promise_then_runs_on_loop_not_inside_set) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *f;
  cr_assert_eq(cudaev_promise_new(loop, &f), cudaSuccess);
  struct rec r = {0};
  cr_assert_eq(cudaev_future_then(f, rec_cb, &r), cudaSuccess);
  cr_expect_eq(cudaev_future_ready(f), 0);
  cr_expect_eq(cudaev_future_result(f), cudaErrorNotReady);
  cr_expect_eq(cudaev_promise_set(f, cudaErrorInvalidValue), cudaSuccess);
  cr_expect_eq(atomic_load(&r.calls), 0, "continuation ran inside promise_set");
  cr_expect_eq(cudaev_future_ready(f), 1);
  cr_expect_eq(cudaev_future_result(f), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_promise_set(f, cudaSuccess), cudaErrorIllegalState);
  drain(loop);
  cr_expect_eq(atomic_load(&r.calls), 1);
  cr_expect_eq(r.status, cudaErrorInvalidValue);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

struct order_ctx {
  int seq[4];
  int n;
  cudaev_future_t *again;
  int late;
};
static void ord0(cudaev_future_t *f, cudaError_t s, void *u) {
  struct order_ctx *c = u;
  c->seq[c->n++] = 0;
}
static void ord1(cudaev_future_t *f, cudaError_t s, void *u) {
  struct order_ctx *c = u;
  c->seq[c->n++] = 1;
}
static void late_cb(cudaev_future_t *f, cudaError_t s, void *u) { ((struct order_ctx *)u)->late++; }
static void ord2(cudaev_future_t *f, cudaError_t s, void *u) {
  struct order_ctx *c = u;
  c->seq[c->n++] = 2;
  /* then() on a completed future from a callback: not run inside this call. */
  cr_expect_eq(cudaev_future_then(f, late_cb, c), cudaSuccess);
  cr_expect_eq(c->late, 0);
  /* wait() on the loop thread would deadlock: refused. */
  cr_expect_eq(cudaev_future_wait(f, 0), cudaErrorNotPermitted);
}

Test(loop_future, several_continuations_in_order_and_late_then) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *f;
  cr_assert_eq(cudaev_promise_new(loop, &f), cudaSuccess);
  struct order_ctx c = {0};
  cudaev_future_then(f, ord0, &c);
  cudaev_future_then(f, ord1, &c);
  cudaev_future_then(f, ord2, &c);
  cudaev_promise_set(f, cudaSuccess);
  cudaev_future_release(f); /* continuations keep it alive */
  drain(loop);
  cr_expect_eq(c.n, 3);
  cr_expect(c.seq[0] == 0 && c.seq[1] == 1 && c.seq[2] == 2);
  cr_expect_eq(c.late, 1);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

/* then_chain: fn's future is flattened into out; NULL ends with the status. */
struct chain_ctx {
  cudaev_future_t *next; /* what the step returns (its reference handed over) */
  cudaError_t seen;
  atomic_int ran;
};
static cudaev_future_t *chain_fn(cudaev_future_t *f, cudaError_t st, void *user) {
  struct chain_ctx *c = user;
  c->seen = st;
  atomic_fetch_add(&c->ran, 1);
  return c->next;
}

Test(loop_future, then_chain_flattens_the_returned_future) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *a, *b, *out, *out2;
  cr_assert_eq(cudaev_promise_new(loop, &a), cudaSuccess);
  cr_assert_eq(cudaev_promise_new(loop, &b), cudaSuccess);
  struct chain_ctx c1 = {.next = cudaev_future_retain(b)};
  cr_assert_eq(cudaev_future_then_chain(a, chain_fn, &c1, &out), cudaSuccess);
  /* A chain on the chain, whose step ends it (NULL). */
  struct chain_ctx c2 = {.next = NULL};
  cr_assert_eq(cudaev_future_then_chain(out, chain_fn, &c2, &out2), cudaSuccess);
  cudaev_promise_set(a, cudaErrorInvalidValue);
  drain(loop);
  cr_expect_eq(atomic_load(&c1.ran), 1);
  cr_expect_eq(c1.seen, cudaErrorInvalidValue);
  cr_expect_eq(cudaev_future_ready(out), 0, "out completed before the returned future");
  cudaev_promise_set(b, cudaErrorNotReady);
  drain(loop);
  cr_expect_eq(cudaev_future_result(out), cudaErrorNotReady);
  cr_expect_eq(atomic_load(&c2.ran), 1);
  cr_expect_eq(c2.seen, cudaErrorNotReady);
  cr_expect_eq(cudaev_future_result(out2), cudaErrorNotReady);
  cudaev_future_t *none;
  cr_expect_eq(cudaev_future_then_chain(a, NULL, NULL, &none), cudaErrorInvalidValue);
  cr_expect_null(none);
  cudaev_future_release(a);
  cudaev_future_release(b);
  cudaev_future_release(out);
  cudaev_future_release(out2);
  drain(loop);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

/* Destroy with the chain's returned future pending: out fails. */
Test(loop_future, then_chain_destroy_fails_out) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *a, *b, *out;
  cr_assert_eq(cudaev_promise_new(loop, &a), cudaSuccess);
  cr_assert_eq(cudaev_promise_new(loop, &b), cudaSuccess);
  struct chain_ctx c = {.next = cudaev_future_retain(b)};
  cr_assert_eq(cudaev_future_then_chain(a, chain_fn, &c, &out), cudaSuccess);
  cudaev_promise_set(a, cudaSuccess);
  drain(loop);
  cudaev_loop_destroy(loop);
  cr_expect_eq(cudaev_future_result(out), CUDAEV_ERROR_LOOP_DESTROYED);
  cudaev_future_release(a);
  cudaev_future_release(b);
  cudaev_future_release(out);
}

/* cudaev_promise_set completes only cudaev_promise_new's futures: on every
 * other kind it is refused with cudaErrorInvalidValue and the future is
 * left as it was, so each still completes with its own outcome. */
Test(loop_future, promise_set_refuses_every_other_future) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *a, *in[1], *f[7];
  const char *what[7] = {"then_chain's out", "future_done's out", "future_timeout's out",
                         "when_all's",       "when_any's",        "a timer",
                         "a cancelled timer"};
  cr_assert_eq(cudaev_promise_new(loop, &a), cudaSuccess);
  in[0] = a;
  struct chain_ctx c = {.next = NULL};
  cr_assert_eq(cudaev_future_then_chain(a, chain_fn, &c, &f[0]), cudaSuccess);
  cr_assert_eq(cudaev_future_new_work_done(a, &f[1]), cudaSuccess);
  cr_assert_eq(cudaev_future_new_timeout(a, 60 * 1000000000ull, &f[2]), cudaSuccess);
  cr_assert_eq(cudaev_future_new_all(loop, in, 1, &f[3]), cudaSuccess);
  cr_assert_eq(cudaev_future_new_any(loop, in, 1, &f[4]), cudaSuccess);
  cr_assert_eq(cudaev_future_new_timer(loop, 1000000, &f[5]), cudaSuccess);
  cr_assert_eq(cudaev_future_new_timer(loop, 60 * 1000000000ull, &f[6]), cudaSuccess);
  for (int i = 0; i < 7; i++) {
    cr_expect_eq(cudaev_promise_set(f[i], CUDAEV_ERROR_CANCELLED), cudaErrorInvalidValue, "%s",
                 what[i]);
    cr_expect_eq(cudaev_future_ready(f[i]), 0, "%s was touched", what[i]);
  }
  drain(loop);
  cr_expect_eq(cudaev_future_ready(f[0]), 0, "then_chain's out completed by the set");
  cr_expect_eq(cudaev_promise_set(a, cudaErrorInvalidValue), cudaSuccess);
  cr_expect_eq(cudaev_future_cancel(f[6]), 1);
  uint64_t t0 = mono_ns();
  while (!cudaev_future_ready(f[5]) && mono_ns() - t0 < 5000000000ull) cudaev_loop_process(loop);
  drain(loop);
  /* Each has the outcome its own rule gives it, none the set's. */
  for (int i = 0; i < 5; i++)
    cr_expect_eq(cudaev_future_result(f[i]), cudaErrorInvalidValue, "%s", what[i]);
  cr_expect_eq(cudaev_future_result(f[5]), cudaSuccess);
  cr_expect_eq(cudaev_future_result(f[6]), CUDAEV_ERROR_CANCELLED);
  /* Completed or not, the refusal is the same. */
  for (int i = 0; i < 7; i++)
    cr_expect_eq(cudaev_promise_set(f[i], cudaSuccess), cudaErrorInvalidValue, "%s", what[i]);
  cr_expect_eq(cudaev_promise_set(NULL, cudaSuccess), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_promise_set(a, cudaSuccess), cudaErrorIllegalState);
  for (int i = 0; i < 7; i++) cudaev_future_release(f[i]);
  cudaev_future_release(a);
  drain(loop);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

Test(loop_future, user_data_destructor_and_refs) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  atomic_int dtors = 0;
  cudaev_future_t *f;
  cr_assert_eq(cudaev_promise_new(loop, &f), cudaSuccess);
  cudaev_future_set_user(f, &dtors, dtor_count);
  cr_expect_eq(cudaev_future_user(f), &dtors);
  cr_expect_eq(cudaev_future_loop(f), loop);
  cudaev_future_retain(f);
  cudaev_future_release(f);
  cudaev_promise_set(f, cudaSuccess);
  drain(loop);
  cr_expect_eq(atomic_load(&dtors), 0);
  cudaev_future_release(f);
  cr_expect_eq(atomic_load(&dtors), 1, "last release frees and calls the destructor");
  cudaev_future_release(NULL);
  cudaev_loop_destroy(loop);
}

Test(loop_future, bad_arguments) {
  cudaev_loop_t *loop;
  cudaev_future_t *f = (void *)1;
  cr_expect_eq(cudaev_loop_new_foreign(NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_loop_new_ev(NULL, &loop), cudaErrorInvalidValue);
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cr_expect_eq(cudaev_promise_new(NULL, &f), cudaErrorInvalidValue);
  cr_expect_null(f);
  cr_expect_eq(cudaev_future_then(NULL, rec_cb, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_future_new_any(loop, NULL, 0, &f), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_loop_post(loop, NULL, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_loop_fd(NULL), -1);
  /* GPU sources report why the GPU is unavailable; nothing is returned. */
  cr_expect_neq(cudaev_future_new_stream(loop, NULL, &f), cudaSuccess);
  cr_expect_null(f);
  cr_expect_str_eq(cudaev_error_name(CUDAEV_ERROR_CANCELLED), "CUDAEV_ERROR_CANCELLED");
  cr_expect_str_eq(cudaev_error_name(cudaSuccess), "cudaSuccess");
  cudaev_loop_destroy(loop);
}

/* Every value of the toolkit's cudaError enum, parsed from driver_types.h
 * ("name = number," lines between "enum __device_builtin__ cudaError" and
 * "};"). Returns how many were found. */
static int cuda_error_values(long *vals, int cap) {
  const char *tk = getenv("CUDAEV_TOOLKIT");
  char path[4096];
  snprintf(path, sizeof path, "%s/include/driver_types.h", tk != NULL ? tk : "/usr/local/cuda");
  FILE *fp = fopen(path, "r");
  cr_assert_not_null(fp, "cannot open %s", path);
  char line[1024];
  int n = 0, in = 0;
  while (fgets(line, sizeof line, fp) != NULL) {
    if (!in) {
      in = strstr(line, "enum") != NULL && strstr(line, "cudaError") != NULL &&
           strstr(line, "cudaError_t") == NULL;
      continue;
    }
    if (strstr(line, "};") != NULL) break;
    const char *eq = strchr(line, '=');
    if (eq == NULL || strstr(line, "cudaError") == NULL) continue;
    char *end;
    long v = strtol(eq + 1, &end, 0);
    if (end != eq + 1 && n < cap) vals[n++] = v;
  }
  fclose(fp);
  return n;
}

/* Our outcomes collide with no cudaError value (nor with the range
 * cudaErrorApiFailureBase + a driver code, 0..999, that the runtime
 * documents), and lie inside the value range C++ gives the enumeration: the
 * smallest bit-field holding every enumerator (include/cudaev.h says why). */
Test(loop_future, outcomes_outside_cuda) {
  static long vals[4096];
  int n = cuda_error_values(vals, 4096);
  cr_assert_gt(n, 100, "parsed only %d cudaError values", n);
  const cudaError_t ours[] = {CUDAEV_ERROR_CANCELLED, CUDAEV_ERROR_LOOP_DESTROYED,
                              CUDAEV_ERROR_NO_LIBEV, CUDAEV_ERROR_TIMEOUT};
  const char *names[] = {"CUDAEV_ERROR_CANCELLED", "CUDAEV_ERROR_LOOP_DESTROYED",
                         "CUDAEV_ERROR_NO_LIBEV", "CUDAEV_ERROR_TIMEOUT"};
  int found_base = 0;
  long max = 0;
  for (int i = 0; i < n; i++) {
    found_base |= vals[i] == 10000;
    cr_assert_geq(vals[i], 0, "a negative cudaError value changes the C++ range rule");
    if (vals[i] > max) max = vals[i];
  }
  cr_expect(found_base, "cudaErrorApiFailureBase (10000) not parsed");
  long range = 1; /* 2^bits - 1 >= max */
  while (range < max) range = range * 2 + 1;
  cr_expect_eq(range, 16383);
  for (size_t j = 0; j < sizeof ours / sizeof ours[0]; j++) {
    long v = (long)ours[j];
    cr_expect_eq(v, CUDAEV_ERROR_BASE + 1 + (long)j);
    cr_expect_gt(v, max + 999, "%s is not above every cudaError value", names[j]);
    cr_expect_leq(v, range, "%s is outside cudaError's range in C++", names[j]);
    for (int i = 0; i < n; i++)
      cr_expect_neq(v, vals[i], "%s collides with a cudaError value", names[j]);
    cr_expect_str_eq(cudaev_error_name(ours[j]), names[j]);
    cr_expect_str_eq(cudaGetErrorName(ours[j]), names[j]);
    cr_expect_str_neq(cudaev_error_string(ours[j]), "unrecognized error code");
    cr_expect_str_neq(cudaGetErrorString(ours[j]), "unrecognized error code");
  }
  cr_expect_leq(CUDAEV_ERROR_BASE + 99, range, "the reserved block leaves cudaError's range");
  /* CUDA's own names are unchanged, and codes beside ours unknown. */
  cr_expect_str_eq(cudaev_error_name((cudaError_t)10000), "cudaErrorApiFailureBase");
  cr_expect_str_eq(cudaGetErrorName((cudaError_t)CUDAEV_ERROR_BASE), "unrecognized error code");
  cr_expect_str_eq(cudaGetErrorName((cudaError_t)(CUDAEV_ERROR_BASE + 5)),
                   "unrecognized error code");
  cr_expect_str_eq(cudaGetErrorString(CUDAEV_ERROR_TIMEOUT),
                   "the deadline passed before the future completed");
}

Test(loop_future, cancel_detaches) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  struct rec r = {0};
  cudaev_future_then(f, rec_cb, &r);
  cr_expect_eq(cudaev_future_cancel(f), 1);
  cr_expect_eq(cudaev_future_cancel(f), 0);
  cr_expect_eq(cudaev_future_result(f), CUDAEV_ERROR_CANCELLED);
  cr_expect_eq(cudaev_promise_set(f, cudaSuccess), cudaErrorIllegalState);
  drain(loop);
  cr_expect_eq(atomic_load(&r.calls), 1);
  cr_expect_eq(r.status, CUDAEV_ERROR_CANCELLED);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

/* ---- combinators ------------------------------------------------------ */

Test(loop_future, when_all_first_error_and_empty) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *in[3], *all, *none;
  for (int i = 0; i < 3; i++) cudaev_promise_new(loop, &in[i]);
  cr_assert_eq(cudaev_future_new_all(loop, in, 3, &all), cudaSuccess);
  cr_assert_eq(cudaev_future_new_all(loop, NULL, 0, &none), cudaSuccess);
  struct rec r = {0};
  cudaev_future_then(all, rec_cb, &r);
  cudaev_promise_set(in[1], cudaErrorLaunchFailure);
  cudaev_promise_set(in[0], cudaSuccess);
  drain(loop);
  cr_expect_eq(cudaev_future_ready(all), 0);
  cudaev_promise_set(in[2], cudaErrorInvalidValue);
  drain(loop);
  cr_expect_eq(atomic_load(&r.calls), 1);
  cr_expect_eq(cudaev_future_result(all), cudaErrorLaunchFailure);
  cr_expect_eq(cudaev_future_result(none), cudaSuccess);
  for (int i = 0; i < 3; i++) cudaev_future_release(in[i]);
  cudaev_future_release(all);
  cudaev_future_release(none);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

Test(loop_future, when_any_index) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *in[4], *any;
  for (int i = 0; i < 4; i++) cudaev_promise_new(loop, &in[i]);
  cr_assert_eq(cudaev_future_new_any(loop, in, 4, &any), cudaSuccess);
  cr_expect_eq(cudaev_future_any_index(any), (size_t)-1);
  cudaev_promise_set(in[2], cudaErrorNotReady);
  drain(loop);
  cudaev_promise_set(in[0], cudaSuccess);
  drain(loop);
  cr_expect_eq(cudaev_future_result(any), cudaErrorNotReady);
  cr_expect_eq(cudaev_future_any_index(any), 2);
  cudaev_future_release(any); /* the block still waits for in[1], in[3] */
  cudaev_promise_set(in[1], cudaSuccess);
  cudaev_promise_set(in[3], cudaSuccess);
  drain(loop);
  for (int i = 0; i < 4; i++) cudaev_future_release(in[i]);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

/* ---- destroy with pending futures ---------------------------------------- */

Test(loop_future, destroy_fails_pending) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  enum { N = 100 };
  cudaev_future_t *f[N];
  struct rec r = {0};
  atomic_int dtors = 0;
  for (int i = 0; i < N; i++) {
    cr_assert_eq(cudaev_promise_new(loop, &f[i]), cudaSuccess);
    cudaev_future_set_user(f[i], &dtors, dtor_count);
    cudaev_future_then(f[i], rec_cb, &r);
    if (i % 2) cudaev_future_release(f[i]); /* dropped by the app, still pending */
  }
  cudaev_loop_destroy(loop);
  cr_expect_eq(atomic_load(&r.calls), N);
  cr_expect_eq(r.status, CUDAEV_ERROR_LOOP_DESTROYED);
  cr_expect_eq(atomic_load(&dtors), N / 2, "dropped futures freed by destroy");
  for (int i = 0; i < N; i += 2) {
    cr_expect_eq(cudaev_future_result(f[i]), CUDAEV_ERROR_LOOP_DESTROYED);
    cudaev_future_release(f[i]);
  }
  cr_expect_eq(atomic_load(&dtors), N);
}

/* ---- the three run modes ------------------------------------------------ */

struct post_ctx {
  atomic_int done;
  cudaev_loop_t *loop;
  pthread_t th;
};
static void post_fn(cudaev_loop_t *loop, void *u) {
  struct post_ctx *c = u;
  c->loop = loop;
  c->th = pthread_self();
  atomic_store(&c->done, 1);
}
static void set_flag_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  atomic_store((atomic_int *)u, 1);
}

static void *setter(void *arg) {
  usleep(2000);
  cudaev_promise_set(arg, cudaSuccess);
  return NULL;
}

/* cudaev_loop_pending counts a future from the moment the call that made it
 * returns. The driving thread of a foreign loop makes a promise and a
 * timer, then runs `while (cudaev_loop_pending(loop)) drive(loop);`,
 * completing the promise once the timer fired: the loop runs until both
 * completed and their continuations ran (before, pending read 0 until the
 * first cudaev_loop_process, and the loop ended at once). */
Test(loop_modes, pending_counts_from_creation) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *p, *t;
  cr_assert_eq(cudaev_promise_new(loop, &p), cudaSuccess);
  cr_expect_eq(cudaev_loop_pending(loop), 1, "a promise, before any cudaev_loop_process");
  cr_assert_eq(cudaev_future_new_timer(loop, 2000000, &t), cudaSuccess);
  cr_expect_eq(cudaev_loop_pending(loop), 2, "and a timer");
  struct rec rp = {0}, rt = {0};
  cr_assert_eq(cudaev_future_then(p, rec_cb, &rp), cudaSuccess);
  cr_assert_eq(cudaev_future_then(t, rec_cb, &rt), cudaSuccess);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  cr_assert(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN};
  cr_assert(epoll_ctl(ep, EPOLL_CTL_ADD, cudaev_loop_fd(loop), &ev) == 0);
  int passes = 0;
  while (cudaev_loop_pending(loop)) {
    int ms = cudaev_loop_prepare(loop);
    struct epoll_event got;
    epoll_wait(ep, &got, 1, ms < 0 || ms > 1000 ? 1000 : ms);
    cudaev_loop_process(loop);
    if (cudaev_future_ready(t) && !cudaev_future_ready(p)) cudaev_promise_set(p, cudaSuccess);
    cr_assert_lt(++passes, 10000, "pending never reached 0");
  }
  close(ep);
  cr_expect_eq(atomic_load(&rt.calls), 1, "the loop ended before the timer's continuation");
  cr_expect_eq(atomic_load(&rp.calls), 1, "the loop ended before the promise's continuation");
  cr_expect_eq(rt.status, cudaSuccess);
  cudaev_future_release(p);
  cudaev_future_release(t);
  cudaev_loop_destroy(loop);
}

struct pending_in_cb {
  atomic_int done;
  size_t seen;
  cudaev_future_t *p;
};
static void pending_post(cudaev_loop_t *loop, void *u) {
  struct pending_in_cb *c = u;
  size_t before = cudaev_loop_pending(loop);
  cudaev_promise_new(loop, &c->p);
  c->seen = cudaev_loop_pending(loop) - before;
  atomic_store(&c->done, 1);
}

/* The same rule on the other threads: a thread-mode loop's count includes
 * a promise as soon as cudaev_promise_new returns, made on the
 * application's thread (the loop's thread takes it in concurrently) or
 * inside a callback on the loop's own. */
Test(loop_modes, pending_counts_from_creation_any_thread) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  for (int i = 0; i < 1000; i++) {
    cudaev_future_t *p;
    cr_assert_eq(cudaev_promise_new(loop, &p), cudaSuccess);
    cr_assert_geq(cudaev_loop_pending(loop), 1, "round %d", i);
    cudaev_promise_set(p, cudaSuccess);
    cudaev_future_release(p);
  }
  struct pending_in_cb c = {0};
  cr_assert_eq(cudaev_loop_post(loop, pending_post, &c), cudaSuccess);
  while (!atomic_load(&c.done)) usleep(100);
  cr_expect_eq(c.seen, 1, "a promise made on the loop thread");
  cudaev_promise_set(c.p, cudaSuccess);
  cudaev_future_release(c.p);
  uint64_t t0 = mono_ns();
  while (cudaev_loop_pending(loop) != 0 && mono_ns() - t0 < 5000000000ull) usleep(100);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

Test(loop_modes, foreign_epoll) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cr_assert(cudaev_loop_fd(loop) >= 0);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  atomic_int flag = 0;
  cudaev_future_then(f, set_flag_cb, &flag);
  pthread_t t;
  pthread_create(&t, NULL, setter, f);
  drive_epoll(loop, &flag); /* returns only once the continuation ran */
  pthread_join(t, NULL);
  cr_expect_eq(cudaev_future_result(f), cudaSuccess);
  struct post_ctx pc = {0};
  cudaev_loop_post(loop, post_fn, &pc);
  cr_expect_eq(atomic_load(&pc.done), 0);
  drive_epoll(loop, &pc.done);
  cr_expect(pthread_equal(pc.th, pthread_self()));
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

struct ev_ctx {
  struct ev_loop *evl;
  atomic_int *flag;
};
static void ev_stop_when_flag(struct ev_loop *evl, ev_timer *w, int revents) {
  struct ev_ctx *c = w->data;
  if (atomic_load(c->flag)) ev_break(evl, EVBREAK_ALL);
}

Test(loop_modes, attached_to_libev) {
  struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);
  cr_assert_not_null(evl);
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_ev(evl, &loop), cudaSuccess);
  cr_expect_eq(cudaev_loop_fd(loop), -1);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  atomic_int flag = 0;
  cudaev_future_then(f, set_flag_cb, &flag);
  pthread_t t;
  pthread_create(&t, NULL, setter, f);
  /* The app's own watcher keeps ev_run going; ours are unref'd. */
  struct ev_ctx c = {evl, &flag};
  ev_timer tm;
  ev_timer_init(&tm, ev_stop_when_flag, 0.001, 0.001);
  tm.data = &c;
  ev_timer_start(evl, &tm);
  ev_run(evl, 0);
  ev_timer_stop(evl, &tm);
  pthread_join(t, NULL);
  cr_expect_eq(atomic_load(&flag), 1);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  /* Only our (unref'd) watchers were left: ev_run returns at once. */
  ev_run(evl, 0);
  ev_loop_destroy(evl);
}

static void unref_post(cudaev_loop_t *loop, void *u) { cudaev_loop_unref(loop); }

/* Keep-alive: pending futures hold ev_run; nothing else of ours does. */
Test(loop_modes, libev_pending_keeps_ev_run) {
  struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);
  cr_assert_not_null(evl);
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_ev(evl, &loop), cudaSuccess);
  /* Nothing pending: returns at once. */
  ev_run(evl, 0);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  atomic_int flag = 0;
  cudaev_future_then(f, set_flag_cb, &flag);
  pthread_t t;
  pthread_create(&t, NULL, setter, f);
  /* No watcher of the application's: the pending promise keeps it. */
  ev_run(evl, 0);
  pthread_join(t, NULL);
  cr_expect_eq(atomic_load(&flag), 1);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_future_release(f);
  /* An explicit reference keeps it too, until a posted call drops it. */
  struct post_ctx pc = {0};
  cudaev_loop_ref(loop);
  cudaev_loop_post(loop, post_fn, &pc);
  cr_assert_eq(cudaev_loop_post(loop, unref_post, NULL), cudaSuccess);
  ev_run(evl, 0);
  cr_expect_eq(atomic_load(&pc.done), 1);
  cudaev_loop_unref(loop); /* unmatched: ignored */
  cudaev_loop_destroy(loop);
  ev_run(evl, 0);
  ev_loop_destroy(evl);
}

/* ---- deferred close ----------------------------------------------------- */

struct closing {
  cudaev_loop_t *loop;
  atomic_int closed, after, cb_in_pass;
  cudaev_future_t *other;
  cudaError_t other_status;
  atomic_int other_calls;
  pthread_t cb_thread;
};
static void closed_cb(cudaev_loop_t *loop, void *u) {
  struct closing *c = u;
  c->cb_thread = pthread_self();
  atomic_fetch_add(&c->closed, 1);
}
static void other_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  struct closing *c = u;
  c->other_status = s;
  atomic_fetch_add(&c->other_calls, 1);
}
static void close_from_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  struct closing *c = u;
  cr_expect_eq(cudaev_loop_close(c->loop, closed_cb, c), cudaSuccess);
  cr_expect_eq(cudaev_loop_close(c->loop, closed_cb, c), cudaErrorIllegalState);
  /* Deferred: not closed yet, the loop still works in this callback. */
  cr_expect_eq(atomic_load(&c->closed), 0);
  struct cudaev_loop_stats st;
  cr_expect_eq(cudaev_loop_stats(c->loop, &st, sizeof st), cudaSuccess);
}

/* Each mode: a continuation closes its own loop; a pending promise fails
 * once with LOOP_DESTROYED; the close callback runs once, on the loop
 * thread, after the pass. */
static void close_inside(int mode) {
  static struct closing c;
  memset(&c, 0, sizeof c);
  struct ev_loop *evl = NULL;
  if (mode == 0) cr_assert_eq(cudaev_loop_new_foreign(&c.loop), cudaSuccess);
  if (mode == 1) {
    evl = ev_loop_new(EVFLAG_AUTO);
    cr_assert_eq(cudaev_loop_new_ev(evl, &c.loop), cudaSuccess);
  }
  if (mode == 2) cr_assert_eq(cudaev_loop_new_thread(&c.loop), cudaSuccess);
  cudaev_future_t *f;
  cudaev_promise_new(c.loop, &f);
  cudaev_promise_new(c.loop, &c.other);
  cudaev_future_then(c.other, other_cb, &c);
  cudaev_future_then(f, close_from_cb, &c);
  cudaev_promise_set(f, cudaSuccess);
  if (mode == 0) {
    /* The close happens at the end of this call: no more calls after. */
    for (int i = 0; i < 100 && !atomic_load(&c.closed); i++) cudaev_loop_process(c.loop);
    cr_expect(pthread_equal(c.cb_thread, pthread_self()));
  }
  if (mode == 1) {
    ev_run(evl, 0); /* returns: the loop holds no reference any more */
    cr_expect(pthread_equal(c.cb_thread, pthread_self()));
    ev_loop_destroy(evl);
  }
  if (mode == 2) {
    for (int i = 0; i < 5000 && !atomic_load(&c.closed); i++) usleep(1000);
    cr_expect(!pthread_equal(c.cb_thread, pthread_self()));
  }
  cr_expect_eq(atomic_load(&c.closed), 1);
  cr_expect_eq(atomic_load(&c.other_calls), 1);
  cr_expect_eq(c.other_status, CUDAEV_ERROR_LOOP_DESTROYED);
  cr_expect_eq(cudaev_future_result(c.other), CUDAEV_ERROR_LOOP_DESTROYED);
  cudaev_future_release(f);
  cudaev_future_release(c.other);
}

Test(loop_close, inside_callback_foreign) { close_inside(0); }
Test(loop_close, inside_callback_ev) { close_inside(1); }
Test(loop_close, inside_callback_thread) { close_inside(2); }

Test(loop_close, outside_callbacks_at_once) {
  static struct closing c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(cudaev_loop_new_thread(&c.loop), cudaSuccess);
  cudaev_promise_new(c.loop, &c.other);
  cudaev_future_then(c.other, other_cb, &c);
  cr_expect_eq(cudaev_loop_close(c.loop, closed_cb, &c), cudaSuccess);
  cr_expect_eq(atomic_load(&c.closed), 1);
  cr_expect(pthread_equal(c.cb_thread, pthread_self()));
  cr_expect_eq(atomic_load(&c.other_calls), 1);
  cr_expect_eq(cudaev_future_result(c.other), CUDAEV_ERROR_LOOP_DESTROYED);
  cudaev_future_release(c.other);
  cr_expect_eq(cudaev_loop_close(NULL, NULL, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_loop_close(cudaev_loop_default(), NULL, NULL), cudaErrorInvalidValue);
}

/* The shutdown that does not block its caller (include/cudaev.h,
 * cudaev_loop_close): a thread posts a close to a thread-mode loop and
 * goes on at once, although the teardown is slow (a continuation it runs
 * takes 200 ms); the teardown and the close callback run on the loop's
 * own thread. */
static void slow_other_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  usleep(200000);
  other_cb(f, s, u);
}
static void close_posted(cudaev_loop_t *loop, void *u) {
  cr_expect_eq(cudaev_loop_close(loop, closed_cb, u), cudaSuccess);
}
Test(loop_close, posted_close_does_not_block_the_caller) {
  static struct closing c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(cudaev_loop_new_thread(&c.loop), cudaSuccess);
  cudaev_promise_new(c.loop, &c.other);
  cudaev_future_then(c.other, slow_other_cb, &c);
  uint64_t t0 = mono_ns();
  cr_expect_eq(cudaev_loop_post(c.loop, close_posted, &c), cudaSuccess);
  cr_expect_lt(mono_ns() - t0, 100000000ull, "the caller waited for the teardown");
  for (int i = 0; i < 5000 && !atomic_load(&c.closed); i++) usleep(1000);
  cr_expect_eq(atomic_load(&c.closed), 1);
  cr_expect(!pthread_equal(c.cb_thread, pthread_self()), "the close callback ran on the caller");
  cr_expect_eq(atomic_load(&c.other_calls), 1);
  cr_expect_eq(c.other_status, CUDAEV_ERROR_LOOP_DESTROYED);
  cudaev_future_release(c.other);
}

/* ---- misuse: caught with a message, in a child ------------------------- */

/* Runs fn in a forked child with stderr captured; expects SIGABRT and
 * `want` in the message. */
static void expect_abort(void (*fn)(void), const char *want) {
  int p[2];
  cr_assert(pipe(p) == 0);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    dup2(p[1], 2);
    close(p[0]);
    fn();
    _exit(0);
  }
  close(p[1]);
  char buf[1024];
  size_t n = 0;
  ssize_t r;
  while (n < sizeof buf - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
  buf[n] = '\0';
  close(p[0]);
  int st;
  cr_assert(waitpid(pid, &st, 0) == pid);
  cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "child status %d, said: %s", st, buf);
  cr_expect(strstr(buf, want) != NULL, "want \"%s\", got: %s", want, buf);
}

static void destroy_cb(cudaev_future_t *f, cudaError_t s, void *u) { cudaev_loop_destroy(u); }
static void destroy_inside_callback(void) {
  cudaev_loop_t *loop;
  cudaev_loop_new_foreign(&loop);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  cudaev_future_then(f, destroy_cb, loop);
  cudaev_promise_set(f, cudaSuccess);
  drain(loop);
}

Test(loop_misuse, destroy_inside_callback_aborts) {
  expect_abort(destroy_inside_callback,
               "cudaev: cudaev_loop_destroy inside a callback of the same loop");
}

static atomic_int in_cb;
static void slow_post(cudaev_loop_t *loop, void *u) {
  atomic_store(&in_cb, 1);
  usleep(200000);
}
static void *second_driver(void *arg) {
  while (!atomic_load(&in_cb)) usleep(100);
  cudaev_loop_process(arg);
  return NULL;
}
static void two_drivers(void) {
  cudaev_loop_t *loop;
  cudaev_loop_new_foreign(&loop);
  cudaev_loop_post(loop, slow_post, NULL);
  pthread_t t;
  pthread_create(&t, NULL, second_driver, loop);
  cudaev_loop_process(loop);
  pthread_join(t, NULL);
}

Test(loop_misuse, two_threads_driving_abort) {
  expect_abort(two_drivers, "cudaev: two threads drive one loop at once");
}

static void hook_to_stderr(int level, const char *msg, void *user) {
  fprintf(stderr, "%s level %d %s\n", (const char *)user, level, msg);
}
static void destroy_inside_callback_hooked(void) {
  cudaev_log_set(hook_to_stderr, "HOOK");
  destroy_inside_callback();
}

Test(loop_misuse, log_hook_gets_the_message) {
  expect_abort(destroy_inside_callback_hooked,
               "HOOK level 0 cudaev: cudaev_loop_destroy inside a callback");
  cudaev_log_set(NULL, NULL);
}

Test(loop_misuse, stats) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  struct cudaev_loop_stats st;
  cr_expect_eq(cudaev_loop_stats(loop, NULL, sizeof st), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_loop_stats(loop, &st, 1), cudaErrorInvalidValue);
  for (int i = 0; i < 3; i++) {
    cudaev_future_t *f;
    cudaev_promise_new(loop, &f);
    cudaev_promise_set(f, cudaSuccess);
    drain(loop);
    cudaev_future_release(f);
  }
  cr_assert_eq(cudaev_loop_stats(loop, &st, sizeof st), cudaSuccess);
  cr_expect_eq(st.size, sizeof st);
  cr_expect_eq(st.completions, 3);
  cr_expect_geq(st.passes, 3);
  cr_expect_geq(st.wakeups, 1);
  cr_expect_leq(st.wakeups, st.passes);
  cr_expect_eq(st.timers_fired, 0);
  /* An older, shorter struct: only its bytes are written. */
  struct cudaev_loop_stats old;
  memset(&old, 0xab, sizeof old);
  size_t n = offsetof(struct cudaev_loop_stats, wakeups);
  cr_assert_eq(cudaev_loop_stats(loop, &old, n), cudaSuccess);
  cr_expect_eq(old.size, n);
  cr_expect_eq(old.passes, st.passes);
  cr_expect_eq(old.completions, 0xababababababababull);
  cudaev_loop_destroy(loop);
}

/* A nested call on the driving thread is not a second driver. */
static void nested_post(cudaev_loop_t *loop, void *u) {
  cudaev_loop_process(loop);
  atomic_store((atomic_int *)u, 1);
}
Test(loop_misuse, nested_process_allowed) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  atomic_int done = 0;
  cudaev_loop_post(loop, nested_post, &done);
  drain(loop);
  cr_expect_eq(atomic_load(&done), 1);
  cudaev_loop_destroy(loop);
}

/* CUDAEV_DEBUG=1 (set here through the flag it sets at load). */
extern bool cudaev__debug;
static void double_release(void) {
  cudaev__debug = true;
  cudaev_loop_t *loop;
  cudaev_loop_new_foreign(&loop);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  cudaev_promise_set(f, cudaSuccess);
  drain(loop);
  cudaev_future_release(f);
  cudaev_future_release(f);
}
static void use_after_release(void) {
  cudaev__debug = true;
  cudaev_loop_t *loop;
  cudaev_loop_new_foreign(&loop);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  cudaev_promise_set(f, cudaSuccess);
  drain(loop);
  cudaev_future_release(f);
  cudaev_future_then(f, rec_cb, NULL);
}

Test(loop_misuse, debug_double_release) {
  expect_abort(double_release, "cudaev: cudaev_future_release on a future already freed");
  expect_abort(use_after_release, "cudaev: cudaev_future_then on a future already freed");
}

/* Debug mode changes nothing for correct use. */
Test(loop_misuse, debug_correct_use) {
  cudaev__debug = true;
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  for (int i = 0; i < 10000; i++) {
    cudaev_future_t *f;
    cr_assert_eq(cudaev_promise_new(loop, &f), cudaSuccess);
    struct rec r = {0};
    cudaev_future_then(f, rec_cb, &r);
    cudaev_promise_set(f, cudaSuccess);
    drain(loop);
    cr_expect_eq(atomic_load(&r.calls), 1);
    cudaev_future_release(f);
  }
  cudaev_loop_destroy(loop);
  cudaev__debug = false;
}

Test(loop_modes, own_thread_and_wait) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  cr_expect_eq(cudaev_future_wait(f, 1000000), CUDAEV_ERROR_TIMEOUT, "1 ms timeout");
  cr_expect_eq(cudaev_future_wait(f, 0), CUDAEV_ERROR_TIMEOUT, "a look only");
  cr_expect(!cudaev_future_ready(f), "a wait's timeout leaves the future pending");
  pthread_t t;
  pthread_create(&t, NULL, setter, f);
  cr_expect_eq(cudaev_future_wait(f, -1), cudaSuccess);
  pthread_join(t, NULL);
  struct post_ctx pc = {0};
  cudaev_loop_post(loop, post_fn, &pc);
  while (!atomic_load(&pc.done)) usleep(100);
  cr_expect(!pthread_equal(pc.th, pthread_self()), "callbacks run on the loop's thread");
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  cr_expect_not_null(cudaev_loop_default());
  cr_expect_eq(cudaev_loop_default(), cudaev_loop_default());
}

/* ---- concurrency ----------------------------------------------------------- */

#define THREADS 32

struct stress {
  cudaev_loop_t *loop;
  long per_thread;
  atomic_long callbacks;
  atomic_long wins;
  atomic_long bad;
};

struct item {
  atomic_int seen;
  struct stress *s;
};

static void stress_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  struct item *it = u;
  if (atomic_fetch_add(&it->seen, 1) != 0) atomic_fetch_add(&it->s->bad, 1);
  atomic_fetch_add(&it->s->callbacks, 1);
  free(it);
}

struct racer {
  cudaev_future_t *f;
  struct stress *s;
};

static void *stress_thread(void *arg) {
  struct stress *s = arg;
  unsigned seed = (unsigned)(uintptr_t)pthread_self();
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
    /* Two completers race: set and cancel; exactly one wins. */
    int a = cudaev_promise_set(f, cudaSuccess) == cudaSuccess;
    int b = cudaev_future_cancel(f);
    if (rand_r(&seed) & 1) {
      int t = a;
      a = b;
      b = t;
    }
    atomic_fetch_add(&s->wins, a + b);
    cudaev_future_release(f);
  }
  return NULL;
}

static long count_from_env(long dflt) {
  const char *e = getenv("CUDAEV_TEST_FUTURES");
  return e ? atol(e) : dflt;
}

/* 32 threads submit promises and complete them (set and cancel racing)
 * while the loop thread runs continuations. Default 320k futures; set
 * CUDAEV_TEST_FUTURES=10000000 for the 10M the unit suite runs. */
Test(loop_stress, exactly_once_32_threads, .timeout = 300) {
  static struct stress s;
  cr_assert_eq(cudaev_loop_new_thread(&s.loop), cudaSuccess);
  long total = count_from_env(320000);
  s.per_thread = total / THREADS;
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, stress_thread, &s);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  long want = s.per_thread * THREADS;
  cr_expect_eq(atomic_load(&s.wins), want, "exactly one completer per future");
  while (atomic_load(&s.callbacks) < want && cudaev_loop_pending(s.loop) > 0) usleep(1000);
  /* The queue may still hold firings (not counted as pending): a loaded
   * sanitizer build needs more than a few seconds for 10M. */
  for (int i = 0; i < 60000 && atomic_load(&s.callbacks) < want; i++) usleep(1000);
  cr_expect_eq(atomic_load(&s.callbacks), want);
  cr_expect_eq(atomic_load(&s.bad), 0);
  /* A future leaves the count when the pass that ran its continuations
   * ends (cudaev_loop_pending): the last callbacks may have run in a pass
   * still going. */
  for (int i = 0; i < 5000 && cudaev_loop_pending(s.loop) != 0; i++) usleep(1000);
  cr_expect_eq(cudaev_loop_pending(s.loop), 0);
  cudaev_loop_destroy(s.loop);
}

/* then() from other threads racing with completion on the loop thread:
 * every continuation runs once, whether it was added before or after. */
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

Test(loop_stress, then_races_completion) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  struct then_race r = {.n = 20000};
  r.fs = calloc((size_t)r.n, sizeof *r.fs);
  for (long i = 0; i < r.n; i++) cudaev_promise_new(loop, &r.fs[i]);
  pthread_t a[4], b;
  for (int i = 0; i < 4; i++) pthread_create(&a[i], NULL, then_thread, &r);
  pthread_create(&b, NULL, set_thread, &r);
  for (int i = 0; i < 4; i++) pthread_join(a[i], NULL);
  pthread_join(b, NULL);
  for (int i = 0; i < 5000 && atomic_load(&r.calls) < 4 * r.n; i++) usleep(1000);
  cr_expect_eq(atomic_load(&r.calls), 4 * r.n, "calls %ld pending %zu", (long)atomic_load(&r.calls),
               cudaev_loop_pending(loop));
  for (long i = 0; i < r.n; i++) {
    cr_expect_eq(cudaev_future_wait(r.fs[i], -1), cudaSuccess);
    cudaev_future_release(r.fs[i]);
  }
  free(r.fs);
  cudaev_loop_destroy(loop);
}

/* Waiters on many threads wake when another thread completes. */
static void *waiter(void *arg) { return (void *)(intptr_t)cudaev_future_wait(arg, 5000000000LL); }
Test(loop_stress, many_waiters) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  cudaev_future_t *f;
  cudaev_promise_new(loop, &f);
  pthread_t w[16];
  for (int i = 0; i < 16; i++) pthread_create(&w[i], NULL, waiter, f);
  usleep(30000); /* let them reach the futex */
  cudaev_promise_set(f, cudaErrorInvalidValue);
  for (int i = 0; i < 16; i++) {
    void *rv;
    pthread_join(w[i], &rv);
    cr_expect_eq((cudaError_t)(intptr_t)rv, cudaErrorInvalidValue);
  }
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}
