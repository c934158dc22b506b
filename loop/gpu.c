/* GPU completion sources (cudaev_stream_future, cudaev_event_future, the
 * async memcpy/memset/malloc/launch/graph-launch variants, cudaev_host_func) and device
 * notifications.
 *
 * How a completion is detected (docs/design.md has the picture):
 *  - every submission enqueues, after the work, a marker: either
 *    cuStreamWriteValue32 of a unique tag into its own word of pinned,
 *    mapped host memory, or a pooled cuEventRecord. They cost differently
 *    (H200, bench/RESULTS.md): a word is read by the host for nothing, but
 *    each one costs the GPU ~1.4 us (its system-wide fence serializes the
 *    whole context: 64 streams of kernel + word retire 450k/s); an event
 *    costs the GPU nothing (kernel + event: 2.0M/s, as kernels alone) but
 *    the host a cuEventQuery (~1.75 us when it has passed, ~0.1 us when
 *    not). So a submission onto a stream with none of our futures
 *    outstanding (the latency case) gets a word, and one that queues behind
 *    outstanding futures (the throughput case) gets an event, except every
 *    WORD_EVERY-th, which gets a word again (struct backlog);
 *  - the loop keeps one FIFO per stream and looks only at the head of each
 *    busy stream while it is a word (stream order makes the rest wait
 *    behind it); when the head is an event it finds the newest entry the
 *    GPU has passed in one step: the newest passed word (read for free),
 *    then a binary search over the events behind it, newest first, so one
 *    query completes a whole run (find_done);
 *  - before sleeping it spins briefly when the oldest work is expected to
 *    finish soon (from a moving average of completion times), and only then
 *    arms one cuLaunchHostFunc per busy stream that writes the loop's
 *    eventfd: no host callback per operation;
 *  - host functions never run after a sticky context error, so a watchdog
 *    timer queries the loop's internal stream every 200 ms and fails every
 *    pending future with the context's error;
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
 *    has run fn (struct cudaev__hgate), followed by a pooled event;
 *  - a stream's record (struct cudaev__track) lives while its FIFO holds
 *    work; once drained it stays cached (most recently idle last) so that a
 *    stream used again soon finds it, and beyond IDLE_MAX idle records the
 *    oldest is reused for the next new stream or freed: a program that
 *    creates and destroys streams does not grow, and steady state allocates
 *    nothing. A record says nothing about its stream beyond the work in its
 *    FIFO (the driver may hand a destroyed stream's handle to a new one).
 */
#include "loop_internal.h"

#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The source's members (cudaev__source_gpu, at the end of the tracking
 * code); loop.c and future.c reach them only through that table. */
bool cudaev__gpu_enter(struct cudaev_loop *loop);
void cudaev__gpu_leave(struct cudaev_loop *loop, bool pushed);
void cudaev__gpu_track(struct cudaev_loop *loop, struct cudaev_future *f);
size_t cudaev__gpu_pending(struct cudaev_loop *loop);
cudaError_t cudaev__gpu_self_state(struct cudaev_future *f);
bool cudaev__gpu_poll(struct cudaev_loop *loop);
void cudaev__gpu_watchdog(struct cudaev_loop *loop, uint64_t now);
uint64_t cudaev__gpu_before_sleep(struct cudaev_loop *loop);
void cudaev__gpu_open_gates(struct cudaev_loop *loop);
void cudaev__gpu_fini(struct cudaev_loop *loop);
/* Stream records alive (tracked streams plus at most IDLE_MAX idle ones);
 * for tests. Thread: any (a relaxed snapshot). */
size_t cudaev__gpu_tracks(struct cudaev_loop *loop);

#define WORDS_PER_CHUNK 4096u
#define MAX_CHUNKS      1024u
#define NBUCKETS        1024u
#define WATCHDOG_NS     200000000ull
#define IDLE_MAX        64u /* idle stream records kept for reuse */
#define NSLOTS          4096u /* backlog slots (streams hash into them) */
#define WORD_EVERY      16u  /* on a backlogged stream: a word every 16th
                                (CUDAEV_LOOP_WORD_EVERY overrides, 1..1024) */
#define WINDOW          256u /* FIFO entries find_done looks at in one step */
#define FLOW_NS         20000u /* spin on while the last completion is this recent */
#define GAP_MIN_NS      10000u /* shortest sleep while streams are deep */
#define ENQUEUE_MAX_OUTSTANDING 256u /* the loop enqueues on no stream deeper */
#define DEEP_POLL_NS    1000000u /* sleep cap with deep streams, no gap known */
#define GAP_MAX_NS      10000000u /* gaps between completions count up to this */

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
struct backlog {
  _Atomic uint64_t v;
  _Atomic uint64_t order;
};

static uint32_t order_begin(struct backlog *b, bool *solo) {
  uint64_t o = atomic_fetch_add_explicit(&b->order, 1ull << 32, memory_order_acq_rel);
  *solo = (uint32_t)(o >> 32) != (uint32_t)o; /* another one in flight */
  return (uint32_t)(o >> 32);
}

static uint32_t order_end(struct backlog *b, uint32_t began, bool *solo) {
  uint64_t o = atomic_fetch_add_explicit(&b->order, 1, memory_order_acq_rel);
  if ((uint32_t)(o >> 32) != began + 1) *solo = true; /* one began meanwhile */
  return (uint32_t)o;
}

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
};

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
  uint32_t busy_idx;   /* index in gpu->busy, UINT32_MAX when idle */
  uint32_t ngates;     /* loop-thread host functions in the FIFO */
  uint32_t nsolo;      /* entries of unknown stream order (struct backlog) */
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
  uint32_t probe; /* ring position (rhead-relative base) of the oldest word
                     entry after an event head; UINT32_MAX: look it up */
  uint64_t nsub;       /* plain futures submitted */
  uint64_t armed_upto; /* nsub when a wakeup was last armed */
};

struct cudaev__gpu {
  CUcontext ctx;
  CUstream internal; /* event futures and the watchdog's query */
  int use_events;
  _Atomic uint32_t tag_gen;
  /* Shared with submitting threads; never held across a driver call. */
  pthread_mutex_t mu;
  uint32_t *free_words;
  uint32_t nfree, cap_free;
  CUevent *free_events;
  uint32_t nfree_ev, cap_free_ev;
  uint32_t nchunks;
  uint32_t *chunk_host[MAX_CHUNKS];
  CUdeviceptr chunk_dev[MAX_CHUNKS];
  /* Loop thread only. */
  struct cudaev__track *buckets[NBUCKETS];     /* every record: busy or idle */
  struct cudaev__track *idle_head, *idle_tail; /* oldest idle first */
  uint32_t nidle;
  _Atomic size_t ntracks; /* records alive (read by tests off the loop) */
  struct cudaev__track **busy;
  uint32_t nbusy, cap_busy;
  size_t ntracked;
  uint64_t ewma_ns;
  uint64_t last_done; /* ns: the last pass that completed something */
  uint64_t gap_ns;    /* moving average of the time between such passes
                         while work stayed queued (0: none seen yet) */
  uint64_t next_watchdog;
  uint32_t word_every;
  struct backlog slots[NSLOTS]; /* submitters and loop; atomics only */
};

static inline uint32_t *word_ptr(struct cudaev__gpu *g, uint32_t w) {
  return g->chunk_host[w / WORDS_PER_CHUNK] + w % WORDS_PER_CHUNK;
}
static inline CUdeviceptr word_dev(struct cudaev__gpu *g, uint32_t w) {
  return g->chunk_dev[w / WORDS_PER_CHUNK] + (CUdeviceptr)(w % WORDS_PER_CHUNK) * 4u;
}

/* Grows an array of 32/64-bit items under the mutex (no driver call). */
static bool grow(void **arr, uint32_t *cap, size_t item, uint32_t need) {
  if (need <= *cap) return true;
  uint32_t ncap = *cap ? *cap : 256;
  while (ncap < need) ncap *= 2;
  void *p = cudaev__alloc(ncap * item);
  if (p == NULL) return false;
  if (*cap) memcpy(p, *arr, *cap * item);
  cudaev__free(*arr, *cap * item);
  *arr = p;
  *cap = ncap;
  return true;
}

