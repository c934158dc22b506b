/* cudaev_asio.hpp: a cudaev loop inside an Asio io_context, and futures as
 * Asio asynchronous operations. C++17 and standalone Asio (Debian
 * libasio-dev, 1.22 or later); `co_await` with asio::use_awaitable needs
 * C++20 where the program uses it, not here. Header-only.
 *
 *   asio::io_context io(1);
 *   cudaev::loop loop = cudaev::loop::new_foreign();
 *   cudaev::asio_driver driver(io.get_executor(), loop.get());
 *   co_spawn(io, [&]() -> asio::awaitable<void> {
 *     cudaev::future f;
 *     cudaev::check(cudaev_memcpy_async(loop.get(), dst, src, n, kind, stream, f.out()), "copy");
 *     co_await cudaev::async_wait(f, asio::use_awaitable);  // throws std::system_error
 *     driver.stop();                                          // lets io.run() return
 *   }, asio::detached);
 *   io.run();
 *
 * asio_driver drives a foreign-mode loop (cudaev_loop_new_foreign) from the
 * io_context: an asio::posix::stream_descriptor waits for the loop's fd to
 * be readable, and the loop's deadline, pushed by cudaev_loop_set_timer_cb
 * (Asio has no hook right before it blocks), arms an asio::steady_timer;
 * either calls cudaev_loop_process. So every cudaev callback runs inside
 * the io_context's run(), on its thread.
 *
 * async_wait(f, token) is an Asio operation (asio::async_initiate) that
 * completes with void(std::error_code) when f does: an empty code for
 * cudaSuccess, else cudaev::make_error_code(outcome) (CUDAEV_ERROR_CANCELLED
 * when f was cancelled, CUDAEV_ERROR_LOOP_DESTROYED when its loop was
 * destroyed first). Any completion token works: asio::use_awaitable (which
 * throws std::system_error on an error; asio::redirect_error(use_awaitable,
 * ec) does not), a callback, asio::use_future. The handler is invoked
 * through its associated executor, as by asio::post: never inside
 * async_wait, never inside cudaev_loop_process (so it may destroy the loop
 * or the driver). The future may belong to any loop: a thread-mode loop's
 * completion is posted across threads the same way.
 *
 * Cancellation (the handler's asio::cancellation_slot: a coroutine under
 * asio::experimental::awaitable_operators `||`, a cancellation_signal):
 * terminal, partial and total cancellation end the wait, which completes
 * with asio::error::operation_aborted (Asio's own code; it does not compare
 * equal to std::errc::operation_canceled). The future is left alone: its work goes
 * on and others may still wait for it; cancel the work itself with
 * future::cancel(), which completes the wait with CUDAEV_ERROR_CANCELLED
 * (equal to std::errc::operation_canceled). Destroying the io_context
 * while waits are pending destroys their handlers without invoking them,
 * as Asio does with its own operations (a coroutine suspended in the wait
 * is destroyed); the futures are left alone here too.
 *
 * Threads: one thread runs the io_context (cudaev_loop_process accepts
 * one driving thread); the driver's members and async_wait are called on
 * it. A cancellation signal is emitted on it too (Asio's rule). Futures may
 * be completed from any thread (cudaev_promise_set, the GPU).
 * Ownership: the application owns the io_context, the loop and the driver;
 * destroy the driver before the io_context (it holds Asio objects of it)
 * and stop it before the loop is destroyed (destroying the loop closes the
 * fd the driver watches); do not cudaev_loop_close a loop a driver drives.
 * async_wait holds its own reference to the future until it completes.
 * Outstanding work: the driver keeps run() from returning until stop(), as
 * a libuv poll handle keeps uv_run running; a pending async_wait counts as
 * work of its io executor.
 */
#ifndef CUDAEV_ASIO_HPP
#define CUDAEV_ASIO_HPP

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/error.hpp>
#include <asio/async_result.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/post.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudaev.hpp"

