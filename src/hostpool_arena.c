/* The pinned pool's jemalloc side: jemalloc's options, the arenas and
 * their extent hooks, the devices' reset generations, purges and resets
 * (contract: hostpool_internal.h).
 * Calls: hostpool_chunk.c (the hooks record and release chunks). */
#include "capture.h"
#include "hostpool_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* jemalloc's options. This symbol outranks every other source, the
 * CUDAEV_JE_MALLOC_CONF environment variable included, because the pool
 * depends on them:
 *  retain:false   an extent jemalloc no longer needs goes back through the
 *                 dalloc hook instead of being kept as reserved address
 *                 space; with retain on, jemalloc grows by large chunks it
 *                 then splits, and the hooks refuse splits;
 *  muzzy_decay_ms:0  there are no purge hooks (pinned pages cannot be
 *                 madvise()d away), so decayed dirty extents go straight to
 *                 dalloc;
 *  tcache:false   every call names MALLOCX_TCACHE_NONE: a freed block goes
 *                 back to its arena at once, where decay and purge see it
 *                 and arena destruction at a reset finds it;
 *  narenas:1, oversize_threshold:0, background_thread:false
 *                 only the pool's own arenas are used: one automatic arena
 *                 (jemalloc always has arena 0), no dedicated huge arena, no
 *                 thread of jemalloc's (the reaper, hostpool_reaper.c, runs
 *                 decay). */
const char *cudaev_je_malloc_conf_2_conf_harder =
    "retain:false,muzzy_decay_ms:0,tcache:false,narenas:1,oversize_threshold:0,"
    "background_thread:false";

/* jemalloc's thread-state key (5.3.0, src/tsd.c with __thread TLS): its
 * destructor is jemalloc code, so dlclose must delete it (cudaev__hostpool_arena_unload). */
extern pthread_key_t cudaev_je_int_je_tsd_tsd;

/* The layout of arena_config_t in jemalloc 5.3.0
 * (include/jemalloc/internal/arena_types.h), which
 * experimental.arenas_create_ext takes and checks by size. */
struct arena_config {
  extent_hooks_t *extent_hooks;
  bool metadata_use_hooks;
};
_Static_assert(sizeof(struct arena_config) == 2 * sizeof(void *), "arena_config_t layout");

/* ---- state ---------------------------------------------------------------- */

/* Writer-preferring, so that a fork is not starved by threads that keep
 * allocating. Readers never nest. */
static pthread_rwlock_t je_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static struct pool_arena *arenas; /* [device * FLAG_SETS + flags] */
static int ndevices;
static _Atomic unsigned *gens; /* per device, bumped by each reset */
static size_t page;
static pthread_mutex_t purge_mu = PTHREAD_MUTEX_INITIALIZER;

/* Set by a hook when the driver refused a chunk: the error cudaHostAlloc
 * returns when jemalloc then gives up. */
static _Thread_local CUresult hook_error;

/* ---- extent hooks --------------------------------------------------------- */

static CUresult host_alloc(void **base, size_t size, unsigned flags) {
  *base = NULL;
  return cudaev__drv.cuMemHostAlloc(base, size, flags);
}

/* Gives a chunk back to the driver in the context it was made in, unless a
 * reset of its device freed it already (its address may since belong to a
 * new allocation). The driver's error is ignored: a context the application
 * destroyed through the driver API has freed the chunk too. */
static void chunk_release(const struct chunk *c) {
  if (c->gen != atomic_load_explicit(&gens[c->device], memory_order_acquire)) return;
  CUcontext cur = NULL, popped;
  /* jemalloc decides when a chunk goes back (decay, on the reaper or on
   * any pooled call): the free is the pool's, never the application's, and
   * no part of any capture (driver.h). */
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  bool pushed = cudaev__drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != c->ctx &&
                cudaev__drv.cuCtxPushCurrent(c->ctx) == CUDA_SUCCESS;
  (void)cudaev__drv.cuMemFreeHost(c->base);
  if (pushed) cudaev__drv.cuCtxPopCurrent(&popped);
  cudaev__capture_restore(mode);
}

/* Runs inside cudaHostAlloc (the only caller of mallocx), so the device's
 * primary context is current and the chunk belongs to it. new_addr is set
 * only to grow an extent in place, which a driver allocation cannot do. */
