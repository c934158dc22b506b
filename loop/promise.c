/* Promises (cudaev_promise_*), the library's relays, the combinators
 * (cudaev_future_new_all / _any) and cudaev_future_new_work_done: the futures
 * that complete by a call, not by a device. They are kept on the loop's
 * pending list only so that a destroy can fail them: that list is this
 * file's source (cudaev__source_promise).
 * Calls: future.c (the future core), alloc.c. */
#include "loop_internal.h"

#include <stdint.h>
#include <string.h>

/* ---- the promise source: the pending list (loop thread) ----------------- */

static bool pend_add(struct cudaev_loop *loop, struct cudaev_future *f) {
  if (loop->npend == loop->cap_pend) {
    uint32_t cap = loop->cap_pend ? loop->cap_pend * 2 : 64;
    struct cudaev_future **p = cudaev__alloc(cap * sizeof *p);
    if (p == NULL) return false;
    if (loop->npend) memcpy(p, loop->pend, loop->npend * sizeof *p);
    cudaev__free(loop->pend, loop->cap_pend * sizeof *p);
    loop->pend = p;
    loop->cap_pend = cap;
  }
  f->x.pend_idx = loop->npend;
  loop->pend[loop->npend++] = f;
  return true;
}

static void pend_del(struct cudaev_loop *loop, struct cudaev_future *f) {
  uint32_t i = f->x.pend_idx;
  if (i == UINT32_MAX || i >= loop->npend || loop->pend[i] != f) return;
  struct cudaev_future *last = loop->pend[--loop->npend];
  loop->pend[i] = last;
  last->x.pend_idx = i;
  f->x.pend_idx = UINT32_MAX;
}

static void promise_track(struct cudaev_loop *loop, struct cudaev_future *f) {
  /* Already fired (an inline continuation of an input completed it
   * before its own registration message came): the loop's reference is
   * gone with the firing; nothing to list. */
  if (f->fired) return;
  if (!pend_add(loop, f)) {
    /* Untracked: it still works, but loop destroy cannot fail it; keep
     * the loop's reference until it fires. */
  }
}

static size_t promise_pending(struct cudaev_loop *loop) { return loop->npend; }

/* Fails what is pending; each completion takes itself off the list. The
 * list itself is freed with the loop (late submissions may still use it). */
static void promise_fini(struct cudaev_loop *loop) {
  while (loop->npend > 0) {
    struct cudaev_future *f = loop->pend[loop->npend - 1];
    if (!cudaev__future_try_complete(f, CUDAEV_ERROR_LOOP_DESTROYED)) {
      /* Completed but not fired yet: its FIRE is queued; fire it here. */
      cudaev__future_fire(f);
    }
  }
}

const struct cudaev__source_ops cudaev__source_promise = {
    .kinds = CUDAEV__LISTED_KINDS,
    .fini = promise_fini,
    .track = promise_track,
    .untrack = pend_del,
    .pending = promise_pending,
};

/* ---- when the work is done ---------------------------------------------- */

static void done_cb(cudaev_future_t *f, cudaError_t status, void *user) {
  (void)f;
  cudaev__future_try_complete(user, status);
  cudaev_future_release(user); /* the watcher's */
}

CUDAEV_EXPORT cudaError_t cudaev_future_new_work_done(cudaev_future_t *f, cudaev_future_t **out) {
  if (out != NULL) *out = NULL;
  if (f == NULL || out == NULL || f->kind == CUDAEV__K_HOSTFN) return cudaErrorInvalidValue;
  /* A promise the pending list does not hold: destroy fails promises
   * before the GPU source has let the GPU finish, and g must not complete
   * before that. */
  struct cudaev_future *g = cudaev__relay_new(f->loop, false);
  if (g == NULL) return cudaErrorMemoryAllocation;
  cudaev_future_retain(g); /* the watcher's */
  const struct cudaev__source_ops *src = f->loop->src_of[f->kind];
  cudaError_t e = src->done != NULL ? src->done(f, g) : cudaev_future_then(f, done_cb, g);
  if (e != cudaSuccess) {
    cudaev_future_release(g);
    cudaev_future_release(g);
    cudaev_future_release(g);
    return e;
  }
  *out = g;
  return cudaSuccess;
}

/* ---- promises ------------------------------------------------------------ */

/* The loop's reference is taken all the same when unlisted (firing drops
 * it). */
static struct cudaev_future *promise_make(struct cudaev_loop *loop, int kind, bool listed) {
  struct cudaev_future *f = cudaev__future_new(loop, kind);
  if (f == NULL) return NULL;
  cudaev_future_retain(f); /* the loop's */
  if (listed) cudaev__future_submit(f);
  return f;
}

struct cudaev_future *cudaev__relay_new(struct cudaev_loop *loop, bool listed) {
  return promise_make(loop, CUDAEV__K_RELAY, listed);
}