namespace cudaev {

namespace detail {

struct wait_registry;

/* One pending async_wait. Whoever first sets `done` under the registry's
 * lock (the future's continuation, a cancellation, the io_context's
 * shutdown) decides how it ends; the others find it done and leave. */
struct wait_op : std::enable_shared_from_this<wait_op> {
  explicit wait_op(std::shared_ptr<wait_registry> r) : reg(std::move(r)) {}
  virtual ~wait_op() = default;
  wait_op(const wait_op &) = delete;
  wait_op &operator=(const wait_op &) = delete;
  /* Under the lock, once: posts the handler with ec. */
  virtual void complete(const std::error_code &ec) noexcept = 0;
  /* Outside the lock, once: destroys the handler without invoking it. */
  virtual void abandon() noexcept = 0;

  std::shared_ptr<wait_registry> reg;
  wait_op *prev = nullptr, *next = nullptr;
  bool done = false;
};

/* The pending waits of one execution context. Shared with every wait, so
 * that a continuation running on another thread after the context is gone
 * still finds the lock and `shut`. */
struct wait_registry {
  std::mutex mu;
  bool shut = false;
  wait_op *head = nullptr;

  void link(wait_op *op) noexcept {
    op->next = head;
    if (head != nullptr) head->prev = op;
    head = op;
  }
  void unlink(wait_op *op) noexcept {
    if (op->prev != nullptr) op->prev->next = op->next;
    if (op->next != nullptr) op->next->prev = op->prev;
    if (head == op) head = op->next;
    op->prev = op->next = nullptr;
  }
};

/* Ends the waits of an execution context when it shuts down (its
 * destructor): their handlers hold its executors. */
class wait_service final : public asio::execution_context::service {
 public:
  inline static asio::execution_context::id id;

  explicit wait_service(asio::execution_context &ctx)
      : asio::execution_context::service(ctx), reg(std::make_shared<wait_registry>()) {}

  const std::shared_ptr<wait_registry> reg;

 private:
  void shutdown() override {
    std::vector<std::shared_ptr<wait_op>> ended;
    {
      std::lock_guard<std::mutex> g(reg->mu);
      reg->shut = true;
      while (wait_op *op = reg->head) {
        reg->unlink(op);
        op->done = true;
        ended.push_back(op->shared_from_this());
      }
    }
    /* Outside the lock: destroying a coroutine may start another wait. */
    for (auto &op : ended) op->abandon();
  }
};

inline void wait_finish(wait_op &op, const std::error_code &ec) noexcept {
  std::lock_guard<std::mutex> g(op.reg->mu);
  if (op.done) return;
  op.done = true;
  op.reg->unlink(&op);
  op.complete(ec);
}

/* The future's continuation (loop thread, inside cudaev_loop_process or
 * cudaev_loop_destroy). `user` is a heap std::shared_ptr<wait_op>. */
inline void wait_on_done(cudaev_future_t *, cudaError_t status, void *user) {
  std::shared_ptr<wait_op> op(std::move(*static_cast<std::shared_ptr<wait_op> *>(user)));
  delete static_cast<std::shared_ptr<wait_op> *>(user);
  wait_finish(*op, status == cudaSuccess ? std::error_code() : make_error_code(status));
}

/* Installed in the handler's cancellation slot; weak, so that a stale one
 * left in the slot keeps nothing alive. */
struct wait_cancel {
  std::weak_ptr<wait_op> op;
  void operator()(asio::cancellation_type_t t) {
    using ct = asio::cancellation_type;
    if ((t & (ct::terminal | ct::partial | ct::total)) == ct::none) return;
    if (std::shared_ptr<wait_op> o = op.lock()) wait_finish(*o, asio::error::operation_aborted);
  }
};

template <class Handler, class Work>
class wait_op_impl final : public wait_op {
 public:
  wait_op_impl(std::shared_ptr<wait_registry> r, Handler &&h, Work w)
      : wait_op(std::move(r)), h_(std::move(h)), work_(std::move(w)) {}

  void complete(const std::error_code &ec) noexcept override {
    /* The handler's own executor (the io executor when it has none). A
     * handler that cannot be posted (out of memory) is destroyed, as at
     * shutdown: an exception must not cross the C continuation. */
    try {
      auto ex = asio::get_associated_executor(*h_, *work_);
      asio::post(ex, [h = std::move(*h_), ec]() mutable {
        asio::get_associated_cancellation_slot(h).clear();
        std::move(h)(ec);
      });
    } catch (...) {
    }
    h_.reset();
    work_.reset(); /* after the post: run() must not see no work in between */
  }

  void abandon() noexcept override {
    h_.reset();
    work_.reset();
  }

