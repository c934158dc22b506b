/* Loop-thread host functions (owner: hostfn.c): the event path's gate
 * (struct cudaev__hgate), which finish() (gpu_poll.c) and the abandon at
 * exit (gpu.c) open, and head_state (gpu_marker.h) reads. */
#ifndef CUDAEV_HOSTFN_H
#define CUDAEV_HOSTFN_H

#include <cuda.h>
#include <stdint.h>

struct cudaev__waker;
struct cudaev__stall;

/* Event path of a loop-thread host function: the driver's host function
 * (gate_fn) sets `reached`, wakes the loop, and blocks until the loop sets
 * `open`. References: gate_fn's and the HOSTFN future's. */
struct cudaev__hgate {
  _Atomic uint32_t refs;
  _Atomic uint32_t reached;
  _Atomic uint32_t open;
  struct cudaev__waker *w;
  struct cudaev__stall *stall; /* held until gate_fn has run (stall.h) */
  CUstream stream;
};

/* hostfn.c. Loop thread: lets a blocked gate_fn return (or one not yet run
 * pass); the release drops one of the gate's references. */
void cudaev__hgate_open(struct cudaev__hgate *hg);
void cudaev__hgate_release(struct cudaev__hgate *hg);

#endif
