/* cudaev.h from C++: every outcome a future can have travels through the
 * API as a cudaError_t, and each must be a value C++ allows the enumeration
 * to hold (include/cudaev.h, "outcomes", says why our own lie at 15001..).
 *
 * Two checks. At compile time (any compiler): each CUDAEV_ERROR_* lies
 * above every CUDA error (and the 10000 + driver code range) and inside the
 * value range of cudaError, computed here from its enumerators. At run
 * time, built with -fsanitize=undefined -fno-sanitize-recover=all: the
 * undefined group of g++ (since GCC 5) and clang++ includes -fsanitize=enum,
 * which aborts on a load of a cudaError_t outside that range (with the old
 * 0x4345000N outcomes: "load of value 1128595457, which is not a valid
 * value for type 'cudaError'").
 *
 * The runs: a promise set with each CUDA error and each of our outcomes,
 * cancel, a timeout through cudaev_future_new_timeout and through
 * cudaev_future_wait, when_all passing an outcome on, a loop destroyed with
 * a future pending, and CUDAEV_ERROR_NO_LIBEV. Each outcome is stored in
 * and loaded from cudaError_t variables (the continuation's, the test's),
 * so that the sanitizer sees it as C++ code holding it would.
 *
 * Plain program: exit 0 when every check passed. tests/unit/cxx_std.sh
 * builds it again for every C++ standard with g++ and clang++. */
#include <cudaev.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error_table.h"

/* ---- compile time ---------------------------------------------------------- */

/* C++11 constexpr functions are one return statement each. */
static constexpr int max_of(const int *v, int n, int m) {
  return n == 0 ? m : max_of(v + 1, n - 1, v[0] > m ? v[0] : m);
}
/* The values of the smallest bit-field holding 0..max: 0..2^b - 1. */
static constexpr int range_of(int max, int r) { return r >= max ? r : range_of(max, r * 2 + 1); }

#define CODE_OF(code, name, text) name,
static constexpr int cuda_codes[] = {CUDAEV_ERROR_TABLE(CODE_OF)};
#undef CODE_OF
static constexpr int ncuda = (int)(sizeof cuda_codes / sizeof cuda_codes[0]);
static constexpr int cuda_max = max_of(cuda_codes, ncuda, cudaErrorApiFailureBase);
static constexpr int cuda_range = range_of(cuda_max, 1);

