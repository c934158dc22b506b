/* Composition: cudaev_future_then_chain, a continuation that returns the
 * next future, flattened (JS promises' then). Built on the public API (two
 * continuations) and a relay, the library's own promise, which the
 * application cannot complete (cudaev_promise_set refuses it). */
#include "loop_internal.h"

struct chain {
  cudaev_chain_fn fn;
  void *user;
  cudaev_future_t *out;
};

/* The returned future completed: so does out, with its outcome. */
static void chain_settle(cudaev_future_t *inner, cudaError_t status, void *user) {
  (void)inner;
  cudaev__future_try_complete(user, status);
  cudaev_future_release(user);
}

static void chain_step(cudaev_future_t *f, cudaError_t status, void *user) {
  struct chain c = *(struct chain *)user;
  cudaev__free(user, sizeof(struct chain));
  cudaev_future_t *next = c.fn(f, status, c.user);
  if (next == NULL) {
    cudaev__future_try_complete(c.out, status);
    cudaev_future_release(c.out);
    return;
  }
  /* out's reference goes with the continuation. */
  if (cudaev_future_then(next, chain_settle, c.out) != cudaSuccess) {
    cudaev__future_try_complete(c.out, cudaErrorMemoryAllocation);
    cudaev_future_release(c.out);
  }
  cudaev_future_release(next); /* fn's reference, taken over */
}

CUDAEV_EXPORT cudaError_t cudaev_future_then_chain(cudaev_future_t *f, cudaev_chain_fn fn,
                                                   void *user, cudaev_future_t **out) {
  if (out != NULL) *out = NULL;
  if (f == NULL || fn == NULL || out == NULL) return cudaErrorInvalidValue;
  struct chain *c = cudaev__alloc(sizeof *c);
  if (c == NULL) return cudaErrorMemoryAllocation;
  cudaev_future_t *p = cudaev__relay_new(f->loop, true);
  if (p == NULL) {
    cudaev__free(c, sizeof *c);
    return cudaErrorMemoryAllocation;
  }
  c->fn = fn;
  c->user = user;
  c->out = cudaev_future_retain(p); /* the chain's */
  cudaError_t e = cudaev_future_then(f, chain_step, c);
  if (e != cudaSuccess) {
    cudaev_future_release(p);
    cudaev_future_release(p);
    cudaev__free(c, sizeof *c);
    return e;
  }
  *out = p;
  return cudaSuccess;
}
