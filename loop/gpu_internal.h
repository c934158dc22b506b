/* Internal contracts of the GPU completion source (loop/gpu*.c, hostfn.c):
 * its state (struct cudaev__gpu, one per CUDA context the loop serves: the
 * creation context's in loop->gpu, which also holds the table of all of
 * them), a stream's
 * record (struct cudaev__track), what submitting threads share about a
 * stream (struct cudaev__backlog), and the small helpers the hot paths
 * inline. Nothing outside the source includes this header: loop.c and
 * future.c reach the source through cudaev__source_gpu only.
 *
 * Which file owns what (docs/design.md has the table and the picture):
 *   gpu.c         the source's table, its creation and destroy, the
 *                 passes over every context's state
 *   gpu_ctx.c     a context's state: making one, finding a submission's
 *   gpu_marker.c  completion markers: the pools of words (pinned, mapped)
 *                 and events, enqueueing a marker (head_state, below,
 *                 reads one)
 *   gpu_stream.c  stream records: hash, idle list, FIFO rings, tracking
 *   gpu_poll.c    a pass: prefetch, completion of runs, the watchdog
 *   gpu_wake.c    before sleeping: the adaptive spin, armed wakeups
 *   gpu_submit.c  cudaev_future_new_stream and the other submissions
 *   gpu_done.c    cudaev_future_new_work_done of a GPU future: the watches
 *   hostfn.c      cudaev_launch_host_func_async: loop-thread host functions
 *   notify.c      device notifications (not a future source) */
#ifndef CUDAEV_GPU_INTERNAL_H
#define CUDAEV_GPU_INTERNAL_H

#include "loop_internal.h"
#include "stall.h"

#define WORDS_PER_CHUNK         4096u /* completion words per chunk of pinned memory */
#define MAX_CHUNKS              1024u
#define NBUCKETS                1024u /* stream-record hash buckets */
#define NSLOTS                  4096u /* backlog slots (streams hash into them) */
#define WATCHDOG_NS             200000000ull
#define ENQUEUE_MAX_OUTSTANDING 256u /* the loop enqueues on no stream deeper */
#define MAX_CTX                 64u  /* contexts one loop serves */
#define TAG_SHIFT               26u  /* a tag's high bits: its context's index */

/* ---- a stream as submitters see it (atomics only) ----------------------- */

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

static inline uint32_t order_begin(struct cudaev__backlog *b, bool *solo) {
  uint64_t o = atomic_fetch_add_explicit(&b->order, 1ull << 32, memory_order_acq_rel);
  *solo = (uint32_t)(o >> 32) != (uint32_t)o; /* another one in flight */
  return (uint32_t)(o >> 32);
}

static inline uint32_t order_end(struct cudaev__backlog *b, uint32_t began, bool *solo) {
  uint64_t o = atomic_fetch_add_explicit(&b->order, 1, memory_order_acq_rel);
  if ((uint32_t)(o >> 32) != began + 1) *solo = true; /* one began meanwhile */
  return (uint32_t)o;
}

/* ---- the records -------------------------------------------------------- */

/* The argument of an armed wakeup (wake_arm_fn): refcounted, so that it
 * outlives the stream's record and the loop when the driver runs the host
 * function late. One reference is the record's, one each armed wakeup's. */
struct cudaev__arm {
  _Atomic uint32_t refs;
  _Atomic uint32_t armed; /* 1 while a wakeup is queued on the stream */
  struct cudaev__waker *w;
};

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

/* A stream's record (gpu_stream.c): its FIFO of our futures and what the
 * loop keeps about it to find its next completion cheaply. */
