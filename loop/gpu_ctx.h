/* The GPU completion source's state for one CUDA context (struct
 * cudaev__gpu; owner: gpu_ctx.c makes one, gpu.c keeps the loop's table of
 * them and destroys them), and a submission's frame (its context made
 * current). The state's fields are grouped by the file that owns them,
 * each group marked; the others only read them where marked. The rest of
 * the source has headers of its own: gpu_marker.h (completion markers),
 * gpu_stream.h (stream records), gpu_wake.h, gpu_poll.h, gpu_done.h,
 * hostfn.h, stall.h. Nothing outside the GPU source includes these:
 * loop.c and future.c reach it through cudaev__source_gpu only. */
#ifndef CUDAEV_GPU_CTX_H
#define CUDAEV_GPU_CTX_H

#include "loop_internal.h"

#include <pthread.h>

struct cudaev__track; /* gpu_stream.h */
struct cudaev__watch; /* gpu_done.c */
struct cudaev__stall; /* stall.h */

#define WORDS_PER_CHUNK         4096u /* completion words per chunk of pinned memory */
#define MAX_CHUNKS              1024u
#define NBUCKETS                1024u /* stream-record hash buckets */
#define NSLOTS                  4096u /* backlog slots (streams hash into them) */
#define WATCHDOG_NS             200000000ull
#define ENQUEUE_MAX_OUTSTANDING 256u /* the loop enqueues on no stream deeper */
#define MAX_CTX                 64u  /* contexts one loop serves */
#define TAG_SHIFT               26u  /* a tag's high bits: its context's index */

/* ---- a stream as submitters see it (atomics only; gpu_marker.h) ------- */

/* A stream as seen by submitting threads (streams share a slot when their
 * handles hash together, rarely with 4096 slots: that only costs speed).
 *
 * v: the submissions onto it (high 32 bits) and how many of those are
 * outstanding (low 32 bits: the loop subtracts one as each finishes). It
 * chooses the marker.
 *
 * order: markers enqueued (high) and done enqueueing (low). Inferring that
 * an entry has passed from a newer one needs the stream FIFO in the GPU's
 * order, which threads submitting to one stream at once do not give: each
 * marker enqueue is bracketed here (order_begin / order_end), its future
 * is placed in the FIFO by the count at its end (msg.seq), and one whose
 * bracket overlapped another's is `solo`: the loop never infers it, and
 * checks that stream's entries one by one while it is in the FIFO. */
struct cudaev__backlog {
  _Atomic uint64_t v;
  _Atomic uint64_t order;
};

/* The source's state for one context. A loop starts with its creation
 * context's (loop->gpu, index 0) and adds one per other context the first
 * time work of that context is submitted (cudaev__gpu_for); they live until
 * the loop is destroyed. A future finds its context's state from its tag
 * (gpu_of), never by a lookup per completion. */
struct cudaev__gpu {
  CUcontext ctx;
  uint32_t idx; /* in the table (all[idx] == this); tags carry it */
  /* Index 0 only: destroy has begun to free the states; submissions (from
   * the continuations destroy runs) are refused from then on. Written by
   * the destroying thread, read by submitters. */
  _Atomic uint32_t closing;
  /* gpu_ctx.c's, set at creation; read by all. */
  CUstream internal; /* event futures and the watchdog's query */
  int use_events;
  uint32_t word_every;
  _Atomic uint32_t tag_gen; /* next_tag (gpu_marker.h) */
  /* gpu_marker.c's pools (words reach others through word_ptr/word_dev).
   * Shared with submitting threads; never held across a driver call. */
  pthread_mutex_t mu;
  uint32_t *free_words;
  uint32_t nfree, cap_free;
  CUevent *free_events;
  uint32_t nfree_ev, cap_free_ev;
  uint32_t nev_made; /* pooled events alive: cap_free_ev covers them all */
  uint32_t nchunks;
  uint32_t *chunk_host[MAX_CHUNKS];
  CUdeviceptr chunk_dev[MAX_CHUNKS];
  /* gpu_stream.c's records. Loop thread only. */
  struct cudaev__track *buckets[NBUCKETS];     /* every record: busy or idle */
  struct cudaev__track *idle_head, *idle_tail; /* oldest idle first */
  uint32_t nidle;
  _Atomic size_t ntracks; /* records alive (read by tests off the loop) */
  /* Streams with work in their FIFO, in the order they became busy (a
   * pass visits them in this order, fetching ahead by index). A stream a
   * pass drains stays listed until the outermost pass ends (passing == 0)
   * and the list is compacted from drained_from (UINT32_MAX: none
   * drained): a callback may run a pass inside a pass, and the outer one's
   * record must not go idle (nor be freed) under it. */
  struct cudaev__track **busy;
  uint32_t nbusy, cap_busy;
  uint32_t passing, drained_from; /* passing: gpu_poll.c's pass depth */
  size_t ntracked;
  /* gpu_poll.c writes (as it completes), gpu_wake.c reads (to spin and
   * sleep). Loop thread only. */
  uint64_t ewma_ns;
  uint64_t last_done; /* ns: the last pass that completed something */
  uint64_t gap_ns;    /* moving average of the time between such passes
                         while work stayed queued (0: none seen yet) */
  uint64_t next_watchdog;
  /* gpu_wake.c's hybrid polling: the wake it last asked for (ns, 0: none
   * outstanding), when the work it was for was due, and how late the loop
   * ran after such asks, on average. */
  uint64_t hybrid_at, hybrid_due, wake_late_ns;
  /* gpu_done.c's: cudaev_future_new_work_done's futures whose markers have not passed yet (loop
   * thread only; few, searched linearly when one passes). */
  struct cudaev__watch *watch;
  uint32_t nwatch, cap_watch;
  struct cudaev__backlog slots[NSLOTS]; /* gpu_marker.h; submitters and loop, atomics only */
  /* gpu.c's, index 0 only: the table of every context's state. Entries are
   * published (nall, release) before any future carries their index, and
   * only added, under all_mu. */
  struct cudaev__gpu *_Atomic all[MAX_CTX];
  _Atomic uint32_t nall;
  pthread_mutex_t all_mu;
  /* gpu.c's, index 0 only: the loop's record for the detection of host functions
   * that wait for a loop nobody drives (stall.h); NULL: not watched. */
  struct cudaev__stall *stall;
};

