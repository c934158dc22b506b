/* The GPU source's state per CUDA context (struct cudaev__gpu): making
 * one, and finding a submission's (cudaev__gpu_for). A loop serves every
 * context of the process: it starts with its creation context's state and
 * adds one the first time work of another context is submitted; a future
 * carries its state's index in its tag (gpu_of), so nothing is looked up
 * per completion. */
#include "gpu_ctx.h"
#include "gpu_marker.h"

#include "env.h"

#include <stdlib.h>
#include <string.h>

#define WORD_EVERY \
  16u /* on a backlogged stream: a word every 16th
                          (CUDAEV_LOOP_WORD_EVERY overrides, 1..1024) */

/* A new state for context c at index idx of the loop's table: its
 * internal stream, the probe of stream memory operations. Makes c current
 * for the driver calls. */
cudaError_t cudaev__gpu_new(CUcontext c, uint32_t idx, struct cudaev__gpu **out) {
  struct cudaev__gpu *g = cudaev__alloc(sizeof *g);
  if (g == NULL) return cudaErrorMemoryAllocation;
  memset(g, 0, sizeof *g);
  pthread_mutex_init(&g->mu, NULL);
  atomic_init(&g->tag_gen, 0);
  atomic_init(&g->closing, 0);
  g->ewma_ns = 10000;
  g->drained_from = UINT32_MAX; /* none */
  g->ctx = c;
  g->idx = idx;
  bool pushed = cudaev__ctx_in(c);
  CUresult r = cudaev__drv.cuStreamCreate(&g->internal, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    cudaev__ctx_out(pushed);
    pthread_mutex_destroy(&g->mu);
    cudaev__free(g, sizeof *g);
    return cudaev__error_from_cu(r);
  }
  g->word_every = (uint32_t)cudaev__env_num("CUDAEV_LOOP_WORD_EVERY", 1, 1024, WORD_EVERY);
  const char *env = getenv("CUDAEV_LOOP_EVENTS");
  g->use_events = env != NULL && env[0] == '1';
  if (!g->use_events) {
    /* Probe stream memory operations once; the probe word stays reserved. */
    uint32_t w;
    cudaError_t e = cudaev__gpu_word_get(g, &w);
    if (e == cudaSuccess) {
      r = cudaev__drv.cuStreamWriteValue32(g->internal, word_dev(g, w), 1, 0);
      if (r == CUDA_ERROR_NOT_SUPPORTED) g->use_events = 1;
    } else {
      g->use_events = 1; /* no mapped pinned memory: events still work */
    }
  }
  cudaev__ctx_out(pushed);
  *out = g;
  return cudaSuccess;
}

cudaError_t cudaev__gpu_for(struct cudaev_loop *loop, CUstream stream, CUcontext cur,
                            struct cudaev__gpu **out) {
  struct cudaev__gpu *h = loop->gpu;
  CUcontext c = NULL;
  /* NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name a stream of the
   * current context; another handle knows its own. */
  if ((uintptr_t)stream > 2 && cudaev__drv.cuStreamGetCtx != NULL &&
      cudaev__drv.cuStreamGetCtx(stream, &c, NULL) != CUDA_SUCCESS)
    c = NULL;
  if (c == NULL) c = cur;
  if (c == NULL || c == h->ctx) {
    *out = h;
    return cudaSuccess;
  }
  uint32_t n = atomic_load_explicit(&h->nall, memory_order_acquire);
  for (uint32_t i = 1; i < n; i++) {
    struct cudaev__gpu *g = atomic_load_explicit(&h->all[i], memory_order_relaxed);
    if (g->ctx == c) {
      *out = g;
      return cudaSuccess;
    }
  }
  /* First work of this context: make its state (once, under the lock). */
  cudaError_t e = cudaSuccess;
  pthread_mutex_lock(&h->all_mu);
  n = atomic_load_explicit(&h->nall, memory_order_relaxed);
  struct cudaev__gpu *g = NULL;
  for (uint32_t i = 1; i < n && g == NULL; i++)
    if (atomic_load_explicit(&h->all[i], memory_order_relaxed)->ctx == c)
      g = atomic_load_explicit(&h->all[i], memory_order_relaxed);
  if (g == NULL) {
    e = n == MAX_CTX ? cudaErrorNotSupported : cudaev__gpu_new(c, n, &g);
    if (e == cudaSuccess) {
      atomic_store_explicit(&h->all[n], g, memory_order_relaxed);
      atomic_store_explicit(&h->nall, n + 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&h->all_mu);
  *out = g;
  return e;
}