struct cudaev__track {
  CUstream stream;
  /* The FIFO, oldest first: a ring of futures, each tagged in bit 0 when it
   * is marked by an event (is_event), so that finding the next word reads
   * the ring only; entry i is ring[(rhead + i) & (cap - 1)]. An array, not
   * a list: with 100k futures pending they are cold in the cache, and the
   * next ones' addresses are known ahead to fetch them. */
  uintptr_t *ring;
  uint32_t cap, rhead, rlen;
  struct cudaev__track *hnext;         /* hash chain */
  struct cudaev__track *inext, *iprev; /* idle list, when busy_idx == UINT32_MAX */
  struct cudaev__arm *arm;
  uint32_t busy_idx; /* index in gpu->busy, UINT32_MAX when idle */
  uint32_t ngates;   /* loop-thread host functions in the FIFO */
  uint32_t nsolo;    /* entries of unknown stream order (struct cudaev__backlog) */
  /* The head's completion word and tag when the head is marked by one (a
   * GPU future or a host function's signal), else NULL: a pass finds a
   * stream that is not there yet from this record and the word alone,
   * without touching the future (with 100k pending, a cache miss per busy
   * stream per pass). Kept by head_changed(). */
  const uint32_t *hw;
  uint32_t htag;
  bool tail_ev; /* the tail is marked by an event (kept by ring_insert) */
  /* The newest word entry appended (its word, tag and ring position,
   * rhead-based): when it is written, every entry up to it has passed,
   * known from this record and one word (the loop's flush marker usually). */
  const uint32_t *tw;
  uint32_t twtag, twpos;
  uint32_t flushing;   /* a flush marker of the loop's is in the FIFO */
  uint64_t next_query; /* ns: the earliest the head's event is queried again */
  /* Ring position (rhead-relative base) of the oldest word entry after an
   * event head; UINT32_MAX: look it up. */
  uint32_t probe;
  uint64_t nsub;       /* plain futures submitted */
  uint64_t armed_upto; /* nsub when a wakeup was last armed */
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
  CUstream internal; /* event futures and the watchdog's query */
  int use_events;
  _Atomic uint32_t tag_gen;
  /* Shared with submitting threads; never held across a driver call. */
  pthread_mutex_t mu;
  uint32_t *free_words;
  uint32_t nfree, cap_free;
  CUevent *free_events;
  uint32_t nfree_ev, cap_free_ev;
  uint32_t nev_made; /* pooled events alive: cap_free_ev covers them all */
  uint32_t nchunks;
  uint32_t *chunk_host[MAX_CHUNKS];
  CUdeviceptr chunk_dev[MAX_CHUNKS];
  /* Loop thread only. */
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
  uint32_t passing, drained_from;
  size_t ntracked;
  uint64_t ewma_ns;
  uint64_t last_done; /* ns: the last pass that completed something */
  uint64_t gap_ns;    /* moving average of the time between such passes
                         while work stayed queued (0: none seen yet) */
  uint64_t next_watchdog;
  uint32_t word_every;
  /* cudaev_future_new_work_done's futures whose markers have not passed yet (loop
   * thread only; few, searched linearly when one passes). */
  struct cudaev__watch *watch;
  uint32_t nwatch, cap_watch;
  struct cudaev__backlog slots[NSLOTS]; /* submitters and loop; atomics only */
  /* Index 0 only: the table of every context's state. Entries are
   * published (nall, release) before any future carries their index, and
   * only added, under all_mu. */
  struct cudaev__gpu *_Atomic all[MAX_CTX];
  _Atomic uint32_t nall;
  pthread_mutex_t all_mu;
  /* Index 0 only: the loop's record for the detection of host functions
   * that wait for a loop nobody drives (stall.h); NULL: not watched. */
  struct cudaev__stall *stall;
};

/* A cudaev_future_new_work_done waiting for f's marker: g completes when it passes. */
struct cudaev__watch {
  struct cudaev_future *f, *g;
};

/* The state of f's context (a GPU or HOSTFN future with its marker). */
static inline struct cudaev__gpu *gpu_of(const struct cudaev_future *f) {
  return atomic_load_explicit(&f->loop->gpu->all[f->tag >> TAG_SHIFT], memory_order_relaxed);
}

static inline uint32_t *word_ptr(struct cudaev__gpu *g, uint32_t w) {
  return g->chunk_host[w / WORDS_PER_CHUNK] + w % WORDS_PER_CHUNK;
}
static inline CUdeviceptr word_dev(struct cudaev__gpu *g, uint32_t w) {
  return g->chunk_dev[w / WORDS_PER_CHUNK] + (CUdeviceptr)(w % WORDS_PER_CHUNK) * 4u;
}

static inline struct cudaev__backlog *slot_of(struct cudaev__gpu *g, CUstream s) {
  uint64_t h = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull;
  return &g->slots[h >> 52]; /* NSLOTS == 4096 */
}

/* A fresh tag of g's: a count in the low bits, g's index in the high ones
 * (gpu_of). Never 0 (a word's value when it is handed out). */
static inline uint32_t next_tag(struct cudaev__gpu *g) {
  uint32_t t;
  do {
    uint32_t n = atomic_fetch_add_explicit(&g->tag_gen, 1, memory_order_relaxed) + 1;
    t = (n & ((1u << TAG_SHIFT) - 1)) | g->idx << TAG_SHIFT;
  } while (t == 0);
  return t;
}

