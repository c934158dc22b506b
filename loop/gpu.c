/* The GPU completion source: futures of work on CUDA streams
 * (gpu_submit.c, hostfn.c), completed by the loop (gpu_poll.c). This file
 * holds its table (cudaev__source_gpu), its creation and its destroy;
 * gpu_internal.h lists the other files and their contracts.
 *
 * How a completion is detected (docs/design.md has the picture):
 *  - every submission enqueues, after the work, a marker: either
 *    cuStreamWriteValue32 of a unique tag into its own word of pinned,
 *    mapped host memory, or a pooled cuEventRecord. They cost differently
 *    (docs/design.md quotes bench/RESULTS.md): a word is read by the host
 *    for nothing, but each one costs the GPU ~1.4 us (its system-wide fence
 *    serializes the whole context: 64 streams of kernel + word retire
 *    450k/s on an H200); an event costs the GPU nothing (kernel + event:
 *    2.0M/s, as fast as kernels alone) but the host a cuEventQuery
 *    (0.5-1.8 us when it has passed, ~0.4-0.5 us when not). So a submission
 *    onto a stream with none of our futures outstanding (the latency case)
 *    gets a word, and one that queues behind outstanding futures (the
 *    throughput case) gets an event, except every WORD_EVERY-th, which gets
 *    a word again (struct cudaev__backlog);
 *  - the loop keeps one FIFO per stream and looks only at the head of each
 *    busy stream while it is a word (stream order makes the rest wait
 *    behind it); when the head is an event, the word behind it decides for
 *    a whole run of events: the newest word appended (usually the loop's
 *    own flush marker, enqueued behind a FIFO that ends in an event), else
 *    the oldest word behind the head; with no word, a few queries find the
 *    passed prefix (events_done, find_done);
 *  - before sleeping it spins briefly when the oldest work is expected to
 *    finish soon (from a moving average of completion times), and only then
 *    arms one cuLaunchHostFunc per busy stream that writes the loop's
 *    eventfd: no host callback per operation (gpu_wake.c);
 *  - host functions never run after a sticky context error, so a watchdog
 *    queries the loop's internal stream every 200 ms while work is pending
 *    and fails every pending future with the context's error;
 *  - at most one such wakeup is in flight per stream (it covers everything
 *    submitted before it; when it fires the loop arms the next one), and
 *    none is armed on a stream that holds a loop-thread host function not
 *    yet run: the loop thread must never block in an enqueue on a stream
 *    whose queue is full behind a gate only the loop can open (the driver
 *    blocks enqueues once about a thousand operations are pending on a
 *    stream);
 *  - where stream memory operations are missing, pooled events replace the
 *    words (CUDAEV_LOOP_EVENTS=1 forces this path). cuEventQuery's
 *    CUDA_ERROR_NOT_READY means "not yet"; CUDA_SUCCESS completes the
 *    future; any other code is its outcome. Loop-thread host functions
 *    then use a driver host function that blocks on a futex until the loop
 *    has run fn (struct cudaev__hgate), followed by a pooled event. */
#include "gpu_internal.h"

#include <stdlib.h>
#include <string.h>

#define WORD_EVERY \
  16u /* on a backlogged stream: a word every 16th
                          (CUDAEV_LOOP_WORD_EVERY overrides, 1..1024) */

/* Binds the loop to the calling thread's context and creates the GPU
 * resources. Returns the error that makes the source unavailable. */