static_assert(cuda_range == 16383, "cudaError's value range is 0..16383");
#define FITS(code, name, text)                                                            \
  static_assert((int)(name) > cuda_max + 999, #name " is not above every CUDA error");    \
  static_assert((int)(name) <= cuda_range, #name " is outside cudaError's range in C++"); \
  static_assert((int)(name) == (code), #name " differs from its row in error_table.h");
CUDAEV_OUTCOME_TABLE(FITS)
#undef FITS
static_assert(CUDAEV_ERROR_BASE + 99 <= cuda_range, "the reserved block leaves cudaError's range");

/* ---- run time -------------------------------------------------------------- */

static int failed, checks;

#define CHECK(c, ...)                                 \
  do {                                                \
    checks++;                                         \
    if (!(c)) {                                       \
      failed++;                                       \
      fprintf(stderr, "cxx_outcomes: FAIL %s: ", #c); \
      fprintf(stderr, __VA_ARGS__);                   \
      fputc('\n', stderr);                            \
    }                                                 \
  } while (0)

struct seen {
  cudaError_t status; /* what the continuation got */
  int calls;
};

static void record(cudaev_future_t *f, cudaError_t status, void *user) {
  (void)f;
  seen *s = static_cast<seen *>(user);
  s->status = status;
  s->calls++;
}

static double now_s() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Foreign mode, driven here: no thread of the library's runs callbacks. */
static void drive(cudaev_loop_t *loop, cudaev_future_t *until) {
  double end = now_s() + 10;
  while (!cudaev_future_ready(until) && now_s() < end) cudaev_loop_process(loop);
  cudaev_loop_process(loop); /* the pass that runs its continuations */
}

/* A promise completed with `code` reaches the continuation, result, wait
 * and the error functions as itself. */
static void through_promise(cudaev_loop_t *loop, cudaError_t code, const char *name) {
  cudaev_future_t *p = NULL;
  CHECK(cudaev_promise_new(loop, &p) == cudaSuccess, "%s", name);
  seen s = {cudaSuccess, 0};
  CHECK(cudaev_future_then(p, record, &s) == cudaSuccess, "%s", name);
  cudaError_t set = cudaev_promise_set(p, code);
  CHECK(set == cudaSuccess, "%s: set gave %d", name, (int)set);
  drive(loop, p);
  cudaError_t result = cudaev_future_result(p);
  cudaError_t waited = cudaev_future_wait(p, 0);
  CHECK(s.calls == 1 && s.status == code, "%s: the continuation saw %d", name, (int)s.status);
  CHECK(result == code, "%s: result %d", name, (int)result);
  CHECK(waited == code, "%s: wait %d", name, (int)waited);
  CHECK(strcmp(cudaev_error_name(code), name) == 0, "%s: named %s", name, cudaev_error_name(code));
  CHECK(strcmp(cudaGetErrorName(code), name) == 0, "%s: cudaGetErrorName %s", name,
        cudaGetErrorName(code));
  cudaev_future_release(p);
}

static void cancel(cudaev_loop_t *loop) {
  cudaev_future_t *p = NULL;
  CHECK(cudaev_promise_new(loop, &p) == cudaSuccess, "cancel");
  seen s = {cudaSuccess, 0};
  cudaev_future_then(p, record, &s);
  CHECK(cudaev_future_cancel(p) == 1, "cancel");
  drive(loop, p);
  cudaError_t r = cudaev_future_result(p);
  CHECK(r == CUDAEV_ERROR_CANCELLED, "cancel: result %d", (int)r);
  CHECK(s.calls == 1 && s.status == CUDAEV_ERROR_CANCELLED, "cancel: saw %d", (int)s.status);
  cudaError_t again = cudaev_promise_set(p, cudaSuccess);
  CHECK(again == cudaErrorIllegalState, "cancel: set after %d", (int)again);
  cudaev_future_release(p);
}

static void timeouts(cudaev_loop_t *loop) {
  cudaev_future_t *p = NULL, *g = NULL;
  CHECK(cudaev_promise_new(loop, &p) == cudaSuccess, "timeout");
  /* cudaev_future_wait's own deadline: the same outcome as a timeout's. */
  cudaError_t w = cudaev_future_wait(p, 1000000);
  CHECK(w == CUDAEV_ERROR_TIMEOUT, "wait's timeout gave %d", (int)w);
  CHECK(!cudaev_future_ready(p), "wait's timeout left the future pending");
  CHECK(cudaev_future_new_timeout(p, 1000000, &g) == cudaSuccess, "timeout");
  seen s = {cudaSuccess, 0};
  cudaev_future_then(g, record, &s);
  drive(loop, g);
  cudaError_t r = cudaev_future_result(g);
  CHECK(r == CUDAEV_ERROR_TIMEOUT, "cudaev_future_new_timeout gave %d", (int)r);
  CHECK(s.calls == 1 && s.status == CUDAEV_ERROR_TIMEOUT, "timeout: saw %d", (int)s.status);
  /* The deadline's future is no promise: setting it is refused. */
  cudaError_t set = cudaev_promise_set(g, cudaSuccess);
  CHECK(set == cudaErrorInvalidValue, "promise_set on a timeout's future gave %d", (int)set);
  cudaev_promise_set(p, cudaSuccess);
  drive(loop, p);
  cudaev_future_release(g);
  cudaev_future_release(p);
}

static void when_all_passes_outcomes_on(cudaev_loop_t *loop) {
  cudaev_future_t *in[2] = {NULL, NULL}, *all = NULL;
  cudaev_promise_new(loop, &in[0]);
  cudaev_promise_new(loop, &in[1]);
  CHECK(cudaev_future_new_all(loop, in, 2, &all) == cudaSuccess, "when_all");
  cudaev_future_cancel(in[1]);
  cudaev_promise_set(in[0], cudaSuccess);
  drive(loop, all);
  cudaError_t r = cudaev_future_result(all);
  CHECK(r == CUDAEV_ERROR_CANCELLED, "when_all gave %d", (int)r);
  cudaev_future_release(all);
  cudaev_future_release(in[0]);
  cudaev_future_release(in[1]);
}

static void loop_destroyed(void) {
  cudaev_loop_t *loop = NULL;
  CHECK(cudaev_loop_new_foreign(&loop) == cudaSuccess, "loop");
  cudaev_future_t *p = NULL;
  cudaev_promise_new(loop, &p);
  seen s = {cudaSuccess, 0};
  cudaev_future_then(p, record, &s);
  cudaev_loop_destroy(loop);
  cudaError_t r = cudaev_future_result(p);
  CHECK(r == CUDAEV_ERROR_LOOP_DESTROYED, "destroy: result %d", (int)r);
  CHECK(s.calls == 1 && s.status == CUDAEV_ERROR_LOOP_DESTROYED, "destroy: saw %d", (int)s.status);
  cudaev_future_release(p);
}

/* No libev is linked here, and CUDAEV_LIBEV names a file that is not
 * there: binding fails before the (never used) libev loop is touched. */
static void no_libev(void) {
  setenv("CUDAEV_LIBEV", "/nonexistent/libev.so.4", 1);
  int not_a_loop = 0;
  cudaev_loop_t *loop = NULL;
  cudaError_t e = cudaev_loop_new_ev(reinterpret_cast<struct ev_loop *>(&not_a_loop), &loop);
  CHECK(e == CUDAEV_ERROR_NO_LIBEV, "cudaev_loop_new_ev gave %d", (int)e);
  CHECK(loop == NULL, "no loop");
  CHECK(strstr(cudaev_error_string(e), "/nonexistent") != NULL, "why: %s", cudaev_error_string(e));
}

int main() {
  cudaev_loop_t *loop = NULL;
  if (cudaev_loop_new_foreign(&loop) != cudaSuccess) {
    fprintf(stderr, "cxx_outcomes: no loop\n");
    return 1;
  }
#define RUN(code, name, text) through_promise(loop, name, #name);
  CUDAEV_ERROR_TABLE(RUN)
  CUDAEV_OUTCOME_TABLE(RUN)
#undef RUN
  cancel(loop);
  timeouts(loop);
  when_all_passes_outcomes_on(loop);
  CHECK(cudaev_loop_pending(loop) == 0, "%zu still pending", cudaev_loop_pending(loop));
  cudaev_loop_destroy(loop);
  loop_destroyed();
  no_libev();
  printf("cxx_outcomes (C++ %ld): %d checks, %d failed\n", (long)__cplusplus, checks, failed);
  return failed != 0;
}