static void *hook_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment,
                        bool *zero, bool *commit, unsigned arena_ind) {
  struct pool_arena *pa = (struct pool_arena *)h;
  if (new_addr != NULL) return NULL;
  if (alignment < page) alignment = page;
  void *base;
  CUresult r = host_alloc(&base, size, pa->flags);
  if (r == CUDA_SUCCESS && ((uintptr_t)base & (alignment - 1)) != 0) {
    /* The driver's allocations are page-aligned; a larger alignment takes
     * a larger chunk, and its real base is what goes back to the driver. */
    (void)cudaev__drv.cuMemFreeHost(base);
    r = size + alignment < size ? CUDA_ERROR_OUT_OF_MEMORY
                                : host_alloc(&base, size + alignment, pa->flags);
  }
  if (r != CUDA_SUCCESS) {
    hook_error = r;
    return NULL;
  }
  struct chunk c = {.addr = ((uintptr_t)base + alignment - 1) & ~(uintptr_t)(alignment - 1),
                    .size = size,
                    .base = base,
                    .device = pa->device,
                    .gen = atomic_load_explicit(&gens[pa->device], memory_order_acquire),
                    .flags = pa->flags};
  /* The driver's own answer when it is the one that failed. */
  CUresult g = cudaev__drv.cuCtxGetCurrent(&c.ctx);
  if (g != CUDA_SUCCESS || !cudaev__hostpool_chunk_insert(&c)) {
    (void)cudaev__drv.cuMemFreeHost(base);
    hook_error = g != CUDA_SUCCESS ? g : CUDA_ERROR_OUT_OF_MEMORY;
    return NULL;
  }
  /* Nothing says the driver's pages are zero: clear them when asked. */
  if (*zero) memset((void *)c.addr, 0, size);
  *commit = true;
  return (void *)c.addr;
}

static bool hook_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed,
                        unsigned arena_ind) {
  struct chunk c;
  if (cudaev__hostpool_chunk_take((uintptr_t)addr, &c)) chunk_release(&c);
  return false;
}

static void hook_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed,
                         unsigned arena_ind) {
  (void)hook_dalloc(h, addr, size, committed, arena_ind);
}

/* Refused, so that every extent jemalloc holds is exactly one chunk and a
 * dalloc is always a whole driver allocation (tools/jemalloc.sh builds
 * jemalloc so that it reuses extents by exact size instead). */
static bool hook_split(extent_hooks_t *h, void *addr, size_t size, size_t size_a, size_t size_b,
                       bool committed, unsigned arena_ind) {
  return true;
}
static bool hook_merge(extent_hooks_t *h, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
                       bool committed, unsigned arena_ind) {
  return true;
}

/* No commit/decommit/purge hooks: pinned pages stay committed while
 * jemalloc holds them, and decay hands them to dalloc. */
static const extent_hooks_t hooks_template = {
    .alloc = hook_alloc,
    .dalloc = hook_dalloc,
    .destroy = hook_destroy,
    .split = hook_split,
    .merge = hook_merge,
};

/* ---- arenas ---------------------------------------------------------------- */

/* je_lock held (as a reader). */
static void arena_ctl(unsigned ind, const char *op) {
  char name[64];
  snprintf(name, sizeof name, "arena.%u.%s", ind, op);
  (void)cudaev_je_mallctl(name, NULL, NULL, NULL, 0);
}

/* The arena of pa, created on first use; 0 when jemalloc cannot make one
 * (the caller then asks the driver directly). Two threads may both create
 * one: the loser destroys its own, which nobody has seen. */
unsigned cudaev__hostpool_arena_ind(struct pool_arena *pa) {
  unsigned ind = atomic_load_explicit(&pa->ind, memory_order_acquire);
  if (CUDAEV_LIKELY(ind != 0)) return ind;
  struct arena_config cfg = {.extent_hooks = &pa->hooks, .metadata_use_hooks = false};
  size_t sz = sizeof ind;
  pthread_rwlock_rdlock(&je_lock);
  int err = cudaev_je_mallctl("experimental.arenas_create_ext", &ind, &sz, &cfg, sizeof cfg);
  pthread_rwlock_unlock(&je_lock);
  if (err != 0) return 0;
  unsigned seen = 0;
  if (!atomic_compare_exchange_strong(&pa->ind, &seen, ind)) {
    pthread_rwlock_rdlock(&je_lock);
    arena_ctl(ind, "destroy");
    pthread_rwlock_unlock(&je_lock);
    return seen;
  }
  return ind;
}

