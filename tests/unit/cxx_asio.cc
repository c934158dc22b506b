/* include/cudaev_asio.hpp: asio_driver and cudaev::async_wait, C++20.
 *
 *  - the driver: the loop's fd (a promise completed on another thread) and
 *    its deadline (a cudaev timer with nothing else to wake the loop) both
 *    reach cudaev_loop_process; stop() lets run() return; a loop that is
 *    not foreign, or none, is refused with a std::system_error;
 *  - async_wait with asio::use_awaitable (success, and a failure thrown as
 *    std::system_error with the outcome's code), with a callback
 *    (driver.async_wait, and async_wait(executor, ...)), with
 *    asio::use_future; an empty future gives cudaErrorInvalidValue; a
 *    future already complete still completes through the executor, never
 *    inside async_wait; a handler never runs inside cudaev_loop_process
 *    (cudaev_future_wait works in it, which a callback would refuse);
 *  - cancellation: a cancellation signal ends the wait with
 *    operation_aborted and leaves the future pending (and its later
 *    completion calls nobody); an awaitable_operators `||` whose other side
 *    wins does the same; future::cancel() completes the wait with
 *    CUDAEV_ERROR_CANCELLED; destroying the io_context with a coroutine
 *    suspended in a wait destroys that coroutine without resuming it, and
 *    the future's later completion touches nothing freed (ASan in the asan
 *    build); a loop destroyed under a wait completes it with
 *    CUDAEV_ERROR_LOOP_DESTROYED;
 *  - nothing leaks: every handler object made is destroyed (counted), and
 *    nothing is left pending on the loop.
 * A 10 s watchdog timer fails a run that would otherwise hang.
 *
 * Plain program: exit 0 when every check passed. */
#include <cudaev_asio.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

using namespace std::chrono_literals;

static int failed, checks;

#define CHECK(c)                                                          \
  do {                                                                    \
    checks++;                                                             \
    if (!(c)) {                                                           \
      failed++;                                                           \
      std::fprintf(stderr, "cxx_asio: FAIL line %d: %s\n", __LINE__, #c); \
    }                                                                     \
  } while (0)

/* Counts live handler objects: made, copied or moved ones each count until
 * destroyed. */
static int live;
struct tracked {
  tracked() { live++; }
  tracked(const tracked &) { live++; }
  tracked(tracked &&) noexcept { live++; }
  ~tracked() { live--; }
};

/* A callback handler recording its one call. */
struct recorder {
  std::error_code *ec;
  int *calls;
  tracked t;
  void operator()(std::error_code e) {
    *ec = e;
    ++*calls;
  }
};

static cudaev::future promise(cudaev::loop &loop) {
  cudaev::future p;
  cudaev::check(cudaev_promise_new(loop.get(), p.out()), "cudaev_promise_new");
  return p;
}

/* Fails the run instead of hanging it. */
static void watchdog(asio::io_context &io, asio::steady_timer &t) {
  t.expires_after(10s);
  t.async_wait([&io](std::error_code ec) {
    if (ec) return;
    std::fprintf(stderr, "cxx_asio: FAIL: the watchdog fired (a wait never completed)\n");
    failed++;
    io.stop();
  });
}

static void test_await_and_deadline() {
  asio::io_context io(1);
  cudaev::loop loop = cudaev::loop::new_foreign();
  cudaev::asio_driver driver(io.get_executor(), loop.get());
  asio::steady_timer dog(io);
  watchdog(io, dog);
  cudaev::future p = promise(loop), bad = promise(loop), t;
  cudaev::check(cudaev_future_new_timer(loop.get(), 20'000'000, t.out()), "timer");
  int steps = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await cudaev::async_wait(p, asio::use_awaitable); /* the fd: another thread */
        CHECK(p.result() == cudaSuccess);
        /* Not inside a cudaev callback: waiting is permitted here. */
        CHECK(p.wait(0ns) == cudaSuccess);
        steps++;
        co_await cudaev::async_wait(t, asio::use_awaitable); /* the deadline alone */
        CHECK(t.result() == cudaSuccess);
        steps++;
        try {
          co_await cudaev::async_wait(bad, asio::use_awaitable);
        } catch (const std::system_error &e) {
          CHECK(e.code() == cudaev::make_error_code(cudaErrorIllegalAddress));
          steps++;
        }
        co_await cudaev::async_wait(cudaev::future(), asio::use_awaitable); /* throws */
      },
      [&](std::exception_ptr e) {
        /* The empty future's wait threw cudaErrorInvalidValue. */
        try {
          if (e) std::rethrow_exception(e);
        } catch (const std::system_error &se) {
          CHECK(se.code() == cudaev::make_error_code(cudaErrorInvalidValue));
          steps++;
        }
        dog.cancel();
        driver.stop();
      });
  std::thread setter([&] {
    std::this_thread::sleep_for(2ms);
    cudaev_promise_set(p.get(), cudaSuccess);
    cudaev_promise_set(bad.get(), cudaErrorIllegalAddress);
  });
  io.run();
  setter.join();
  CHECK(steps == 4);
  CHECK(loop.pending() == 0);
}