/* The loop's side of struct cudaev__backlog: f is no longer outstanding. */
static inline void backlog_done(struct cudaev__gpu *g, struct cudaev_future *f, CUstream s) {
  if (f->counted) atomic_fetch_sub_explicit(&slot_of(g, s)->v, 1, memory_order_relaxed);
  f->counted = 0;
}

/* ---- a stream's FIFO (loop thread) -------------------------------------- */

/* A plain GPU future marked by an event: its state costs a driver call. */
static inline bool is_event(const struct cudaev_future *f) {
  return f->kind == CUDAEV__K_GPU && f->use_event;
}

static inline struct cudaev_future *ent(const struct cudaev__track *t, uint32_t i) {
  return (struct cudaev_future *)(t->ring[(t->rhead + i) & (t->cap - 1)] & ~(uintptr_t)1);
}
static inline bool ent_event(const struct cudaev__track *t, uint32_t i) {
  return t->ring[(t->rhead + i) & (t->cap - 1)] & 1;
}
static inline struct cudaev_future *head_of(const struct cudaev__track *t) {
  return t->rlen ? ent(t, 0) : NULL;
}
static inline void pop(struct cudaev__track *t) {
  t->rhead++;
  t->rlen--;
}

static inline bool has_word(const struct cudaev_future *f) {
  return !f->use_event && (f->kind == CUDAEV__K_GPU || f->kind == CUDAEV__K_HOSTFN);
}

/* Keeps t->hw / t->htag (the head's word) after the head changed. Inline:
 * a pass calls it after every run it completes. */
static inline void head_changed(struct cudaev__gpu *g, struct cudaev__track *t) {
  struct cudaev_future *h = head_of(t);
  bool word = h != NULL && has_word(h);
  t->hw = word ? word_ptr(g, h->x.word) : NULL;
  t->htag = word ? h->tag : 0;
}

/* Where the GPU is with f: cudaErrorNotReady while it has not passed f's
 * marker, else f's outcome (cudaSuccess, or the error cuEventQuery gave).
 * Inline: a pass reads every word head through it. Thread: any. */
static inline cudaError_t head_state(struct cudaev__gpu *g, struct cudaev_future *f) {
  /* Byte loads of their own (a waiter thread reads these while the loop
   * writes the bit-field byte between them; see cudaev__gpu_self_state). */
  uint8_t kind = __atomic_load_n(&f->kind, __ATOMIC_RELAXED);
  uint8_t use_event = __atomic_load_n(&f->use_event, __ATOMIC_RELAXED);
  if (kind == CUDAEV__K_HOSTFN && use_event)
    return atomic_load_explicit(&f->aux.hg->reached, memory_order_acquire) ? cudaSuccess
                                                                           : cudaErrorNotReady;
  if (use_event) {
    CUresult r = cudaev__drv.cuEventQuery(f->u.ev);
    if (r == CUDA_ERROR_NOT_READY) return cudaErrorNotReady; /* not yet: never an outcome */
    return cudaev__error_from_cu(r);
  }
  return __atomic_load_n(word_ptr(g, f->x.word), __ATOMIC_ACQUIRE) == f->tag ? cudaSuccess
                                                                             : cudaErrorNotReady;
}

/* The index of the newest word entry appended, while it is in the FIFO;
 * UINT32_MAX otherwise. */
static inline uint32_t tail_word(const struct cudaev__track *t) {
  uint32_t i = t->twpos - t->rhead;
  return t->tw != NULL && i < t->rlen ? i : UINT32_MAX;
}

/* Whether the loop thread may enqueue on t's stream (a wakeup, a flush
 * marker). Not behind a loop-thread host function not yet run, nor with
 * hundreds of our futures outstanding on it: the driver blocks an enqueue
 * once about a thousand operations are pending on a stream, and the loop
 * must not block in one behind work that may wait for the loop itself (its
 * host function's gate, or a stream wait on a value a continuation
 * writes); a stream that deep completes through the timed wakeups of deep
 * streams and the words among its entries. Never on the per-thread default
 * stream: the loop thread's would be another stream. */
