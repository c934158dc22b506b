/* The loop object (owner: loop.c; its run modes, backend_*.c, own the
 * backend's fields) and what a pass and the run modes share. The other
 * contracts of the loop layer have headers of their own, each owned by one
 * file: alloc.h, debug.h, msg.h, waker.h, future_internal.h (future.c),
 * source.h (the completion sources' table), timer.c's and the GPU
 * source's (gpu_ctx.h, gpu_marker.h, gpu_stream.h, gpu_wake.h, gpu_poll.h,
 * gpu_done.h, hostfn.h, stall.h). Fields of struct cudaev_loop that one
 * source keeps there are marked with their owner.
 *
 * Layering: loop/ sits above src/ (it may use the driver table and
 * src/internal.h); src/ never includes anything from loop/.
 *
 * Thread model in one paragraph: the state of a future's continuations and
 * of every tracking structure (stream FIFOs, the pending list) is touched
 * only by the loop thread, inside cudaev__loop_process(). Other threads talk
 * to the loop through one intrusive MPSC queue (cudaev__msg) plus one
 * eventfd write; a future's outcome is published by whichever thread claims
 * it first (one CAS on `state`), so completion is exactly-once without a
 * lock.
 */
#ifndef CUDAEV_LOOP_INTERNAL_H
#define CUDAEV_LOOP_INTERNAL_H

#include "internal.h"

#include "alloc.h"
#include "clock.h"
#include "cudaev.h"
#include "debug.h"
#include "future_internal.h"
#include "msg.h"
#include "mpsc.h"
#include "source.h"
#include "waker.h"

#include <pthread.h>
#include <stdint.h>