CUDAEV_EXPORT cudaError_t cudaev_promise_new(cudaev_loop_t *loop, cudaev_future_t **out) {
  if (out != NULL) *out = NULL;
  if (loop == NULL || out == NULL) return cudaErrorInvalidValue;
  struct cudaev_future *f = promise_make(loop, CUDAEV__K_PROMISE, true);
  if (f == NULL) return cudaErrorMemoryAllocation;
  *out = f;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_promise_set(cudaev_future_t *f, cudaError_t status) {
  if (f == NULL) return cudaErrorInvalidValue;
  CUDAEV__CHECK_LIVE(f, "cudaev_promise_set");
  /* Only the application's own promises: every other future (a relay, a
   * combinator, a timer, GPU work) is completed by the library, and a set
   * from outside would inject an outcome into it. f stays untouched. */
  if (f->kind != CUDAEV__K_PROMISE) return cudaErrorInvalidValue;
  return cudaev__future_try_complete(f, status) ? cudaSuccess : cudaErrorIllegalState;
}

/* ---- combinators --------------------------------------------------------- */

static void all_cb(cudaev_future_t *in, cudaError_t status, void *user) {
  struct cudaev_future *c = user;
  /* `tag` holds the first error seen; loop thread only. */
  if (status != cudaSuccess && c->tag == 0) c->tag = (uint32_t)status;
  if (--c->u.left == 0) cudaev__future_try_complete(c, (cudaError_t)c->tag);
  cudaev_future_release(c);
}

struct any_block {
  struct cudaev_future *c;
  _Atomic size_t left; /* inputs whose continuation has not run */
  size_t n;
  struct any_ent {
    struct any_block *b;
    size_t i;
  } ent[];
};

static void any_block_free(struct any_block *b) {
  cudaev_future_release(b->c);
  cudaev__free(b, sizeof *b + b->n * sizeof b->ent[0]);
}

static void any_cb(cudaev_future_t *in, cudaError_t status, void *user) {
  struct any_ent *e = user;
  struct any_block *b = e->b;
  struct cudaev_future *c = b->c;
  if (cudaev__future_claim(c)) {
    c->u.index = e->i;
    cudaev__future_complete(c, status);
  }
  if (atomic_fetch_sub_explicit(&b->left, 1, memory_order_acq_rel) == 1) any_block_free(b);
}

static cudaError_t combine(cudaev_loop_t *loop, cudaev_future_t *const *fs, size_t n,
                           cudaev_future_t **out, int kind) {
  if (out != NULL) *out = NULL;
  if (loop == NULL || out == NULL || (n > 0 && fs == NULL)) return cudaErrorInvalidValue;
  if (kind == CUDAEV__K_ANY && (n == 0 || n > UINT32_MAX)) return cudaErrorInvalidValue;
  for (size_t i = 0; i < n; i++)
    if (fs[i] == NULL || fs[i]->loop != loop || fs[i]->kind == CUDAEV__K_HOSTFN)
      return cudaErrorInvalidValue;
  struct cudaev_future *c = cudaev__future_new(loop, kind);
  if (c == NULL) return cudaErrorMemoryAllocation;
  struct any_block *b = NULL;
  if (kind == CUDAEV__K_ANY) {
    b = cudaev__alloc(sizeof *b + n * sizeof b->ent[0]);
    if (b == NULL) {
      cudaev_future_release(c);
      return cudaErrorMemoryAllocation;
    }
    b->c = cudaev_future_retain(c); /* released with the block */
    atomic_init(&b->left, n);
    b->n = n;
    c->u.index = SIZE_MAX;
  } else {
    c->u.left = n;
  }
  cudaev_future_retain(c); /* the loop's */
  cudaev__future_submit(c);
  cudaError_t err = cudaSuccess;
  size_t i = 0;
  for (; i < n; i++) {
    if (kind == CUDAEV__K_ALL) {
      cudaev_future_retain(c);
      err = cudaev_future_then(fs[i], all_cb, c);
      if (err != cudaSuccess) cudaev_future_release(c);
    } else {
      b->ent[i].b = b;
      b->ent[i].i = i;
      err = cudaev_future_then(fs[i], any_cb, &b->ent[i]);
    }
    if (err != cudaSuccess) break;
  }
  if (err != cudaSuccess) {
    /* Inputs already hooked still run their continuation; complete the
     * combinator now so they find it done. */
    cudaev__future_try_complete(c, err);
    if (kind == CUDAEV__K_ANY) {
      /* Entries never hooked will not count down: take them off now. */
      if (atomic_fetch_sub_explicit(&b->left, n - i, memory_order_acq_rel) == n - i)
        any_block_free(b);
    }
    cudaev_future_release(c);
    return err;
  }
  if (kind == CUDAEV__K_ALL && n == 0) cudaev__future_try_complete(c, cudaSuccess);
  *out = c;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_future_new_all(cudaev_loop_t *loop, cudaev_future_t *const *fs,
                                                size_t n, cudaev_future_t **out) {
  return combine(loop, fs, n, out, CUDAEV__K_ALL);
}

CUDAEV_EXPORT cudaError_t cudaev_future_new_any(cudaev_loop_t *loop, cudaev_future_t *const *fs,
                                                size_t n, cudaev_future_t **out) {
  return combine(loop, fs, n, out, CUDAEV__K_ANY);
}

CUDAEV_EXPORT size_t cudaev_future_any_index(const cudaev_future_t *f) {
  if (f == NULL || f->kind != CUDAEV__K_ANY || !cudaev_future_ready(f)) return (size_t)-1;
  return (size_t)f->u.index;
}
