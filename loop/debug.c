/* Misuse checks of the loop layer: the fatal message (cudaev__die) and the
 * CUDAEV_DEBUG=1 checks of futures (a freed future is poisoned and kept in
 * a quarantine instead of being recycled, so that a second release or a
 * later use is caught and named). A leaf: it calls no other loop file but
 * the allocator. */
#include "loop_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cudaev__debug;

/* Read once at load: the checks cost one load of a global while off. */
__attribute__((constructor)) static void debug_init(void) {
  const char *e = getenv("CUDAEV_DEBUG");
  cudaev__debug = e != NULL && *e != '\0' && strcmp(e, "0") != 0;
}

/* cudaev_log_set's hook, read and written as one pointer to a pair. */
struct log_hook {
  cudaev_log_fn fn;
  void *user;
};
static _Atomic(struct log_hook *) log_hook;
static struct log_hook log_hooks[2];
static _Atomic unsigned log_slot;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

CUDAEV_EXPORT void cudaev_log_set(cudaev_log_fn fn, void *user) {
  /* Two slots, alternated under a lock: a reader holding the old pair
   * sees it whole (a later replacement of the same slot after the next
   * call is the documented limit). */
  pthread_mutex_lock(&log_mu);
  if (fn == NULL) {
    atomic_store_explicit(&log_hook, NULL, memory_order_release);
  } else {
    unsigned i = atomic_fetch_add_explicit(&log_slot, 1, memory_order_relaxed) & 1u;
    log_hooks[i].fn = fn;
    log_hooks[i].user = user;
    atomic_store_explicit(&log_hook, &log_hooks[i], memory_order_release);
  }
  pthread_mutex_unlock(&log_mu);
}

void cudaev__log(int level, const char *msg) {
  char line[512];
  snprintf(line, sizeof line, "cudaev: %s", msg);
  struct log_hook *h = atomic_load_explicit(&log_hook, memory_order_acquire);
  if (h != NULL) {
    h->fn(level, line, h->user);
    return;
  }
  fprintf(stderr, "%s\n", line);
  fflush(stderr);
}

_Noreturn void cudaev__die(const char *msg) {
  cudaev__log(CUDAEV_LOG_ERROR, msg);
  abort();
}

_Noreturn void cudaev__future_misuse(const struct cudaev_future *f, const char *call) {
  char buf[256];
  snprintf(buf, sizeof buf,
           "%s on a future already freed (%p): a release too many, or a use after the last release",
           call, (const void *)f);
  cudaev__die(buf);
}

/* Freed futures wait here, poisoned, before going back to the allocator:
 * the oldest is recycled once QUARANTINE are held. */
#define QUARANTINE 4096
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cudaev_future *q_ring[QUARANTINE];
static unsigned q_next;

void cudaev__future_quarantine(struct cudaev_future *f) {
  f->msg.kind = CUDAEV__MSG_FREED;
  pthread_mutex_lock(&q_mu);
  struct cudaev_future *old = q_ring[q_next];
  q_ring[q_next] = f;
  q_next = (q_next + 1) % QUARANTINE;
  pthread_mutex_unlock(&q_mu);
  if (old != NULL) cudaev__free(old, sizeof *old);
}
