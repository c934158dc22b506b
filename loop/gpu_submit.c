/* Submissions onto streams (any thread): cudaev_stream_future,
 * cudaev_event_future and the async memcpy / memset / malloc / launch /
 * graph-launch variants. Each enqueues the work, then a completion marker
 * chosen per submission (a word, or a pooled event on a stream with our
 * futures outstanding; see gpu.c), and hands the future to the loop. */
#include "gpu_internal.h"

/* Enqueues the completion marker on `stream` and hands the future to the
 * loop. */
static cudaError_t mark(struct cudaev__sub *s, CUstream stream, cudaev_future_t **out) {
  struct cudaev_loop *loop = s->loop;
  struct cudaev__gpu *g = s->g;
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  if (f == NULL) return cudaErrorMemoryAllocation;
  /* The marker (see the top of gpu.c): a word unless the stream has
   * futures of ours outstanding, then an event, but a word every
   * WORD_EVERY-th submission. */
  struct cudaev__backlog *b = slot_of(g, stream);
  uint64_t old = atomic_fetch_add_explicit(&b->v, (1ull << 32) | 1u, memory_order_relaxed);
  f->counted = 1;
  bool backlogged = (uint32_t)old != 0 && (old >> 32) % g->word_every != 0;
  /* The per-thread default stream is a different stream on each thread:
   * its FIFO mixes streams, so its futures are checked one by one (solo),
   * by words, and woken by a host function of the submitter's (the loop
   * cannot enqueue on it). */
  bool per_thread = stream == CU_STREAM_PER_THREAD;
  f->use_event = g->use_events || (backlogged && !per_thread);
  cudaError_t e = cudaev__gpu_enqueue_marker(g, f, stream);
  if (e != cudaSuccess) {
    backlog_done(g, f, stream);
    cudaev_future_release(f);
    return e;
  }
  if (per_thread) {
    f->solo = 1;
    atomic_fetch_add_explicit(&loop->waker->refs, 1, memory_order_relaxed);
    if (cudaev__drv.cuLaunchHostFunc(stream, cudaev__gpu_wake_fn, loop->waker) != CUDA_SUCCESS)
      cudaev__waker_release(loop->waker); /* the watchdog's timer still polls */
  }
  f->t_submit = cudaev__now_ns();
  f->track = (struct cudaev__track *)(void *)stream; /* resolved by the loop */
  cudaev_future_retain(f);                           /* the FIFO's */
  cudaev__future_submit(f);
  *out = f;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_stream_future(cudaev_loop_t *loop, cudaStream_t stream,
                                               cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__sub_end(&s, mark(&s, (CUstream)stream, out));
}

CUDAEV_EXPORT cudaError_t cudaev_event_future(cudaev_loop_t *loop, cudaEvent_t event,
                                              cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, NULL, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (event == NULL) return cudaev__sub_end(&s, cudaErrorInvalidResourceHandle);
  e = cudaev__error_from_cu(cudaev__drv.cuStreamWaitEvent(s.g->internal, (CUevent)event, 0));
  if (e == cudaSuccess) e = mark(&s, s.g->internal, out);
  return cudaev__sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_memcpy_async(cudaev_loop_t *loop, void *dst, const void *src,
                                              size_t count, enum cudaMemcpyKind kind,
                                              cudaStream_t stream, cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if ((unsigned)kind > (unsigned)cudaMemcpyDefault)
    return cudaev__sub_end(&s, cudaErrorInvalidMemcpyDirection);
  if (count > 0 && (dst == NULL || src == NULL)) return cudaev__sub_end(&s, cudaErrorInvalidValue);
  if (count > 0)
    e = cudaev__error_from_cu(
        cudaev__drv.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, count, (CUstream)stream));
  if (e == cudaSuccess) e = mark(&s, (CUstream)stream, out);
  return cudaev__sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_memset_async(cudaev_loop_t *loop, void *dev, int value,
                                              size_t count, cudaStream_t stream,
                                              cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (count > 0 && dev == NULL) return cudaev__sub_end(&s, cudaErrorInvalidValue);
  if (count > 0)
    e = cudaev__error_from_cu(cudaev__drv.cuMemsetD8Async((CUdeviceptr)dev, (unsigned char)value,
                                                          count, (CUstream)stream));
  if (e == cudaSuccess) e = mark(&s, (CUstream)stream, out);
  return cudaev__sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_malloc_async(cudaev_loop_t *loop, void **dev_ptr, size_t size,
                                              cudaStream_t stream, cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (dev_ptr == NULL) return cudaev__sub_end(&s, cudaErrorInvalidValue);
  CUdeviceptr d = 0;
  e = cudaev__error_from_cu(cudaev__drv.cuMemAllocAsync(&d, size, (CUstream)stream));
  if (e != cudaSuccess) return cudaev__sub_end(&s, e);
  *dev_ptr = (void *)d;
  e = mark(&s, (CUstream)stream, out);
  /* The allocation stands even if the marker could not be enqueued. */
  return cudaev__sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_launch_kernel_async(cudaev_loop_t *loop, const void *func,
                                                     dim3 grid, dim3 block, void **args,
                                                     size_t shmem, cudaStream_t stream,
                                                     cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  e = cudaLaunchKernel(func, grid, block, args, shmem, stream);
  if (e == cudaSuccess) e = mark(&s, (CUstream)stream, out);
  return cudaev__sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_launch_cufunc_async(cudaev_loop_t *loop, struct CUfunc_st *func,
                                                     dim3 grid, dim3 block, void **args,
                                                     size_t shmem, cudaStream_t stream,
                                                     cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (func == NULL) return cudaev__sub_end(&s, cudaErrorInvalidResourceHandle);
  e = cudaev__error_from_cu(cudaev__drv.cuLaunchKernel(func, grid.x, grid.y, grid.z, block.x,
                                                       block.y, block.z, (unsigned)shmem,
                                                       (CUstream)stream, args, NULL));
  if (e == cudaSuccess) e = mark(&s, (CUstream)stream, out);
  return cudaev__sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_graph_launch_async(cudaev_loop_t *loop, cudaGraphExec_t exec,
                                                    cudaStream_t stream, cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  e = cudaGraphLaunch(exec, stream);
  if (e == cudaSuccess) e = mark(&s, (CUstream)stream, out);
  return cudaev__sub_end(&s, e);
}