static cudaError_t word_get(struct cudaev__gpu *g, uint32_t *out) {
  pthread_mutex_lock(&g->mu);
  if (g->nfree > 0) {
    *out = g->free_words[--g->nfree];
    pthread_mutex_unlock(&g->mu);
    __atomic_store_n(word_ptr(g, *out), 0u, __ATOMIC_RELAXED);
    return cudaSuccess;
  }
  pthread_mutex_unlock(&g->mu);
  /* Grow outside the lock: a new chunk of pinned, device-mapped words. */
  void *host = NULL;
  CUdeviceptr dev = 0;
  CUresult r = cudaev__drv.cuMemHostAlloc(&host, WORDS_PER_CHUNK * 4u,
                                          CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r == CUDA_SUCCESS) r = cudaev__drv.cuMemHostGetDevicePointer(&dev, host, 0);
  if (r != CUDA_SUCCESS) {
    if (host != NULL) cudaev__drv.cuMemFreeHost(host);
    return cudaev__error_from_cu(r);
  }
  memset(host, 0, WORDS_PER_CHUNK * 4u);
  pthread_mutex_lock(&g->mu);
  /* The free list must hold every word ever made (all may come back at
   * once), not just those free now. */
  if (g->nchunks == MAX_CHUNKS || !grow((void **)&g->free_words, &g->cap_free, sizeof(uint32_t),
                                        (g->nchunks + 1) * WORDS_PER_CHUNK)) {
    pthread_mutex_unlock(&g->mu);
    cudaev__drv.cuMemFreeHost(host);
    return cudaErrorMemoryAllocation;
  }
  uint32_t c = g->nchunks++;
  g->chunk_host[c] = host;
  g->chunk_dev[c] = dev;
  for (uint32_t i = WORDS_PER_CHUNK; i-- > 1;) g->free_words[g->nfree++] = c * WORDS_PER_CHUNK + i;
  pthread_mutex_unlock(&g->mu);
  *out = c * WORDS_PER_CHUNK;
  return cudaSuccess;
}

static void words_put(struct cudaev__gpu *g, const uint32_t *w, uint32_t n) {
  if (n == 0) return;
  pthread_mutex_lock(&g->mu);
  /* cap_free covers every word ever made (word_get grows it with each
   * chunk to nchunks * WORDS_PER_CHUNK). */
  for (uint32_t i = 0; i < n; i++) g->free_words[g->nfree++] = w[i];
  pthread_mutex_unlock(&g->mu);
}

static cudaError_t event_get(struct cudaev__gpu *g, CUevent *out) {
  pthread_mutex_lock(&g->mu);
  if (g->nfree_ev > 0) {
    *out = g->free_events[--g->nfree_ev];
    pthread_mutex_unlock(&g->mu);
    return cudaSuccess;
  }
  pthread_mutex_unlock(&g->mu);
  return cudaev__error_from_cu(cudaev__drv.cuEventCreate(out, CU_EVENT_DISABLE_TIMING));
}

static void event_put(struct cudaev__gpu *g, CUevent e) {
  pthread_mutex_lock(&g->mu);
  if (grow((void **)&g->free_events, &g->cap_free_ev, sizeof(CUevent), g->nfree_ev + 1)) {
    g->free_events[g->nfree_ev++] = e;
    e = NULL;
  }
  pthread_mutex_unlock(&g->mu);
  if (e != NULL) cudaev__drv.cuEventDestroy(e);
}

static struct backlog *slot_of(struct cudaev__gpu *g, CUstream s) {
  uint64_t h = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull;
  return &g->slots[h >> 52]; /* NSLOTS == 4096 */
}

static uint32_t next_tag(struct cudaev__gpu *g) {
  uint32_t t;
  do t = atomic_fetch_add_explicit(&g->tag_gen, 1, memory_order_relaxed) + 1;
  while (t == 0);
  return t;
}

/* The loop's side of struct backlog: f is no longer outstanding. */
static void backlog_done(struct cudaev__gpu *g, struct cudaev_future *f, CUstream s) {
  if (f->counted) atomic_fetch_sub_explicit(&slot_of(g, s)->v, 1, memory_order_relaxed);
  f->counted = 0;
}

/* ---- context -------------------------------------------------------------- */

bool cudaev__gpu_enter(struct cudaev_loop *loop) {
  CUcontext c = NULL;
  cudaev__drv.cuCtxGetCurrent(&c);
  if (c == loop->gpu->ctx) return false;
  return cudaev__drv.cuCtxPushCurrent(loop->gpu->ctx) == CUDA_SUCCESS;
}

void cudaev__gpu_leave(struct cudaev_loop *loop, bool pushed) {
  if (pushed) {
    CUcontext c;
    cudaev__drv.cuCtxPopCurrent(&c);
  }
}

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
    e = word_get(g, &w);
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

/* ---- event-path host-function gates ------------------------------------ */

static void hgate_release(struct cudaev__hgate *hg) {
  if (atomic_fetch_sub_explicit(&hg->refs, 1, memory_order_acq_rel) != 1) return;
  cudaev__waker_release(hg->w);
  cudaev__free(hg, sizeof *hg);
}

