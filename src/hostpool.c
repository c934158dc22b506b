/* Pinned host memory served from private jemalloc arenas (contract and
 * limits: hostpool.h).
 *
 * Three structures:
 *  - the arenas: one per (device, flag set), created on first use and
 *    published with one atomic store; their extent hooks get chunks from
 *    cuMemHostAlloc and give them back with cuMemFreeHost;
 *  - the chunk registry (reg, one mutex): every chunk jemalloc holds, by
 *    address, with the real base the driver returned, the context it
 *    belongs to and the device's reset generation when it was made;
 *  - the live table (live, a mutex per shard): every pointer handed out and
 *    not yet freed, so that cudaFreeHost never passes jemalloc a pointer it
 *    did not hand out.
 * Those mutexes, and the reaper's, are never held with another or across a
 * driver call. Two more locks are held across jemalloc calls, and so across the driver
 * calls of the hooks those run:
 *  - je_lock, a reader-writer lock every jemalloc call is made under (as a
 *    reader: calls never exclude each other through it) and that fork takes
 *    as the writer, so that no thread is inside jemalloc when the process
 *    forks. jemalloc's own fork handlers take its arena locks, but not every
 *    lock it has: the lock of its address map (rtree init_lock), taken when
 *    a chunk lands in a new region of the address space, is not, and a
 *    child forked while another thread held it deadlocked in jemalloc.
 *  - purge_mu, which serialises the reaper's purges with cudaDeviceReset's
 *    arena destruction; nothing on an allocation or free path takes it. */
#include "capture.h"
#include "env.h"
#include "hostpool.h"

#include "cudaev_jemalloc.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined:
 * every combination is a flag set, and an index. */
#define FLAG_SETS        8
#define DECAY_MS_DEFAULT 5000

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
 *                 thread of jemalloc's (the reaper below runs decay). */
const char *cudaev_je_malloc_conf_2_conf_harder =
    "retain:false,muzzy_decay_ms:0,tcache:false,narenas:1,oversize_threshold:0,"
    "background_thread:false";

/* jemalloc's thread-state key (5.3.0, src/tsd.c with __thread TLS): its
 * destructor is jemalloc code, so dlclose must delete it (see pool_fini). */
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

struct pool_arena {
  extent_hooks_t hooks; /* first: a hook's extent_hooks argument points here */
  _Atomic unsigned ind; /* jemalloc arena index; 0 = none (0 is jemalloc's own arena) */
  int device;
  unsigned flags;
};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static atomic_bool pool_live;     /* initialised and switched on */
static struct pool_arena *arenas; /* [device * FLAG_SETS + flags] */
static int ndevices;
static _Atomic unsigned *gens; /* per device, bumped by each reset */
static size_t page;
static long decay_ms;

/* Set by a hook when the driver refused a chunk: the error cudaHostAlloc
 * returns when jemalloc then gives up. */
static _Thread_local CUresult hook_error;

/* ---- chunk registry ------------------------------------------------------- */

struct chunk {
  uintptr_t addr; /* what jemalloc got: base aligned as it asked */
  size_t size;
  void *base; /* what the driver returned */
  CUcontext ctx;
  int device;
  unsigned gen;
  unsigned flags; /* the cudaHostAlloc flags of its arena */
};

/* Sorted by addr. Touched on chunk allocation and release (each a driver
 * call anyway) and when cudaFreeHost is given a pointer that is not live. */
