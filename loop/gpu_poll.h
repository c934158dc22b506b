/* A pass of the GPU source over one context's streams (owner:
 * gpu_poll.c): completing what the GPU passed, the sticky-error watchdog,
 * failing everything, and the waiter's own look (self_state). Called by
 * gpu.c (the source's table). */
#ifndef CUDAEV_GPU_POLL_H
#define CUDAEV_GPU_POLL_H

#include "gpu_ctx.h"

/* gpu_poll.c. Loop thread, except self_state (any thread). The members
 * self_state, poll and tick (cudaev__gpu_watchdog) of the source. */
cudaError_t cudaev__gpu_self_state(struct cudaev_future *f);
/* A pass over g's streams, with g's context current. */
bool cudaev__gpu_poll(struct cudaev_loop *loop, struct cudaev__gpu *g);
/* g's part of the source's tick: the sticky-error watchdog, every
 * WATCHDOG_NS, with g's context current. */
void cudaev__gpu_watchdog(struct cudaev_loop *loop, struct cudaev__gpu *g, uint64_t now);
/* Fails everything g tracks with err (a sticky context error, or
 * destroy), with g's context current. */
void cudaev__gpu_fail_all(struct cudaev_loop *loop, struct cudaev__gpu *g, cudaError_t err);

#endif
