/* Stream records of the GPU source (owner: gpu_stream.c): a stream's
 * FIFO of our futures (struct cudaev__track), the hash, the idle list and
 * the busy list, and the FIFO's inline helpers that a pass uses
 * (gpu_poll.c, gpu_wake.c). Loop thread only. */
#ifndef CUDAEV_GPU_STREAM_H
#define CUDAEV_GPU_STREAM_H

#include "gpu_marker.h"

struct cudaev__arm; /* gpu_wake.c */

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

/* ---- a stream's FIFO (loop thread) -------------------------------------- */

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

/* Keeps t->hw / t->htag (the head's word) after the head changed. Inline:
 * a pass calls it after every run it completes. */
static inline void head_changed(struct cudaev__gpu *g, struct cudaev__track *t) {
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

#endif
