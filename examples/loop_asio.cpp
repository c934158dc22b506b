/* loop_asio: a cudaev loop inside an Asio io_context, GPU futures awaited by
 * C++20 coroutines (include/cudaev_asio.hpp).
 *
 * NREQ coroutines are co_spawned on one io_context. With a GPU each runs a
 * request on its own stream: copy a pattern to the device, memset the
 * second half, copy it all back, awaiting each step (co_await
 * cudaev::async_wait(f, asio::use_awaitable)), then checks the bytes.
 * Without one (--promises) each awaits a promise a worker thread completes
 * with a value, then a cudaev timer. One more coroutine waits for a slow
 * promise under cudaev_future_new_timeout and must see CUDAEV_ERROR_TIMEOUT
 * (as a std::error_code, through asio::redirect_error); the worker's late
 * completion of that promise then succeeds. Meanwhile an asio::steady_timer
 * ticks on the same thread: the coroutines' waits never block it. When all
 * are done the driver stops and io.run() returns.
 *
 * Threads: every coroutine, cudaev callback and timer runs on the main
 * thread, inside io.run(). The worker only completes promises (thread-safe).
 * Ownership: main owns the io_context, the loop and the driver (declared
 * in that order: the driver dies first, then the io_context, then the loop).
 *
 *   loop_asio [--gpu | --promises]   exit 0: every check passed; 77: --gpu, no GPU;
 *                                     no option: the GPU when there is one
 */
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "cudaev_asio.hpp"

using namespace std::chrono_literals;

