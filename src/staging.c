/* The pinned staging ring for pageable copies (src/staging.h). */
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "ntcopy.h"
#include "staging.h"
#include "spin.h"
#include "wait.h"

/* Buffers of 2 MiB: the DMA of one (about 40 us at 50 GB/s) hides the
 * host copy of the next one and the per-chunk driver calls (an enqueue and
 * an event record, a few microseconds); 8 of them let the host run up to
 * 16 MiB ahead of the DMA. */
#define CHUNK               ((size_t)2 << 20)
#define SLOTS               8
/* The unit a host copy is split into for the copy threads: small enough
 * that a chunk of a copy just over the threshold still has a part
 * for a second thread. */
#define PART                ((size_t)256 << 10)
/* Copy threads beside the caller: one thread copies about 10 GB/s, four
 * together outrun the DMA. */
#define WORKERS_DEFAULT     3
#define WORKERS_MAX         15
/* Copies up to this size go to the driver (staging.h). Measured on the
 * H100 host: with the ring from 256 KiB up, 1 MiB copies to the host ran
 * at 1.57x NVIDIA's (1.06x to the device); 512 KiB keeps the smallest
 * staged copy at two chunks, whose host copy and DMA overlap. */
#define STAGING_MIN_DEFAULT ((size_t)512 << 10)
/* How long a thread spins on a staging buffer's event before the driver's
 * wait: a chunk's DMA takes 40 us to 1 ms; longer means the stream is
 * still busy with earlier work, and then the thread should not burn a core. */
#define SLOT_SPIN_NS        (2 * 1000 * 1000LL)
/* How long an idle copy thread spins for the next part before it sleeps:
 * the next chunk of the same copy follows within microseconds. */
#define WORKER_SPIN_NS      (100 * 1000LL)

