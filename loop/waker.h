/* The wakeup of a loop (owner: waker.c): the eventfd and its pending
 * flag, and cudaev__loop_send, the one door into a loop from any thread.
 * Shared, by reference, with the driver's host functions that wake the
 * loop (gpu_wake.c, hostfn.c, notify.c). */
#ifndef CUDAEV_WAKER_H
#define CUDAEV_WAKER_H

#include <cuda_runtime_api.h>

#include <stdbool.h>
#include <stdint.h>

struct cudaev_loop;
struct cudaev__msg;

/* The wakeup (waker.c): an eventfd shared by the loop and by the driver's
 * host functions that wake it. Refcounted because a host function may still
 * be queued on a stream when the loop is destroyed. */
struct cudaev__waker {
  _Atomic uint32_t refs;
  _Atomic uint32_t pending; /* 1 once written since the loop last drained */
  int fd;
};
/* A new waker with one reference, or the error (out of memory, no eventfd). */
cudaError_t cudaev__waker_new(struct cudaev__waker **out);
/* Makes the fd readable, at most once per drain. Thread: any. */
void cudaev__waker_wake(struct cudaev__waker *w);
void cudaev__waker_release(struct cudaev__waker *w);
/* The loop thread, at the start of a pass: reads the fd if a wake wrote
 * it and re-arms wake. Returns whether the fd had been written. */
bool cudaev__waker_drain(struct cudaev__waker *w);

/* Sends a message to the loop and wakes it. Thread: any. */
void cudaev__loop_send(struct cudaev_loop *loop, struct cudaev__msg *m);

#endif
