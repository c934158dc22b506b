/* The interface between the loop (loop.c, future.c) and its completion
 * sources (promise.c's promises, timer.c, gpu.c): the const table each
 * source fills. loop.c owns the list of sources; each table is owned by
 * the file that defines it. */
#ifndef CUDAEV_SOURCE_H
#define CUDAEV_SOURCE_H

#include "cudaev.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cudaev_loop;
struct cudaev_future;

/* A completion source is a kind of work that completes futures: GPU work on
 * streams (loop/gpu*.c), promises and combinators (loop/promise.c), later
 * timers or a second device. Each plugs into the loop through one const
 * table, as libuv's handle types do: the loop walks the sources it runs
 * once per pass (never once per future: a source keeps its inner loops to
 * itself), and the future core reaches a future's source only through
 * loop->src_of[f->kind] (track, self_state). Neither calls a source by
 * name. A NULL member is skipped. Members run on the loop thread (the
 * thread inside cudaev__loop_process, or the one destroying the loop)
 * unless they say otherwise. */
struct cudaev__source_ops {
  /* The future kinds it tracks: bit (1u << kind) per enum cudaev__fkind. */
  uint32_t kinds;
  /* Loop creation, on the creating thread: sets up the source's state in
   * the loop. Any result but cudaSuccess leaves the loop without this
   * source; its own entry points report why. */
  cudaError_t (*init)(struct cudaev_loop *loop);
  /* Loop destroy: fails what is pending with CUDAEV_ERROR_LOOP_DESTROYED
   * (continuations run on the destroying thread) and frees what passes
   * use. Afterwards the loop calls only pending, and track for a future
   * that was still queued. */
  void (*fini)(struct cudaev_loop *loop);
  /* Takes a submitted future of one of `kinds` in (the pending list, its
   * stream's FIFO) with the loop's reference. */
  void (*track)(struct cudaev_loop *loop, struct cudaev_future *f);
  /* Thread: any (a waiter off the loop thread). Where f's work stands
   * without the loop: cudaErrorNotReady, else the outcome the waiter
   * completes f with. NULL: waiters only wait for the loop. The waiter
   * calls it only with CUDAEV__READER set on f (f still pending then), so
   * the loop and what the source keeps for f live through the call as long
   * as the source calls cudaev__future_unread(f) before freeing them. */
  cudaError_t (*self_state)(struct cudaev_future *f);
  /* Around each pass and each before_sleep: makes current what the source
   * needs (the loop's CUDA context); returns whether leave must undo it. */
  bool (*enter)(struct cudaev_loop *loop);
  void (*leave)(struct cudaev_loop *loop, bool entered);
  /* Thread: any. cudaev_future_new_work_done for f: completes g (a promise not on
   * the pending list, with a reference of its own) once f's work has
   * really finished, even if f was cancelled. NULL: when f completes. */
  cudaError_t (*done)(struct cudaev_future *f, struct cudaev_future *g);
  /* Around continuations of f that run outside the source's poll (f was
   * completed off the loop thread, or they were added after it fired):
   * makes current what they should see (a GPU future's own context);
   * returns whether leave_future must undo it. */
  bool (*enter_future)(struct cudaev_future *f);
  void (*leave_future)(bool entered);
  /* Once per pass: completes what has finished. True if anything did. */
  bool (*poll)(struct cudaev_loop *loop);
  /* Once per pass, after every poll, with the pass's clock (cudaev__now_ns):
   * the source's periodic work (the GPU's sticky-error watchdog). */
  void (*tick)(struct cudaev_loop *loop, uint64_t now);
  /* Before the loop blocks, when no message or continuation is waiting:
   * spins or arms wakeups as the source sees fit, and returns the longest
   * the loop may block in ns (UINT64_MAX: until woken; 0: not at all). */
  uint64_t (*before_sleep)(struct cudaev_loop *loop);
  /* Loop thread, when a future of its kinds that the loop holds a
   * reference for until it fires (promises, combinators, timers) fires:
   * takes it off the source's lists; the firing drops that reference. */
  void (*untrack)(struct cudaev_loop *loop, struct cudaev_future *f);
  /* Futures it tracks (cudaev_loop_pending). */
  size_t (*pending)(struct cudaev_loop *loop);
  /* Process exit, with the loop thread stopped (or calling exit itself):
   * lets go of what outside the process waits for the loop (host-function
   * gates on streams), without a driver call or user code. */
  void (*abandon)(struct cudaev_loop *loop);
};

/* The future kinds whose source has a self_state (future.c; loop.c adds
 * a source's kinds when a loop starts it): a waiter reads the loop only
 * for these. */
extern _Atomic uint32_t cudaev__self_state_kinds;

/* The kinds the promise source keeps on the loop's pending list (promise.c):
 * promises, combinators, relays. */
#define CUDAEV__LISTED_KINDS                                                   \
  ((1u << CUDAEV__K_PROMISE) | (1u << CUDAEV__K_ALL) | (1u << CUDAEV__K_ANY) | \
   (1u << CUDAEV__K_RELAY))

/* The sources, in the order the loop runs them (loop.c lists them). */
extern const struct cudaev__source_ops cudaev__source_promise; /* promise.c */
extern const struct cudaev__source_ops cudaev__source_timer;   /* timer.c */
extern const struct cudaev__source_ops cudaev__source_gpu;     /* gpu.c */
#define CUDAEV__NSOURCES 3

#endif