static inline bool may_enqueue(struct cudaev__gpu *g, const struct cudaev__track *t) {
  return t->ngates == 0 && t->stream != CU_STREAM_PER_THREAD &&
         (uint32_t)atomic_load_explicit(&slot_of(g, t->stream)->v, memory_order_relaxed) <
             ENQUEUE_MAX_OUTSTANDING;
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

/* ---- functions, by the file that defines them --------------------------- */

/* gpu_ctx.c. A new state for context c at index idx of the loop's table
 * (its internal stream, the probe of stream memory operations); makes c
 * current for its driver calls. Thread: any. */
cudaError_t cudaev__gpu_new(CUcontext c, uint32_t idx, struct cudaev__gpu **out);

/* gpu_marker.c. Thread: any; the pools' mutex is never held across a
 * driver call. Grows an array (under the mutex, for the pools' own); false
 * when out of memory. */
bool cudaev__gpu_grow(void **arr, uint32_t *cap, size_t item, uint32_t need);
/* A zeroed completion word (its index), making a chunk when none is free. */
cudaError_t cudaev__gpu_word_get(struct cudaev__gpu *g, uint32_t *out);
void cudaev__gpu_words_put(struct cudaev__gpu *g, const uint32_t *w, uint32_t n);
/* A DISABLE_TIMING event from the pool, or a new one; the pool makes
 * room for it first (cudaErrorMemoryAllocation when it cannot), so that
 * giving it back never fails: a pooled event is destroyed only with the
 * pool (a waiter may still query one the loop gave back). */
cudaError_t cudaev__gpu_event_get(struct cudaev__gpu *g, CUevent *out);
void cudaev__gpu_event_put(struct cudaev__gpu *g, CUevent e);
void cudaev__gpu_events_put(struct cudaev__gpu *g, CUevent *ev, uint32_t n);
/* Destroy, with g's context current: destroys the pooled events,
 * frees the chunks of words and the free lists. */
void cudaev__gpu_pool_fini(struct cudaev__gpu *g);
/* Enqueues f's completion marker on `stream`: a pooled event if
 * f->use_event, else a word with a fresh tag; the enqueue is bracketed on
 * the stream's slot, which gives f its place in stream order (msg.seq) and
 * says whether another submission overlapped it (solo). On failure the word
 * or event goes back and nothing is on the stream. */
cudaError_t cudaev__gpu_enqueue_marker(struct cudaev__gpu *g, struct cudaev_future *f,
                                       CUstream stream);

/* gpu_stream.c. Loop thread. The source's track. */
void cudaev__gpu_track(struct cudaev_loop *loop, struct cudaev_future *f);
/* Busy stream i's FIFO is empty: it leaves the busy list at the next
 * compaction. */
static inline void cudaev__gpu_busy_drained(struct cudaev__gpu *g, uint32_t i) {
  if (i < g->drained_from) g->drained_from = i;
}
/* Outside any pass (g->passing == 0): takes the drained streams off the
 * busy list, keeping the others' order, and makes their records idle. */
void cudaev__gpu_busy_compact(struct cudaev__gpu *g);
/* Destroy: frees every record. */
void cudaev__gpu_records_free(struct cudaev__gpu *g);

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

/* gpu_wake.c. g's part of the source's before_sleep (loop thread), with
 * g's context current. */
uint64_t cudaev__gpu_before_sleep(struct cudaev_loop *loop, struct cudaev__gpu *g);
/* A stream record's arm, with a reference to the waker; NULL when out of
 * memory. Thread: any. */
struct cudaev__arm *cudaev__arm_new(struct cudaev__waker *w);
void cudaev__arm_release(struct cudaev__arm *a);
/* A host function that wakes the loop; its argument is a waker reference
 * it releases. */
void CUDA_CB cudaev__gpu_wake_fn(void *arg);

/* hostfn.c. Loop thread: lets a blocked gate_fn return (or one not yet run
 * pass); the release drops one of the gate's references. */
void cudaev__hgate_open(struct cudaev__hgate *hg);
void cudaev__hgate_release(struct cudaev__hgate *hg);

/* gpu_done.c. The source's done (any thread). Loop thread: done_fire
 * completes the watch on f (popped, its marker passed, outcome st);
 * done_fini (destroy, after the context's synchronisation) completes every
 * watch left with st and frees the list. */
cudaError_t cudaev__gpu_done(struct cudaev_future *f, struct cudaev_future *g);
void cudaev__gpu_done_fire(struct cudaev__gpu *s, struct cudaev_future *f, cudaError_t st);
void cudaev__gpu_done_fini(struct cudaev__gpu *s, cudaError_t st);

/* gpu.c. Stream records alive (tracked streams plus at most IDLE_MAX idle
 * ones, gpu_stream.c);
 * for tests. Thread: any (a relaxed snapshot). */
size_t cudaev__gpu_tracks(struct cudaev_loop *loop);

#endif
