/* Pinned host memory served from private jemalloc arenas: the runtime's
 * entry points, the pool's initialisation, and its fork and unload
 * handlers (contract and limits: hostpool.h; the pool's files and their
 * locks: hostpool_internal.h).
 * Calls: hostpool_reaper.c, hostpool_held.c, hostpool_arena.c,
 * hostpool_chunk.c, hostpool_live.c. */
#include "capture.h"
#include "env.h"
#include "hostpool_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#define DECAY_MS_DEFAULT 5000

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static atomic_bool pool_live; /* initialised and switched on */

/* ---- fork and unload ------------------------------------------------------- */

/* Registered at pool initialisation, after jemalloc's handlers (its
 * constructor registers them when the library loads), so that fork runs
 * this prepare before jemalloc's: je_lock is taken first, and jemalloc then
 * finds every one of its locks free. The child has a consistent pool, no
 * reaper (it starts its own on its first free) and no purge in flight. The
 * locks are initialised afresh in the child rather than unlocked: glibc
 * tells a reader-writer lock's writer by thread id, which fork changed. */
static void fork_prepare(void) {
  cudaev__hostpool_arena_fork_lock();
  cudaev__hostpool_reaper_fork_lock();
  cudaev__hostpool_held_fork_lock();
  cudaev__hostpool_chunk_fork_lock();
  cudaev__hostpool_live_fork_lock();
}
static void fork_parent(void) {
  cudaev__hostpool_live_fork_unlock();
  cudaev__hostpool_chunk_fork_unlock();
  cudaev__hostpool_held_fork_unlock();
  cudaev__hostpool_reaper_fork_unlock();
  cudaev__hostpool_arena_fork_unlock();
}
static void fork_child(void) {
  cudaev__hostpool_live_fork_reinit();
  cudaev__hostpool_chunk_fork_reinit();
  cudaev__hostpool_held_fork_reinit();
  cudaev__hostpool_arena_fork_reinit();
  cudaev__hostpool_reaper_fork_reinit();
}

/* dlclose (and exit): the reaper stops, and jemalloc's thread-state key is
 * deleted, as no key destructor may point into an unloaded library. */
__attribute__((destructor)) static void pool_fini(void) {
  cudaev__hostpool_reaper_stop();
  cudaev__hostpool_arena_unload();
}

/* ---- the runtime's entry points --------------------------------------------- */

static void pool_init(void) {
  if (cudaev__env_off("CUDAEV_HOST_POOL")) return;
  long decay_ms = (long)cudaev__env_num("CUDAEV_HOST_POOL_DECAY_MS", 0, 3600000, DECAY_MS_DEFAULT);
  if (!cudaev__hostpool_arena_setup(decay_ms)) return;
  cudaev__hostpool_reaper_init(decay_ms);
  if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) return;
  if (!cudaev__hostpool_arenas_create(cudaev__rt.device_count)) return;
  atomic_store_explicit(&pool_live, true, memory_order_release);
}

/* The device whose primary context is current, or -1 (no context, or one
 * of the application's own). */
static int primary_device(void) {
  CUcontext c = NULL;
  if (cudaev__drv.cuCtxGetCurrent(&c) != CUDA_SUCCESS || c == NULL) return -1;
  int ndevices = cudaev__hostpool_ndevices();
  for (int i = 0; i < ndevices; i++)
    if (atomic_load_explicit(&cudaev__rt.devices[i].primary, memory_order_acquire) == c) return i;
  return -1;
}

bool cudaev__hostpool_alloc(void **p, size_t size, unsigned flags, CUresult *r) {
  if (size > CUDAEV_HOSTPOOL_MAX || flags >= FLAG_SETS) return false;
  pthread_once(&pool_once, pool_init);
  if (!atomic_load_explicit(&pool_live, memory_order_acquire)) return false;
  int d = primary_device();
  if (d < 0) return false;
  struct pool_arena *pa = cudaev__hostpool_arena_at(d, flags);
  unsigned ind = cudaev__hostpool_arena_ind(pa);
  if (ind == 0) return false;
  unsigned gen = cudaev__hostpool_gen(d);
  void *m = cudaev__hostpool_je_alloc(ind, size, r);
  if (m == NULL) return true;
  if (!cudaev__hostpool_live_put((uintptr_t)m, pa, gen)) {
    cudaev__hostpool_je_free(m);
    *r = CUDA_ERROR_OUT_OF_MEMORY;
    return true;
  }
  cudaev__hostpool_note_alloc();
  *p = m;
  *r = CUDA_SUCCESS;
  return true;
}

bool cudaev__hostpool_free(void *p, cudaError_t *e) {
  if (!atomic_load_explicit(&pool_live, memory_order_acquire)) return false;
  struct live_entry le;
  if (cudaev__hostpool_live_take((uintptr_t)p, &le)) {
    /* From before a reset of its device: the driver freed it and answers. */
    if (le.gen != cudaev__hostpool_gen(le.pa->device)) return false;
    /* During a capture the synchronisation below would invalidate it:
     * the memory is held instead (cudaev__hostpool_release_held), unless
     * the driver would refuse NVIDIA's cuMemFreeHost on this thread too.
     * Then the synchronisation fails as that free does (and invalidates
     * the capture as it does), and the memory stays allocated, as a
     * refused free leaves it. */
    if (cudaev__capture_unsafe_call() == CUDAEV__CAPTURE_ALLOWED &&
        cudaev__hostpool_hold(p, le.pa->device, le.gen)) {
      cudaev__hostpool_note_free();
      *e = cudaSuccess;
      return true;
    }
    /* cuMemFreeHost waits for the GPU before the pages can be reused; so
     * must a free that makes them reusable at once. */
    CUresult r = cudaev__drv.cuCtxSynchronize(NULL);
    if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
        cudaev__hostpool_live_put((uintptr_t)p, le.pa, le.gen)) {
      *e = cudaev__error_from_cu(r);
      return true;
    }
    cudaev__hostpool_je_free(p);
    cudaev__hostpool_note_free();
    cudaev__hostpool_release_held();
    *e = r == CUDA_SUCCESS ? cudaSuccess : cudaev__error_from_cu(r);
    return true;
  }
  /* Inside pooled memory but not a live allocation's start: interior, or
   * already freed. The driver would refuse it; jemalloc must never see it. */
  if (cudaev__hostpool_chunk_contains((uintptr_t)p)) {
    *e = cudaErrorInvalidValue;
    return true;
  }
  return false;
}

void cudaev__hostpool_flags(const void *p, unsigned *flags) {
  unsigned f;
  if (atomic_load_explicit(&pool_live, memory_order_acquire) &&
      cudaev__hostpool_chunk_flags((uintptr_t)p, &f))
    *flags = f | (*flags & CU_MEMHOSTALLOC_DEVICEMAP);
}

void cudaev__hostpool_reset(int device) {
  if (!atomic_load_explicit(&pool_live, memory_order_acquire) || device < 0 ||
      device >= cudaev__hostpool_ndevices())
    return;
  cudaev__hostpool_arenas_reset(device);
}

unsigned cudaev__hostpool_arena(int device, unsigned flags) {
  if (!atomic_load_explicit(&pool_live, memory_order_acquire) || device < 0 ||
      device >= cudaev__hostpool_ndevices() || flags >= FLAG_SETS)
    return 0;
  return cudaev__hostpool_arena_made(device, flags);
}