static struct {
  pthread_mutex_t mu;
  struct chunk *v;
  size_t n, cap;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Index of the last chunk whose addr <= a, or (size_t)-1. reg.mu held. */
static size_t reg_floor(uintptr_t a) {
  size_t lo = 0, hi = reg.n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (reg.v[mid].addr <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

static bool reg_insert(const struct chunk *c) {
  bool ok = true;
  pthread_mutex_lock(&reg.mu);
  if (reg.n == reg.cap) {
    size_t cap = reg.cap ? reg.cap * 2 : 64;
    struct chunk *v = realloc(reg.v, cap * sizeof *v);
    if (v == NULL) {
      ok = false;
      goto done;
    }
    reg.v = v;
    reg.cap = cap;
  }
  size_t i = reg_floor(c->addr) + 1;
  memmove(&reg.v[i + 1], &reg.v[i], (reg.n - i) * sizeof *reg.v);
  reg.v[i] = *c;
  reg.n++;
done:
  pthread_mutex_unlock(&reg.mu);
  return ok;
}

static bool reg_take(uintptr_t addr, struct chunk *out) {
  bool found = false;
  pthread_mutex_lock(&reg.mu);
  size_t i = reg_floor(addr);
  if (i != (size_t)-1 && reg.v[i].addr == addr) {
    *out = reg.v[i];
    memmove(&reg.v[i], &reg.v[i + 1], (reg.n - i - 1) * sizeof *reg.v);
    reg.n--;
    found = true;
  }
  pthread_mutex_unlock(&reg.mu);
  return found;
}

static bool reg_contains(uintptr_t a) {
  pthread_mutex_lock(&reg.mu);
  size_t i = reg_floor(a);
  bool in = i != (size_t)-1 && a - reg.v[i].addr < reg.v[i].size;
  pthread_mutex_unlock(&reg.mu);
  return in;
}

/* The arena flags of the chunk holding `a`, or false when none does. */
static bool reg_flags(uintptr_t a, unsigned *flags) {
  pthread_mutex_lock(&reg.mu);
  size_t i = reg_floor(a);
  bool in = i != (size_t)-1 && a - reg.v[i].addr < reg.v[i].size;
  if (in) *flags = reg.v[i].flags;
  pthread_mutex_unlock(&reg.mu);
  return in;
}

/* ---- live allocations ----------------------------------------------------- */

/* Open addressing with linear probing and backward-shift deletion, in
 * shards so that threads freeing different pointers rarely meet. */
#define LIVE_SHARDS 16

struct live_entry {
  uintptr_t p; /* 0 = empty */
  struct pool_arena *pa;
  unsigned gen; /* the device's reset generation at allocation */
};

struct live_shard {
  pthread_mutex_t mu;
  struct live_entry *t;
  size_t cap, n; /* cap: 0 or a power of two */
} __attribute__((aligned(64)));

static struct live_shard live[LIVE_SHARDS] = {
    [0 ... LIVE_SHARDS - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER}};

static inline uint64_t live_hash(uintptr_t p) {
  return (uint64_t)(p >> 12) * UINT64_C(0x9e3779b97f4a7c15);
}
static inline struct live_shard *live_shard_of(uint64_t h) { return &live[h >> 60]; }
static inline size_t live_home(uint64_t h, size_t cap) { return (size_t)(h >> 20) & (cap - 1); }

/* Places e in t (which has room), replacing an entry with the same p. */
static void live_place(struct live_entry *t, size_t cap, const struct live_entry *e, size_t *n) {
  size_t i = live_home(live_hash(e->p), cap);
  while (t[i].p != 0 && t[i].p != e->p) i = (i + 1) & (cap - 1);
  if (t[i].p == 0) (*n)++;
  t[i] = *e;
}

static bool live_put(uintptr_t p, struct pool_arena *pa, unsigned gen) {
  struct live_entry e = {p, pa, gen};
  struct live_shard *s = live_shard_of(live_hash(p));
  bool ok = true;
  pthread_mutex_lock(&s->mu);
  if ((s->n + 1) * 4 > s->cap * 3) {
    size_t cap = s->cap ? s->cap * 2 : 64, n = 0;
    struct live_entry *t = calloc(cap, sizeof *t);
    if (t == NULL) {
      ok = false;
      goto done;
    }
    for (size_t i = 0; i < s->cap; i++)
      if (s->t[i].p != 0) live_place(t, cap, &s->t[i], &n);
    free(s->t);
    s->t = t;
    s->cap = cap;
    s->n = n;
  }
  live_place(s->t, s->cap, &e, &s->n);
done:
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static bool live_take(uintptr_t p, struct live_entry *out) {
  uint64_t h = live_hash(p);
  struct live_shard *s = live_shard_of(h);
  bool found = false;
  pthread_mutex_lock(&s->mu);
  if (s->cap == 0) goto done;
  size_t mask = s->cap - 1, i = live_home(h, s->cap);
  while (s->t[i].p != 0 && s->t[i].p != p) i = (i + 1) & mask;
  if (s->t[i].p == 0) goto done;
  *out = s->t[i];
  found = true;
  s->n--;
  /* Backward shift: pull later entries of the probe run into the hole
   * unless their home lies cyclically in (hole, their slot]. */
  for (;;) {
    s->t[i].p = 0;
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (s->t[j].p == 0) goto done;
      size_t k = live_home(live_hash(s->t[j].p), s->cap);
      bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (!stays) break;
    }
    s->t[i] = s->t[j];
    i = j;
  }
done:
  pthread_mutex_unlock(&s->mu);
  return found;
}

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
  if (g != CUDA_SUCCESS || !reg_insert(&c)) {
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
  if (reg_take((uintptr_t)addr, &c)) chunk_release(&c);
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
static unsigned arena_of(struct pool_arena *pa) {
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

/* ---- frees during a capture ------------------------------------------------- */

/* A pooled free waits for the GPU (cuCtxSynchronize) before jemalloc may
 * hand the memory out again. A context synchronisation is refused while a
 * stream of the context captures, whatever the threads' modes, and the
 * refusal invalidates that capture; NVIDIA's cudaFreeHost (the driver's
 * cuMemFreeHost) leaves it alone. So while a capture may be in progress
 * (capture.h) a freed allocation is held here, not reusable, and goes back
 * to jemalloc after a later synchronisation of its device's context, made
 * when no capture is (the next pooled free, or the reaper). */
struct held_free {
  void *p;
  int device;
  unsigned gen;
};
static struct {
  pthread_mutex_t mu; /* guards v, n, cap; never held across a driver call */
  struct held_free *v;
  size_t n, cap;
} held = {.mu = PTHREAD_MUTEX_INITIALIZER};
static atomic_size_t nheld;

static bool hold_free(void *p, int device, unsigned gen) {
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
static void release_held(void) {
  if (atomic_load_explicit(&nheld, memory_order_acquire) == 0 || cudaev__capture_maybe()) return;
  pthread_mutex_lock(&held.mu);
  struct held_free *v = held.v;
  size_t n = held.n;
  held.v = NULL;
  held.n = held.cap = 0;
  atomic_store_explicit(&nheld, 0, memory_order_release);
  pthread_mutex_unlock(&held.mu);
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  for (int d = 0; d < ndevices; d++) {
    size_t i = 0;
    while (i < n && v[i].device != d) i++;
    if (i == n) continue;
    /* No primary context: no work of it can be in flight. */
    CUcontext c = atomic_load_explicit(&cudaev__rt.devices[d].primary, memory_order_acquire);
    if (c != NULL) (void)cudaev__drv.cuCtxSynchronize(c);
    pthread_rwlock_rdlock(&je_lock);
    for (; i < n; i++)
      if (v[i].device == d && v[i].gen == atomic_load_explicit(&gens[d], memory_order_acquire))
        cudaev_je_dallocx(v[i].p, MALLOCX_TCACHE_NONE);
    pthread_rwlock_unlock(&je_lock);
  }
  cudaev__capture_restore(mode);
  free(v);
}

/* ---- reaper ---------------------------------------------------------------- */

static pthread_mutex_t purge_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool pool_dirty;     /* freed memory may be cached: the reaper has work */
static atomic_ulong pool_activity; /* bumped by every pooled allocation and free */
static struct {
  pthread_mutex_t mu; /* guards the fields below */
  pthread_cond_t cv;
  pthread_t th;
  bool running, stop, hooked;
} reaper = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* all: purge everything cached; else let decay purge what has been cached
 * longer than the decay time. */
static void pool_purge(bool all) {
  pthread_mutex_lock(&purge_mu);
  pthread_rwlock_rdlock(&je_lock);
  for (int i = 0; i < ndevices * FLAG_SETS; i++) {
    unsigned ind = atomic_load_explicit(&arenas[i].ind, memory_order_acquire);
    if (ind != 0) arena_ctl(ind, all ? "purge" : "decay");
  }
  pthread_rwlock_unlock(&je_lock);
  pthread_mutex_unlock(&purge_mu);
}

/* jemalloc's decay only runs when its arena is used; this thread runs it
 * while the pool holds freed memory, every quarter of the decay time, and
 * purges everything once no pooled call happened for a whole decay time. */
static void *reaper_main(void *arg) {
  (void)arg;
  /* Its frees are no part of any capture (driver.h). */
  (void)cudaev__capture_relax();
  uint64_t period = (uint64_t)decay_ms * 250000u, decay = (uint64_t)decay_ms * 1000000u;
  if (period < 1000000u) period = 1000000u;
  pthread_mutex_lock(&reaper.mu);
  unsigned long seen = atomic_load(&pool_activity);
  uint64_t idle_since = now_ns();
  while (!reaper.stop) {
    if (!atomic_load(&pool_dirty)) {
      pthread_cond_wait(&reaper.cv, &reaper.mu);
      seen = atomic_load(&pool_activity);
      idle_since = now_ns();
      continue;
    }
    uint64_t until = now_ns() + period;
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u),
                          .tv_nsec = (long)(until % 1000000000u)};
    while (!reaper.stop && pthread_cond_timedwait(&reaper.cv, &reaper.mu, &ts) == 0) {
    }
    if (reaper.stop) break;
    pthread_mutex_unlock(&reaper.mu);
    uint64_t t = now_ns();
    unsigned long a = atomic_load(&pool_activity);
    if (a != seen) {
      seen = a;
      idle_since = t;
    }
    bool idle = t - idle_since >= decay;
    release_held();
    pool_purge(idle);
    pthread_mutex_lock(&reaper.mu);
    /* Dekker with note_free: it bumps the activity, then reads the flag;
     * this clears the flag, then reads the activity. One of the two sees
     * the other, so a free is never left without a reaper. */
    if (idle && atomic_load(&nheld) == 0) {
      atomic_store(&pool_dirty, false);
      if (atomic_load(&pool_activity) != seen) atomic_store(&pool_dirty, true);
    }
  }
  pthread_mutex_unlock(&reaper.mu);
  return NULL;
}

/* Process exit (atexit: before the driver's own exit handlers, registered
 * at cuInit, which came first) and dlclose: stops the reaper and joins it,
 * so that no purge runs while the driver tears down. */
static void pool_at_exit(void) {
  pthread_mutex_lock(&reaper.mu);
  bool join = reaper.running && !pthread_equal(reaper.th, pthread_self());
  pthread_t th = reaper.th;
  reaper.stop = true;
  pthread_cond_signal(&reaper.cv);
  pthread_mutex_unlock(&reaper.mu);
  if (join) pthread_join(th, NULL);
  pthread_mutex_lock(&reaper.mu);
  reaper.running = false;
  pthread_mutex_unlock(&reaper.mu);
}

static void reaper_kick(void) {
  pthread_mutex_lock(&reaper.mu);
  atomic_store(&pool_dirty, true);
  if (reaper.running) {
    pthread_cond_signal(&reaper.cv);
  } else if (!reaper.stop) {
    if (!reaper.hooked) {
      reaper.hooked = true;
      atexit(pool_at_exit);
    }
    /* Signals go to the application's threads, never to this one. If no
     * thread can be made, jemalloc's own decay (on pool activity) is all
     * that returns memory: the flag stays set so no free tries again. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    reaper.running = pthread_create(&reaper.th, NULL, reaper_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  pthread_mutex_unlock(&reaper.mu);
}

static inline void note_free(void) {
  atomic_fetch_add(&pool_activity, 1);
  if (!atomic_load(&pool_dirty)) reaper_kick();
}

/* ---- fork and unload ------------------------------------------------------- */

/* Registered at pool initialisation, after jemalloc's handlers (its
 * constructor registers them when the library loads), so that fork runs
 * this prepare before jemalloc's: je_lock is taken first, and jemalloc then
 * finds every one of its locks free. The child has a consistent pool, no
 * reaper (it starts its own on its first free) and no purge in flight. The
 * locks are initialised afresh in the child rather than unlocked: glibc
 * tells a reader-writer lock's writer by thread id, which fork changed. */
static void fork_prepare(void) {
  pthread_mutex_lock(&purge_mu);
  pthread_rwlock_wrlock(&je_lock);
  pthread_mutex_lock(&reaper.mu);
  pthread_mutex_lock(&held.mu);
  pthread_mutex_lock(&reg.mu);
  for (int i = 0; i < LIVE_SHARDS; i++) pthread_mutex_lock(&live[i].mu);
}
static void fork_parent(void) {
  for (int i = LIVE_SHARDS - 1; i >= 0; i--) pthread_mutex_unlock(&live[i].mu);
  pthread_mutex_unlock(&reg.mu);
  pthread_mutex_unlock(&held.mu);
  pthread_mutex_unlock(&reaper.mu);
  pthread_rwlock_unlock(&je_lock);
  pthread_mutex_unlock(&purge_mu);
}
static void cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}
static void fork_child(void) {
  for (int i = 0; i < LIVE_SHARDS; i++) pthread_mutex_init(&live[i].mu, NULL);
  pthread_mutex_init(&reg.mu, NULL);
  pthread_mutex_init(&reaper.mu, NULL);
  pthread_mutex_init(&held.mu, NULL);
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&je_lock, &a);
  pthread_rwlockattr_destroy(&a);
  pthread_mutex_init(&purge_mu, NULL);
  cond_init_monotonic(&reaper.cv);
  reaper.running = false;
  reaper.stop = false;
  atomic_store(&pool_dirty, false);
}

/* dlclose (and exit): the reaper stops, and jemalloc's thread-state key is
 * deleted, as no key destructor may point into an unloaded library. */
__attribute__((destructor)) static void pool_fini(void) {
  pool_at_exit();
  pthread_key_delete(cudaev_je_int_je_tsd_tsd);
}

/* ---- the runtime's entry points --------------------------------------------- */

static void pool_init(void) {
  if (cudaev__env_off("CUDAEV_HOST_POOL")) return;
  decay_ms = (long)cudaev__env_num("CUDAEV_HOST_POOL_DECAY_MS", 0, 3600000, DECAY_MS_DEFAULT);
  size_t sz = sizeof page;
  ssize_t dms = decay_ms;
  if (cudaev_je_mallctl("arenas.page", &page, &sz, NULL, 0) != 0 ||
      cudaev_je_mallctl("arenas.dirty_decay_ms", NULL, NULL, &dms, sizeof dms) != 0)
    return;
  cond_init_monotonic(&reaper.cv);
  if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) return;
  int n = cudaev__rt.device_count;
  struct pool_arena *a = calloc((size_t)n * FLAG_SETS, sizeof *a);
  _Atomic unsigned *g = calloc((size_t)n, sizeof *g);
  if (a == NULL || g == NULL) {
    free(a);
    free((void *)g);
    return;
  }
  for (int i = 0; i < n * FLAG_SETS; i++) {
    a[i].hooks = hooks_template;
    a[i].device = i / FLAG_SETS;
    a[i].flags = (unsigned)(i % FLAG_SETS);
  }
  arenas = a;
  gens = g;
  ndevices = n;
  atomic_store_explicit(&pool_live, true, memory_order_release);
}

/* The device whose primary context is current, or -1 (no context, or one
 * of the application's own). */
static int primary_device(void) {
  CUcontext c = NULL;
  if (cudaev__drv.cuCtxGetCurrent(&c) != CUDA_SUCCESS || c == NULL) return -1;
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
  struct pool_arena *pa = &arenas[d * FLAG_SETS + (int)flags];
  unsigned ind = arena_of(pa);
  if (ind == 0) return false;
  unsigned gen = atomic_load_explicit(&gens[d], memory_order_acquire);
  hook_error = CUDA_SUCCESS;
  pthread_rwlock_rdlock(&je_lock);
  void *m = cudaev_je_mallocx(size, MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE | MALLOCX_ALIGN(page));
  pthread_rwlock_unlock(&je_lock);
  if (m == NULL) {
    *r = hook_error != CUDA_SUCCESS ? hook_error : CUDA_ERROR_OUT_OF_MEMORY;
    return true;
  }
  if (!live_put((uintptr_t)m, pa, gen)) {
    pthread_rwlock_rdlock(&je_lock);
    cudaev_je_dallocx(m, MALLOCX_TCACHE_NONE);
    pthread_rwlock_unlock(&je_lock);
    *r = CUDA_ERROR_OUT_OF_MEMORY;
    return true;
  }
  atomic_fetch_add_explicit(&pool_activity, 1, memory_order_relaxed);
  *p = m;
  *r = CUDA_SUCCESS;
  return true;
}

bool cudaev__hostpool_free(void *p, cudaError_t *e) {
  if (!atomic_load_explicit(&pool_live, memory_order_acquire)) return false;
  struct live_entry le;
  if (live_take((uintptr_t)p, &le)) {
    /* From before a reset of its device: the driver freed it and answers. */
    if (le.gen != atomic_load_explicit(&gens[le.pa->device], memory_order_acquire)) return false;
    /* During a capture the synchronisation below would invalidate it:
     * the memory is held instead (release_held), unless the driver would
     * refuse NVIDIA's cuMemFreeHost on this thread too. Then the
     * synchronisation fails as that free does (and invalidates the capture
     * as it does), and the memory stays allocated, as a refused free
     * leaves it. */
    if (cudaev__capture_unsafe_call() == CUDAEV__CAPTURE_ALLOWED &&
        hold_free(p, le.pa->device, le.gen)) {
      note_free();
      *e = cudaSuccess;
      return true;
    }
    /* cuMemFreeHost waits for the GPU before the pages can be reused; so
     * must a free that makes them reusable at once. */
    CUresult r = cudaev__drv.cuCtxSynchronize(NULL);
    if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && live_put((uintptr_t)p, le.pa, le.gen)) {
      *e = cudaev__error_from_cu(r);
      return true;
    }
    pthread_rwlock_rdlock(&je_lock);
    cudaev_je_dallocx(p, MALLOCX_TCACHE_NONE);
    pthread_rwlock_unlock(&je_lock);
    note_free();
    release_held();
    *e = r == CUDA_SUCCESS ? cudaSuccess : cudaev__error_from_cu(r);
    return true;
  }
  /* Inside pooled memory but not a live allocation's start: interior, or
   * already freed. The driver would refuse it; jemalloc must never see it. */
  if (reg_contains((uintptr_t)p)) {
    *e = cudaErrorInvalidValue;
    return true;
  }
  return false;
}

void cudaev__hostpool_flags(const void *p, unsigned *flags) {
  unsigned f;
  if (atomic_load_explicit(&pool_live, memory_order_acquire) && reg_flags((uintptr_t)p, &f))
    *flags = f | (*flags & CU_MEMHOSTALLOC_DEVICEMAP);
}

void cudaev__hostpool_reset(int device) {
  if (!atomic_load_explicit(&pool_live, memory_order_acquire) || device < 0 || device >= ndevices)
    return;
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

unsigned cudaev__hostpool_arena(int device, unsigned flags) {
  if (!atomic_load_explicit(&pool_live, memory_order_acquire) || device < 0 || device >= ndevices ||
      flags >= FLAG_SETS)
    return 0;
  return atomic_load(&arenas[device * FLAG_SETS + (int)flags].ind);
}
