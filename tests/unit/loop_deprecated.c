/* The names of version 0 (include/cudaev.h, "deprecated names") still work
 * and answer exactly as the names that replaced them: the same checks run
 * through both. That using one warns is checked by cxx_std.sh. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cudaev.h"

/* The library's logger (loop/debug.c), reachable in the core archive. */
void cudaev__log(int level, const char *msg);

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void drain(cudaev_loop_t *loop) {
  for (int i = 0; i < 1000; i++) {
    cudaev_loop_process(loop);
    if (cudaev_loop_prepare(loop) != 0) break;
  }
  cudaev_loop_process(loop);
}

static cudaev_loop_t *new_loop(void) {
  cudaev_loop_t *loop = NULL;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  return loop;
}

static void wait_ready(cudaev_loop_t *loop, cudaev_future_t *f) {
  for (int i = 0; i < 100000 && !cudaev_future_ready(f); i++) {
    int ms = cudaev_loop_timeout(loop); /* the old name drives the loop as well */
    (void)ms;
    cudaev_loop_process(loop);
  }
  cr_assert(cudaev_future_ready(f));
}

Test(loop_deprecated, timer_and_timeout) {
  cudaev_loop_t *loop = new_loop();
  cudaev_future_t *t = NULL, *p = NULL, *d = NULL;
  cr_assert_eq(cudaev_timer_future(loop, 1000000, &t), cudaSuccess);
  wait_ready(loop, t);
  cr_assert_eq(cudaev_future_result(t), cudaSuccess);

  cr_assert_eq(cudaev_promise_new(loop, &p), cudaSuccess);
  cr_assert_eq(cudaev_future_timeout(p, 1000000, &d), cudaSuccess);
  wait_ready(loop, d);
  cr_assert_eq(cudaev_future_result(d), CUDAEV_ERROR_TIMEOUT);
  cr_assert_eq(cudaev_promise_set(d, cudaSuccess), cudaErrorInvalidValue,
               "the old name's future is the library's, like the new one's");
  cr_assert_eq(cudaev_timer_future(NULL, 1, &t), cudaev_future_new_timer(NULL, 1, &t));
  cr_assert_eq(cudaev_future_timeout(NULL, 1, &d), cudaev_future_new_timeout(NULL, 1, &d));
  cudaev_future_release(t);
  cudaev_future_release(p);
  cudaev_future_release(d);
  cudaev_loop_destroy(loop);
}

Test(loop_deprecated, combinators_and_done) {
  cudaev_loop_t *loop = new_loop();
  cudaev_future_t *p[2] = {NULL, NULL}, *all = NULL, *any = NULL, *done = NULL;
  cr_assert_eq(cudaev_promise_new(loop, &p[0]), cudaSuccess);
  cr_assert_eq(cudaev_promise_new(loop, &p[1]), cudaSuccess);
  cr_assert_eq(cudaev_when_all(loop, p, 2, &all), cudaSuccess);
  cr_assert_eq(cudaev_when_any(loop, p, 2, &any), cudaSuccess);
  cr_assert_eq(cudaev_future_done(p[1], &done), cudaSuccess);
  cr_assert_eq(cudaev_when_any_index(any), (size_t)-1);
  cr_assert_eq(cudaev_promise_set(p[1], cudaErrorInvalidValue), cudaSuccess);
  drain(loop);
  cr_assert_eq(cudaev_when_any_index(any), 1);
  cr_assert_eq(cudaev_when_any_index(any), cudaev_future_any_index(any));
  cr_assert_eq(cudaev_future_result(any), cudaErrorInvalidValue);
  cr_assert_eq(cudaev_future_result(done), cudaErrorInvalidValue);
  cr_assert(!cudaev_future_ready(all));
  cr_assert_eq(cudaev_promise_set(p[0], cudaSuccess), cudaSuccess);
  drain(loop);
  cr_assert_eq(cudaev_future_result(all), cudaErrorInvalidValue);
  cr_assert_eq(cudaev_when_any(loop, p, 0, &any), cudaev_future_new_any(loop, p, 0, &any));
  cr_assert_eq(cudaev_future_done(NULL, &done), cudaev_future_new_work_done(NULL, &done));
  cudaev_future_t *fs[] = {p[0], p[1], all, any, done};
  for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) cudaev_future_release(fs[i]);
  cudaev_loop_destroy(loop);
}

static atomic_int logged;
static void count_log(int level, const char *msg, void *user) {
  (void)level, (void)msg, (void)user;
  atomic_fetch_add(&logged, 1);
}

Test(loop_deprecated, loop_timeout_log_and_gpu_sources) {
  cudaev_loop_t *loop = new_loop();
  /* Nothing pending: both names answer "until the fd is readable". */
  cr_assert_eq(cudaev_loop_timeout(loop), cudaev_loop_prepare(loop));
  cr_assert_eq(cudaev_loop_timeout_ns(loop), cudaev_loop_prepare_ns(loop));
  cr_assert_eq(cudaev_loop_timeout(loop), -1);

  /* The hook set through the old name is the one the library calls. */
  cudaev_set_log(count_log, NULL);
  cudaev__log(CUDAEV_LOG_WARN, "a message for the hook");
  cudaev_log_set(NULL, NULL);
  cr_assert_eq(atomic_load(&logged), 1);

  /* No driver here: the GPU sources fail the same way under both names. */
  cudaev_future_t *f = NULL;
  cr_assert_eq(cudaev_stream_future(loop, NULL, &f), cudaev_future_new_stream(loop, NULL, &f));
  cr_assert_eq(cudaev_event_future(loop, NULL, &f), cudaev_future_new_event(loop, NULL, &f));
  cr_assert_eq(cudaev_host_func(loop, NULL, NULL, NULL, &f),
               cudaev_launch_host_func_async(loop, NULL, NULL, NULL, &f));
  cr_assert_neq(cudaev_host_func(loop, NULL, NULL, NULL, &f), cudaSuccess);
  cudaev_loop_destroy(loop);
}
