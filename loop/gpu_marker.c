/* Completion markers of the GPU source: the pools they come from
 * (completion words, 4-byte slots of pinned, device-mapped host memory that
 * the GPU writes with cuStreamWriteValue32, and DISABLE_TIMING events),
 * and enqueueing a marker behind a submission's work (reading one is
 * head_state in gpu_marker.h, inline for the pass). The pools are shared
 * with submitting threads under one mutex, never held across a driver
 * call: chunks of words are made outside it. */
#include "gpu_marker.h"

#include <string.h>

/* Grows an array of 32/64-bit items under the mutex (no driver call). */
bool cudaev__gpu_grow(void **arr, uint32_t *cap, size_t item, uint32_t need) {
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

cudaError_t cudaev__gpu_word_get(struct cudaev__gpu *g, uint32_t *out) {
  pthread_mutex_lock(&g->mu);
  if (g->nfree > 0) {
    *out = g->free_words[--g->nfree];
    pthread_mutex_unlock(&g->mu);
    __atomic_store_n(word_ptr(g, *out), 0u, __ATOMIC_RELAXED);
    return cudaSuccess;
  }
  pthread_mutex_unlock(&g->mu);
  /* Grow outside the lock: a new chunk of pinned, device-mapped words, the
   * loop's own memory, no part of any capture (driver.h). */
  void *host = NULL;
  CUdeviceptr dev = 0;
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  CUresult r = cudaev__drv.cuMemHostAlloc(&host, WORDS_PER_CHUNK * 4u,
                                          CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r == CUDA_SUCCESS) r = cudaev__drv.cuMemHostGetDevicePointer(&dev, host, 0);
  if (r != CUDA_SUCCESS && host != NULL) cudaev__drv.cuMemFreeHost(host);
  cudaev__capture_restore(mode);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  memset(host, 0, WORDS_PER_CHUNK * 4u);
  pthread_mutex_lock(&g->mu);
  /* The free list must hold every word ever made (all may come back at
   * once), not just those free now. */
  if (g->nchunks == MAX_CHUNKS ||
      !cudaev__gpu_grow((void **)&g->free_words, &g->cap_free, sizeof(uint32_t),
                        (g->nchunks + 1) * WORDS_PER_CHUNK)) {
    pthread_mutex_unlock(&g->mu);
    mode = cudaev__capture_relax();
    cudaev__drv.cuMemFreeHost(host);
    cudaev__capture_restore(mode);
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

void cudaev__gpu_words_put(struct cudaev__gpu *g, const uint32_t *w, uint32_t n) {
  if (n == 0) return;
  pthread_mutex_lock(&g->mu);
  /* cap_free covers every word ever made (word_get grows it with each
   * chunk to nchunks * WORDS_PER_CHUNK). */
  for (uint32_t i = 0; i < n; i++) g->free_words[g->nfree++] = w[i];
  pthread_mutex_unlock(&g->mu);
}

cudaError_t cudaev__gpu_event_get(struct cudaev__gpu *g, CUevent *out) {
  pthread_mutex_lock(&g->mu);
  if (g->nfree_ev > 0) {
    *out = g->free_events[--g->nfree_ev];
    pthread_mutex_unlock(&g->mu);
    return cudaSuccess;
  }
  /* Room in the free list for every event made, this one included, before
   * it is made: giving events back then needs no memory. Were it to fail
   * there, the event would have to be destroyed, and a waiter of the
   * future it marked may still be querying it (self_state). */
  if (!cudaev__gpu_grow((void **)&g->free_events, &g->cap_free_ev, sizeof(CUevent),
                        g->nev_made + 1)) {
    pthread_mutex_unlock(&g->mu);
    return cudaErrorMemoryAllocation;
  }
  g->nev_made++;
  pthread_mutex_unlock(&g->mu);
  cudaError_t e = cudaev__error_from_cu(cudaev__drv.cuEventCreate(out, CU_EVENT_DISABLE_TIMING));
  if (e != cudaSuccess) {
    pthread_mutex_lock(&g->mu);
    g->nev_made--;
    pthread_mutex_unlock(&g->mu);
  }
  return e;
}

void cudaev__gpu_event_put(struct cudaev__gpu *g, CUevent e) { cudaev__gpu_events_put(g, &e, 1); }

void cudaev__gpu_events_put(struct cudaev__gpu *g, CUevent *ev, uint32_t n) {
  if (n == 0) return;
  pthread_mutex_lock(&g->mu);
  /* cap_free_ev covers every event made (event_get grows it first). */
  memcpy(g->free_events + g->nfree_ev, ev, n * sizeof *ev);
  g->nfree_ev += n;
  pthread_mutex_unlock(&g->mu);
}

void cudaev__gpu_pool_fini(struct cudaev__gpu *g) {
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  for (uint32_t i = 0; i < g->nfree_ev; i++) cudaev__drv.cuEventDestroy(g->free_events[i]);
  for (uint32_t i = 0; i < g->nchunks; i++) cudaev__drv.cuMemFreeHost(g->chunk_host[i]);
  cudaev__capture_restore(mode);
  cudaev__free(g->free_words, g->cap_free * sizeof(uint32_t));
  cudaev__free(g->free_events, g->cap_free_ev * sizeof(CUevent));
}

cudaError_t cudaev__gpu_enqueue_marker(struct cudaev__gpu *g, struct cudaev_future *f,
                                       CUstream stream) {
  cudaError_t e =
      f->use_event ? cudaev__gpu_event_get(g, &f->u.ev) : cudaev__gpu_word_get(g, &f->x.word);
  if (e != cudaSuccess) return e;
  f->tag = next_tag(g); /* an event's too: it carries g's index (gpu_of) */
  struct cudaev__backlog *b = slot_of(g, stream);
  bool solo;
  uint32_t began = order_begin(b, &solo);
  e = cudaev__error_from_cu(
      f->use_event ? cudaev__drv.cuEventRecord(f->u.ev, stream)
                   : cudaev__drv.cuStreamWriteValue32(stream, word_dev(g, f->x.word), f->tag, 0));
  f->msg.seq = order_end(b, began, &solo);
  f->solo = solo;
  if (e != cudaSuccess) {
    if (f->use_event)
      cudaev__gpu_event_put(g, f->u.ev);
    else
      cudaev__gpu_words_put(g, &f->x.word, 1);
  }
  return e;
}
