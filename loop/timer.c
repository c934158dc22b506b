/* The timer source: futures that complete at a deadline
 * (cudaev_future_new_timer) and deadlines on other futures
 * (cudaev_future_new_timeout). Pending timers sit in a binary min-heap by
 * deadline (the loop thread's only); a pass completes those whose deadline
 * passed, and before the loop sleeps the nearest deadline bounds how long
 * it may (thread mode's ppoll, ev mode's ev_timer, foreign mode's
 * cudaev_loop_prepare all come from cudaev__loop_before_sleep). A timer
 * completed early (cancelled) leaves the heap when it fires (untrack). */
#include "loop_internal.h"

#include <string.h>

struct cudaev__timers {
  struct cudaev_future **h; /* h[0] is the nearest deadline */
  uint32_t n, cap;
};

/* ---- the heap (loop thread) ---------------------------------------------- */

static void put(struct cudaev__timers *t, uint32_t i, struct cudaev_future *f) {
  t->h[i] = f;
  f->x.pend_idx = i;
}

static void sift_up(struct cudaev__timers *t, uint32_t i) {
  struct cudaev_future *f = t->h[i];
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (t->h[p]->u.deadline <= f->u.deadline) break;
    put(t, i, t->h[p]);
    i = p;
  }
  put(t, i, f);
}

static void sift_down(struct cudaev__timers *t, uint32_t i) {
  struct cudaev_future *f = t->h[i];
  for (;;) {
    uint32_t c = 2 * i + 1;
    if (c >= t->n) break;
    if (c + 1 < t->n && t->h[c + 1]->u.deadline < t->h[c]->u.deadline) c++;
    if (f->u.deadline <= t->h[c]->u.deadline) break;
    put(t, i, t->h[c]);
    i = c;
  }
  put(t, i, f);
}

static bool heap_add(struct cudaev__timers *t, struct cudaev_future *f) {
  if (t->n == t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 64;
    struct cudaev_future **h = cudaev__alloc(cap * sizeof *h);
    if (h == NULL) return false;
    if (t->n) memcpy(h, t->h, t->n * sizeof *h);
    cudaev__free(t->h, t->cap * sizeof *h);
    t->h = h;
    t->cap = cap;
  }
  put(t, t->n++, f);
  sift_up(t, t->n - 1);
  return true;
}

static void heap_del(struct cudaev__timers *t, struct cudaev_future *f) {
  uint32_t i = f->x.pend_idx;
  if (i == UINT32_MAX || i >= t->n || t->h[i] != f) return;
  f->x.pend_idx = UINT32_MAX;
  struct cudaev_future *last = t->h[--t->n];
  if (i == t->n) return;
  put(t, i, last);
  if (i > 0 && t->h[(i - 1) / 2]->u.deadline > last->u.deadline)
    sift_up(t, i);
  else
    sift_down(t, i);
}

/* ---- the source ---------------------------------------------------------- */

static cudaError_t timer_init(struct cudaev_loop *loop) {
  struct cudaev__timers *t = cudaev__alloc(sizeof *t);
  if (t == NULL) return cudaErrorMemoryAllocation;
  memset(t, 0, sizeof *t);
  loop->timers = t;
  return cudaSuccess;
}

/* Fails what is pending; each completion fires at once (the destroying
 * thread is the loop thread) and takes itself off the heap. A timer
 * submitted later (still queued) fails in track. */
static void timer_fini(struct cudaev_loop *loop) {
  struct cudaev__timers *t = loop->timers;
  while (t->n > 0) {
    struct cudaev_future *f = t->h[t->n - 1];
    if (!cudaev__future_try_complete(f, CUDAEV_ERROR_LOOP_DESTROYED)) cudaev__future_fire(f);
  }
  cudaev__free(t->h, t->cap * sizeof *t->h);
  cudaev__free(t, sizeof *t);
  loop->timers = NULL;
}

static void timer_track(struct cudaev_loop *loop, struct cudaev_future *f) {
  if (f->fired) return; /* cancelled and fired before it got here */
  if (loop->timers == NULL) {
    cudaev__future_try_complete(f, CUDAEV_ERROR_LOOP_DESTROYED);
    return;
  }
  if (!heap_add(loop->timers, f)) cudaev__future_try_complete(f, cudaErrorMemoryAllocation);
}

static void timer_untrack(struct cudaev_loop *loop, struct cudaev_future *f) {
  if (loop->timers != NULL) heap_del(loop->timers, f);
}

static bool timer_poll(struct cudaev_loop *loop) {
  struct cudaev__timers *t = loop->timers;
  if (t->n == 0) return false;
  uint64_t now = cudaev__now_ns();
  bool any = false;
  while (t->n > 0 && t->h[0]->u.deadline <= now) {
    struct cudaev_future *f = t->h[0];
    heap_del(t, f);
    /* Lost only to a cancel on another thread whose FIRE is queued. */
    if (cudaev__future_try_complete(f, cudaSuccess)) cudaev__stat_add(&loop->st.timers_fired, 1);
    any = true;
  }
  return any;
}