struct ring {
  pthread_mutex_t lock;
  int nslots;          /* buffers made so far */
  void *buf[SLOTS];    /* CHUNK bytes each, cuMemHostAlloc(PORTABLE) */
  CUevent ev[SLOTS];   /* recorded after the last DMA that used buf[i] */
  bool pending[SLOTS]; /* ev[i] recorded and not yet seen complete */
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled;
static size_t staging_min = STAGING_MIN_DEFAULT;
/* Non-temporal stores (ntcopy.h): always into a staging buffer, which only
 * the DMA reads; into the application's memory from copies of this size
 * on, which outgrow the caches (0: never). CUDAEV_STAGING_NT=0 turns both
 * off. */
#define NT_D2H_MIN ((size_t)8 << 20)
static bool nt_h2d = true;
static size_t nt_d2h_min = NT_D2H_MIN;
static int nrings;
static struct ring *rings;

static void init(void) {
  if (cudaev__env_off("CUDAEV_STAGING")) return;
  staging_min = (size_t)cudaev__env_num("CUDAEV_STAGING_MIN", (long long)CUDAEV_STAGING_MIN,
                                        1LL << 40, (long long)STAGING_MIN_DEFAULT);
  if (cudaev__env_off("CUDAEV_STAGING_NT")) {
    nt_h2d = false;
    nt_d2h_min = 0;
  }
  struct ring *r = calloc((size_t)cudaev__rt.device_count, sizeof *r);
  if (r == NULL) return;
  for (int i = 0; i < cudaev__rt.device_count; i++) pthread_mutex_init(&r[i].lock, NULL);
  rings = r;
  nrings = cudaev__rt.device_count;
  enabled = true;
}

/* ---- host copies on several threads --------------------------------------- */

/* One job at a time: a copy is cut into PART-sized parts that the caller
 * and the copy threads claim from `next`, whose high half is the job's
 * generation, so a thread that is late for a job can never claim a part of
 * the next one. The job's fields change only once every part of the
 * previous job is done. */
static struct {
  pthread_once_t once;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int nworkers;
  atomic_flag busy;      /* a caller owns the job */
  atomic_uint gen;       /* bumped for each job */
  _Atomic uint64_t next; /* gen << 32 | next part to claim */
  atomic_size_t done;    /* parts finished */
  atomic_int sleepers;   /* threads waiting on cv */
  char *dst;
  const char *src;
  size_t len;
  bool stream;          /* non-temporal stores (ntcopy.h) */
  atomic_size_t nparts; /* read before a part is claimed, so atomic */
} pool = {.once = PTHREAD_ONCE_INIT,
          .mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER,
          .busy = ATOMIC_FLAG_INIT};

/* `stream`: with non-temporal stores (ntcopy.h). */
static void copy_one(void *dst, const void *src, size_t len, bool stream) {
  if (stream)
    cudaev__nt_copy(dst, src, len);
  else
    memcpy(dst, src, len);
}

static void run_parts(unsigned gen) {
  uint64_t v = atomic_load_explicit(&pool.next, memory_order_acquire);
  for (;;) {
    if ((unsigned)(v >> 32) != gen) return;
    size_t i = (size_t)(uint32_t)v;
    if (i >= atomic_load_explicit(&pool.nparts, memory_order_relaxed)) return;
    if (!atomic_compare_exchange_weak_explicit(&pool.next, &v, v + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    size_t off = i * PART, n = pool.len - off < PART ? pool.len - off : PART;
    copy_one(pool.dst + off, pool.src + off, n, pool.stream);
    atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
    v = atomic_load_explicit(&pool.next, memory_order_acquire);
  }
}

static void *worker(void *arg) {
  (void)arg;
  unsigned seen = atomic_load(&pool.gen);
  for (;;) {
    unsigned g;
    long long until = cudaev__mono_ns() + WORKER_SPIN_NS;
    while ((g = atomic_load(&pool.gen)) == seen) {
      if (cudaev__mono_ns() < until) {
        for (int i = 0; i < 64; i++) cudaev__cpu_relax();
        continue;
      }
      pthread_mutex_lock(&pool.mu);
      atomic_fetch_add(&pool.sleepers, 1);
      while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.cv, &pool.mu);
      atomic_fetch_sub(&pool.sleepers, 1);
      pthread_mutex_unlock(&pool.mu);
    }
    seen = g;
    run_parts(g);
  }
  return NULL;
}

/* The copy threads never take the application's signals. */
static void pool_start(void) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  long max = (long)cudaev__env_num("CUDAEV_STAGING_THREADS", 0, WORKERS_MAX, WORKERS_DEFAULT);
  int want = (int)(ncpu - 1 < max ? ncpu - 1 : max);
  if (want < 0) want = 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (int i = 0; i < want; i++) {
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    bool ok = pthread_create(&t, &a, worker, NULL) == 0;
    pthread_attr_destroy(&a);
    if (!ok) break;
    pool.nworkers++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void host_copy(void *dst, const void *src, size_t len, bool stream) {
  size_t nparts = (len + PART - 1) / PART;
  if (nparts < 2) {
    copy_one(dst, src, len, stream);
    return;
  }
  pthread_once(&pool.once, pool_start);
  if (pool.nworkers == 0 || atomic_flag_test_and_set(&pool.busy)) {
    copy_one(dst, src, len, stream);
    return;
  }
  pool.dst = dst;
  pool.src = src;
  pool.len = len;
  pool.stream = stream;
  atomic_store_explicit(&pool.nparts, nparts, memory_order_relaxed);
  atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
  unsigned g = atomic_load_explicit(&pool.gen, memory_order_relaxed) + 1;
  atomic_store_explicit(&pool.next, (uint64_t)g << 32, memory_order_release);
  /* Sequentially consistent store and load: either a thread about to
   * sleep sees the new generation, or this sees it sleeping and wakes it. */
  atomic_store(&pool.gen, g);
  if (atomic_load(&pool.sleepers) > 0) {
    pthread_mutex_lock(&pool.mu);
    pthread_cond_broadcast(&pool.cv);
    pthread_mutex_unlock(&pool.mu);
  }
  run_parts(g);
  while (atomic_load_explicit(&pool.done, memory_order_acquire) < nparts) cudaev__cpu_relax();
  atomic_flag_clear(&pool.busy);
}

/* ---- which copies the ring takes ------------------------------------------ */

/* Host memory the driver knows nothing of: not pinned, registered, managed
 * or device memory. (cuPointerGetAttributes answers an unknown pointer
 * with a memory type of 0 instead of an error.) */
static bool pageable(const void *p) {
  unsigned long long type = 0;
  CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
  void *data[] = {&type};
  return cudaev__drv.cuPointerGetAttributes(1, a, data, (CUdeviceptr)p) == CUDA_SUCCESS &&
         type == 0;
}

/* [p, p + n) lies inside one device (not managed) allocation. */
static bool device_range(const void *p, size_t n) {
  unsigned long long type = 0, managed = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                             CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                             CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *data[] = {&type, &managed, &start, &size};
  if (cudaev__drv.cuPointerGetAttributes(4, a, data, (CUdeviceptr)p) != CUDA_SUCCESS) return false;
  CUdeviceptr d = (CUdeviceptr)p;
  return type == CU_MEMORYTYPE_DEVICE && managed == 0 && start != 0 && d >= start &&
         n <= size - (size_t)(d - start);
}

/* The stream is not capturing and belongs to the current context, which
 * is device d's primary context. */
static int ring_device(CUstream st) {
  CUstreamCaptureStatus cs;
  if (cudaev__drv.cuStreamIsCapturing(st, &cs) != CUDA_SUCCESS ||
      cs != CU_STREAM_CAPTURE_STATUS_NONE)
    return -1;
  CUcontext cur = NULL;
  if (cudaev__drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur == NULL) return -1;
  if (st != NULL && st != CU_STREAM_LEGACY && st != CU_STREAM_PER_THREAD) {
    /* A green context's stream names no CUcontext: it goes to the driver. */
    CUcontext sc = NULL;
    CUgreenCtx green = NULL;
    if (cudaev__drv.cuStreamGetCtx(st, &sc, &green) != CUDA_SUCCESS || sc != cur) return -1;
  }
  for (int i = 0; i < nrings; i++)
    if (atomic_load_explicit(&cudaev__rt.devices[i].primary, memory_order_acquire) == cur) return i;
  return -1;
}

/* ---- the ring ---------------------------------------------------------------- */

/* Makes buffers up to `want`; returns how many there are. A refusal of the
 * driver (pinned memory is scarce) leaves the ring smaller. */
static int grow(struct ring *g, int want) {
  if (g->nslots >= want) return g->nslots;
  /* Pinned allocation is one of the calls a stream capture in global mode
   * forbids on this thread (it would invalidate the capture); the ring's
   * own buffers are no part of any capture, so relaxed mode is borrowed
   * for them, as the runtime documents for libraries. */
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  while (g->nslots < want) {
    int i = g->nslots;
    void *p = NULL;
    CUevent e = NULL;
    if (cudaev__drv.cuMemHostAlloc(&p, CHUNK, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) break;
    if (cudaev__drv.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
      cudaev__drv.cuMemFreeHost(p);
      break;
    }
    g->buf[i] = p;
    g->ev[i] = e;
    g->pending[i] = false;
    g->nslots = i + 1;
  }
  cudaev__capture_restore(mode);
  return g->nslots;
}

/* Waits until buffer i is no longer read or written by a DMA. */
static CUresult slot_wait(struct ring *g, int i) {
  if (!g->pending[i]) return CUDA_SUCCESS;
  CUresult r = cudaev__wait_event_within(g->ev[i], SLOT_SPIN_NS);
  if (r == CUDA_SUCCESS) g->pending[i] = false;
  return r;
}

/* Marks buffer i as used by the DMA just enqueued. If the event cannot be
 * recorded, nothing would tell when the DMA is done: the stream is waited
 * for instead. */
static CUresult slot_record(struct ring *g, int i, CUstream st) {
  CUresult r = cudaev__drv.cuEventRecord(g->ev[i], st);
  if (r == CUDA_SUCCESS) {
    g->pending[i] = true;
    return r;
  }
  (void)cudaev__drv.cuStreamSynchronize(st);
  return r;
}

/* Small copies are cut into about four chunks so that host copies and
 * DMAs overlap, each of at least two parts so that two threads share its
 * host copy; large ones into CHUNK. */
static size_t chunk_for(size_t count) {
  size_t c = (count / 4 + PART - 1) / PART * PART;
  return c < 2 * PART ? 2 * PART : c > CHUNK ? CHUNK : c;
}

static CUresult h2d(struct ring *g, int nslots, CUdeviceptr dst, const char *src, size_t count,
                    CUstream st, bool sync) {
  size_t chunk = chunk_for(count);
  int last = -1;
  CUresult r;
  for (size_t off = 0, k = 0; off < count; off += chunk, k++) {
    int i = (int)(k % (size_t)nslots);
    size_t n = count - off < chunk ? count - off : chunk;
    if ((r = slot_wait(g, i)) != CUDA_SUCCESS) return r;
    host_copy(g->buf[i], src + off, n, nt_h2d);
    if ((r = cudaev__drv.cuMemcpyHtoDAsync(dst + off, g->buf[i], n, st)) != CUDA_SUCCESS) return r;
    if ((r = slot_record(g, i, st)) != CUDA_SUCCESS) return r;
    last = i;
  }
  /* The DMAs run in stream order: the last one done means all are. */
  return sync && last >= 0 ? slot_wait(g, last) : CUDA_SUCCESS;
}

static CUresult d2h(struct ring *g, int nslots, char *dst, CUdeviceptr src, size_t count,
                    CUstream st) {
  size_t chunk = chunk_for(count), nchunks = (count + chunk - 1) / chunk, issued = 0;
  CUresult r;
  for (size_t k = 0; k < nchunks; k++) {
    for (; issued < nchunks && issued < k + (size_t)nslots; issued++) {
      int i = (int)(issued % (size_t)nslots);
      size_t off = issued * chunk, n = count - off < chunk ? count - off : chunk;
      if ((r = slot_wait(g, i)) != CUDA_SUCCESS) return r;
      if ((r = cudaev__drv.cuMemcpyDtoHAsync(g->buf[i], src + off, n, st)) != CUDA_SUCCESS)
        return r;
      if ((r = slot_record(g, i, st)) != CUDA_SUCCESS) return r;
    }
    int i = (int)(k % (size_t)nslots);
    size_t off = k * chunk, n = count - off < chunk ? count - off : chunk;
    if ((r = slot_wait(g, i)) != CUDA_SUCCESS) return r;
    host_copy(dst + off, g->buf[i], n, nt_d2h_min != 0 && count >= nt_d2h_min);
  }
  return CUDA_SUCCESS;
}

bool cudaev__staged_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                         CUstream st, bool sync, CUresult *r) {
  pthread_once(&once, init);
  if (!enabled || count <= staging_min) return false;
  /* With cudaMemcpyDefault the destination's answer gives the direction,
   * and for a copy to the host it is already the pageable check. */
  bool to_device, dst_pageable = false;
  if (kind == cudaMemcpyHostToDevice)
    to_device = true;
  else if (kind == cudaMemcpyDeviceToHost)
    to_device = false;
  else if (kind == cudaMemcpyDefault)
    to_device = !(dst_pageable = pageable(dst));
  else
    return false;
  if (to_device ? !pageable(src) || !device_range(dst, count)
                : !(dst_pageable || pageable(dst)) || !device_range(src, count))
    return false;
  int d = ring_device(st);
  if (d < 0) return false;
  struct ring *g = &rings[d];
  /* A ring busy with another thread's copy is not waited for: that copy
   * may wait for work this thread has yet to enqueue. */
  if (pthread_mutex_trylock(&g->lock) != 0) return false;
  size_t nchunks = (count + chunk_for(count) - 1) / chunk_for(count);
  int nslots = grow(g, nchunks < SLOTS ? (int)nchunks : SLOTS);
  if (nslots == 0) {
    pthread_mutex_unlock(&g->lock);
    return false;
  }
  /* The ring's event waits are calls a stream capture in global mode (on
   * this thread or another) forbids; the copy itself is not part of any
   * capture (ring_device refused a capturing stream), and NVIDIA's runtime
   * copies pageable memory during such a capture: relaxed mode is
   * borrowed for the copy, as for the buffers. */
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  *r = to_device ? h2d(g, nslots, (CUdeviceptr)dst, src, count, st, sync)
                 : d2h(g, nslots, dst, (CUdeviceptr)src, count, st);
  cudaev__capture_restore(mode);
  pthread_mutex_unlock(&g->lock);
  return true;
}

void cudaev__staging_reset(int device) {
  pthread_once(&once, init);
  if (!enabled || device < 0 || device >= nrings) return;
  struct ring *g = &rings[device];
  pthread_mutex_lock(&g->lock);
  g->nslots = 0;
  pthread_mutex_unlock(&g->lock);
}