/* A loop statistic: one writer (the loop thread), readers anywhere. */
static inline void cudaev__stat_add(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* A run mode: who waits for the wakeup fd and the timer (const vtable,
 * chosen at creation). */
struct cudaev__backend {
  /* Starts watching (io on the fd, timer, prepare hook). true on error. */
  bool (*start)(struct cudaev_loop *loop);
  /* Stops and frees the backend's state; from the destroying thread. */
  void (*stop)(struct cudaev_loop *loop);
  /* Loop thread, after a pass and on cudaev_loop_ref/_unref: whether the
   * loop keeps its host loop running (pending futures or the
   * application's references) changed, maybe. NULL: nothing to do. */
  void (*keep)(struct cudaev_loop *loop);
};

extern const struct cudaev__backend cudaev__backend_ev;
extern const struct cudaev__backend cudaev__backend_foreign;
extern const struct cudaev__backend cudaev__backend_thread;

struct cudaev__gpu;    /* gpu_ctx.h */
struct cudaev__timers; /* timer.c */

struct cudaev_loop {
  struct cudaev__mpsc q;
  struct cudaev__waker *waker;
  const struct cudaev__backend *be;
  void *be_state;      /* the backend's: ev mode's watchers, thread mode's thread */
  struct ev_loop *evl; /* ev mode: the application's libev loop */
  _Atomic uint32_t spin_max_us;
  _Atomic uint32_t markers;    /* cudaev_markers_t: the marker policy of new submissions */
  _Atomic size_t npending_pub; /* published count for cudaev_loop_pending */
  /* Futures sent to the loop to be registered (CUDAEV__MB_SUBMIT) that no
   * published count holds yet: cudaev_loop_pending adds them, so that a
   * future counts from the moment the call that made it returns, on any
   * thread. Added to before the message is sent; a pass subtracts what it
   * took in (ntaken) only after it published its count, with release, so
   * a reader that loads this first (acquire) and npending_pub second
   * counts such a future in one of the two, or both, never in neither. */
  _Atomic size_t nqueued;
  size_t ntaken; /* loop thread: taken in by this pass, still in nqueued */
  _Atomic uint32_t stopping;
  /* Foreign mode: a per-thread address of the thread inside
   * cudaev_loop_process, so that a second thread is caught. */
  _Atomic(void *) driver;
  /* ev mode, loop thread: cudaev_loop_ref count, and whether the loop
   * holds a reference on the host loop (backend_ev.c). */
  uint32_t user_refs;
  bool host_refd;
  /* Foreign mode, loop thread: cudaev_loop_set_timer_cb's, and the
   * deadline it was last told (cudaev__now_ns; UINT64_MAX: none). */
  /* cudaev_loop_stats: written by the loop thread only (relaxed load +
   * store, no locked instruction), read from any. */
  struct {
    _Atomic uint64_t passes, wakeups, completions, timers_fired;
    /* The GPU source's (struct cudaev_loop_stats says what each counts). */
    _Atomic uint64_t gpu_completions, gpu_words, gpu_events, gpu_failed, gpu_armed, spin_ns,
        watchdog_checks, watchdog_errors;
    _Atomic uint64_t gpu_latency[CUDAEV_LOOP_LATENCY_BUCKETS];
  } st;
  /* Futures complete at their creation, on any thread (many writers:
   * atomic adds); counted into the stats' completions when read. */
  _Atomic uint64_t done_at_creation;
  /* cudaev_loop_close from inside a callback: the pass's caller (the run
   * mode) closes the loop when its outermost pass returns. */
  cudaev_close_cb close_cb;
  void *close_user;
  bool closing;
  void (*timer_cb)(struct cudaev_loop *loop, int64_t timeout_ns, void *user);
  void *timer_user;
  uint64_t timer_told;
  /* The process's default loop, which cudaev_loop_destroy leaves alone:
   * set before the loop is published (backend_thread.c), cleared in a fork
   * child, where the default loop is a new one. */
  bool is_default;
  /* Set at creation: the sources this loop runs, and the source of each
   * future kind. Passes run the first nrun (nsrc until destroy finalized
   * them); the pending count asks all nsrc. */
  uint32_t nsrc, nrun;
  const struct cudaev__source_ops *src[CUDAEV__NSOURCES];
  const struct cudaev__source_ops *src_of[CUDAEV__K_COUNT];
  /* loop thread only: */
  struct cudaev__cont *def_head, *def_tail; /* continuations of fired futures */
  /* The promise source's (promise.c): promises and combinators not fired. */
  struct cudaev_future **pend;
  uint32_t npend, cap_pend;
  /* The timer source's (timer.c): a min-heap of pending timers by
   * deadline; NULL once finalized. */
  struct cudaev__timers *timers;
  /* The GPU source's (gpu*.c): its state, NULL when the runtime could not
   * start, and why. */
  struct cudaev__gpu *gpu;
  cudaError_t gpu_error;
};

/* The loop the calling thread is processing, or NULL. */
extern _Thread_local struct cudaev_loop *cudaev__tls_loop;
static inline bool cudaev__on_loop(const struct cudaev_loop *loop) {
  return cudaev__tls_loop == loop;
}

/* Wakes the loop (any thread). */
static inline void cudaev__loop_wake(struct cudaev_loop *loop) { cudaev__waker_wake(loop->waker); }

/* One pass: drain wakeups and messages, poll the sources, their periodic
 * work, run deferred continuations. Returns true when more work is ready
 * now. */
bool cudaev__loop_process(struct cudaev_loop *loop);
/* Before blocking: lets the sources spin and arm wakeups. Returns the
 * longest the caller may block in ns (UINT64_MAX: until the fd fires; 0:
 * process again now). */
uint64_t cudaev__loop_before_sleep(struct cudaev_loop *loop);
/* The run modes, after their outermost pass, when loop->closing: tears
 * the loop down as cudaev_loop_destroy does (the backend's stop first),
 * calls the close callback and frees the loop. */
void cudaev__loop_close_now(struct cudaev_loop *loop);
/* Process exit, the loop thread stopped or calling exit itself: the
 * sources' abandon (no driver call, no user code). */
void cudaev__loop_abandon(struct cudaev_loop *loop);

#endif
