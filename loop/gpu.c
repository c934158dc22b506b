/* The GPU completion source: futures of work on CUDA streams
 * (gpu_submit.c, hostfn.c), completed by the loop (gpu_poll.c). This file
 * holds its table (cudaev__source_gpu), its creation and its destroy;
 * gpu_ctx.h lists the other headers and their owners.
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
#include "gpu_ctx.h"
#include "gpu_done.h"
#include "gpu_marker.h"
#include "gpu_poll.h"
#include "gpu_stream.h"
#include "gpu_wake.h"
#include "hostfn.h"
#include "stall.h"

#include <stdlib.h>
#include <string.h>

/* Binds the loop to the calling thread's context (its first state) and
 * creates the GPU resources. Returns the error that makes the source
 * unavailable. */
static cudaError_t gpu_init(struct cudaev_loop *loop) {
  cudaError_t e = cudaev__ctx();
  if (e != cudaSuccess) return e;
  CUcontext c = NULL;
  e = cudaev__error_from_cu(cudaev__drv.cuCtxGetCurrent(&c));
  struct cudaev__gpu *g = NULL;
  if (e == cudaSuccess) e = cudaev__gpu_new(c, 0, &g);
  if (e != cudaSuccess) return e;
  pthread_mutex_init(&g->all_mu, NULL);
  atomic_init(&g->all[0], g);
  atomic_init(&g->nall, 1);
  g->stall = cudaev__stall_new(loop);
  loop->gpu = g;
  return cudaSuccess;
}

/* The number of states, and the i-th (loop thread, or any thread for a
 * snapshot). */
static uint32_t nall(const struct cudaev_loop *loop) {
  return atomic_load_explicit(&loop->gpu->nall, memory_order_acquire);
}
static struct cudaev__gpu *state(const struct cudaev_loop *loop, uint32_t i) {
  return atomic_load_explicit(&loop->gpu->all[i], memory_order_relaxed);
}

size_t cudaev__gpu_tracks(struct cudaev_loop *loop) {
  if (loop->gpu == NULL) return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < nall(loop); i++)
    n += atomic_load_explicit(&state(loop, i)->ntracks, memory_order_relaxed);
  return n;
}

/* The source's abandon (process exit): opens the gates of the loop-thread
 * host functions in the stream FIFOs without running them. */
static void gpu_open_gates(struct cudaev_loop *loop) {
  for (uint32_t k = 0; k < nall(loop); k++) {
    struct cudaev__gpu *g = state(loop, k);
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
}

/* Also after fini (the loop still counts what its sources hold). */
static size_t gpu_pending(struct cudaev_loop *loop) {
  if (loop->gpu == NULL) return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < nall(loop); i++) n += state(loop, i)->ntracked;
  return n;
}

/* A pass over every context's streams; the others' contexts are made
 * current around theirs (the pass entered the loop's), so that the
 * continuations run inline see the context their work ran in. */
static bool gpu_poll_all(struct cudaev_loop *loop) {
  cudaev__stall_poll(loop->gpu->stall);
  bool any = cudaev__gpu_poll(loop, loop->gpu);
  for (uint32_t i = 1; i < nall(loop); i++) {
    struct cudaev__gpu *g = state(loop, i);
    if (g->nbusy == 0) continue;
    bool pushed = cudaev__ctx_in(g->ctx);
    any |= cudaev__gpu_poll(loop, g);
    cudaev__ctx_out(pushed);
  }
  return any;
}

static void gpu_tick_all(struct cudaev_loop *loop, uint64_t now) {
  cudaev__stall_tick(loop->gpu->stall, now);
  cudaev__gpu_watchdog(loop, loop->gpu, now);
  for (uint32_t i = 1; i < nall(loop); i++) {
    struct cudaev__gpu *g = state(loop, i);
    if (g->nbusy == 0 || now < g->next_watchdog) continue;
    bool pushed = cudaev__ctx_in(g->ctx);
    cudaev__gpu_watchdog(loop, g, now);
    cudaev__ctx_out(pushed);
  }
}

static uint64_t gpu_before_sleep_all(struct cudaev_loop *loop) {
  uint64_t t = cudaev__gpu_before_sleep(loop, loop->gpu);
  for (uint32_t i = 1; i < nall(loop) && t != 0; i++) {
    struct cudaev__gpu *g = state(loop, i);
    if (g->nbusy == 0) continue;
    bool pushed = cudaev__ctx_in(g->ctx);
    uint64_t u = cudaev__gpu_before_sleep(loop, g);
    cudaev__ctx_out(pushed);
    if (u < t) t = u;
  }
  return t;
}

static void gpu_fini(struct cudaev_loop *loop) {
  /* A continuation run below that submits GPU work would find a state
   * freed already (the table keeps pointers to them) or put work behind
   * the failing: it gets CUDAEV_ERROR_LOOP_DESTROYED instead. */
  atomic_store_explicit(&loop->gpu->closing, 1, memory_order_relaxed);
  /* The other contexts first, the loop's (which holds the table) last. */
  for (uint32_t i = nall(loop); i-- > 0;) {
    struct cudaev__gpu *g = state(loop, i);
    bool pushed = cudaev__ctx_in(g->ctx);
    bool had = g->nbusy > 0;
    /* Host functions not run are skipped (their gates open in finish()). */
    cudaev__gpu_fail_all(loop, g, CUDAEV_ERROR_LOOP_DESTROYED);
    /* The GPU may still be about to write our words: let it finish. The
     * waits are the loop's own, no part of any capture (driver.h). */
    struct cudaev__capture_mode mode = cudaev__capture_relax();
    cudaError_t synced = cudaSuccess;
    if (had) synced = cudaev__error_from_cu(cudaev__drv.cuCtxSynchronize(NULL));
    cudaev__drv.cuStreamSynchronize(g->internal);
    cudaev__capture_restore(mode);
    /* Now the GPU is done with what cudaev_future_new_work_done waits for. */
    cudaev__gpu_done_fini(g, synced);
    cudaev__drv.cuStreamDestroy(g->internal);
    cudaev__gpu_pool_fini(g);
    cudaev__ctx_out(pushed);
    cudaev__gpu_records_free(g);
    pthread_mutex_destroy(&g->mu);
    if (i == 0) {
      pthread_mutex_destroy(&g->all_mu);
      cudaev__stall_free(g->stall);
    }
    cudaev__free(g, sizeof *g);
  }
  loop->gpu = NULL;
  loop->gpu_error = CUDAEV_ERROR_LOOP_DESTROYED; /* what later submissions get */
}

/* A GPU future's continuations outside a pass over its context's streams
 * (the pass has the loop's context current): its own context around them. */
static bool gpu_enter_future(struct cudaev_future *f) {
  struct cudaev_loop *loop = f->loop;
  if (f->kind != CUDAEV__K_GPU || loop->gpu == NULL) return false;
  struct cudaev__gpu *g = gpu_of(f);
  return g != loop->gpu && cudaev__ctx_in(g->ctx);
}

static void gpu_leave_future(bool entered) { cudaev__ctx_out(entered); }

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
    .done = cudaev__gpu_done,
    .enter_future = gpu_enter_future,
    .leave_future = gpu_leave_future,
    .poll = gpu_poll_all,
    .tick = gpu_tick_all,
    .before_sleep = gpu_before_sleep_all,
    .pending = gpu_pending,
    .abandon = gpu_open_gates,
};
