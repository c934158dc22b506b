/* Allocation of the loop layer's objects (futures, continuations, records)
 * from per-thread free lists.
 *
 * Why not a jemalloc arena (measured on the GPU machine; docs/design.md,
 * "Memory and ownership"): linking Debian's libjemalloc.so.2 replaces
 * malloc for the whole process, and a process that loads libcudart late
 * (LD_PRELOAD into Python, dlopen from ctypes) then frees glibc's blocks
 * with jemalloc's free: PyTorch aborted with "munmap_chunk(): invalid
 * pointer". Embedding libjemalloc_pic.a instead brings jemalloc's
 * initial-exec TLS (2.6 KiB), and dlopen() of the library then fails with
 * "cannot allocate memory in static TLS block", which NVIDIA's library does
 * not. So objects are recycled through size-class free lists kept per
 * thread: in steady state a completion allocates nothing. */
#include "alloc.h"

#include <pthread.h>
#include <stdbool.h>
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
/* Size classes of 16 bytes up to 512; larger objects go to malloc. */
#define CLASS_SHIFT 4
#define CLASSES     32
#define CACHE_MAX   8192 /* objects kept per class per thread */

struct free_obj {
  struct free_obj *next;
};

struct cache {
  struct free_obj *head[CLASSES];
  unsigned count[CLASSES];
  bool registered; /* thread_key holds this cache: emptied at thread exit */
  bool dead;       /* emptied at thread exit: later objects go to malloc */
};

static _Thread_local struct cache cache;

/* A thread's cache goes back to malloc when the thread exits (objects a
 * submitting thread freed would otherwise be lost with it). */
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static bool thread_key_made;

static void cache_drain(void *arg) {
  struct cache *c = arg;
  for (size_t k = 0; k < CLASSES; k++) {
    while (c->head[k] != NULL) {
      struct free_obj *o = c->head[k];
      c->head[k] = o->next;
      free(o);
    }
    c->count[k] = 0;
  }
  c->dead = true;
}

static void thread_key_make(void) {
  thread_key_made = pthread_key_create(&thread_key, cache_drain) == 0;
}

/* dlclose: no destructor may point into an unloaded library. */
__attribute__((destructor)) static void thread_key_drop(void) {
  if (thread_key_made) pthread_key_delete(thread_key);
  thread_key_made = false;
}

static inline size_t class_of(size_t size) { return (size + 15) >> CLASS_SHIFT; }

void *cudaev__alloc(size_t size) {
  size_t c = class_of(size);
  if (c >= CLASSES) return malloc(size);
  struct free_obj *o = cache.head[c];
  if (o != NULL) {
    cache.head[c] = o->next;
    cache.count[c]--;
    return o;
  }
  return malloc(c << CLASS_SHIFT);
}

/* An object freed on another thread than the one that made it joins the
 * freeing thread's list: loop threads free what submitters allocated, and
 * their lists are where the next allocations on the loop thread come from. */
void cudaev__free(void *p, size_t size) {
  if (p == NULL) return;
  size_t c = class_of(size);
  if (c >= CLASSES || cache.count[c] >= CACHE_MAX || cache.dead) {
    free(p);
    return;
  }
  if (!cache.registered) {
    pthread_once(&thread_key_once, thread_key_make);
    if (!thread_key_made || pthread_setspecific(thread_key, &cache) != 0) {
      free(p);
      return;
    }
    cache.registered = true;
  }
  struct free_obj *o = p;
  o->next = cache.head[c];
  cache.head[c] = o;
  cache.count[c]++;
}
#endif