static cudaError_t gpu_init(struct cudaev_loop *loop) {
  cudaError_t e = cudaev__ctx();
  if (e != cudaSuccess) return e;
  struct cudaev__gpu *g = cudaev__alloc(sizeof *g);
  if (g == NULL) return cudaErrorMemoryAllocation;
  memset(g, 0, sizeof *g);
  pthread_mutex_init(&g->mu, NULL);
  atomic_init(&g->tag_gen, 0);
  g->ewma_ns = 10000;
  CUresult r = cudaev__drv.cuCtxGetCurrent(&g->ctx);
  if (r == CUDA_SUCCESS) r = cudaev__drv.cuStreamCreate(&g->internal, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    pthread_mutex_destroy(&g->mu);
    cudaev__free(g, sizeof *g);
    return cudaev__error_from_cu(r);
  }
  g->word_every = WORD_EVERY;
  const char *we = getenv("CUDAEV_LOOP_WORD_EVERY");
  if (we != NULL && atoi(we) >= 1 && atoi(we) <= 1024) g->word_every = (uint32_t)atoi(we);
  const char *env = getenv("CUDAEV_LOOP_EVENTS");
  g->use_events = env != NULL && env[0] == '1';
  if (!g->use_events) {
    /* Probe stream memory operations once; the probe word stays reserved. */
    uint32_t w;
    e = cudaev__gpu_word_get(g, &w);
    if (e == cudaSuccess) {
      r = cudaev__drv.cuStreamWriteValue32(g->internal, word_dev(g, w), 1, 0);
      if (r == CUDA_ERROR_NOT_SUPPORTED) g->use_events = 1;
    } else {
      g->use_events = 1; /* no mapped pinned memory: events still work */
    }
  }
  loop->gpu = g;
  return cudaSuccess;
}

size_t cudaev__gpu_tracks(struct cudaev_loop *loop) {
  return loop->gpu ? atomic_load_explicit(&loop->gpu->ntracks, memory_order_relaxed) : 0;
}

/* The source's abandon (process exit): opens the gates of the loop-thread
 * host functions in the stream FIFOs without running them. */
static void gpu_open_gates(struct cudaev_loop *loop) {
  struct cudaev__gpu *g = loop->gpu;
  for (uint32_t i = 0; i < g->nbusy; i++)
    for (uint32_t j = 0; j < g->busy[i]->rlen; j++) {
      struct cudaev_future *f = ent(g->busy[i], j);
      if (f->kind != CUDAEV__K_HOSTFN) continue;
      if (f->use_event)
        cudaev__hgate_open(f->aux.hg); /* its reference stays: the process is ending */
      else
        __atomic_store_n(word_ptr(g, f->gate), f->tag, __ATOMIC_RELEASE);
    }
}

/* Also after fini (the loop still counts what its sources hold). */
static size_t gpu_pending(struct cudaev_loop *loop) {
  return loop->gpu != NULL ? loop->gpu->ntracked : 0;
}

static void gpu_fini(struct cudaev_loop *loop) {
  struct cudaev__gpu *g = loop->gpu;
  bool pushed = cudaev__gpu_enter(loop);
  bool had = g->nbusy > 0;
  /* Host functions not run are skipped (their gates open in finish()). */
  cudaev__gpu_fail_all(loop, CUDAEV_ERROR_LOOP_DESTROYED);
  /* The GPU may still be about to write our words: let it finish. */
  if (had) cudaev__drv.cuCtxSynchronize(NULL);
  cudaev__drv.cuStreamSynchronize(g->internal);
  cudaev__drv.cuStreamDestroy(g->internal);
  cudaev__gpu_pool_fini(g);
  cudaev__gpu_leave(loop, pushed);
  cudaev__gpu_records_free(g);
  pthread_mutex_destroy(&g->mu);
  cudaev__free(g, sizeof *g);
  loop->gpu = NULL;
}

/* The GPU source's state lives in loop->gpu; its error in loop->gpu_error,
 * which the submission functions return while loop->gpu is NULL. */
static cudaError_t gpu_source_init(struct cudaev_loop *loop) {
  loop->gpu_error = gpu_init(loop);
  return loop->gpu_error;
}

const struct cudaev__source_ops cudaev__source_gpu = {
    .kinds = (1u << CUDAEV__K_GPU) | (1u << CUDAEV__K_HOSTFN),
    .init = gpu_source_init,
    .fini = gpu_fini,
    .track = cudaev__gpu_track,
    .self_state = cudaev__gpu_self_state,
    .enter = cudaev__gpu_enter,
    .leave = cudaev__gpu_leave,
    .poll = cudaev__gpu_poll,
    .tick = cudaev__gpu_watchdog,
    .before_sleep = cudaev__gpu_before_sleep,
    .pending = gpu_pending,
    .abandon = gpu_open_gates,
};