/* The state of f's context (a GPU or HOSTFN future with its marker). */
static inline struct cudaev__gpu *gpu_of(const struct cudaev_future *f) {
  return atomic_load_explicit(&f->loop->gpu->all[f->tag >> TAG_SHIFT], memory_order_relaxed);
}

/* ---- contexts, and a submission's frame --------------------------------- */

/* Makes context c current on the calling thread (pushes it when another
 * one, or none, is current); returns whether it pushed. */
static inline bool cudaev__ctx_in(CUcontext c) {
  CUcontext cur = NULL;
  cudaev__drv.cuCtxGetCurrent(&cur);
  if (cur == c) return false;
  return cudaev__drv.cuCtxPushCurrent(c) == CUDA_SUCCESS;
}

static inline void cudaev__ctx_out(bool pushed) {
  if (pushed) {
    CUcontext c;
    cudaev__drv.cuCtxPopCurrent(&c);
  }
}

/* The source's enter / leave: the loop's (creation) context around a pass;
 * a pass makes each other context's current around its own work. */
static inline bool cudaev__gpu_enter(struct cudaev_loop *loop) {
  return cudaev__ctx_in(loop->gpu->ctx);
}

static inline void cudaev__gpu_leave(struct cudaev_loop *loop, bool pushed) {
  (void)loop;
  cudaev__ctx_out(pushed);
}

struct cudaev__sub {
  struct cudaev_loop *loop;
  struct cudaev__gpu *g; /* the state of the submission's context */
  bool pushed;
};

/* gpu_ctx.c. The state of the context that work on `stream` runs in: the
 * stream's own context, or for the NULL, legacy and per-thread handles the
 * calling thread's current one (the loop's creation context when none is
 * current); created on first use. `cur` is the calling thread's current
 * context. Thread: any. */
cudaError_t cudaev__gpu_for(struct cudaev_loop *loop, CUstream stream, CUcontext cur,
                            struct cudaev__gpu **out);

/* Checks the loop, finds the state of the submission's context (see
 * cudaev__gpu_for) and makes that context current for the submission. */
static inline cudaError_t cudaev__sub_begin(struct cudaev__sub *s, cudaev_loop_t *loop,
                                            CUstream stream, cudaev_future_t **out) {
  s->loop = loop;
  s->g = NULL;
  s->pushed = false;
  if (out != NULL) *out = NULL;
  if (loop == NULL || out == NULL) return cudaErrorInvalidValue;
  if (loop->gpu == NULL) return loop->gpu_error;
  if (atomic_load_explicit(&loop->gpu->closing, memory_order_relaxed))
    return CUDAEV_ERROR_LOOP_DESTROYED;
  CUcontext cur = NULL;
  cudaev__drv.cuCtxGetCurrent(&cur);
  cudaError_t e = cudaev__gpu_for(loop, stream, cur, &s->g);
  if (e != cudaSuccess) return e;
  if (cur != s->g->ctx) s->pushed = cudaev__drv.cuCtxPushCurrent(s->g->ctx) == CUDA_SUCCESS;
  return cudaSuccess;
}

static inline cudaError_t cudaev__sub_end(struct cudaev__sub *s, cudaError_t e) {
  cudaev__ctx_out(s->pushed);
  return cudaev__ret(e);
}

/* gpu_ctx.c. A new state for context c at index idx of the loop's table
 * (its internal stream, the probe of stream memory operations); makes c
 * current for its driver calls. Thread: any. */
cudaError_t cudaev__gpu_new(CUcontext c, uint32_t idx, struct cudaev__gpu **out);

/* gpu.c. Stream records alive (tracked streams plus at most IDLE_MAX idle
 * ones, gpu_stream.c);
 * for tests. Thread: any (a relaxed snapshot). */
size_t cudaev__gpu_tracks(struct cudaev_loop *loop);

#endif
