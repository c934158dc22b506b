/* Completion markers of the GPU source (owner: gpu_marker.c): the pools
 * of completion words (pinned, mapped) and of events, a stream's slot of
 * submitters' counts (struct cudaev__backlog, in gpu_ctx.h) and its
 * brackets, tags, enqueueing a marker, and reading one (head_state,
 * inline: a pass reads every word head through it). Users: the
 * submissions (gpu_submit.c, hostfn.c), the loop's passes (gpu_poll.c,
 * gpu_stream.c, gpu_wake.c), gpu_ctx.c (the probe at creation). */
#ifndef CUDAEV_GPU_MARKER_H
#define CUDAEV_GPU_MARKER_H

#include "gpu_ctx.h"
#include "hostfn.h"

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

static inline uint32_t *word_ptr(struct cudaev__gpu *g, uint32_t w) {
  return g->chunk_host[w / WORDS_PER_CHUNK] + w % WORDS_PER_CHUNK;
}
static inline CUdeviceptr word_dev(struct cudaev__gpu *g, uint32_t w) {
  return g->chunk_dev[w / WORDS_PER_CHUNK] + (CUdeviceptr)(w % WORDS_PER_CHUNK) * 4u;
}

/* A plain GPU future marked by an event: its state costs a driver call. */
static inline bool is_event(const struct cudaev_future *f) {
  return f->kind == CUDAEV__K_GPU && f->use_event;
}

static inline bool has_word(const struct cudaev_future *f) {
  return !f->use_event && (f->kind == CUDAEV__K_GPU || f->kind == CUDAEV__K_HOSTFN);
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

#endif
