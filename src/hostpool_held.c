/* The pinned pool's frees held during a capture (contract:
 * hostpool_internal.h).
 * Calls: hostpool_arena.c (the held frees go back to jemalloc there). */
#include "capture.h"
#include "hostpool_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* A pooled free waits for the GPU (cuCtxSynchronize) before jemalloc may
 * hand the memory out again. A context synchronisation is refused while a
 * stream of the context captures, whatever the threads' modes, and the
 * refusal invalidates that capture; NVIDIA's cudaFreeHost (the driver's
 * cuMemFreeHost) leaves it alone. So while a capture may be in progress
 * (capture.h) a freed allocation is held here, not reusable, and goes back
 * to jemalloc after a later synchronisation of its device's context, made
 * when no capture is (the next pooled free, or the reaper). */
static struct {
  pthread_mutex_t mu; /* guards v, n, cap; never held across a driver call */
  struct held_free *v;
  size_t n, cap;
} held = {.mu = PTHREAD_MUTEX_INITIALIZER};
static atomic_size_t nheld;

bool cudaev__hostpool_hold(void *p, int device, unsigned gen) {
  pthread_mutex_lock(&held.mu);
  if (held.n == held.cap) {
    size_t cap = held.cap ? 2 * held.cap : 16;
    struct held_free *v = realloc(held.v, cap * sizeof *v);
    if (v == NULL) {
      pthread_mutex_unlock(&held.mu);
      return false;
    }
    held.v = v;
    held.cap = cap;
  }
  held.v[held.n++] = (struct held_free){p, device, gen};
  atomic_store_explicit(&nheld, held.n, memory_order_release);
  pthread_mutex_unlock(&held.mu);
  return true;
}

/* Gives the held frees to jemalloc once no capture may be in progress:
 * each device's primary context is synchronised first (in relaxed mode:
 * this may run on the reaper). Frees of a device reset since are dropped:
 * the driver freed them. */
void cudaev__hostpool_release_held(void) {
  if (atomic_load_explicit(&nheld, memory_order_acquire) == 0 || cudaev__capture_maybe()) return;
  pthread_mutex_lock(&held.mu);
  struct held_free *v = held.v;
  size_t n = held.n;
  held.v = NULL;
  held.n = held.cap = 0;
  atomic_store_explicit(&nheld, 0, memory_order_release);
  pthread_mutex_unlock(&held.mu);
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  int ndevices = cudaev__hostpool_ndevices();
  for (int d = 0; d < ndevices; d++) {
    size_t i = 0;
    while (i < n && v[i].device != d) i++;
    if (i == n) continue;
    /* No primary context: no work of it can be in flight. */
    CUcontext c = atomic_load_explicit(&cudaev__rt.devices[d].primary, memory_order_acquire);
    if (c != NULL) (void)cudaev__drv.cuCtxSynchronize(c);
    cudaev__hostpool_arena_free_held(d, v, i, n);
  }
  cudaev__capture_restore(mode);
  free(v);
}

size_t cudaev__hostpool_nheld(void) { return atomic_load(&nheld); }

void cudaev__hostpool_held_fork_lock(void) { pthread_mutex_lock(&held.mu); }
void cudaev__hostpool_held_fork_unlock(void) { pthread_mutex_unlock(&held.mu); }
void cudaev__hostpool_held_fork_reinit(void) { pthread_mutex_init(&held.mu, NULL); }