static void test_tokens() {
  asio::io_context io(1);
  cudaev::loop loop = cudaev::loop::new_foreign();
  cudaev::asio_driver driver(io.get_executor(), loop.get());
  asio::steady_timer dog(io);
  watchdog(io, dog);

  /* A callback through the driver, and through an explicit executor; the
   * work's own cancel completes with CUDAEV_ERROR_CANCELLED. */
  cudaev::future a = promise(loop), b = promise(loop);
  std::error_code ea, eb;
  int ca = 0, cb = 0;
  driver.async_wait(a, recorder{&ea, &ca, {}});
  cudaev::async_wait(io.get_executor(), b, recorder{&eb, &cb, {}});
  CHECK(live == 2);
  CHECK(a.cancel());
  cudaev_promise_set(b.get(), cudaSuccess);

  /* Already complete: still never inside async_wait. */
  std::error_code ec_done = cudaev::make_error_code(cudaErrorUnknown);
  int c_done = 0;
  driver.async_wait(b, recorder{&ec_done, &c_done, {}});
  CHECK(c_done == 0);

  /* use_future: the handler runs on the future's own executor. */
  cudaev::future u = promise(loop), ubad = promise(loop);
  std::future<void> fu = driver.async_wait(u, asio::use_future);
  std::future<void> fbad = driver.async_wait(ubad, asio::use_future);
  cudaev_promise_set(u.get(), cudaSuccess);
  cudaev_promise_set(ubad.get(), cudaErrorInvalidDevice);
  while ((fu.wait_for(0s) != std::future_status::ready ||
          fbad.wait_for(0s) != std::future_status::ready) &&
         !io.stopped())
    io.run_one_for(100ms);
  driver.stop();
  dog.cancel();
  io.run();
  CHECK(ca == 1 && ea == cudaev::make_error_code(CUDAEV_ERROR_CANCELLED));
  CHECK(ea == std::errc::operation_canceled);
  CHECK(cb == 1 && !eb);
  CHECK(c_done == 1 && !ec_done);
  bool got = false;
  try {
    fu.get();
    fbad.get();
  } catch (const std::system_error &e) {
    got = e.code() == cudaev::make_error_code(cudaErrorInvalidDevice);
  }
  CHECK(got);
  CHECK(live == 0);
  cudaev_loop_process(loop.get());
  CHECK(loop.pending() == 0);
}