 private:
  std::optional<Handler> h_;
  std::optional<Work> work_;
};

/* The executor type a handler has when it has none of its own. */
struct no_executor {};

template <class IoExecutor>
struct initiate_wait {
  IoExecutor io;

  template <class Handler>
  void operator()(Handler &&handler, cudaev_future_t *f) const {
    using H = std::decay_t<Handler>;
    auto work = asio::prefer(io, asio::execution::outstanding_work.tracked);
    auto &svc = asio::use_service<wait_service>(asio::query(io, asio::execution::context));
    /* The slot is the cancellation state's, not the handler object's: it
     * stays valid once the handler moved into the operation. */
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<wait_op_impl<H, decltype(work)>>(svc.reg, H(std::move(handler)),
                                                                std::move(work));
    {
      std::lock_guard<std::mutex> g(svc.reg->mu);
      if (svc.reg->shut)
        op->done = true; /* the context is going: as at its shutdown */
      else
        svc.reg->link(op.get());
    }
    if (op->done) {
      op->abandon();
      return;
    }
    /* Done already (or no future): complete now, through the executor. */
    if (f == nullptr || cudaev_future_ready(f)) {
      cudaError_t r = f == nullptr ? cudaErrorInvalidValue : cudaev_future_result(f);
      wait_finish(*op, r == cudaSuccess ? std::error_code() : make_error_code(r));
      return;
    }
    if (slot.is_connected()) slot.template emplace<wait_cancel>(wait_cancel{op});
    auto *hold = new std::shared_ptr<wait_op>(op);
    cudaError_t e = cudaev_future_then(f, wait_on_done, hold);
    if (e != cudaSuccess) {
      delete hold;
      wait_finish(*op, make_error_code(e));
    }
  }
};

template <class Handler>
inline constexpr bool has_executor =
    !std::is_same_v<asio::associated_executor_t<Handler, no_executor>, no_executor>;

}  // namespace detail

/* Waits for f as an Asio operation (the top of this file says how it
 * completes, and cancellation). The handler's associated executor is the
 * io executor (its context tracks the wait, and the wait counts as its
 * work): use_awaitable inside a coroutine has one, a callback gets one with
 * asio::bind_executor(ex, cb); a handler without one (a plain lambda,
 * asio::use_future) is refused at compile time: use asio_driver::async_wait
 * or the overload with an executor. f is read during the call only (the
 * wait takes its own reference). An empty f completes with
 * cudaErrorInvalidValue. Thread: the io_context's. */
template <class CompletionToken>
auto async_wait(const future &f, CompletionToken &&token) {
  return asio::async_initiate<CompletionToken, void(std::error_code)>(
      [](auto &&handler, cudaev_future_t *fp) {
        using H = std::decay_t<decltype(handler)>;
        static_assert(detail::has_executor<H>,
                      "cudaev::async_wait: this handler has no associated executor; pass one "
                      "(cudaev::async_wait(ex, f, token)) or bind one (asio::bind_executor)");
        if constexpr (detail::has_executor<H>) {
          auto ex = asio::get_associated_executor(handler);
          detail::initiate_wait<decltype(ex)>{ex}(std::forward<decltype(handler)>(handler), fp);
        }
      },
      token, f.get());
}

/* The same with an io executor given: handlers without an executor of
 * their own are invoked through it (use_future's through its own). */
template <class Executor, class CompletionToken,
          class = std::enable_if_t<asio::execution::is_executor<Executor>::value>>
auto async_wait(const Executor &ex, const future &f, CompletionToken &&token) {
  return asio::async_initiate<CompletionToken, void(std::error_code)>(
      detail::initiate_wait<Executor>{ex}, token, f.get());
}

/* Drives a foreign-mode loop from an io_context (the top of this file
 * says how, and the thread and ownership rules). Not copyable or movable
 * (the loop's timer callback points at it). */
class asio_driver {
 public:
  using executor_type = asio::any_io_executor;

