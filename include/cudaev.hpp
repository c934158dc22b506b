/* cudaev.hpp: C++ handles for the cudaev API (include/cudaev.h). C++17,
 * header-only, no dependency beyond cudaev.h and the standard library; the
 * Asio integration is in <cudaev_asio.hpp>.
 *
 *   cudaev::loop loop = cudaev::loop::new_foreign();   // throws std::system_error
 *   cudaev::future f;
 *   cudaev::check(cudaev_promise_new(loop.get(), f.out()), "cudaev_promise_new");
 *   if (f.wait(std::chrono::milliseconds(5)) == CUDAEV_ERROR_TIMEOUT) f.cancel();
 *
 * What is here:
 *  - cudaev::error_category() and cudaev::make_error_code(cudaError_t): an
 *    outcome (a CUDA error or one of ours) as a std::error_code, named by
 *    cudaev_error_name and described by cudaev_error_string. The outcomes
 *    that have a portable meaning compare equal to std::errc values
 *    (CUDAEV_ERROR_CANCELLED == std::errc::operation_canceled, ...).
 *    std::is_error_code_enum is not specialised for cudaError: the enum is
 *    NVIDIA's, in the global namespace, and a second library specialising
 *    it too would break the program; call cudaev::make_error_code.
 *  - cudaev::loop: owns a loop (move-only); its destructor destroys it.
 *  - cudaev::future: owns one reference to a future (copy retains, move
 *    steals, the destructor releases).
 * Nothing here wraps the submissions (cudaev_memcpy_async, ...): call the C
 * function with loop.get() and future.out().
 *
 * Threads: the rules are the C functions' (include/cudaev.h): each member
 * says which it calls. A handle object itself is not thread-safe (as a
 * std::shared_ptr instance is not); distinct handles to one future may be
 * used on different threads.
 * Errors: functions that throw say so and throw std::system_error with the
 * outcome's code; the others are noexcept and return the outcome.
 */
#ifndef CUDAEV_HPP
#define CUDAEV_HPP

#include <cudaev.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>

#if !defined(_MSVC_LANG) && __cplusplus < 201703L
#error "cudaev.hpp needs C++17 or later"
#endif

namespace cudaev {

namespace detail {

class category final : public std::error_category {
 public:
  const char *name() const noexcept override { return "cudaev"; }

  /* "<name>: <description>". A value outside cudaError's range (0..16383,
   * include/cudaev.h says why) is never converted to cudaError_t, which
   * would be undefined behaviour in C++. */
  std::string message(int v) const override {
    if (v < 0 || v > 16383) return "unknown cudaev outcome " + std::to_string(v);
    cudaError_t e = static_cast<cudaError_t>(v);
    return std::string(cudaev_error_name(e)) + ": " + cudaev_error_string(e);
  }

  std::error_condition default_error_condition(int v) const noexcept override {
    switch (v) {
    case CUDAEV_ERROR_CANCELLED: return std::errc::operation_canceled;
    case CUDAEV_ERROR_TIMEOUT: return std::errc::timed_out;
    case cudaErrorMemoryAllocation: return std::errc::not_enough_memory;
    case cudaErrorInvalidValue: return std::errc::invalid_argument;
    case cudaErrorNotPermitted: return std::errc::operation_not_permitted;
    case cudaErrorNotSupported: return std::errc::not_supported;
    default: return std::error_condition(v, *this);
    }
  }
};

}  // namespace detail

/* The category of cudaev outcomes; name() is "cudaev". One object per
 * program (an inline function's static). Thread: any. */
inline const std::error_category &error_category() noexcept {
  static const detail::category c;
  return c;
}

/* An outcome as a std::error_code (cudaSuccess gives value 0, false).
 * Thread: any. */
inline std::error_code make_error_code(cudaError_t e) noexcept {
  return std::error_code(static_cast<int>(e), error_category());
}

/* Throws std::system_error(make_error_code(e), what) unless e is
 * cudaSuccess. Thread: any. */
inline void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) throw std::system_error(make_error_code(e), what);
}

/* Owns a loop: the destructor (and reset, and move assignment) calls
 * cudaev_loop_destroy, so the rules of that function apply to where the
 * handle may die: foreign mode, on the driving thread outside
 * cudaev_loop_process (not inside a cudaev callback: it would abort);
 * thread mode, any thread but the loop's own. Never give it
 * cudaev_loop_default(). Stop whatever watches the loop's fd (an
 * asio_driver) before the loop dies: destroying the loop closes the fd.
 * Move-only. */
