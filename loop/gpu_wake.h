/* How the GPU source lets the loop sleep (owner: gpu_wake.c): the
 * adaptive spin, the wakeups armed on streams (struct cudaev__arm, opaque:
 * a stream's record holds one), and the host function that wakes the loop. */
#ifndef CUDAEV_GPU_WAKE_H
#define CUDAEV_GPU_WAKE_H

#include "gpu_ctx.h"

struct cudaev__arm; /* gpu_wake.c */

/* gpu_wake.c. g's part of the source's before_sleep (loop thread), with
 * g's context current. */
uint64_t cudaev__gpu_before_sleep(struct cudaev_loop *loop, struct cudaev__gpu *g);
/* A stream record's arm, with a reference to the waker; NULL when out of
 * memory. Thread: any. */
struct cudaev__arm *cudaev__arm_new(struct cudaev__waker *w);
void cudaev__arm_release(struct cudaev__arm *a);
/* Whether a wakeup of this arm is queued on its stream. Thread: any. */
bool cudaev__arm_armed(struct cudaev__arm *a);
/* A host function that wakes the loop; its argument is a waker reference
 * it releases. */
void CUDA_CB cudaev__gpu_wake_fn(void *arg);

#endif