  /* Starts watching `loop`'s fd and deadline with objects of ex's
   * io_context. Throws std::system_error: make_error_code(
   * cudaErrorInvalidValue) when loop is NULL or not in foreign mode, or
   * Asio's error if the fd cannot be watched. Thread: the io_context's. */
  asio_driver(const executor_type &ex, cudaev_loop_t *loop)
      : s_(std::make_shared<state>(ex, loop)) {
    int fd = loop != nullptr ? cudaev_loop_fd(loop) : -1;
    if (fd < 0)
      throw std::system_error(make_error_code(cudaErrorInvalidValue),
                              "cudaev::asio_driver: not a foreign-mode loop");
    s_->fd.assign(fd);
    watch(s_);
    cudaev_loop_set_timer_cb(loop, on_deadline, s_.get()); /* tells the first deadline now */
  }
  asio_driver(const asio_driver &) = delete;
  asio_driver &operator=(const asio_driver &) = delete;
  ~asio_driver() { stop(); }

  /* Stops driving the loop: clears the loop's timer callback, hands the fd
   * back to the loop (never closes it) and cancels the driver's Asio waits,
   * so that run() can return. Idempotent; legal inside a cudaev callback.
   * The loop keeps its futures; a later driver may drive it again.
   * Thread: the io_context's. */
  void stop() noexcept {
    if (s_->stopped) return;
    s_->stopped = true;
    cudaev_loop_set_timer_cb(s_->loop, nullptr, nullptr);
    s_->timer.cancel();
    s_->fd.release(); /* cancels the wait; the fd stays the loop's */
  }

  executor_type get_executor() const noexcept { return s_->fd.get_executor(); }
  cudaev_loop_t *loop() const noexcept { return s_->loop; }

  /* cudaev::async_wait with this driver's executor as the io executor:
   * takes any completion token (a plain callback runs on the io_context).
   * Thread: the io_context's. */
  template <class CompletionToken>
  auto async_wait(const future &f, CompletionToken &&token) const {
    return cudaev::async_wait(get_executor(), f, std::forward<CompletionToken>(token));
  }

 private:
  /* Shared with the driver's pending Asio handlers, which may run (with
   * operation_aborted) after the driver is gone. */
  struct state : std::enable_shared_from_this<state> {
    state(const executor_type &ex, cudaev_loop_t *l) : loop(l), fd(ex), timer(ex) {}
    cudaev_loop_t *loop;
    asio::posix::stream_descriptor fd;
    asio::steady_timer timer;
    bool stopped = false;
    bool told = false;      /* the loop told a deadline during this pass */
    bool timer_due = false; /* our timer fired: its deadline is used up */
  };

  static void process(const std::shared_ptr<state> &s) {
    s->told = false;
    cudaev_loop_process(s->loop);
    /* The loop tells only a deadline that moved; if ours was used up and
     * the pass told none, ask (the same as the loop's own check). */
    if (!s->stopped && s->timer_due && !s->told) arm(*s, cudaev_loop_prepare_ns(s->loop));
  }

  static void watch(const std::shared_ptr<state> &s) {
    s->fd.async_wait(asio::posix::stream_descriptor::wait_read, [s](const std::error_code &ec) {
      if (s->stopped) return;
      if (ec) throw std::system_error(ec, "cudaev::asio_driver: waiting for the loop's fd");
      /* Asio's reactor is edge-triggered: a write to the fd while no wait
       * is queued is not reported. So the next wait is queued before the
       * pass drains the fd: a write before the drain is seen by the pass,
       * one after it wakes the new wait. */
      watch(s);
      process(s);
    });
  }

  static void arm(state &s, int64_t ns) {
    s.timer_due = false;
    if (ns < 0) {
      s.timer.cancel();
      return;
    }
    s.timer.expires_after(std::chrono::nanoseconds(ns)); /* cancels the previous wait */
    s.timer.async_wait([self = s.shared_from_this()](const std::error_code &ec) {
      if (ec == asio::error::operation_aborted || self->stopped) return;
      self->timer_due = true;
      process(self);
    });
  }

  /* The loop's timer callback: inside cudaev_loop_set_timer_cb or at the
   * end of cudaev_loop_process, on the io_context's thread. noexcept: an
   * exception must not cross the C library; a timer that cannot be armed
   * (out of memory) terminates, as the loop could never wake for it. */
  static void on_deadline(cudaev_loop_t *, int64_t ns, void *user) noexcept {
    state *s = static_cast<state *>(user);
    s->told = true;
    arm(*s, ns);
  }

  std::shared_ptr<state> s_;
};

}  // namespace cudaev

#endif