static void test_cancel() {
  using namespace asio::experimental::awaitable_operators;
  asio::io_context io(1);
  cudaev::loop loop = cudaev::loop::new_foreign();
  cudaev::asio_driver driver(io.get_executor(), loop.get());
  asio::steady_timer dog(io);
  watchdog(io, dog);

  /* A signal: the wait ends, the future stays pending, its later
   * completion calls nobody. */
  cudaev::future p = promise(loop);
  asio::cancellation_signal sig;
  std::error_code ec;
  int calls = 0;
  driver.async_wait(p, asio::bind_cancellation_slot(sig.slot(), recorder{&ec, &calls, {}}));
  io.poll();
  CHECK(calls == 0);
  sig.emit(asio::cancellation_type::terminal);
  io.poll();
  CHECK(calls == 1 && ec == asio::error::operation_aborted);
  CHECK(!p.ready());
  cudaev_promise_set(p.get(), cudaSuccess);

  /* `||`: the timer wins, the wait is cancelled, the future untouched. */
  cudaev::future q = promise(loop);
  int which = -1;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer t(io, 5ms);
        auto r = co_await (cudaev::async_wait(q, asio::use_awaitable) ||
                           t.async_wait(asio::use_awaitable));
        which = static_cast<int>(r.index());
      },
      [&](std::exception_ptr) {
        dog.cancel();
        driver.stop();
      });
  io.run();
  CHECK(which == 1);
  CHECK(!q.ready() && q.cancel());
  CHECK(calls == 1);
  CHECK(live == 0);
  cudaev_loop_process(loop.get());
  CHECK(loop.pending() == 0);
}

static void test_context_destroyed() {
  cudaev::loop loop = cudaev::loop::new_foreign();
  cudaev::future p = promise(loop);
  int resumed = 0, destroyed = 0;
  struct guard {
    int *n;
    ~guard() { ++*n; }
  };
  {
    asio::io_context io(1);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          guard g{&destroyed};
          co_await cudaev::async_wait(p, asio::use_awaitable);
          resumed++;
        },
        asio::detached);
    io.poll(); /* the coroutine starts and suspends in the wait */
    CHECK(destroyed == 0);
    /* A callback wait too, with a handler object to count. */
    std::error_code ec;
    int calls = 0;
    cudaev::async_wait(io.get_executor(), p, recorder{&ec, &calls, {}});
    CHECK(live == 1);
    /* ~io_context: the waits end without their handlers running. */
  }
  CHECK(destroyed == 1 && resumed == 0);
  CHECK(live == 0);
  /* The future completes later; its continuations find the waits ended. */
  cudaev_promise_set(p.get(), cudaSuccess);
  cudaev_loop_process(loop.get());
  CHECK(resumed == 0 && loop.pending() == 0);
}

static void test_loop_destroyed() {
  asio::io_context io(1);
  cudaev::loop loop = cudaev::loop::new_foreign();
  cudaev::future p = promise(loop);
  std::error_code ec;
  int calls = 0;
  cudaev::async_wait(io.get_executor(), p, recorder{&ec, &calls, {}});
  loop.reset(); /* the continuation runs inside; the handler is posted */
  CHECK(calls == 0);
  io.run(); /* returns once the handler ran: the wait was the only work */
  CHECK(calls == 1 && ec == cudaev::make_error_code(CUDAEV_ERROR_LOOP_DESTROYED));
  CHECK(live == 0);
}

static void test_bad_driver() {
  asio::io_context io(1);
  cudaev::loop t = cudaev::loop::new_thread();
  for (cudaev_loop_t *l : {t.get(), static_cast<cudaev_loop_t *>(nullptr)}) {
    bool refused = false;
    try {
      cudaev::asio_driver d(io.get_executor(), l);
    } catch (const std::system_error &e) {
      refused = e.code() == cudaev::make_error_code(cudaErrorInvalidValue);
    }
    CHECK(refused);
  }
  /* A thread-mode loop's future, awaited from the io_context. */
  cudaev::future tm;
  cudaev::check(cudaev_future_new_timer(t.get(), 1'000'000, tm.out()), "timer");
  std::error_code ec = cudaev::make_error_code(cudaErrorUnknown);
  int calls = 0;
  cudaev::async_wait(io.get_executor(), tm, recorder{&ec, &calls, {}});
  io.run(); /* the wait is work: run() returns after the handler */
  CHECK(calls == 1 && !ec);
}

int main() {
  test_await_and_deadline();
  test_tokens();
  test_cancel();
  test_context_destroyed();
  test_loop_destroyed();
  test_bad_driver();
  CHECK(live == 0);
  std::printf("cxx_asio (C++ %ld): %d checks, %d failed\n", static_cast<long>(__cplusplus), checks,
              failed);
  return failed ? 1 : 0;
}
