/* Stream records (struct cudaev__track), loop thread only: found by
 * hashing the stream handle, kept on an idle list (oldest first) once
 * drained, and each stream's FIFO of futures as a ring kept in stream
 * order. cudaev__gpu_track is the source's track.
 *
 * A record lives while its FIFO holds work; once drained it stays cached
 * (most recently idle last) so that a stream used again soon finds it, and
 * beyond IDLE_MAX idle records the oldest is reused for the next new stream
 * or freed: a program that creates and destroys streams does not grow, and
 * steady state allocates nothing. A record says nothing about its stream
 * beyond the work in its FIFO (the driver may hand a destroyed stream's
 * handle to a new one). */
#include "gpu_stream.h"
#include "gpu_wake.h"

#include <string.h>

/* Idle stream records kept for reuse (about 300 bytes each with their
 * ring): a program that keeps up to this many streams going idle and busy
 * again allocates nothing for them in steady state. */
#define IDLE_MAX 1024u

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

/* Frees the oldest idle records beyond IDLE_MAX. */
static void idle_trim(struct cudaev__gpu *g) {
  while (g->nidle > IDLE_MAX) {
    struct cudaev__track *t = g->idle_head;
    idle_unlink(g, t);
    unhash(g, t);
    cudaev__arm_release(t->arm); /* a wakeup still queued keeps its own reference */
    cudaev__free(t->ring, t->cap * sizeof *t->ring);
    cudaev__free(t, sizeof *t);
    atomic_fetch_sub_explicit(&g->ntracks, 1, memory_order_relaxed);
  }
}

/* The record of stream `s`, made idle when new (cudaev__gpu_track makes it busy). */
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
    if (cudaev__arm_armed(t->arm)) {
      struct cudaev__arm *a = cudaev__arm_new(w);
      if (a != NULL) {
        cudaev__arm_release(t->arm);
        t->arm = a;
      } /* else keep it: wakeups of this stream wait for the old one (the
           watchdog's timer still wakes the loop) */
    }
  } else {
    t = cudaev__alloc(sizeof *t);
    struct cudaev__arm *a = cudaev__arm_new(w);
    if (t == NULL || a == NULL) {
      cudaev__free(t, sizeof *t);
      if (a != NULL) cudaev__arm_release(a);
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

/* Places f in t's FIFO by msg.seq (stream order; see struct cudaev__backlog): at
 * the tail unless a submitter that enqueued earlier handed its future over
 * later. Equal seqs keep their arrival order (a host function's two
 * entries). false when the ring cannot grow. */
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
  struct cudaev__gpu *g = gpu_of(f);
  /* Until tracked, `track` carries the stream handle (mark(), gpu_submit.c). */
  struct cudaev__track *t = track_get(g, loop->waker, (CUstream)(void *)f->track);
  if (t == NULL ||
      (t->busy_idx == UINT32_MAX &&
       !cudaev__gpu_grow((void **)&g->busy, &g->cap_busy, sizeof *g->busy, g->nbusy + 1)) ||
      !ring_insert(g, t, f)) {
    /* Out of memory: report it; the word is not recycled (the GPU may
     * still write it). A host function's gate opens now (fn does not run;
     * its future gets the error): the stream must not wait forever. */
    backlog_done(g, f, (CUstream)(void *)f->track);
    cudaev__future_try_complete(f, cudaErrorMemoryAllocation);
    cudaev__future_unread(f); /* its word stays, but destroy frees the chunk */
    if (f->kind == CUDAEV__K_HOSTFN) {
      struct cudaev_future *uf = f->user;
      if (uf != NULL) uf->aux.hostfn_result = cudaErrorMemoryAllocation;
      if (f->use_event) {
        cudaev__hgate_open(f->aux.hg);
        cudaev__hgate_release(f->aux.hg);
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

/* In order, so that a pass meets the streams in the order its fetch-ahead
 * assumed (moving the last one into a drained one's place put a stream
 * nothing had fetched in its way). */
void cudaev__gpu_busy_compact(struct cudaev__gpu *g) {
  uint32_t w = g->drained_from;
  if (w == UINT32_MAX) return;
  for (uint32_t r = w; r < g->nbusy; r++) {
    struct cudaev__track *t = g->busy[r];
    if (t->rlen == 0) {
      t->busy_idx = UINT32_MAX;
      idle_push(g, t);
      continue;
    }
    t->busy_idx = w;
    g->busy[w++] = t;
  }
  g->nbusy = w;
  g->drained_from = UINT32_MAX;
  idle_trim(g);
}

void cudaev__gpu_records_free(struct cudaev__gpu *g) {
  for (uint32_t b = 0; b < NBUCKETS; b++) {
    struct cudaev__track *t = g->buckets[b];
    while (t != NULL) {
      struct cudaev__track *n = t->hnext;
      cudaev__arm_release(t->arm);
      cudaev__free(t->ring, t->cap * sizeof *t->ring);
      cudaev__free(t, sizeof *t);
      t = n;
    }
  }
  g->idle_head = g->idle_tail = NULL;
  g->nidle = 0;
  cudaev__free(g->busy, g->cap_busy * sizeof *g->busy);
}
