/* A fake driver for the pinned host memory pool's tests (hostpool.c,
 * hostpool_threads.c): fake_driver_loop's contexts plus a driver-side table
 * of pinned allocations, page-aligned as the driver's are, that answers
 * cuMemHostGetFlags, cuMemHostGetDevicePointer, cuMemHostRegister and
 * cuPointerGetAttributes for any byte of them, counts every call, and can
 * be told to refuse allocations. cuDevicePrimaryCtxReset marks the
 * context's allocations dead (freed for the driver) without unmapping
 * them, so an address from before a reset is never handed out again. */
#ifndef CUDAEV_TESTS_FAKE_HOST_H
#define CUDAEV_TESTS_FAKE_HOST_H

#include "fake_driver.h"

#include <pthread.h>
#include <stdatomic.h>

#define FAKE_HOST_MAX 16384

struct fake_host_alloc {
  _Atomic(uintptr_t) p; /* 0: free slot */
  size_t n;
  unsigned flags;
  bool dead; /* freed by a context reset */
};

static struct fake_host_alloc fake_host[FAKE_HOST_MAX];
static pthread_mutex_t fake_host_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t fake_host_top; /* slots in use are below */
static atomic_int fake_host_allocs, fake_host_frees, fake_host_bad_frees, fake_host_syncs;
static atomic_int fake_host_dead_frees;   /* cuMemFreeHost of a chunk a reset freed */
static _Atomic CUresult fake_host_refuse; /* returned by cuMemHostAlloc when set */
static size_t fake_host_last_size;
static unsigned fake_host_last_flags;

/* The slot whose allocation contains a, live or dead; NULL if none.
 * fake_host_mu held. */
static inline struct fake_host_alloc *fake_host_find(uintptr_t a) {
  for (size_t i = 0; i < fake_host_top; i++) {
    uintptr_t p = atomic_load(&fake_host[i].p);
    if (p != 0 && a - p < fake_host[i].n) return &fake_host[i];
  }
  return NULL;
}

static inline CUresult fake_pinned_alloc(void **p, size_t n, unsigned flags) {
  atomic_fetch_add(&fake_host_allocs, 1);
  CUresult r = atomic_load(&fake_host_refuse);
  if (r != CUDA_SUCCESS) return r;
  void *m = NULL;
  if (posix_memalign(&m, 4096, n) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&fake_host_mu);
  size_t i = 0;
  while (i < fake_host_top && atomic_load(&fake_host[i].p) != 0) i++;
  if (i == FAKE_HOST_MAX) {
    pthread_mutex_unlock(&fake_host_mu);
    free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (i == fake_host_top) fake_host_top++;
  fake_host[i].n = n;
  fake_host[i].flags = flags;
  fake_host[i].dead = false;
  atomic_store(&fake_host[i].p, (uintptr_t)m);
  fake_host_last_size = n;
  fake_host_last_flags = flags;
  pthread_mutex_unlock(&fake_host_mu);
  *p = m;
  return CUDA_SUCCESS;
}

static inline CUresult fake_pinned_free(void *p) {
  atomic_fetch_add(&fake_host_frees, 1);
  pthread_mutex_lock(&fake_host_mu);
  struct fake_host_alloc *a = fake_host_find((uintptr_t)p);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (a != NULL && atomic_load(&a->p) == (uintptr_t)p) {
    if (a->dead) {
      atomic_fetch_add(&fake_host_dead_frees, 1);
    } else {
      atomic_store(&a->p, 0);
      free(p);
      r = CUDA_SUCCESS;
    }
  }
  if (r != CUDA_SUCCESS) atomic_fetch_add(&fake_host_bad_frees, 1);
  pthread_mutex_unlock(&fake_host_mu);
  return r;
}

/* Live allocation containing p: its flags, or -1. */
static inline int fake_host_flags_of(const void *p) {
  pthread_mutex_lock(&fake_host_mu);
  struct fake_host_alloc *a = fake_host_find((uintptr_t)p);
  int f = a != NULL && !a->dead ? (int)a->flags : -1;
  pthread_mutex_unlock(&fake_host_mu);
  return f;
}

/* Live allocation containing p: its size, or 0. */
static inline size_t fake_host_size_of(const void *p) {
  pthread_mutex_lock(&fake_host_mu);
  struct fake_host_alloc *a = fake_host_find((uintptr_t)p);
  size_t n = a != NULL && !a->dead ? a->n : 0;
  pthread_mutex_unlock(&fake_host_mu);
  return n;
}

static inline CUresult fake_host_get_flags(unsigned *flags, void *p) {
  int f = fake_host_flags_of(p);
  if (f < 0) return CUDA_ERROR_INVALID_VALUE;
  *flags = (unsigned)f;
  return CUDA_SUCCESS;
}

static inline CUresult fake_host_dptr(CUdeviceptr *d, void *p, unsigned flags) {
  (void)flags;
  int f = fake_host_flags_of(p);
  if (f < 0 || !(f & CU_MEMHOSTALLOC_DEVICEMAP)) return CUDA_ERROR_INVALID_VALUE;
  *d = (CUdeviceptr)p;
  return CUDA_SUCCESS;
}

static void *fake_host_registered;
static inline CUresult fake_host_register(void *p, size_t n, unsigned flags) {
  (void)flags;
  fake_host_registered = p;
  if (fake_host_flags_of(p) >= 0 || fake_host_flags_of((char *)p + n - 1) >= 0)
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  return CUDA_SUCCESS;
}

static inline CUresult fake_host_attrs(unsigned n, CUpointer_attribute *q, void **data,
                                       CUdeviceptr ptr) {
  if (fake_host_flags_of((void *)ptr) < 0) return CUDA_SUCCESS; /* unknown: left as is */
  for (unsigned i = 0; i < n; i++) {
    switch (q[i]) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data[i] = CU_MEMORYTYPE_HOST; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data[i] = ptr; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data[i] = (void *)ptr; break;
    default: break;
    }
  }
  return CUDA_SUCCESS;
}

static inline CUresult fake_host_sync(CUcontext c) {
  (void)c;
  atomic_fetch_add(&fake_host_syncs, 1);
  return CUDA_SUCCESS;
}

static inline CUresult fake_host_primary_reset(CUdevice d) {
  (void)d;
  pthread_mutex_lock(&fake_host_mu);
  for (size_t i = 0; i < fake_host_top; i++)
    if (atomic_load(&fake_host[i].p) != 0) fake_host[i].dead = true;
  pthread_mutex_unlock(&fake_host_mu);
  return CUDA_SUCCESS;
}

/* A fork child may find the table's mutex held by a thread of the parent's. */
static inline void fake_host_fork_child(void) { pthread_mutex_init(&fake_host_mu, NULL); }

static inline void fake_driver_host(struct cudaev_driver *t) {
  fake_driver_loop(t);
  t->cuMemHostAlloc = fake_pinned_alloc;
  t->cuMemFreeHost = fake_pinned_free;
  t->cuMemHostGetFlags = fake_host_get_flags;
  t->cuMemHostGetDevicePointer = fake_host_dptr;
  t->cuMemHostRegister = fake_host_register;
  t->cuPointerGetAttributes = fake_host_attrs;
  t->cuCtxSynchronize = fake_host_sync;
  t->cuDevicePrimaryCtxReset = fake_host_primary_reset;
  pthread_atfork(NULL, NULL, fake_host_fork_child);
}

#endif
