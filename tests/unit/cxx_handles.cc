/* include/cudaev.hpp: the error category, and the RAII handles.
 *
 *  - category: its name, each outcome's message (cudaev_error_name and
 *    cudaev_error_string), values outside cudaError's range named without
 *    converting them, the outcomes that map to std::errc compare equal,
 *    check() throws std::system_error carrying the code;
 *  - future: copy retains, move steals, assignment and out() release, and
 *    the future is freed exactly when the last handle goes (a user-data
 *    destructor counts it, so a leaked or doubled reference fails here,
 *    under any build; the asan build's LeakSanitizer sees the rest); an
 *    empty handle answers without passing NULL on; wait() with a duration;
 *  - loop: new_foreign, move, move-assignment destroys the loop it held
 *    (its pending promise completes with CUDAEV_ERROR_LOOP_DESTROYED),
 *    release/reset.
 *
 * Plain program, C++17 and later: exit 0 when every check passed. */
#include <cudaev.hpp>

#include <cstdio>
#include <string>
#include <utility>

static int failed, checks;

#define CHECK(c)                                                             \
  do {                                                                       \
    checks++;                                                                \
    if (!(c)) {                                                              \
      failed++;                                                              \
      std::fprintf(stderr, "cxx_handles: FAIL line %d: %s\n", __LINE__, #c); \
    }                                                                        \
  } while (0)

static int freed;
static void count_free(void *) { freed++; }

static bool starts_with(const std::string &s, const char *p) { return s.rfind(p, 0) == 0; }

static void test_category() {
  const std::error_category &c = cudaev::error_category();
  CHECK(std::string(c.name()) == "cudaev");
  CHECK(&c == &cudaev::make_error_code(cudaErrorInvalidValue).category());
  CHECK(!cudaev::make_error_code(cudaSuccess));
  std::error_code inv = cudaev::make_error_code(cudaErrorInvalidValue);
  CHECK(inv.value() == cudaErrorInvalidValue);
  CHECK(starts_with(inv.message(), "cudaErrorInvalidValue: "));
  CHECK(inv == std::errc::invalid_argument);
  std::error_code can = cudaev::make_error_code(CUDAEV_ERROR_CANCELLED);
  CHECK(starts_with(can.message(), "CUDAEV_ERROR_CANCELLED: "));
  CHECK(can == std::errc::operation_canceled);
  CHECK(cudaev::make_error_code(CUDAEV_ERROR_TIMEOUT) == std::errc::timed_out);
  CHECK(starts_with(cudaev::make_error_code(CUDAEV_ERROR_LOOP_DESTROYED).message(),
                    "CUDAEV_ERROR_LOOP_DESTROYED: "));
  CHECK(cudaev::make_error_code(cudaErrorMemoryAllocation) == std::errc::not_enough_memory);
  /* An outcome without a portable meaning is only itself. */
  CHECK(cudaev::make_error_code(cudaErrorIllegalAddress) != std::errc::invalid_argument);
  CHECK(cudaev::make_error_code(cudaErrorIllegalAddress).default_error_condition().category() == c);
  /* Outside cudaError's range: named, never converted. */
  CHECK(c.message(20000) == "unknown cudaev outcome 20000");
  CHECK(c.message(-1) == "unknown cudaev outcome -1");
  bool threw = false;
  try {
    cudaev::check(CUDAEV_ERROR_TIMEOUT, "waiting");
  } catch (const std::system_error &e) {
    threw = e.code() == cudaev::make_error_code(CUDAEV_ERROR_TIMEOUT) &&
            std::string(e.what()).find("waiting") != std::string::npos;
  }
  CHECK(threw);
  cudaev::check(cudaSuccess, "never thrown");
}

static void test_future(cudaev::loop &loop) {
  freed = 0;
  {
    cudaev::future a;
    CHECK(cudaev_promise_new(loop.get(), a.out()) == cudaSuccess);
    cudaev_future_set_user(a.get(), nullptr, count_free);
    cudaev::future b = a; /* retain */
    CHECK(b.get() == a.get());
    cudaev::future c = std::move(a); /* steal */
    CHECK(!a && c.get() == b.get());
    cudaev::future d;
    d = c; /* retain */
    cudaev::future &same = d;
    d = same; /* self-assignment keeps it */
    CHECK(d.get() == b.get());
    cudaev::future e = cudaev::future::retain(d.get());
    CHECK(cudaev_promise_set(e.get(), cudaSuccess) == cudaSuccess);
    CHECK(b.ready() && b.result() == cudaSuccess);
    CHECK(b.wait(std::chrono::milliseconds(0)) == cudaSuccess);
    CHECK(b.loop() == loop.get());
    CHECK(!b.cancel()); /* already complete */
    e.reset();
    b = cudaev::future(); /* move-assign an empty one: releases */
    c.reset();
    cudaev_loop_process(loop.get()); /* the pass that ends its pending state */
    CHECK(freed == 0);               /* d still holds it */
    cudaev_future_t *raw = d.detach();
    CHECK(!d && freed == 0);
    d.reset(raw); /* adopts it back */
  }
  CHECK(freed == 1);

  /* out() releases what it held. */
  freed = 0;
  {
    cudaev::future f;
    CHECK(cudaev_promise_new(loop.get(), f.out()) == cudaSuccess);
    cudaev_future_set_user(f.get(), nullptr, count_free);
    CHECK(f.cancel());
    cudaev_loop_process(loop.get());
    CHECK(cudaev_future_new_timer(loop.get(), 1, f.out()) == cudaSuccess);
    CHECK(freed == 1);
    /* A timer completes in a pass of the loop (nothing drives it here). */
    for (int i = 0; i < 1000 && !f.ready(); i++) cudaev_loop_process(loop.get());
    CHECK(f.wait() == cudaSuccess);
  }
  cudaev_loop_process(loop.get());

  /* A pending promise: wait() with a limit times out, the handle stays. */
  cudaev::future p;
  CHECK(cudaev_promise_new(loop.get(), p.out()) == cudaSuccess);
  CHECK(p.wait(std::chrono::microseconds(500)) == CUDAEV_ERROR_TIMEOUT && !p.ready());
  CHECK(p.cancel() && p.result() == CUDAEV_ERROR_CANCELLED);
  cudaev_loop_process(loop.get());

  /* An empty handle answers, never passing NULL on. */
  cudaev::future none;
  CHECK(!none.ready() && none.result() == cudaErrorInvalidValue && !none.cancel());
  CHECK(none.wait() == cudaErrorInvalidValue && none.loop() == nullptr);
  CHECK(!cudaev::future::retain(nullptr));
}

static void test_loop() {
  std::error_code ec;
  cudaev::loop a = cudaev::loop::new_foreign(ec);
  CHECK(!ec && a && a.fd() >= 0 && a.pending() == 0);
  cudaev::future p;
  CHECK(cudaev_promise_new(a.get(), p.out()) == cudaSuccess);
  CHECK(a.pending() == 1);
  cudaev::loop b = std::move(a);
  CHECK(!a && b && a.fd() == -1 && a.pending() == 0);
  b = cudaev::loop::new_foreign(); /* destroys the first loop */
  CHECK(p.ready() && p.result() == CUDAEV_ERROR_LOOP_DESTROYED);
  cudaev::loop t = cudaev::loop::new_thread();
  CHECK(t && t.fd() == -1);
  cudaev_loop_t *raw = t.release();
  CHECK(!t);
  t.reset(raw);
  t.reset();
  CHECK(!t);
}

int main() {
  test_category();
  cudaev::loop loop = cudaev::loop::new_foreign();
  test_future(loop);
  CHECK(loop.pending() == 0);
  test_loop();
  std::printf("cxx_handles (C++ %ld): %d checks, %d failed\n", static_cast<long>(__cplusplus),
              checks, failed);
  return failed ? 1 : 0;
}