/* Loop thread: lets a blocked gate_fn return (or one not yet run pass). */
static void hgate_open(struct cudaev__hgate *hg) {
  atomic_store_explicit(&hg->open, 1, memory_order_release);
  syscall(SYS_futex, (uint32_t *)&hg->open, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Driver host-function thread (event path): no CUDA call in here. */
static void CUDA_CB gate_fn(void *arg) {
  struct cudaev__hgate *hg = arg;
  atomic_store_explicit(&hg->reached, 1, memory_order_release);
  cudaev__waker_wake(hg->w);
  while (atomic_load_explicit(&hg->open, memory_order_acquire) == 0)
    syscall(SYS_futex, (uint32_t *)&hg->open, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
  hgate_release(hg);
}

/* ---- tracking (loop thread) --------------------------------------------- */

static struct cudaev__track **bucket_of(struct cudaev__gpu *g, CUstream s) {
  uintptr_t h = ((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ull;
  return &g->buckets[(h >> 32) % NBUCKETS];
}

static void idle_push(struct cudaev__gpu *g, struct cudaev__track *t) {
  t->inext = NULL;
  t->iprev = g->idle_tail;
  if (g->idle_tail != NULL)
    g->idle_tail->inext = t;
  else
    g->idle_head = t;
  g->idle_tail = t;
  g->nidle++;
}

static void idle_unlink(struct cudaev__gpu *g, struct cudaev__track *t) {
  if (t->iprev != NULL)
    t->iprev->inext = t->inext;
  else
    g->idle_head = t->inext;
  if (t->inext != NULL)
    t->inext->iprev = t->iprev;
  else
    g->idle_tail = t->iprev;
  t->inext = t->iprev = NULL;
  g->nidle--;
}

static void unhash(struct cudaev__gpu *g, struct cudaev__track *t) {
  struct cudaev__track **p = bucket_of(g, t->stream);
  while (*p != t) p = &(*p)->hnext;
  *p = t->hnext;
}

static void arm_release(struct cudaev__arm *a);

static struct cudaev__arm *arm_new(struct cudaev__waker *w) {
  struct cudaev__arm *a = cudaev__alloc(sizeof *a);
  if (a == NULL) return NULL;
  atomic_init(&a->refs, 1);
  atomic_init(&a->armed, 0);
  a->w = w;
  atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
  return a;
}

/* Frees the oldest idle records beyond IDLE_MAX. */
static void idle_trim(struct cudaev__gpu *g) {
  while (g->nidle > IDLE_MAX) {
    struct cudaev__track *t = g->idle_head;
    idle_unlink(g, t);
    unhash(g, t);
    arm_release(t->arm); /* a wakeup still queued keeps its own reference */
    cudaev__free(t->ring, t->cap * sizeof *t->ring);
    cudaev__free(t, sizeof *t);
    atomic_fetch_sub_explicit(&g->ntracks, 1, memory_order_relaxed);
  }
}

/* The record of stream `s`, made idle when new (gpu_track makes it busy). */
static struct cudaev__track *track_get(struct cudaev__gpu *g, struct cudaev__waker *w, CUstream s) {
  struct cudaev__track **b = bucket_of(g, s);
  for (struct cudaev__track *t = *b; t != NULL; t = t->hnext)
    if (t->stream == s) return t;
  struct cudaev__track *t;
  if (g->nidle >= IDLE_MAX) {
    /* Reuse the oldest idle record: nothing of it is kept but its arm, and
     * only when no wakeup is queued on the old stream (that wakeup would
     * clear `armed` under the new stream's feet). */
    t = g->idle_head;
    idle_unlink(g, t);
    unhash(g, t);
    if (atomic_load_explicit(&t->arm->armed, memory_order_seq_cst)) {
      struct cudaev__arm *a = arm_new(w);
      if (a != NULL) {
        arm_release(t->arm);
        t->arm = a;
      } /* else keep it: wakeups of this stream wait for the old one (the
           watchdog's timer still wakes the loop) */
    }
  } else {
    t = cudaev__alloc(sizeof *t);
    struct cudaev__arm *a = arm_new(w);
    if (t == NULL || a == NULL) {
      cudaev__free(t, sizeof *t);
      if (a != NULL) arm_release(a);
      return NULL;
    }
    memset(t, 0, sizeof *t);
    t->arm = a;
    atomic_fetch_add_explicit(&g->ntracks, 1, memory_order_relaxed);
  }
  t->stream = s;
  t->rhead = t->rlen = 0;
  t->hw = NULL;
  t->tw = NULL;
  t->busy_idx = UINT32_MAX;
  t->ngates = 0;
  t->nsolo = 0;
  t->flushing = 0;
  t->next_query = 0;
  t->probe = UINT32_MAX;
  t->nsub = t->armed_upto = 0;
  t->hnext = *b;
  *b = t;
  idle_push(g, t);
  return t;
}

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

/* Places f in t's FIFO by msg.seq (stream order; see struct backlog): at
 * the tail unless a submitter that enqueued earlier handed its future over
 * later. Equal seqs keep their arrival order (a host function's two
 * entries). false when the ring cannot grow. */
static inline bool has_word(const struct cudaev_future *f) {
  return !f->use_event && (f->kind == CUDAEV__K_GPU || f->kind == CUDAEV__K_HOSTFN);
}

static void head_changed(struct cudaev__gpu *g, struct cudaev__track *t) {
  struct cudaev_future *h = head_of(t);
  bool word = h != NULL && has_word(h);
  t->hw = word ? word_ptr(g, h->x.word) : NULL;
  t->htag = word ? h->tag : 0;
}

/* The index of the newest word entry appended, while it is in the FIFO;
 * UINT32_MAX otherwise. */
static inline uint32_t tail_word(const struct cudaev__track *t) {
  uint32_t i = t->twpos - t->rhead;
  return t->tw != NULL && i < t->rlen ? i : UINT32_MAX;
}

static bool ring_insert(struct cudaev__gpu *g, struct cudaev__track *t, struct cudaev_future *f) {
  if (t->rlen == t->cap) {
    uint32_t ncap = t->cap ? 2 * t->cap : 16;
    uintptr_t *r = cudaev__alloc(ncap * sizeof *r);
    if (r == NULL) return false;
    for (uint32_t i = 0; i < t->rlen; i++) r[i] = t->ring[(t->rhead + i) & (t->cap - 1)];
    cudaev__free(t->ring, t->cap * sizeof *r);
    t->ring = r;
    t->cap = ncap;
    /* Positions count from rhead: rebase the cached ones with it. */
    if (t->probe != UINT32_MAX) t->probe -= t->rhead;
    t->twpos -= t->rhead;
    t->rhead = 0;
  }
  uint32_t j = t->rlen, m = t->cap - 1;
  while (j > 0 && (int32_t)(f->msg.seq - ent(t, j - 1)->msg.seq) < 0) {
    t->ring[(t->rhead + j) & m] = t->ring[(t->rhead + j - 1) & m];
    j--;
  }
  if (j != t->rlen) {
    t->probe = UINT32_MAX; /* may no longer be the oldest */
    if (tail_word(t) != UINT32_MAX && j <= t->twpos - t->rhead) t->twpos++;
  } else if (has_word(f)) {
    t->tw = word_ptr(g, f->x.word);
    t->twtag = f->tag;
    t->twpos = t->rhead + j;
  }
  t->ring[(t->rhead + j) & m] = (uintptr_t)f | (is_event(f) ? 1u : 0u);
  if (j == t->rlen) t->tail_ev = is_event(f);
  t->rlen++;
  if (j == 0) head_changed(g, t);
  return true;
}

void cudaev__gpu_track(struct cudaev_loop *loop, struct cudaev_future *f) {
  struct cudaev__gpu *g = loop->gpu;
  /* Until tracked, `track` carries the stream handle (see gpu_submit). */
  struct cudaev__track *t = track_get(g, loop->waker, (CUstream)(void *)f->track);
  if (t == NULL ||
      (t->busy_idx == UINT32_MAX &&
       !grow((void **)&g->busy, &g->cap_busy, sizeof *g->busy, g->nbusy + 1)) ||
      !ring_insert(g, t, f)) {
    /* Out of memory: report it; the word is not recycled (the GPU may
     * still write it). A host function's gate opens now (fn does not run;
     * its future gets the error): the stream must not wait forever. */
    backlog_done(g, f, (CUstream)(void *)f->track);
    cudaev__future_try_complete(f, cudaErrorMemoryAllocation);
    if (f->kind == CUDAEV__K_HOSTFN) {
      struct cudaev_future *uf = f->user;
      if (uf != NULL) uf->aux.hostfn_result = cudaErrorMemoryAllocation;
      if (f->use_event) {
        hgate_open(f->aux.hg);
        hgate_release(f->aux.hg);
      } else {
        __atomic_store_n(word_ptr(g, f->gate), f->tag, __ATOMIC_RELEASE);
      }
      cudaev_future_release(uf);
    }
    cudaev_future_release(f);
    return;
  }
  f->track = t;
  if (f->solo) t->nsolo++;
  if (f->flush) t->flushing = 1;
  if (f->kind == CUDAEV__K_GPU && !f->has_gate && !f->flush) t->nsub++;
  if (f->kind == CUDAEV__K_HOSTFN) t->ngates++;
  if (t->busy_idx == UINT32_MAX) {
    idle_unlink(g, t);
    t->busy_idx = g->nbusy;
    g->busy[g->nbusy++] = t;
    if (g->nbusy == 1) g->next_watchdog = cudaev__now_ns() + WATCHDOG_NS;
  }
  if (!f->flush) g->ntracked++;
}

/* Also after fini (the loop still counts what its sources hold). */
size_t cudaev__gpu_pending(struct cudaev_loop *loop) {
  return loop->gpu != NULL ? loop->gpu->ntracked : 0;
}

/* Where the GPU is with f: cudaErrorNotReady while it has not passed f's
 * marker, else f's outcome (cudaSuccess, or the error cuEventQuery gave). */
static cudaError_t head_state(struct cudaev__gpu *g, struct cudaev_future *f) {
  if (f->kind == CUDAEV__K_HOSTFN && f->use_event)
    return atomic_load_explicit(&f->aux.hg->reached, memory_order_acquire) ? cudaSuccess
                                                                           : cudaErrorNotReady;
  if (f->use_event) {
    CUresult r = cudaev__drv.cuEventQuery(f->u.ev);
    if (r == CUDA_ERROR_NOT_READY) return cudaErrorNotReady; /* not yet: never an outcome */
    return cudaev__error_from_cu(r);
  }
  return __atomic_load_n(word_ptr(g, f->x.word), __ATOMIC_ACQUIRE) == f->tag ? cudaSuccess
                                                                             : cudaErrorNotReady;
}

/* Words and events to give back, in batches (one lock per batch). */
struct recycle {
  uint32_t ndone; /* counted futures finished, for their stream's backlog */
  uint32_t w[64];
  uint32_t n;
  CUevent ev[64];
  uint32_t nev;
};

static void recycle_word(struct cudaev__gpu *g, struct recycle *rc, uint32_t w) {
  if (rc->n == 64) {
    words_put(g, rc->w, rc->n);
    rc->n = 0;
  }
  rc->w[rc->n++] = w;
}

static void events_put(struct cudaev__gpu *g, CUevent *ev, uint32_t n) {
  if (n == 0) return;
  pthread_mutex_lock(&g->mu);
  uint32_t kept = 0;
  if (grow((void **)&g->free_events, &g->cap_free_ev, sizeof(CUevent), g->nfree_ev + n)) {
    memcpy(g->free_events + g->nfree_ev, ev, n * sizeof *ev);
    g->nfree_ev += n;
    kept = n;
  }
  pthread_mutex_unlock(&g->mu);
  for (uint32_t i = kept; i < n; i++) cudaev__drv.cuEventDestroy(ev[i]);
}

static void recycle_event(struct cudaev__gpu *g, struct recycle *rc, CUevent e) {
  if (rc->nev == 64) {
    events_put(g, rc->ev, rc->nev);
    rc->nev = 0;
  }
  rc->ev[rc->nev++] = e;
}

static void recycle_flush(struct cudaev__gpu *g, struct recycle *rc) {
  words_put(g, rc->w, rc->n);
  events_put(g, rc->ev, rc->nev);
  rc->n = rc->nev = 0;
}

/* A popped entry whose marker the GPU has passed (or, with `fail`, whose
 * context died / loop is going away). */
static void finish(struct cudaev_loop *loop, struct cudaev_future *f, struct recycle *rc,
                   cudaError_t fail, uint64_t now) {
  struct cudaev__gpu *g = loop->gpu;
  struct cudaev__track *t = f->track;
  if (f->flush)
    t->flushing = 0;
  else
    g->ntracked--;
  if (f->solo) t->nsolo--;
  if (f->kind == CUDAEV__K_HOSTFN) {
    f->track->ngates--;
    struct cudaev_future *uf = f->user;
    if (uf != NULL) {
      cudaError_t res = fail;
      if (fail == cudaSuccess) res = f->u.h.fn(f->u.h.user);
      uf->aux.hostfn_result = res;
    }
    /* Open the gate: the stream goes on. */
    if (f->use_event) {
      hgate_open(f->aux.hg);
      hgate_release(f->aux.hg);
    } else {
      __atomic_store_n(word_ptr(g, f->gate), f->tag, __ATOMIC_RELEASE);
      recycle_word(g, rc, f->x.word);
    }
    cudaev_future_release(uf);
    cudaev_future_release(f);
    return;
  }
  if (f->counted) {
    f->counted = 0;
    rc->ndone++;
  }
  cudaError_t st = fail != cudaSuccess ? fail : f->has_gate ? f->aux.hostfn_result : cudaSuccess;
  if (cudaev__future_try_complete(f, st) && fail == cudaSuccess && now > f->t_submit && !f->flush)
    g->ewma_ns = g->ewma_ns - g->ewma_ns / 8 + (now - f->t_submit) / 8;
  if (f->use_event)
    recycle_event(g, rc, f->u.ev);
  else
    recycle_word(g, rc, f->x.word);
  if (f->has_gate && !f->use_event) recycle_word(g, rc, f->gate);
  cudaev_future_release(f); /* the FIFO's reference */
}

static void busy_del(struct cudaev__gpu *g, uint32_t i) {
  struct cudaev__track *t = g->busy[i];
  struct cudaev__track *last = g->busy[--g->nbusy];
  g->busy[i] = last;
  last->busy_idx = i;
  t->busy_idx = UINT32_MAX;
  /* Idle now. Callers do not touch other records after this. */
  idle_push(g, t);
  idle_trim(g);
}

cudaError_t cudaev__gpu_self_state(struct cudaev_future *f) {
  struct cudaev_loop *loop = f->loop;
  /* Only a plain GPU future: a host function's outcome is fn's. */
  if (f->kind != CUDAEV__K_GPU || f->has_gate) return cudaErrorNotReady;
  if (!f->use_event) return head_state(loop->gpu, f);
  /* The loop may recycle the event once f is done; the caller re-checks
   * f's state first, and a recycled event only says "not ready" or
   * completes a future already claimed. */
  bool pushed = cudaev__gpu_enter(loop);
  cudaError_t st = head_state(loop->gpu, f);
  cudaev__gpu_leave(loop, pushed);
  return st;
}

/* With many futures pending they are cold in the cache (100k pending:
 * ~20 MB). While the front entry is finished, the one PREFETCH_AHEAD
 * behind it is fetched, and the continuation and word of the one half as
 * far (fetched itself a few steps earlier). */
#define PREFETCH_AHEAD 8u
/* Futures pending (128 bytes each) past which they no longer fit in L2. */
#define COLD_PENDING 16384u
/* A future is 128 bytes, 16-aligned: its lines are those of its first,
 * middle and last bytes. `locality` as __builtin_prefetch's (a constant):
 * 3 into L1, 2 into L2 only (for those needed a stream later). */
#define PREFETCH_FUTURE(f, locality)                                        \
  do {                                                                      \
    const char *p_ = (const char *)(f);                                     \
    __builtin_prefetch(p_, 0, locality);                                    \
    __builtin_prefetch(p_ + 64, 0, locality);                               \
    __builtin_prefetch(p_ + sizeof(struct cudaev_future) - 1, 0, locality); \
  } while (0)
static inline void prefetch_future(const struct cudaev_future *f) { PREFETCH_FUTURE(f, 3); }
static inline void prefetch_ahead(struct cudaev__gpu *g, const struct cudaev__track *t) {
  if (t->rlen > PREFETCH_AHEAD) {
    prefetch_future(ent(t, PREFETCH_AHEAD));
  }
  if (t->rlen > PREFETCH_AHEAD / 2) {
    struct cudaev_future *n = ent(t, PREFETCH_AHEAD / 2);
    __builtin_prefetch(n->conts);
    if (!n->use_event && n->kind == CUDAEV__K_GPU) __builtin_prefetch(word_ptr(g, n->x.word));
  }
}

/* When a pass starts on a stream whose head has passed: the first entries
 * (prefetch_ahead covers those from PREFETCH_AHEAD on), then the
 * continuations of those the ahead-fetch of continuations will not reach
 * (one wait for the first of them, the rest arrive meanwhile). */
static inline void prefetch_front(struct cudaev__gpu *g, const struct cudaev__track *t) {
  uint32_t n = t->rlen <= PREFETCH_AHEAD ? t->rlen : PREFETCH_AHEAD + 1;
  for (uint32_t j = 1; j < n; j++) prefetch_future(ent(t, j));
  __builtin_prefetch(ent(t, 0)->conts);
  for (uint32_t j = 1; j < n && j <= PREFETCH_AHEAD / 2; j++) {
    struct cudaev_future *f = ent(t, j);
    __builtin_prefetch(f->conts);
    if (!f->use_event && f->kind == CUDAEV__K_GPU) __builtin_prefetch(word_ptr(g, f->x.word));
  }
}

/* The ring slots of t's first n entries. */
static inline void prefetch_ring(const struct cudaev__track *t, uint32_t n) {
  if (n > t->rlen) n = t->rlen;
  for (uint32_t j = 0; j < n; j += 8) __builtin_prefetch(t->ring + ((t->rhead + j) & (t->cap - 1)));
  if (n > 0) __builtin_prefetch(t->ring + ((t->rhead + n - 1) & (t->cap - 1)));
}
static inline bool head_passed(const struct cudaev__track *t) {
  return t->hw == NULL || __atomic_load_n(t->hw, __ATOMIC_RELAXED) == t->htag;
}
/* What a visit of t reads first from its record: the head and tail words,
 * the ring slots of its first entries, its backlog slot. */
static inline void prefetch_record(struct cudaev__gpu *g, const struct cudaev__track *t,
                                   bool cold) {
  if (t->hw != NULL) __builtin_prefetch(t->hw);
  if (t->tw != NULL) __builtin_prefetch(t->tw);
  prefetch_ring(t, cold ? 2 * PREFETCH_AHEAD : 1);
  __builtin_prefetch(slot_of(g, t->stream));
}

/* A pass visits the busy streams in turn; each visit's first touches (the
 * record, its ring, the head's word, the stream's backlog slot, the front
 * futures) are cold with many futures pending, so they are fetched streams
 * ahead, in stages: records three ahead, ring, words and slot two ahead,
 * and the front futures of a stream whose head word has passed one ahead.
 * With more futures pending than L2 holds (`cold`), one stage more: the
 * futures of such a stream (up to 2 * PREFETCH_AHEAD, all their lines) two
 * ahead into L2, records four and rings three ahead. bench/cpu-loop-cost,
 * timed per position, showed the entries past the eighth of each stream
 * still cold without it. On the H200 machine (bench-loop-throughput,
 * 2026-11-21, 8 processes per build, 100k pending) the extra stage took
 * the p50 per completion from 0.060-0.063 to 0.058-0.060 us; with 1k
 * pending, where it is skipped, the cost stayed at 0.0506-0.0508 us (0.0515
 * with the extra stage). */
static inline void prefetch_streams(struct cudaev__gpu *g, uint32_t i, bool cold) {
  uint32_t d = cold ? 1 : 0; /* one stage more when the futures are cold */
  if (i + 3 + d < g->nbusy) __builtin_prefetch(g->busy[i + 3 + d]);
  if (i + 2 + d < g->nbusy) prefetch_record(g, g->busy[i + 2 + d], cold);
  if (cold && i + 2 < g->nbusy) {
    const struct cudaev__track *n = g->busy[i + 2];
    if (n->rlen > 1 && n->hw != NULL && head_passed(n))
      for (uint32_t j = 0; j < n->rlen && j < 2 * PREFETCH_AHEAD; j++) PREFETCH_FUTURE(ent(n, j), 2);
  }
  if (i == 0) /* the first streams: nothing fetched them yet */
    for (uint32_t j = 0; j < 2 + d && j < g->nbusy; j++) prefetch_record(g, g->busy[j], cold);
  const struct cudaev__track *t = g->busy[i];
  if (t->rlen > 1 && head_passed(t)) prefetch_front(g, t);
  if (i + 1 < g->nbusy) {
    const struct cudaev__track *n = g->busy[i + 1];
    if (n->rlen > 1 && n->hw != NULL && head_passed(n))
      for (uint32_t j = 0; j < n->rlen && j < PREFETCH_AHEAD; j++) prefetch_future(ent(n, j));
  }
}

/* How many entries at the front of t's FIFO the GPU has passed, when the
 * head is an event and no word was appended behind it, with few driver
 * calls: stream order makes the passed entries a prefix. In order: the
 * head (a stream not there yet costs one query); the tail (one query
 * completes a whole passed run); then, over the first WINDOW entries, the
 * newest passed word or host-function entry (one placed out of order)
 * bounds the prefix from below for free, the oldest unpassed one from
 * above, and the events between are searched by halves. *st gets the
 * outcome that decided: cudaSuccess, or the error a query returned (a
 * sticky error, which every entry up to it gets: querying each would have
 * returned it too). */
static uint32_t find_done(struct cudaev__gpu *g, struct cudaev__track *t, cudaError_t *st) {
  cudaError_t r;
  uint32_t n = t->rlen;
  if ((r = head_state(g, ent(t, 0))) == cudaErrorNotReady) return 0;
  *st = r;
  if (n == 1) return 1;
  if (ent_event(t, n - 1) && (r = head_state(g, ent(t, n - 1))) != cudaErrorNotReady) {
    *st = r;
    return n;
  }
  if (n > WINDOW) n = WINDOW;
  /* lo: index of the newest entry known passed; hi: of the oldest known
   * not passed (n: none in the window). */
  int64_t lo = 0, hi = n;
  for (int64_t i = (int64_t)n - 1; i > 0; i--) {
    if (ent_event(t, (uint32_t)i)) continue;
    if (head_state(g, ent(t, (uint32_t)i)) != cudaErrorNotReady) {
      lo = i;
      break;
    }
    hi = i;
  }
  /* Only events lie strictly between lo and hi. */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    r = head_state(g, ent(t, (uint32_t)mid));
    if (r != cudaErrorNotReady) {
      lo = mid;
      *st = r;
    } else {
      hi = mid;
    }
  }
  return (uint32_t)(lo + 1);
}

/* The index of the oldest word (or host-function) entry behind t's head,
 * which is an event, up to the newest word `tw` (so there is one);
 * cached in t->probe. */
static uint32_t probe_of(struct cudaev__track *t, uint32_t tw) {
  uint32_t i = t->probe - t->rhead;
  if (t->probe != UINT32_MAX && i > 0 && i <= tw) return i;
  for (i = 1; i < tw && ent_event(t, i); i++) {
  }
  t->probe = t->rhead + i;
  return i;
}

/* How many entries at the front of t's FIFO have passed, its head being an
 * event. Words decide for free: the newest word appended (the loop's flush
 * marker, usually), from the stream's record, then the oldest word behind
 * the head (one of every WORD_EVERY markers) cover the events before them.
 * Events are queried only where no word follows them (find_done), and the
 * head's event, so that a short job queued before a long one is not held
 * back until the long one ends, is queried no more often than every 1/8
 * of its age (20 us at least). */
static uint32_t events_done(struct cudaev__gpu *g, struct cudaev__track *t, cudaError_t *st,
                            uint64_t *now) {
  uint32_t tw = tail_word(t);
  if (tw == UINT32_MAX) return find_done(g, t, st);
  *st = cudaSuccess;
  if (__atomic_load_n(t->tw, __ATOMIC_ACQUIRE) == t->twtag) return tw + 1;
  uint32_t w = probe_of(t, tw);
  if (w < tw && (*st = head_state(g, ent(t, w))) != cudaErrorNotReady) return w + 1;
  if (*now == 0) *now = cudaev__now_ns();
  if (*now < t->next_query) return 0;
  struct cudaev_future *h = ent(t, 0);
  uint64_t age = *now > h->t_submit ? *now - h->t_submit : 0;
  t->next_query = *now + (age / 8 > 20000 ? age / 8 : 20000);
  return (*st = head_state(g, h)) != cudaErrorNotReady;
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
static bool may_enqueue(struct cudaev__gpu *g, const struct cudaev__track *t) {
  return t->ngates == 0 && t->stream != CU_STREAM_PER_THREAD &&
         (uint32_t)atomic_load_explicit(&slot_of(g, t->stream)->v, memory_order_relaxed) <
             ENQUEUE_MAX_OUTSTANDING;
}

/* Enqueues f's completion marker on `stream`: a pooled event if
 * f->use_event, else a word with a fresh tag; the enqueue is bracketed on
 * the stream's slot, which gives f its place in stream order (msg.seq) and
 * says whether another submission overlapped it (solo). On failure the
 * word or event goes back and nothing is on the stream. Thread: any. */
static cudaError_t enqueue_marker(struct cudaev__gpu *g, struct cudaev_future *f, CUstream stream) {
  cudaError_t e = f->use_event ? event_get(g, &f->u.ev) : word_get(g, &f->x.word);
  if (e != cudaSuccess) return e;
  if (!f->use_event) f->tag = next_tag(g);
  struct backlog *b = slot_of(g, stream);
  bool solo;
  uint32_t began = order_begin(b, &solo);
  e = cudaev__error_from_cu(
      f->use_event ? cudaev__drv.cuEventRecord(f->u.ev, stream)
                   : cudaev__drv.cuStreamWriteValue32(stream, word_dev(g, f->x.word), f->tag, 0));
  f->msg.seq = order_end(b, began, &solo);
  f->solo = solo;
  if (e != cudaSuccess) {
    if (f->use_event)
      event_put(g, f->u.ev);
    else
      words_put(g, &f->x.word, 1);
  }
  return e;
}

/* Puts a word marker of the loop's own behind t's tail, an event, so that
 * the runs of events before it complete by a read, not by queries. At most
 * one per stream at a time; none where the loop must not enqueue: behind
 * a loop-thread host function (the stream may be full behind its gate),
 * on a per-thread default stream (the loop thread's would be another
 * stream), or without stream memory operations. */
static void flush_tail(struct cudaev_loop *loop, struct cudaev__track *t) {
  struct cudaev__gpu *g = loop->gpu;
  if (g->use_events || t->flushing || !may_enqueue(g, t)) return;
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  if (f == NULL) return;
  f->flush = 1;
  if (enqueue_marker(g, f, t->stream) != cudaSuccess) {
    cudaev_future_release(f);
    return;
  }
  f->t_submit = cudaev__now_ns();
  f->track = (struct cudaev__track *)(void *)t->stream;
  cudaev__future_submit(f); /* on the loop thread: into t's FIFO now; its
                               one reference is the FIFO's */
}

bool cudaev__gpu_poll(struct cudaev_loop *loop) {
  struct cudaev__gpu *g = loop->gpu;
  struct recycle rc = {.n = 0, .nev = 0};
  bool any = false;
  uint64_t now = 0;
  /* More pending than the caches hold: the futures to finish are cold. */
  bool cold = loop->npend + g->ntracked > COLD_PENDING;
  /* Callbacks run inside finish() may submit more work (appends to FIFOs
   * and to `busy`), so everything is re-read on each step. */
  for (uint32_t i = 0; i < g->nbusy;) {
    struct cudaev__track *t = g->busy[i];
    prefetch_streams(g, i, cold);
    while (t->rlen > 0) {
      if (t->hw != NULL && __atomic_load_n(t->hw, __ATOMIC_ACQUIRE) != t->htag) break;
      struct cudaev_future *f = ent(t, 0);
      uint32_t k = 1;
      cudaError_t st;
      if (ent_event(t, 0) && t->nsolo == 0) {
        /* A run of k entries at once (submissions that callbacks make land
         * behind them: only the loop pops, and their seqs are higher). */
        if ((k = events_done(g, t, &st, &now)) == 0) break;
      } else if ((st = head_state(g, f)) == cudaErrorNotReady) {
        /* (With solo entries in the FIFO each is checked on its own: a
         * passed entry says nothing of those before it.) */
        break;
      }
      if (now == 0) now = cudaev__now_ns();
      while (k-- > 0) {
        f = ent(t, 0);
        pop(t);
        prefetch_ahead(g, t);
        /* Entries before the one that decided are passed: success, unless
         * a query returned an error (sticky: theirs too). A host-function
         * entry among them was reached (the stream got past it). */
        finish(loop, f, &rc, st, now);
        any = true;
      }
      if (rc.ndone) {
        atomic_fetch_sub_explicit(&slot_of(g, t->stream)->v, rc.ndone, memory_order_relaxed);
        rc.ndone = 0;
      }
      head_changed(g, t);
      t->next_query = 0;
    }
    if (t->rlen > 0 && t->tail_ev) flush_tail(loop, t);
    if (t->rlen == 0 && t->busy_idx == i)
      busy_del(g, i);
    else
      i++;
  }
  recycle_flush(g, &rc);
  if (any) {
    if (g->last_done != 0 && g->ntracked > 0) {
      uint64_t gap = now - g->last_done;
      if (gap > GAP_MAX_NS) gap = GAP_MAX_NS;
      g->gap_ns = g->gap_ns == 0 ? gap : g->gap_ns - g->gap_ns / 8 + gap / 8;
    }
    g->last_done = now;
  }
  return any;
}

/* Fails everything tracked with `err` (sticky context error or destroy). */
static void fail_all(struct cudaev_loop *loop, cudaError_t err) {
  struct cudaev__gpu *g = loop->gpu;
  struct recycle rc = {.n = 0, .nev = 0};
  while (g->nbusy > 0) {
    struct cudaev__track *t = g->busy[g->nbusy - 1];
    struct cudaev_future *f;
    while (t->rlen > 0) {
      f = ent(t, 0);
      pop(t);
      finish(loop, f, &rc, err, 0);
      if (rc.ndone) {
        atomic_fetch_sub_explicit(&slot_of(g, t->stream)->v, rc.ndone, memory_order_relaxed);
        rc.ndone = 0;
      }
    }
    if (t->busy_idx != UINT32_MAX) busy_del(g, t->busy_idx);
  }
  recycle_flush(g, &rc);
}

void cudaev__gpu_watchdog(struct cudaev_loop *loop, uint64_t now) {
  struct cudaev__gpu *g = loop->gpu;
  if (g->nbusy == 0 || now < g->next_watchdog) return;
  g->next_watchdog = now + WATCHDOG_NS;
  /* A sticky error is returned by every later call in the context, so a
   * query of our own idle stream sees it without blocking. */
  CUresult r = cudaev__drv.cuStreamQuery(g->internal);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) return;
  cudaError_t e = cudaev__error_from_cu(r);
  if (cudaev__error_is_sticky(e)) fail_all(loop, e);
}

static void CUDA_CB wake_fn(void *arg) {
  struct cudaev__waker *w = arg;
  cudaev__waker_wake(w);
  cudaev__waker_release(w);
}

static void arm_release(struct cudaev__arm *a) {
  if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1) return;
  cudaev__waker_release(a->w);
  cudaev__free(a, sizeof *a);
}

/* An armed wakeup: clear `armed` before waking, so that the pass the wake
 * causes may arm the next one. */
static void CUDA_CB wake_arm_fn(void *arg) {
  struct cudaev__arm *a = arg;
  atomic_store_explicit(&a->armed, 0, memory_order_seq_cst);
  cudaev__waker_wake(a->w);
  arm_release(a);
}

static bool any_head_done(struct cudaev__gpu *g) {
  for (uint32_t i = 0; i < g->nbusy; i++)
    if (head_state(g, head_of(g->busy[i])) != cudaErrorNotReady) return true;
  return false;
}

uint64_t cudaev__gpu_before_sleep(struct cudaev_loop *loop) {
  struct cudaev__gpu *g = loop->gpu;
  if (g->nbusy == 0) return UINT64_MAX;
  uint64_t now = cudaev__now_ns();
  /* Adaptive spin (CUDA.jl): only while the oldest work is expected to
   * finish within the window, judged from recent completion times. */
  uint64_t max = (uint64_t)atomic_load_explicit(&loop->spin_max_us, memory_order_relaxed) * 1000;
  if (max > 0 && !g->use_events) {
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = 0; i < g->nbusy; i++)
      if (head_of(g->busy[i])->t_submit < oldest) oldest = head_of(g->busy[i])->t_submit;
    uint64_t end = oldest + 2 * g->ewma_ns + 5000;
    /* While completions flow (a pass completed something lately), the
     * next is likely near too: keep polling rather than sleep until a
     * stream's armed wakeup, which sits behind all of its queued work. */
    if (end < g->last_done + FLOW_NS) end = g->last_done + FLOW_NS;
    if (end > now + max) end = now + max;
    while (now < end) {
      /* New submissions are not tracked yet: process them first. */
      if (any_head_done(g) || !cudaev__mpsc_empty(&loop->q)) return 0;
      for (int k = 0; k < 16; k++) __builtin_ia32_pause();
      now = cudaev__now_ns();
    }
  }
  if (any_head_done(g)) return 0;
  /* Arm one host function per busy stream with work submitted since its
   * last one (UCX): it writes the eventfd when the stream gets there. */
  bool deep = false;
  for (uint32_t i = 0; i < g->nbusy; i++) {
    struct cudaev__track *t = g->busy[i];
    if (t->rlen > 1) deep = true;
    /* Nothing new; or a wakeup still queued (it fires when the stream has
     * passed it, and the pass it causes arms the next); or the loop must
     * not enqueue there (may_enqueue: a loop-thread host function's own
     * wakeup comes first; a stream hundreds deep is polled, below). */
    if (t->nsub <= t->armed_upto || !may_enqueue(g, t) ||
        atomic_load_explicit(&t->arm->armed, memory_order_seq_cst))
      continue;
    atomic_store_explicit(&t->arm->armed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->arm->refs, 1, memory_order_relaxed);
    if (cudaev__drv.cuLaunchHostFunc(t->stream, wake_arm_fn, t->arm) == CUDA_SUCCESS) {
      t->armed_upto = t->nsub;
    } else {
      atomic_store_explicit(&t->arm->armed, 0, memory_order_relaxed);
      arm_release(t->arm); /* the watchdog still polls */
    }
  }
  /* Something may have finished while arming. */
  if (any_head_done(g)) return 0;
  now = cudaev__now_ns();
  uint64_t t = g->next_watchdog > now ? g->next_watchdog - now : 0;
  /* An armed wakeup fires when its stream has passed all of its queued
   * work: with more than one entry queued, the ones before it would wait
   * for that (and a stream too deep to arm has none). So while streams are
   * deep, sleep no longer than a quarter of the usual time between
   * completions (at least GAP_MIN_NS), or DEEP_POLL_NS before any was seen. */
  if (deep) {
    uint64_t cap = g->gap_ns == 0              ? DEEP_POLL_NS
                   : g->gap_ns / 4 > GAP_MIN_NS ? g->gap_ns / 4
                                               : GAP_MIN_NS;
    if (cap < t) t = cap;
  }
  return t;
}

size_t cudaev__gpu_tracks(struct cudaev_loop *loop) {
  return loop->gpu ? atomic_load_explicit(&loop->gpu->ntracks, memory_order_relaxed) : 0;
}

void cudaev__gpu_open_gates(struct cudaev_loop *loop) {
  struct cudaev__gpu *g = loop->gpu;
  for (uint32_t i = 0; i < g->nbusy; i++)
    for (uint32_t j = 0; j < g->busy[i]->rlen; j++) {
      struct cudaev_future *f = ent(g->busy[i], j);
      if (f->kind != CUDAEV__K_HOSTFN) continue;
      if (f->use_event)
        hgate_open(f->aux.hg); /* its reference stays: the process is ending */
      else
        __atomic_store_n(word_ptr(g, f->gate), f->tag, __ATOMIC_RELEASE);
    }
}

void cudaev__gpu_fini(struct cudaev_loop *loop) {
  struct cudaev__gpu *g = loop->gpu;
  bool pushed = cudaev__gpu_enter(loop);
  bool had = g->nbusy > 0;
  /* Host functions not run are skipped (their gates open in finish()). */
  fail_all(loop, CUDAEV_ERROR_LOOP_DESTROYED);
  /* The GPU may still be about to write our words: let it finish. */
  if (had) cudaev__drv.cuCtxSynchronize(NULL);
  cudaev__drv.cuStreamSynchronize(g->internal);
  cudaev__drv.cuStreamDestroy(g->internal);
  for (uint32_t i = 0; i < g->nfree_ev; i++) cudaev__drv.cuEventDestroy(g->free_events[i]);
  for (uint32_t i = 0; i < g->nchunks; i++) cudaev__drv.cuMemFreeHost(g->chunk_host[i]);
  cudaev__gpu_leave(loop, pushed);
  for (uint32_t b = 0; b < NBUCKETS; b++) {
    struct cudaev__track *t = g->buckets[b];
    while (t != NULL) {
      struct cudaev__track *n = t->hnext;
      arm_release(t->arm);
      cudaev__free(t->ring, t->cap * sizeof *t->ring);
      cudaev__free(t, sizeof *t);
      t = n;
    }
  }
  g->idle_head = g->idle_tail = NULL;
  g->nidle = 0;
  cudaev__free(g->busy, g->cap_busy * sizeof *g->busy);
  cudaev__free(g->free_words, g->cap_free * sizeof(uint32_t));
  cudaev__free(g->free_events, g->cap_free_ev * sizeof(CUevent));
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
    .fini = cudaev__gpu_fini,
    .track = cudaev__gpu_track,
    .self_state = cudaev__gpu_self_state,
    .enter = cudaev__gpu_enter,
    .leave = cudaev__gpu_leave,
    .poll = cudaev__gpu_poll,
    .tick = cudaev__gpu_watchdog,
    .before_sleep = cudaev__gpu_before_sleep,
    .pending = cudaev__gpu_pending,
    .abandon = cudaev__gpu_open_gates,
};

/* ---- submission (any thread) -------------------------------------------- */

struct sub {
  struct cudaev_loop *loop;
  bool pushed;
};

/* Checks the loop and makes its context current for the submission. */
static cudaError_t sub_begin(struct sub *s, cudaev_loop_t *loop, cudaev_future_t **out) {
  s->loop = loop;
  s->pushed = false;
  if (out != NULL) *out = NULL;
  if (loop == NULL || out == NULL) return cudaErrorInvalidValue;
  if (loop->gpu == NULL) return loop->gpu_error;
  s->pushed = cudaev__gpu_enter(loop);
  return cudaSuccess;
}

static cudaError_t sub_end(struct sub *s, cudaError_t e) {
  cudaev__gpu_leave(s->loop, s->pushed);
  return cudaev__ret(e);
}

/* Enqueues the completion marker on `stream` and hands the future to the
 * loop. */
static cudaError_t mark(struct cudaev_loop *loop, CUstream stream, cudaev_future_t **out) {
  struct cudaev__gpu *g = loop->gpu;
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  if (f == NULL) return cudaErrorMemoryAllocation;
  /* The marker (see the top of this file): a word unless the stream has
   * futures of ours outstanding, then an event, but a word every
   * WORD_EVERY-th submission. */
  struct backlog *b = slot_of(g, stream);
  uint64_t old = atomic_fetch_add_explicit(&b->v, (1ull << 32) | 1u, memory_order_relaxed);
  f->counted = 1;
  bool backlogged = (uint32_t)old != 0 && (old >> 32) % g->word_every != 0;
  /* The per-thread default stream is a different stream on each thread:
   * its FIFO mixes streams, so its futures are checked one by one (solo),
   * by words, and woken by a host function of the submitter's (the loop
   * cannot enqueue on it). */
  bool per_thread = stream == CU_STREAM_PER_THREAD;
  f->use_event = g->use_events || (backlogged && !per_thread);
  cudaError_t e = enqueue_marker(g, f, stream);
  if (e != cudaSuccess) {
    backlog_done(g, f, stream);
    cudaev_future_release(f);
    return e;
  }
  if (per_thread) {
    f->solo = 1;
    atomic_fetch_add_explicit(&loop->waker->refs, 1, memory_order_relaxed);
    if (cudaev__drv.cuLaunchHostFunc(stream, wake_fn, loop->waker) != CUDA_SUCCESS)
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
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  return sub_end(&s, mark(loop, (CUstream)stream, out));
}

CUDAEV_EXPORT cudaError_t cudaev_event_future(cudaev_loop_t *loop, cudaEvent_t event,
                                              cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (event == NULL) return sub_end(&s, cudaErrorInvalidResourceHandle);
  e = cudaev__error_from_cu(cudaev__drv.cuStreamWaitEvent(loop->gpu->internal, (CUevent)event, 0));
  if (e == cudaSuccess) e = mark(loop, loop->gpu->internal, out);
  return sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_memcpy_async(cudaev_loop_t *loop, void *dst, const void *src,
                                              size_t count, enum cudaMemcpyKind kind,
                                              cudaStream_t stream, cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if ((unsigned)kind > (unsigned)cudaMemcpyDefault)
    return sub_end(&s, cudaErrorInvalidMemcpyDirection);
  if (count > 0 && (dst == NULL || src == NULL)) return sub_end(&s, cudaErrorInvalidValue);
  if (count > 0)
    e = cudaev__error_from_cu(
        cudaev__drv.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, count, (CUstream)stream));
  if (e == cudaSuccess) e = mark(loop, (CUstream)stream, out);
  return sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_memset_async(cudaev_loop_t *loop, void *dev, int value,
                                              size_t count, cudaStream_t stream,
                                              cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (count > 0 && dev == NULL) return sub_end(&s, cudaErrorInvalidValue);
  if (count > 0)
    e = cudaev__error_from_cu(cudaev__drv.cuMemsetD8Async((CUdeviceptr)dev, (unsigned char)value,
                                                          count, (CUstream)stream));
  if (e == cudaSuccess) e = mark(loop, (CUstream)stream, out);
  return sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_malloc_async(cudaev_loop_t *loop, void **dev_ptr, size_t size,
                                              cudaStream_t stream, cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (dev_ptr == NULL) return sub_end(&s, cudaErrorInvalidValue);
  CUdeviceptr d = 0;
  e = cudaev__error_from_cu(cudaev__drv.cuMemAllocAsync(&d, size, (CUstream)stream));
  if (e != cudaSuccess) return sub_end(&s, e);
  *dev_ptr = (void *)d;
  e = mark(loop, (CUstream)stream, out);
  /* The allocation stands even if the marker could not be enqueued. */
  return sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_launch_kernel_async(cudaev_loop_t *loop, const void *func,
                                                     dim3 grid, dim3 block, void **args,
                                                     size_t shmem, cudaStream_t stream,
                                                     cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  e = cudaLaunchKernel(func, grid, block, args, shmem, stream);
  if (e == cudaSuccess) e = mark(loop, (CUstream)stream, out);
  return sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_launch_cufunc_async(cudaev_loop_t *loop, struct CUfunc_st *func,
                                                     dim3 grid, dim3 block, void **args,
                                                     size_t shmem, cudaStream_t stream,
                                                     cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (func == NULL) return sub_end(&s, cudaErrorInvalidResourceHandle);
  e = cudaev__error_from_cu(cudaev__drv.cuLaunchKernel(func, grid.x, grid.y, grid.z, block.x,
                                                       block.y, block.z, (unsigned)shmem,
                                                       (CUstream)stream, args, NULL));
  if (e == cudaSuccess) e = mark(loop, (CUstream)stream, out);
  return sub_end(&s, e);
}

CUDAEV_EXPORT cudaError_t cudaev_graph_launch_async(cudaev_loop_t *loop, cudaGraphExec_t exec,
                                                    cudaStream_t stream, cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  e = cudaGraphLaunch(exec, stream);
  if (e == cudaSuccess) e = mark(loop, (CUstream)stream, out);
  return sub_end(&s, e);
}

/* Event path of cudaev_host_func: on the stream,
 *   launchHostFunc(gate_fn: reached = 1, wake, block until open); record(ev)
 * The loop sees `reached`, runs fn, sets `open`; the pooled event completes
 * the user's future once the stream has passed. While gate_fn blocks, the
 * driver may hold back other host functions of the context (NVIDIA may
 * serialize them): fn must not wait for one. */
static cudaError_t host_func_events(struct cudaev_loop *loop, CUstream st, cudaev_host_fn fn,
                                    void *user, cudaev_future_t **out) {
  struct cudaev__gpu *g = loop->gpu;
  struct cudaev_future *t = cudaev__future_new(loop, CUDAEV__K_HOSTFN);
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  struct cudaev__hgate *hg = cudaev__alloc(sizeof *hg);
  if (t == NULL || f == NULL || hg == NULL) {
    cudaev_future_release(t);
    cudaev_future_release(f);
    cudaev__free(hg, sizeof *hg);
    return cudaErrorMemoryAllocation;
  }
  atomic_init(&hg->refs, 2); /* gate_fn's and t's */
  atomic_init(&hg->reached, 0);
  atomic_init(&hg->open, 0);
  hg->w = loop->waker;
  atomic_fetch_add_explicit(&hg->w->refs, 1, memory_order_relaxed);
  CUevent ev = NULL;
  struct backlog *b = slot_of(g, st);
  bool solo;
  uint32_t began = order_begin(b, &solo);
  cudaError_t e = event_get(g, &ev);
  if (e == cudaSuccess) e = cudaev__error_from_cu(cudaev__drv.cuLaunchHostFunc(st, gate_fn, hg));
  if (e != cudaSuccess) {
    order_end(b, began, &solo);
    /* Nothing is on the stream. */
    if (ev != NULL) event_put(g, ev);
    hgate_release(hg);
    hgate_release(hg);
    cudaev_future_release(t);
    cudaev_future_release(f);
    return e;
  }
  /* From here gate_fn is on the stream: t must be tracked so that the loop
   * opens the gate (it would block the driver's thread forever). */
  t->use_event = 1;
  t->aux.hg = hg;
  t->u.h.fn = fn;
  t->u.h.user = user;
  t->t_submit = cudaev__now_ns();
  t->track = (struct cudaev__track *)(void *)st;
  e = cudaev__error_from_cu(cudaev__drv.cuEventRecord(ev, st));
  t->msg.seq = f->msg.seq = order_end(b, began, &solo);
  t->solo = f->solo = solo || st == CU_STREAM_PER_THREAD;
  if (e != cudaSuccess) {
    event_put(g, ev);
    t->user = NULL; /* fn will not run; the gate still opens once reached */
    cudaev__future_submit(t);
    cudaev_future_release(f);
    return e;
  }
  f->use_event = 1;
  f->u.ev = ev;
  f->has_gate = 1;
  f->gate = UINT32_MAX; /* no gate word on this path */
  f->t_submit = t->t_submit;
  f->track = t->track;
  t->user = cudaev_future_retain(f); /* released when t finishes */
  cudaev_future_retain(f);           /* the FIFO's */
  cudaev__future_submit(t);
  cudaev__future_submit(f);
  *out = f;
  return cudaSuccess;
}

/* Loop-thread host function: on the stream,
 *   write(sig = tagT); launchHostFunc(wake); wait(gate == tagT); write(fin = tagF)
 * The loop sees `sig`, runs fn, opens `gate`; `fin` completes the user's
 * future once the stream has passed. */
CUDAEV_EXPORT cudaError_t cudaev_host_func(cudaev_loop_t *loop, cudaStream_t stream,
                                           cudaev_host_fn fn, void *user, cudaev_future_t **out) {
  struct sub s;
  cudaError_t e = sub_begin(&s, loop, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  struct cudaev__gpu *g = loop->gpu;
  if (fn == NULL) return sub_end(&s, cudaErrorInvalidValue);
  if (g->use_events) return sub_end(&s, host_func_events(loop, (CUstream)stream, fn, user, out));
  CUstream st = (CUstream)stream;
  struct cudaev_future *t = cudaev__future_new(loop, CUDAEV__K_HOSTFN);
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  uint32_t gate = 0;
  bool have_sig = false, have_gate = false, have_fin = false;
  if (t == NULL || f == NULL) {
    e = cudaErrorMemoryAllocation;
    goto fail;
  }
  if ((e = word_get(g, &t->x.word)) != cudaSuccess) goto fail;
  have_sig = true;
  if ((e = word_get(g, &gate)) != cudaSuccess) goto fail;
  have_gate = true;
  if ((e = word_get(g, &f->x.word)) != cudaSuccess) goto fail;
  have_fin = true;
  t->tag = next_tag(g);
  f->tag = next_tag(g);
  t->gate = gate;
  t->u.h.fn = fn;
  t->u.h.user = user;
  struct backlog *b = slot_of(g, st);
  bool solo;
  uint32_t began = order_begin(b, &solo);
  e = cudaev__error_from_cu(
      cudaev__drv.cuStreamWriteValue32(st, word_dev(g, t->x.word), t->tag, 0));
  if (e != cudaSuccess) {
    order_end(b, began, &solo);
    goto fail;
  }
  /* From here the signal is on the stream: t must be tracked so that its
   * word is recycled only after the GPU wrote it. */
  atomic_fetch_add_explicit(&loop->waker->refs, 1, memory_order_relaxed);
  if (cudaev__drv.cuLaunchHostFunc(st, wake_fn, loop->waker) != CUDA_SUCCESS)
    cudaev__waker_release(loop->waker); /* the watchdog's polling still sees it */
  e = cudaev__error_from_cu(
      cudaev__drv.cuStreamWaitValue32(st, word_dev(g, gate), t->tag, CU_STREAM_WAIT_VALUE_EQ));
  if (e == cudaSuccess)
    e = cudaev__error_from_cu(
        cudaev__drv.cuStreamWriteValue32(st, word_dev(g, f->x.word), f->tag, 0));
  t->msg.seq = f->msg.seq = order_end(b, began, &solo);
  t->solo = f->solo = solo || st == CU_STREAM_PER_THREAD;
  t->t_submit = cudaev__now_ns();
  t->track = (struct cudaev__track *)(void *)st;
  if (e != cudaSuccess) {
    /* fn will not run; t still opens the gate (harmless) once seen. The
     * gate word and fin word are leaked: the GPU may wait on / write them. */
    t->user = NULL;
    cudaev__future_submit(t);
    cudaev_future_release(f);
    return sub_end(&s, e);
  }
  t->user = cudaev_future_retain(f); /* released when t finishes */
  f->has_gate = 1;
  f->gate = gate;
  f->t_submit = t->t_submit;
  f->track = t->track;
  cudaev_future_retain(f); /* the FIFO's */
  cudaev__future_submit(t);
  cudaev__future_submit(f);
  *out = f;
  return sub_end(&s, cudaSuccess);
fail:
  if (have_sig) words_put(g, &t->x.word, 1);
  if (have_gate) words_put(g, &gate, 1);
  if (have_fin) words_put(g, &f->x.word, 1);
  cudaev_future_release(t);
  cudaev_future_release(f);
  return sub_end(&s, e);
}

/* ---- device notifications --------------------------------------------------- */

struct cudaev_notify {
  _Atomic uint32_t refs;
  _Atomic uint32_t active;
  struct cudaev_loop *loop;
  cudaev_notify_cb cb;
  void *user;
  CUdevice dev;
  CUasyncCallbackHandle handle;
};

struct notify_msg {
  struct cudaev__run_msg rm;
  struct cudaev_notify *n;
  CUasyncNotificationInfo info;
};

static void notify_release(struct cudaev_notify *n) {
  if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) == 1) cudaev__free(n, sizeof *n);
}

static void notify_run(struct cudaev_loop *loop, struct cudaev__msg *msg);

/* Runs on a driver thread: copy and hand to the loop. */
static void notify_tramp(CUasyncNotificationInfo *info, void *user, CUasyncCallbackHandle h) {
  struct cudaev_notify *n = user;
  if (!atomic_load_explicit(&n->active, memory_order_acquire)) return;
  struct notify_msg *m = cudaev__alloc(sizeof *m);
  if (m == NULL) return; /* dropped: nothing else can be done on this thread */
  m->rm.msg.kind = CUDAEV__MSG_RUN;
  m->rm.run = notify_run;
  m->n = n;
  m->info = *info;
  atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
  cudaev__loop_send(n->loop, &m->rm.msg);
}

/* On the loop thread (a CUDAEV__MSG_RUN). */
static void notify_run(struct cudaev_loop *loop, struct cudaev__msg *msg) {
  struct notify_msg *m = (struct notify_msg *)msg;
  if (atomic_load_explicit(&m->n->active, memory_order_acquire))
    m->n->cb(m->n, &m->info, m->n->user);
  notify_release(m->n);
  cudaev__free(m, sizeof *m);
}

CUDAEV_EXPORT cudaError_t cudaev_notify_register(cudaev_loop_t *loop, int device,
                                                 cudaev_notify_cb cb, void *user,
                                                 cudaev_notify_t **out) {
  if (out != NULL) *out = NULL;
  if (loop == NULL || cb == NULL || out == NULL) return cudaErrorInvalidValue;
  cudaError_t e = cudaev__init();
  if (e != cudaSuccess) return e;
  if (!cudaev__device_valid(device)) return cudaErrorInvalidDevice;
  struct cudaev_notify *n = cudaev__alloc(sizeof *n);
  if (n == NULL) return cudaErrorMemoryAllocation;
  atomic_init(&n->refs, 1);
  atomic_init(&n->active, 1);
  n->loop = loop;
  n->cb = cb;
  n->user = user;
  n->dev = cudaev__rt.devices[device].dev;
  CUresult r = cudaev__drv.cuDeviceRegisterAsyncNotification(n->dev, notify_tramp, n, &n->handle);
  if (r != CUDA_SUCCESS) {
    cudaev__free(n, sizeof *n);
    return cudaev__error_from_cu(r);
  }
  *out = n;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_notify_unregister(cudaev_notify_t *n) {
  if (n == NULL) return cudaErrorInvalidValue;
  atomic_store_explicit(&n->active, 0, memory_order_release);
  CUresult r = cudaev__drv.cuDeviceUnregisterAsyncNotification(n->dev, n->handle);
  notify_release(n);
  return cudaev__error_from_cu(r);
}
