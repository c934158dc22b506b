/* Submissions onto streams (any thread): cudaev_future_new_stream,
 * cudaev_future_new_event and the async memcpy / memset / malloc / launch /
 * graph-launch variants. Each enqueues the work, then a completion marker
 * chosen per submission (a word, or a pooled event on a stream with our
 * futures outstanding; see gpu.c), and hands the future to the loop. */
#include "gpu_ctx.h"
#include "gpu_marker.h"
#include "gpu_wake.h"

#include <string.h>

/* Enqueues the completion marker on `stream` and hands the future to the
 * loop. */
static cudaError_t mark(struct cudaev__sub *s, CUstream stream, cudaev_future_t **out) {
  struct cudaev_loop *loop = s->loop;
  struct cudaev__gpu *g = s->g;
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  if (f == NULL) return cudaErrorMemoryAllocation;
  /* The marker (see the top of gpu.c): a word unless the stream has
   * futures of ours outstanding, then an event, but a word every
   * WORD_EVERY-th submission; always an event where the loop was told so
   * (cudaev_loop_set_markers). */
  struct cudaev__backlog *b = slot_of(g, stream);
  uint64_t old = atomic_fetch_add_explicit(&b->v, (1ull << 32) | 1u, memory_order_relaxed);
  f->counted = 1;
  bool backlogged = (uint32_t)old != 0 && (old >> 32) % g->word_every != 0;
  /* The per-thread default stream is a different stream on each thread:
   * its FIFO mixes streams, so its futures are checked one by one (solo),
   * by words, and woken by a host function of the submitter's (the loop
   * cannot enqueue on it). */
  bool per_thread = stream == CU_STREAM_PER_THREAD;
  bool events = atomic_load_explicit(&loop->markers, memory_order_relaxed) == CUDAEV_MARKERS_EVENTS;
  f->use_event = g->use_events || ((backlogged || events) && !per_thread);
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

/* A future completed with success, for work found done at submission:
 * the loop does not hear of it (no wake-up) unless a continuation is
 * attached. */
static cudaError_t done_now(struct cudaev_loop *loop, cudaev_future_t **out) {
  struct cudaev_future *f = cudaev__future_new_done(loop, CUDAEV__K_RELAY, cudaSuccess);
  if (f == NULL) return cudaErrorMemoryAllocation;
  *out = f;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_future_new_stream(cudaev_loop_t *loop, cudaStream_t stream,
                                                   cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__sub_end(&s, mark(&s, (CUstream)stream, out));
}

CUDAEV_EXPORT cudaError_t cudaev_future_new_event(cudaev_loop_t *loop, cudaEvent_t event,
                                                  cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, NULL, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (event == NULL) return cudaev__sub_end(&s, cudaErrorInvalidResourceHandle);
  /* Done already (a step whose GPU work kept up with its launches, an
   * event never recorded): a future completed here, with no marker and no
   * GPU hop. Any other answer (not ready, an error, an event of a capture)
   * takes the stream wait below, which reports errors as before. The query
   * is on the application's event for the application's request, but in
   * relaxed mode all the same, so that it can never disturb a capture of
   * another thread's (driver.h). */
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  CUresult q = cudaev__drv.cuEventQuery((CUevent)event);
  cudaev__capture_restore(mode);
  if (q == CUDA_SUCCESS) return cudaev__sub_end(&s, done_now(s.loop, out));
  e = cudaev__error_from_cu(cudaev__drv.cuStreamWaitEvent(s.g->internal, (CUevent)event, 0));
  if (e == cudaSuccess) e = mark(&s, s.g->internal, out);
  return cudaev__sub_end(&s, e);
}

/* ---- copies to and from pageable host memory -------------------------- */

/* Whether p is pageable host memory: the driver knows every other kind
 * (device, managed, pinned, registered) and refuses only this one. */
static bool pageable(const void *p) {
  unsigned int type = 0;
  return cudaev__drv.cuPointerGetAttribute != NULL &&
         cudaev__drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                           (CUdeviceptr)p) == CUDA_ERROR_INVALID_VALUE;
}

/* A staging buffer, freed once the GPU is done with it (the continuation
 * of cudaev_future_new_work_done's future: also after a cancel, or at destroy). */
struct stage {
  void *buf, *dst;
  size_t n;
  struct cudaev_future *out; /* D2H: the user's future */
};

/* The buffer is the loop's own: its allocation and its free (which
 * synchronises the context, as cudaFreeHost does) are no part of any
 * capture (driver.h). */
static void stage_free(struct stage *st) {
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  cudaFreeHost(st->buf);
  cudaev__capture_restore(mode);
  cudaev__free(st, sizeof *st);
}

static void h2d_done(cudaev_future_t *g, cudaError_t status, void *user) {
  (void)g;
  (void)status;
  stage_free(user);
}

/* D2H: the user's memory is written here, on the loop thread, and only if
 * the user's future was not completed meanwhile (cancelled, or failed by
 * destroy): claimed first, then written, then published. */
static void d2h_done(cudaev_future_t *g, cudaError_t status, void *user) {
  (void)g;
  struct stage *st = user;
  if (cudaev__future_claim(st->out)) {
    if (status == cudaSuccess) memcpy(st->dst, st->buf, st->n);
    cudaev__future_complete(st->out, status);
  }
  cudaev_future_release(st->out);
  stage_free(st);
}

/* Hands st to the continuation of cudaev_future_new_work_done(f); on failure waits
 * for the stream (a rare error path) and frees it. */
static void stage_after(struct stage *st, struct cudaev_future *f, CUstream stream,
                        cudaev_future_cb cb) {
  cudaev_future_t *g = NULL;
  if (cudaev_future_new_work_done(f, &g) == cudaSuccess &&
      cudaev_future_then(g, cb, st) == cudaSuccess) {
    cudaev_future_release(g);
    return;
  }
  cudaev_future_release(g);
  cudaev__drv.cuStreamSynchronize(stream);
  if (st->out != NULL) cudaev__future_try_complete(st->out, cudaErrorMemoryAllocation);
  cudaev_future_release(st->out);
  stage_free(st);
}

/* A copy with pageable host memory on one side, through pinned memory
 * (the driver would make it synchronous). *staged = false: not such a copy. */
static cudaError_t copy_staged(struct cudaev__sub *s, void *dst, const void *src, size_t count,
                               enum cudaMemcpyKind kind, CUstream stream, cudaev_future_t **out,
                               bool *staged) {
  bool h2d = (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDefault) && pageable(src) &&
             !pageable(dst);
  bool d2h = !h2d && (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDefault) &&
             pageable(dst) && !pageable(src);
  *staged = h2d || d2h;
  if (!*staged) return cudaSuccess;
  struct stage *st = cudaev__alloc(sizeof *st);
  if (st == NULL) return cudaErrorMemoryAllocation;
  memset(st, 0, sizeof *st);
  st->dst = dst;
  st->n = count;
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  cudaError_t e = cudaHostAlloc(&st->buf, count, cudaHostAllocPortable);
  cudaev__capture_restore(mode);
  if (e != cudaSuccess) {
    cudaev__free(st, sizeof *st);
    return e;
  }
  if (h2d) memcpy(st->buf, src, count);
  e = cudaev__error_from_cu(cudaev__drv.cuMemcpyAsync(h2d ? (CUdeviceptr)dst : (CUdeviceptr)st->buf,
                                                      h2d ? (CUdeviceptr)st->buf : (CUdeviceptr)src,
                                                      count, stream));
  if (e != cudaSuccess) {
    stage_free(st);
    return e;
  }
  struct cudaev_future *f = NULL;
  if (d2h && (st->out = cudaev__relay_new(s->loop, true)) == NULL) e = cudaErrorMemoryAllocation;
  if (e == cudaSuccess) e = mark(s, stream, &f);
  if (e != cudaSuccess) {
    /* The copy is on the stream: the buffer stays until it is done. */
    cudaev__drv.cuStreamSynchronize(stream);
    cudaev_future_release(st->out);
    stage_free(st);
    return e;
  }
  if (d2h) {
    *out = cudaev_future_retain(st->out);
    stage_after(st, f, stream, d2h_done);
    cudaev_future_release(f);
  } else {
    *out = f;
    stage_after(st, f, stream, h2d_done);
  }
  return cudaSuccess;
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
  if (count > 0 && kind != cudaMemcpyHostToHost && kind != cudaMemcpyDeviceToDevice) {
    bool staged;
    e = copy_staged(&s, dst, src, count, kind, (CUstream)stream, out, &staged);
    if (staged || e != cudaSuccess) return cudaev__sub_end(&s, e);
  }
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

CUDAEV_EXPORT cudaError_t cudaev_launch_ex_async(cudaev_loop_t *loop, const cudaLaunchConfig_t *cfg,
                                                 const void *func, void **args,
                                                 cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, cfg != NULL ? (CUstream)cfg->stream : NULL, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (cfg == NULL) return cudaev__sub_end(&s, cudaErrorInvalidValue);
  e = cudaLaunchKernelExC(cfg, func, args);
  if (e == cudaSuccess) e = mark(&s, (CUstream)cfg->stream, out);
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
