/* Allocation of the loop layer's objects (futures, continuations, records)
 * from a private jemalloc arena, and the MPSC queue they travel on. */
#include "loop_internal.h"

#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CUDAEV_PLAIN_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CUDAEV_PLAIN_MALLOC 1
#endif
#endif

#ifdef CUDAEV_PLAIN_MALLOC
/* Under sanitizers objects come from malloc so that ASan sees use after
 * free and TSan sees the happens-before of reuse. */
void *cudaev__alloc(size_t size) { return malloc(size); }
void cudaev__free(void *p, size_t size) {
  (void)size;
  free(p);
}
#else
#include <jemalloc/jemalloc.h>

/* Only jemalloc's non-standard API is used: Debian's libjemalloc also
 * exports malloc, and the process may or may not use it for malloc; our
 * objects must come from our arena either way. The arena has no thread
 * cache (MALLOCX_TCACHE_NONE) so objects never leak into the tcache that
 * serves the rest of the process. */
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static int arena_flags;

static void arena_init(void) {
  unsigned ind = 0;
  size_t sz = sizeof ind;
  if (mallctl("arenas.create", &ind, &sz, NULL, 0) == 0)
    arena_flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
  else
    arena_flags = 0; /* jemalloc's default arenas still beat nothing */
}

void *cudaev__alloc(size_t size) {
  pthread_once(&arena_once, arena_init);
  return mallocx(size, arena_flags);
}

void cudaev__free(void *p, size_t size) {
  if (p != NULL) sdallocx(p, size, arena_flags);
}
#endif

/* ---- MPSC queue ----------------------------------------------------------
 * Dmitry Vyukov's intrusive non-blocking MPSC queue: a push is one
 * exchange and one store, a pop touches only consumer-owned state. */

void cudaev__mpsc_init(struct cudaev__mpsc *q) {
  atomic_init(&q->stub.next, NULL);
  q->stub.kind = CUDAEV__MSG_STUB;
  atomic_init(&q->tail, &q->stub);
  q->head = &q->stub;
}

void cudaev__mpsc_push(struct cudaev__mpsc *q, struct cudaev__msg *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  struct cudaev__msg *prev = atomic_exchange_explicit(&q->tail, m, memory_order_acq_rel);
  atomic_store_explicit(&prev->next, m, memory_order_release);
}

struct cudaev__msg *cudaev__mpsc_pop(struct cudaev__mpsc *q) {
  struct cudaev__msg *head = q->head;
  struct cudaev__msg *next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (head == &q->stub) {
    if (next == NULL) return NULL;
    q->head = next;
    head = next;
    next = atomic_load_explicit(&head->next, memory_order_acquire);
  }
  if (next != NULL) {
    q->head = next;
    return head;
  }
  if (head != atomic_load_explicit(&q->tail, memory_order_acquire)) return NULL; /* push in flight */
  cudaev__mpsc_push(q, &q->stub);
  next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (next != NULL) {
    q->head = next;
    return head;
  }
  return NULL;
}

bool cudaev__mpsc_empty(struct cudaev__mpsc *q) {
  return q->head == &q->stub &&
         atomic_load_explicit(&q->tail, memory_order_acquire) == &q->stub;
}