static uint64_t timer_before_sleep(struct cudaev_loop *loop) {
  struct cudaev__timers *t = loop->timers;
  if (t->n == 0) return UINT64_MAX;
  uint64_t now = cudaev__now_ns(), d = t->h[0]->u.deadline;
  return d <= now ? 0 : d - now;
}

static size_t timer_pending(struct cudaev_loop *loop) {
  return loop->timers != NULL ? loop->timers->n : 0;
}

const struct cudaev__source_ops cudaev__source_timer = {
    .kinds = 1u << CUDAEV__K_TIMER,
    .init = timer_init,
    .fini = timer_fini,
    .track = timer_track,
    .untrack = timer_untrack,
    .poll = timer_poll,
    .before_sleep = timer_before_sleep,
    .pending = timer_pending,
};

/* ---- public -------------------------------------------------------------- */

CUDAEV_EXPORT cudaError_t cudaev_future_new_timer(cudaev_loop_t *loop, uint64_t ns,
                                              cudaev_future_t **out) {
  if (out != NULL) *out = NULL;
  if (loop == NULL || out == NULL) return cudaErrorInvalidValue;
  if (loop->src_of[CUDAEV__K_TIMER] == NULL) return cudaErrorMemoryAllocation;
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_TIMER);
  if (f == NULL) return cudaErrorMemoryAllocation;
  uint64_t now = cudaev__now_ns();
  f->u.deadline = ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
  cudaev_future_retain(f); /* the loop's, dropped when it fires */
  cudaev__future_submit(f);
  *out = f;
  return cudaSuccess;
}

/* cudaev_future_new_timeout: g completes with the input's outcome, or with
 * CUDAEV_ERROR_TIMEOUT when the timer wins; whichever comes second finds g
 * done. The block lives until both continuations ran. */
struct timeout_block {
  struct cudaev_future *g, *timer;
  _Atomic uint32_t left;
};

static void timeout_block_done(struct timeout_block *b) {
  if (atomic_fetch_sub_explicit(&b->left, 1, memory_order_acq_rel) != 1) return;
  cudaev_future_release(b->g);
  cudaev_future_release(b->timer);
  cudaev__free(b, sizeof *b);
}

static void input_done(cudaev_future_t *in, cudaError_t status, void *user) {
  struct timeout_block *b = user;
  cudaev__future_try_complete(b->g, status);
  cudaev_future_cancel(b->timer); /* leaves the heap: no longer pending */
  timeout_block_done(b);
}

static void timer_done(cudaev_future_t *t, cudaError_t status, void *user) {
  struct timeout_block *b = user;
  if (status == cudaSuccess) cudaev__future_try_complete(b->g, CUDAEV_ERROR_TIMEOUT);
  timeout_block_done(b);
}

CUDAEV_EXPORT cudaError_t cudaev_future_new_timeout(cudaev_future_t *f, uint64_t ns,
                                                cudaev_future_t **out) {
  if (out != NULL) *out = NULL;
  if (f == NULL || out == NULL) return cudaErrorInvalidValue;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_new_timeout");
  if (f->kind == CUDAEV__K_HOSTFN) return cudaErrorInvalidValue;
  struct cudaev_loop *loop = f->loop;
  struct timeout_block *b = cudaev__alloc(sizeof *b);
  if (b == NULL) return cudaErrorMemoryAllocation;
  cudaError_t e = cudaev_future_new_timer(loop, ns, &b->timer);
  if (e != cudaSuccess) {
    cudaev__free(b, sizeof *b);
    return e;
  }
  /* A combinator's kind: on the pending list (a destroy fails it), not a
   * promise (cudaev_promise_set refuses it). */
  struct cudaev_future *g = cudaev__future_new(loop, CUDAEV__K_ALL);
  if (g == NULL) {
    cudaev_future_cancel(b->timer);
    cudaev_future_release(b->timer);
    cudaev__free(b, sizeof *b);
    return cudaErrorMemoryAllocation;
  }
  b->g = cudaev_future_retain(g); /* the block's */
  atomic_init(&b->left, 2);
  cudaev_future_retain(g); /* the loop's */
  cudaev__future_submit(g);
  e = cudaev_future_then(b->timer, timer_done, b);
  if (e != cudaSuccess) {
    /* Neither continuation is in: undo by hand. */
    cudaev__future_try_complete(g, e);
    cudaev_future_cancel(b->timer);
    atomic_store(&b->left, 1);
    timeout_block_done(b);
    cudaev_future_release(g);
    return e;
  }
  e = cudaev_future_then(f, input_done, b);
  if (e != cudaSuccess) {
    /* The timer's continuation is in and counts down once. */
    cudaev__future_try_complete(g, e);
    cudaev_future_cancel(b->timer);
    timeout_block_done(b);
    cudaev_future_release(g);
    return e;
  }
  *out = g;
  return cudaSuccess;
}