class loop {
 public:
  loop() noexcept = default;
  /* Takes ownership of l (may be NULL). */
  explicit loop(cudaev_loop_t *l) noexcept : l_(l) {}
  loop(const loop &) = delete;
  loop &operator=(const loop &) = delete;
  loop(loop &&o) noexcept : l_(o.release()) {}
  loop &operator=(loop &&o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  ~loop() { reset(); }

  /* cudaev_loop_new_foreign / cudaev_loop_new_thread; throw
   * std::system_error on failure, or set ec (and give an empty handle).
   * Thread: any. */
  static loop new_foreign() { return make(cudaev_loop_new_foreign, "cudaev_loop_new_foreign"); }
  static loop new_foreign(std::error_code &ec) noexcept {
    return make(cudaev_loop_new_foreign, ec);
  }
  static loop new_thread() { return make(cudaev_loop_new_thread, "cudaev_loop_new_thread"); }
  static loop new_thread(std::error_code &ec) noexcept { return make(cudaev_loop_new_thread, ec); }

  cudaev_loop_t *get() const noexcept { return l_; }
  explicit operator bool() const noexcept { return l_ != nullptr; }
  /* Gives up ownership without destroying. */
  cudaev_loop_t *release() noexcept {
    cudaev_loop_t *l = l_;
    l_ = nullptr;
    return l;
  }
  /* Destroys the loop held (if any), then holds l. */
  void reset(cudaev_loop_t *l = nullptr) noexcept {
    cudaev_loop_t *old = l_;
    l_ = l;
    if (old != nullptr) cudaev_loop_destroy(old);
  }

  /* cudaev_loop_fd (-1 when empty or not foreign). Thread: any. */
  int fd() const noexcept { return l_ != nullptr ? cudaev_loop_fd(l_) : -1; }
  /* cudaev_loop_pending (0 when empty). Thread: any. */
  std::size_t pending() const noexcept { return l_ != nullptr ? cudaev_loop_pending(l_) : 0; }

 private:
  static loop make(cudaError_t (*fn)(cudaev_loop_t **), const char *what) {
    std::error_code ec;
    loop l = make(fn, ec);
    if (ec) throw std::system_error(ec, what);
    return l;
  }
  static loop make(cudaError_t (*fn)(cudaev_loop_t **), std::error_code &ec) noexcept {
    cudaev_loop_t *l = nullptr;
    cudaError_t e = fn(&l);
    ec = e == cudaSuccess ? std::error_code() : make_error_code(e);
    return loop(e == cudaSuccess ? l : nullptr);
  }

  cudaev_loop_t *l_ = nullptr;
};

/* One reference to a future. Copying retains (cudaev_future_retain),
 * moving steals, the destructor releases (cudaev_future_release); none of
 * these cancels the future. An empty handle answers every query with
 * "not there" rather than passing NULL on. Thread of each member: any
 * (the C functions'), except that one handle object must not be changed
 * (assigned, reset, out()) while another thread uses it. */
class future {
 public:
  future() noexcept = default;
  /* Adopts one reference (the `out` of a C call), as std::unique_ptr does. */
  explicit future(cudaev_future_t *f) noexcept : f_(f) {}
  /* Adds a reference to a borrowed future (a C callback's argument). */
  static future retain(cudaev_future_t *f) noexcept {
    return future(f != nullptr ? cudaev_future_retain(f) : nullptr);
  }
  future(const future &o) noexcept : f_(o.f_ != nullptr ? cudaev_future_retain(o.f_) : nullptr) {}
  future(future &&o) noexcept : f_(o.detach()) {}
  future &operator=(const future &o) noexcept {
    if (this != &o) reset(o.f_ != nullptr ? cudaev_future_retain(o.f_) : nullptr);
    return *this;
  }
  future &operator=(future &&o) noexcept {
    if (this != &o) reset(o.detach());
    return *this;
  }
  ~future() { reset(); }

  cudaev_future_t *get() const noexcept { return f_; }
  explicit operator bool() const noexcept { return f_ != nullptr; }
  /* Gives up the reference without releasing it (the caller now owns it). */
  cudaev_future_t *detach() noexcept {
    cudaev_future_t *f = f_;
    f_ = nullptr;
    return f;
  }
  /* Releases the reference held (if any), then holds f (adopted). */
  void reset(cudaev_future_t *f = nullptr) noexcept {
    cudaev_future_t *old = f_;
    f_ = f;
    cudaev_future_release(old);
  }
  /* For a C function's `cudaev_future_t **out`: releases the reference
   * held and returns where the new one goes. */
  cudaev_future_t **out() noexcept {
    reset();
    return &f_;
  }

  /* cudaev_future_ready (false when empty). */
  bool ready() const noexcept { return f_ != nullptr && cudaev_future_ready(f_) != 0; }
  /* cudaev_future_result (cudaErrorInvalidValue when empty). */
  cudaError_t result() const noexcept {
    return f_ != nullptr ? cudaev_future_result(f_) : cudaErrorInvalidValue;
  }
  /* cudaev_future_cancel: true if this call cancelled it. */
  bool cancel() const noexcept { return f_ != nullptr && cudaev_future_cancel(f_) != 0; }
  /* cudaev_future_wait with a limit (negative: none); not on the loop
   * thread inside a callback (cudaErrorNotPermitted). Empty:
   * cudaErrorInvalidValue. */
  template <class Rep, class Period>
  cudaError_t wait(std::chrono::duration<Rep, Period> limit) const noexcept {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
    return f_ != nullptr ? cudaev_future_wait(f_, static_cast<int64_t>(ns)) : cudaErrorInvalidValue;
  }
  cudaError_t wait() const noexcept {
    return f_ != nullptr ? cudaev_future_wait(f_, -1) : cudaErrorInvalidValue;
  }
  /* The loop it belongs to (NULL when empty). */
  cudaev_loop_t *loop() const noexcept { return f_ != nullptr ? cudaev_future_loop(f_) : nullptr; }

 private:
  cudaev_future_t *f_ = nullptr;
};

}  // namespace cudaev

#endif