namespace {

constexpr int NREQ = 8;
constexpr size_t BYTES = 64 * 1024;

struct app {
  cudaev::loop loop;
  bool gpu = false;
  std::array<cudaev::future, NREQ> promise; /* --promises: set by the worker */
  cudaev::future slow;                      /* never set in time */
  std::array<int, NREQ> ok{};               /* each request's check passed */
  int slow_ok = 0, done = 0, ticks = 0, failures = 0;
};

void fail(app &a, const char *what, const std::error_code &ec) {
  std::printf("loop_asio: %s: %s\n", what, ec.message().c_str());
  a.failures++;
}

/* One GPU request on its own stream; every step is awaited. */
asio::awaitable<void> gpu_request(app &a, int i) {
  cudaStream_t s = nullptr;
  unsigned char *in = nullptr, *out = nullptr;
  void *dev = nullptr;
  try {
    cudaev::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaev::check(cudaMallocHost(reinterpret_cast<void **>(&in), BYTES), "cudaMallocHost");
    cudaev::check(cudaMallocHost(reinterpret_cast<void **>(&out), BYTES), "cudaMallocHost");
    cudaev::check(cudaMalloc(&dev, BYTES), "cudaMalloc");
    for (size_t j = 0; j < BYTES; j++) in[j] = static_cast<unsigned char>(i * 31 + j);
    std::memset(out, 0, BYTES);
    cudaev::future f;
    cudaev::check(
        cudaev_memcpy_async(a.loop.get(), dev, in, BYTES, cudaMemcpyHostToDevice, s, f.out()),
        "cudaev_memcpy_async");
    co_await cudaev::async_wait(f, asio::use_awaitable);
    cudaev::check(cudaev_memset_async(a.loop.get(), static_cast<char *>(dev) + BYTES / 2, 0x5a + i,
                                      BYTES / 2, s, f.out()),
                  "cudaev_memset_async");
    co_await cudaev::async_wait(f, asio::use_awaitable);
    cudaev::check(
        cudaev_memcpy_async(a.loop.get(), out, dev, BYTES, cudaMemcpyDeviceToHost, s, f.out()),
        "cudaev_memcpy_async");
    co_await cudaev::async_wait(f, asio::use_awaitable);
    bool good = true;
    for (size_t j = 0; good && j < BYTES; j++)
      good = out[j] == (j < BYTES / 2 ? in[j] : static_cast<unsigned char>(0x5a + i));
    a.ok[i] = good;
    if (!good) std::printf("loop_asio: request %d: wrong bytes came back\n", i);
  } catch (const std::system_error &e) {
    fail(a, e.what(), e.code());
  }
  if (s != nullptr) cudaStreamDestroy(s);
  cudaFreeHost(in);
  cudaFreeHost(out);
  cudaFree(dev);
}

/* One promise request: the worker's value, then a cudaev timer. */
asio::awaitable<void> promise_request(app &a, int i) {
  try {
    co_await cudaev::async_wait(a.promise[i], asio::use_awaitable);
    cudaev::future t;
    cudaev::check(cudaev_future_new_timer(a.loop.get(), 1000000, t.out()), "timer");
    co_await cudaev::async_wait(t, asio::use_awaitable);
    a.ok[i] = a.promise[i].result() == cudaSuccess && t.result() == cudaSuccess;
  } catch (const std::system_error &e) {
    fail(a, e.what(), e.code());
  }
}

/* The slow one: a deadline, reported as an error code instead of thrown. */
asio::awaitable<void> slow_request(app &a) {
  cudaev::future limited;
  cudaev::check(cudaev_future_new_timeout(a.slow.get(), 20000000, limited.out()), "timeout");
  std::error_code ec;
  co_await cudaev::async_wait(limited, asio::redirect_error(asio::use_awaitable, ec));
  a.slow_ok = ec == cudaev::make_error_code(CUDAEV_ERROR_TIMEOUT) && !a.slow.ready();
  if (!a.slow_ok) fail(a, "slow request", ec);
}

int usage() {
  std::fprintf(stderr, "usage: loop_asio [--gpu | --promises]  (--gpu: exit 77 without a GPU)\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  bool need_gpu = false, promises = false;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--gpu") == 0)
      need_gpu = true;
    else if (std::strcmp(argv[i], "--promises") == 0)
      promises = true;
    else
      return usage();
  }
  if (need_gpu && promises) return usage();
  app a;
  if (!promises) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n == 0) e = cudaErrorNoDevice;
    if (e != cudaSuccess && need_gpu) {
      std::printf("SKIP: no GPU (%s: %s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
      return 77;
    }
    if (e != cudaSuccess)
      std::printf("loop_asio: no GPU (%s), so the requests are promises\n", cudaGetErrorName(e));
    a.gpu = e == cudaSuccess;
  }

  asio::io_context io(1);
  try {
    a.loop = cudaev::loop::new_foreign();
  } catch (const std::system_error &e) {
    std::printf("loop_asio: %s\n", e.what());
    return 1;
  }
  std::thread worker;
  {
    cudaev::asio_driver driver(io.get_executor(), a.loop.get());
    for (auto &p : a.promise)
      if (!a.gpu) cudaev::check(cudaev_promise_new(a.loop.get(), p.out()), "promise");
    cudaev::check(cudaev_promise_new(a.loop.get(), a.slow.out()), "promise");

    /* An Asio timer of the application's, on the same thread. */
    asio::steady_timer tick(io);
    std::function<void(const std::error_code &)> on_tick = [&](const std::error_code &ec) {
      /* A tick that fired just before the last request finished still
       * runs (cancel cannot take back a completed wait): it must not arm
       * the next, or io.run() would never run out of work. */
      if (ec || a.done == NREQ + 1) return;
      a.ticks++;
      tick.expires_after(2ms);
      tick.async_wait(on_tick);
    };
    tick.expires_after(2ms);
    tick.async_wait(on_tick);

    auto finished = [&](std::exception_ptr) {
      if (++a.done == NREQ + 1) {
        tick.cancel();
        driver.stop(); /* nothing else keeps io.run() going */
      }
    };
    for (int i = 0; i < NREQ; i++)
      asio::co_spawn(io, a.gpu ? gpu_request(a, i) : promise_request(a, i), finished);
    asio::co_spawn(io, slow_request(a), finished);

    /* The worker: a value every millisecond, then the slow one, late. */
    worker = std::thread([&a] {
      for (int i = 0; !a.gpu && i < NREQ; i++) {
        std::this_thread::sleep_for(1ms);
        cudaev_promise_set(a.promise[i].get(), cudaSuccess);
      }
      std::this_thread::sleep_for(40ms);
      cudaev_promise_set(a.slow.get(), cudaSuccess);
    });
    io.run();
  }
  worker.join();

  int good = 0;
  for (int v : a.ok) good += v;
  bool ok = a.failures == 0 && good == NREQ && a.slow_ok && a.done == NREQ + 1 && a.ticks > 0 &&
            a.slow.result() == cudaSuccess;
  /* The slow promise was set after io.run returned: its completion waits
   * for a pass of the loop; nothing else may be pending. */
  cudaev_loop_process(a.loop.get());
  size_t pending = a.loop.pending();
  ok = ok && pending == 0;
  std::printf(
      "loop_asio: %d of %d requests checked (%s), the slow one timed out (%s), the asio timer "
      "ticked meanwhile (%s), %zu pending; %s\n",
      good, NREQ, a.gpu ? "GPU copies and memsets" : "promises and timers",
      a.slow_ok ? "CUDAEV_ERROR_TIMEOUT" : "no", a.ticks > 0 ? "yes" : "no", pending,
      ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
