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

_Noreturn void cudaev__die(const char *msg) {
  fprintf(stderr, "cudaev: %s\n", msg);
  fflush(stderr);
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