bool cudaev__hostpool_arena_setup(long decay_ms) {
  size_t sz = sizeof page;
  ssize_t dms = decay_ms;
  return cudaev_je_mallctl("arenas.page", &page, &sz, NULL, 0) == 0 &&
         cudaev_je_mallctl("arenas.dirty_decay_ms", NULL, NULL, &dms, sizeof dms) == 0;
}

bool cudaev__hostpool_arenas_create(int n) {
  struct pool_arena *a = calloc((size_t)n * FLAG_SETS, sizeof *a);
  _Atomic unsigned *g = calloc((size_t)n, sizeof *g);
  if (a == NULL || g == NULL) {
    free(a);
    free((void *)g);
    return false;
  }
  for (int i = 0; i < n * FLAG_SETS; i++) {
    a[i].hooks = hooks_template;
    a[i].device = i / FLAG_SETS;
    a[i].flags = (unsigned)(i % FLAG_SETS);
  }
  arenas = a;
  gens = g;
  ndevices = n;
  return true;
}

int cudaev__hostpool_ndevices(void) { return ndevices; }

struct pool_arena *cudaev__hostpool_arena_at(int device, unsigned flags) {
  return &arenas[device * FLAG_SETS + (int)flags];
}

unsigned cudaev__hostpool_gen(int device) {
  return atomic_load_explicit(&gens[device], memory_order_acquire);
}

void *cudaev__hostpool_je_alloc(unsigned ind, size_t size, CUresult *err) {
  hook_error = CUDA_SUCCESS;
  pthread_rwlock_rdlock(&je_lock);
  void *m = cudaev_je_mallocx(size, MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE | MALLOCX_ALIGN(page));
  pthread_rwlock_unlock(&je_lock);
  if (m == NULL) *err = hook_error != CUDA_SUCCESS ? hook_error : CUDA_ERROR_OUT_OF_MEMORY;
  return m;
}

void cudaev__hostpool_je_free(void *p) {
  pthread_rwlock_rdlock(&je_lock);
  cudaev_je_dallocx(p, MALLOCX_TCACHE_NONE);
  pthread_rwlock_unlock(&je_lock);
}

void cudaev__hostpool_arena_free_held(int d, const struct held_free *v, size_t i, size_t n) {
  pthread_rwlock_rdlock(&je_lock);
  for (; i < n; i++)
    if (v[i].device == d && v[i].gen == atomic_load_explicit(&gens[d], memory_order_acquire))
      cudaev_je_dallocx(v[i].p, MALLOCX_TCACHE_NONE);
  pthread_rwlock_unlock(&je_lock);
}
void cudaev__hostpool_purge(bool all) {
  pthread_mutex_lock(&purge_mu);
  pthread_rwlock_rdlock(&je_lock);
  for (int i = 0; i < ndevices * FLAG_SETS; i++) {
    unsigned ind = atomic_load_explicit(&arenas[i].ind, memory_order_acquire);
    if (ind != 0) arena_ctl(ind, all ? "purge" : "decay");
  }
  pthread_rwlock_unlock(&je_lock);
  pthread_mutex_unlock(&purge_mu);
}

void cudaev__hostpool_arenas_reset(int device) {
  pthread_mutex_lock(&purge_mu);
  pthread_rwlock_rdlock(&je_lock);
  /* Chunks of the old generation are released without a driver call, and
   * live entries of it are refused by cudaFreeHost's lookup. */
  atomic_fetch_add(&gens[device], 1);
  for (int f = 0; f < FLAG_SETS; f++) {
    unsigned ind = atomic_exchange(&arenas[device * FLAG_SETS + f].ind, 0);
    if (ind != 0) arena_ctl(ind, "destroy");
  }
  pthread_rwlock_unlock(&je_lock);
  pthread_mutex_unlock(&purge_mu);
}

unsigned cudaev__hostpool_arena_made(int device, unsigned flags) {
  return atomic_load(&arenas[device * FLAG_SETS + (int)flags].ind);
}

void cudaev__hostpool_arena_unload(void) { pthread_key_delete(cudaev_je_int_je_tsd_tsd); }

void cudaev__hostpool_arena_fork_lock(void) {
  pthread_mutex_lock(&purge_mu);
  pthread_rwlock_wrlock(&je_lock);
}
void cudaev__hostpool_arena_fork_unlock(void) {
  pthread_rwlock_unlock(&je_lock);
  pthread_mutex_unlock(&purge_mu);
}
void cudaev__hostpool_arena_fork_reinit(void) {
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&je_lock, &a);
  pthread_rwlockattr_destroy(&a);
  pthread_mutex_init(&purge_mu, NULL);
}
