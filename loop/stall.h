/* Stall detection of loop-thread host functions (owner: stall.c).
 *
 * A host function's gate is opened only by a pass of its loop; while the
 * GPU waits at it, every thread that synchronizes (cudaMalloc,
 * cudaMallocHost, cudaDeviceSynchronize, ...) waits too. When nobody drives
 * the loop that is a hang far from its cause, so a monitor thread of
 * stall.c's, which lives only while gates are in flight, says so once per
 * stall through cudaev__log (docs/design.md, "Loop-thread host functions").
 *
 * The record (struct cudaev__stall) is opaque: stall.c alone reads and
 * writes its fields. Who calls what:
 *   gpu.c     _new at loop creation, _free at destroy, _poll and _tick in
 *             every pass (loop thread)
 *   hostfn.c  _hold when it enqueues a gate's wake-up (submitting thread),
 *             _reached and _unhold in that wake-up (the driver's
 *             host-function thread) */
#ifndef CUDAEV_STALL_H
#define CUDAEV_STALL_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

struct cudaev__stall;

/* A loop's record, registered with the monitor, with one reference (the
 * loop's); NULL when out of memory (the loop then goes unwatched).
 * `loop` only names the loop in the message. Thread: any. */
struct cudaev__stall *cudaev__stall_new(const void *loop);
/* Loop destroy: takes the record off the monitor's list and drops the
 * loop's reference. NULL: nothing. Thread: the destroying one. */
void cudaev__stall_free(struct cudaev__stall *s);

/* Submitting thread, before it enqueues a gate's wake-up host function:
 * a reference for that host function, counted as a gate in flight (the
 * monitor runs while any is, starting it if it is not running). Pair with
 * cudaev__stall_unhold, in the host function or when its enqueue failed.
 * NULL: nothing. Thread: any. */
void cudaev__stall_hold(struct cudaev__stall *s);
void cudaev__stall_unhold(struct cudaev__stall *s);
/* The GPU reached a gate on `stream`: the driver's host-function thread
 * records when, unless an earlier gate's stall is on record already. No
 * CUDA call. NULL: nothing. Thread: any. */
void cudaev__stall_reached(struct cudaev__stall *s, CUstream stream);

/* Loop thread, at the start of the GPU source's poll: the pass will see
 * every gate reached so far, so the stall on record (if any) ends. */
void cudaev__stall_poll(struct cudaev__stall *s);
/* Loop thread, in the GPU source's tick: the pass's clock, for the
 * message's "has not run a pass for N ms". */
void cudaev__stall_tick(struct cudaev__stall *s, uint64_t now);

/* The threshold in ms (0: detection off). Read from CUDAEV_HOSTFN_STALL_MS
 * on first use (default 1000); tests set it. Thread: any. */
uint32_t cudaev__stall_ms(void);
void cudaev__stall_set_ms(uint32_t ms);

#endif
