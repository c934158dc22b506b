/* The pinned host memory pool (src/hostpool.c) on a fake driver
 * (fake_host.h): what cudaMallocHost / cudaHostAlloc / cudaFreeHost hand
 * out, which driver calls they make in steady state, the arenas per flag
 * set, bad frees, the switch, device reset, the idle purge, driver errors
 * and fork. */
#include <criterion/criterion.h>

#include "fake_host.h"
#include "hostpool.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static void setup(void) {
  static struct cudaev_driver t;
  fake_driver_host(&t);
  cudaev__driver_install(&t, 13000);
}

TestSuite(hostpool, .init = setup);

static void *pinned(size_t n, unsigned flags) {
  void *p = NULL;
  cr_assert_eq(cudaHostAlloc(&p, n, flags), cudaSuccess, "cudaHostAlloc(%zu, %u)", n, flags);
  cr_assert_not_null(p);
  return p;
}

Test(hostpool, alloc_free_is_page_aligned_pinned_memory) {
  size_t sizes[] = {4 * KIB, 64 * MIB, 1, 5000, 100 * KIB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = NULL;
    cr_assert_eq(cudaMallocHost(&p, sizes[i]), cudaSuccess);
    cr_expect_eq((uintptr_t)p % 4096, 0, "%zu bytes: %p is not page-aligned", sizes[i], p);
    cr_expect_geq(fake_host_size_of(p), sizes[i], "the driver's allocation holds it");
    cr_expect_geq(fake_host_size_of((char *)p + sizes[i] - 1), 1, "to its last byte");
    unsigned f = 99;
    cr_expect_eq(cudaHostGetFlags(&f, p), cudaSuccess);
    cr_expect_eq(f, 0);
    memset(p, 0x5a, sizes[i]);
    int syncs = atomic_load(&fake_host_syncs);
    cr_expect_eq(cudaFreeHost(p), cudaSuccess);
    cr_expect_eq(atomic_load(&fake_host_syncs), syncs + 1, "a free waits for the GPU");
  }
  cr_expect_eq(atomic_load(&fake_host_frees), 0, "freed memory stays in the pool");
  cr_expect_eq(cudaGetLastError(), cudaSuccess);
}

Test(hostpool, steady_state_makes_no_driver_allocation) {
  void *a = pinned(4 * KIB, 0), *b = pinned(64 * MIB, 0);
  cr_assert_eq(cudaFreeHost(a), cudaSuccess);
  cr_assert_eq(cudaFreeHost(b), cudaSuccess);
  int allocs = atomic_load(&fake_host_allocs), frees = atomic_load(&fake_host_frees);
  for (int i = 0; i < 1000; i++) {
    void *p = pinned(4 * KIB, 0);
    cr_expect_eq(p, a, "the same page again");
    cr_assert_eq(cudaFreeHost(p), cudaSuccess);
  }
  for (int i = 0; i < 20; i++) {
    void *p = pinned(64 * MIB, 0);
    cr_expect_eq(p, b);
    cr_assert_eq(cudaFreeHost(p), cudaSuccess);
  }
  cr_expect_eq(atomic_load(&fake_host_allocs), allocs);
  cr_expect_eq(atomic_load(&fake_host_frees), frees);
}

/* The driver's flags for a pooled chunk can be another allocation's (seen
 * on an H100): cudaHostGetFlags answers with the requested flags and the
 * driver's Mapped bit only. */
static CUresult lying_get_flags(unsigned *flags, void *p) {
  CUresult r = fake_host_get_flags(flags, p);
  if (r == CUDA_SUCCESS) *flags ^= CU_MEMHOSTALLOC_PORTABLE;
  return r;
}

Test(hostpool, get_flags_are_the_requested_ones) {
  for (unsigned f = 0; f < 8; f++) {
    void *p = pinned(1000, f);
    cudaev__drv.cuMemHostGetFlags = lying_get_flags;
    unsigned got = 99;
    cr_expect_eq(cudaHostGetFlags(&got, (char *)p + 10), cudaSuccess);
    cr_expect_eq(got, f, "flags 0x%x read back as 0x%x", f, got);
    cudaev__drv.cuMemHostGetFlags = fake_host_get_flags;
    cr_expect_eq(cudaFreeHost(p), cudaSuccess);
  }
}

Test(hostpool, one_arena_per_flag_set) {
  void *p[8];
  unsigned arena[8];
  for (unsigned f = 0; f < 8; f++) {
    p[f] = pinned(1000, f);
    cr_expect_eq(fake_host_last_flags, f, "the chunk has the flags asked for");
    unsigned got = 99;
    cr_expect_eq(cudaHostGetFlags(&got, p[f]), cudaSuccess);
    cr_expect_eq(got, f);
    arena[f] = cudaev__hostpool_arena(0, f);
    cr_expect_neq(arena[f], 0);
    for (unsigned g = 0; g < f; g++) cr_expect_neq(arena[f], arena[g], "flags %u and %u", f, g);
    void *d = NULL;
    cudaError_t e = cudaHostGetDevicePointer(&d, p[f], 0);
    if (f & cudaHostAllocMapped) {
      cr_expect_eq(e, cudaSuccess);
      cr_expect_eq(d, p[f]);
    } else {
      cr_expect_eq(e, cudaErrorInvalidValue, "the driver's answer for unmapped memory");
    }
  }
  for (unsigned f = 0; f < 8; f++) {
    void *q = pinned(1000, f);
    cr_expect_eq(cudaev__hostpool_arena(0, f), arena[f]);
    cr_expect_eq(cudaFreeHost(q), cudaSuccess);
    cr_expect_eq(cudaFreeHost(p[f]), cudaSuccess);
  }
}

Test(hostpool, driver_answers_for_any_byte) {
  char *p = pinned(64 * KIB, cudaHostAllocMapped);
  struct cudaPointerAttributes a;
  cr_expect_eq(cudaPointerGetAttributes(&a, p + 1000), cudaSuccess);
  cr_expect_eq(a.type, cudaMemoryTypeHost);
  cr_expect_eq(a.hostPointer, p + 1000);
  cr_expect_eq(cudaHostRegister(p, 4096, 0), cudaErrorHostMemoryAlreadyRegistered);
  cr_expect_eq(fake_host_registered, p, "cudaHostRegister reaches the driver unchanged");
  void *d = NULL;
  cr_expect_eq(cudaHostGetDevicePointer(&d, p, 0), cudaSuccess);
  cr_expect_eq(d, p);
  cr_expect_eq(cudaFreeHost(p), cudaSuccess);
}

Test(hostpool, interior_double_and_foreign_frees) {
  char *p = pinned(8 * KIB, 0);
  int frees = atomic_load(&fake_host_frees);
  cr_expect_eq(cudaFreeHost(p + 16), cudaErrorInvalidValue, "interior pointer");
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(atomic_load(&fake_host_frees), frees, "never passed on");
  cr_expect_eq(cudaFreeHost(p), cudaSuccess);
  cr_expect_eq(cudaFreeHost(p), cudaErrorInvalidValue, "double free");
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaFreeHost(p + 4096), cudaErrorInvalidValue, "interior of a freed one");
  cr_expect_eq(atomic_load(&fake_host_frees), frees);
  int local;
  cr_expect_eq(cudaFreeHost(&local), cudaErrorInvalidValue, "the driver's answer");
  cr_expect_eq(atomic_load(&fake_host_frees), frees + 1, "asked the driver");
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  /* Nothing was corrupted: the pool hands the page out again, once. */
  char *q = pinned(8 * KIB, 0), *r = pinned(8 * KIB, 0);
  cr_expect_eq(q, p);
  cr_expect_neq(r, p);
  cr_expect_eq(cudaFreeHost(q), cudaSuccess);
  cr_expect_eq(cudaFreeHost(r), cudaSuccess);
}

Test(hostpool, memory_from_the_driver_directly_is_freed_there) {
  void *p = NULL;
  cr_assert_eq(cudaev__drv.cuMemHostAlloc(&p, 4096, 0), CUDA_SUCCESS);
  pinned(4096, 0); /* the pool exists */
  int frees = atomic_load(&fake_host_frees);
  cr_expect_eq(cudaFreeHost(p), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_frees), frees + 1);
}

Test(hostpool, many_live_allocations) {
  enum { N = 3000 };
  static void *p[N];
  for (int i = 0; i < N; i++) p[i] = pinned(4 * KIB, 0);
  for (int i = 0; i < N; i += 2) cr_assert_eq(cudaFreeHost(p[i]), cudaSuccess, "%d", i);
  for (int i = 1; i < N; i += 2) cr_assert_eq(cudaFreeHost(p[i]), cudaSuccess, "%d", i);
  for (int i = 0; i < N; i++) cr_assert_eq(cudaFreeHost(p[i]), cudaErrorInvalidValue, "%d", i);
}

Test(hostpool, switched_off) {
  setenv("CUDAEV_HOST_POOL", "0", 1);
  void *p = pinned(1000, cudaHostAllocPortable);
  cr_expect_eq(fake_host_last_size, 1000, "the driver gets the request as it is");
  cr_expect_eq(fake_host_last_flags, CU_MEMHOSTALLOC_PORTABLE);
  cr_expect_eq(cudaev__hostpool_arena(0, cudaHostAllocPortable), 0);
  cr_expect_eq(cudaFreeHost(p), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_frees), 1);
  cr_expect_eq(cudaFreeHost(p), cudaErrorInvalidValue);
}

Test(hostpool, above_the_threshold_goes_to_the_driver) {
  void *p = pinned(CUDAEV_HOSTPOOL_MAX + 1, 0);
  cr_expect_eq(fake_host_last_size, CUDAEV_HOSTPOOL_MAX + 1);
  cr_expect_eq(cudaFreeHost(p), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_frees), 1);
  void *q = pinned(CUDAEV_HOSTPOOL_MAX, 0);
  cr_expect_eq(cudaFreeHost(q), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_frees), 1, "the largest pooled size stays");
}

Test(hostpool, reset_drops_the_contexts_chunks) {
  void *live = pinned(4 * KIB, 0), *cached = pinned(64 * MIB, 0);
  void *mapped = pinned(4 * KIB, cudaHostAllocMapped);
  cr_assert_eq(cudaFreeHost(cached), cudaSuccess);
  cr_assert_eq(cudaFreeHost(mapped), cudaSuccess);
  int allocs = atomic_load(&fake_host_allocs), frees = atomic_load(&fake_host_frees);
  cr_assert_eq(cudaDeviceReset(), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_frees), frees, "the reset freed them: no driver call");
  cr_expect_eq(cudaev__hostpool_arena(0, 0), 0, "arenas gone");
  void *a = pinned(4 * KIB, 0), *b = pinned(64 * MIB, 0), *c = pinned(4 * KIB, cudaHostAllocMapped);
  cr_expect_eq(atomic_load(&fake_host_allocs), allocs + 3, "new chunks from the driver");
  cr_expect(a != live && a != cached && a != mapped);
  cr_expect(b != live && b != cached && b != mapped);
  cr_expect(c != live && c != cached && c != mapped);
  cr_expect_geq(fake_host_size_of(a), 1, "in a chunk made after the reset");
  cr_expect_geq(fake_host_size_of(b), 1);
  /* A pointer from before the reset is the driver's to judge. */
  cr_expect_eq(cudaFreeHost(live), cudaErrorInvalidValue);
  cr_expect_eq(atomic_load(&fake_host_dead_frees), 1);
  cr_expect_eq(cudaFreeHost(a), cudaSuccess);
  cr_expect_eq(cudaFreeHost(b), cudaSuccess);
  cr_expect_eq(cudaFreeHost(c), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_dead_frees), 1, "no chunk freed twice");
}

static bool wait_for(atomic_int *v, int want, int ms) {
  for (int i = 0; i < ms && atomic_load(v) != want; i++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  return atomic_load(v) == want;
}

Test(hostpool, idle_memory_goes_back_to_the_driver) {
  setenv("CUDAEV_HOST_POOL_DECAY_MS", "20", 1);
  void *p[4] = {pinned(4 * KIB, 0), pinned(64 * MIB, 0), pinned(1 * MIB, cudaHostAllocMapped),
                pinned(12 * KIB, cudaHostAllocPortable)};
  for (int i = 0; i < 4; i++) cr_assert_eq(cudaFreeHost(p[i]), cudaSuccess);
  cr_expect(wait_for(&fake_host_frees, atomic_load(&fake_host_allocs), 3000),
            "%d of %d chunks back after 3 s", atomic_load(&fake_host_frees),
            atomic_load(&fake_host_allocs));
  cr_expect_eq(atomic_load(&fake_host_bad_frees), 0);
  /* And again, after the reaper went to sleep. */
  void *q = pinned(4 * KIB, 0);
  cr_expect_eq(atomic_load(&fake_host_allocs), 5);
  cr_assert_eq(cudaFreeHost(q), cudaSuccess);
  cr_expect(wait_for(&fake_host_frees, 5, 3000));
}

Test(hostpool, driver_errors_come_back) {
  void *p = (void *)1;
  atomic_store(&fake_host_refuse, CUDA_ERROR_OUT_OF_MEMORY);
  cr_expect_eq(cudaMallocHost(&p, 4 * KIB), cudaErrorMemoryAllocation);
  cr_expect_eq(p, (void *)1, "untouched");
  cr_expect_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
  cr_expect_eq(cudaMallocHost(&p, 64 * MIB), cudaErrorMemoryAllocation);
  atomic_store(&fake_host_refuse, CUDA_ERROR_NOT_PERMITTED);
  cr_expect_eq(cudaHostAlloc(&p, 4 * KIB, cudaHostAllocMapped), cudaErrorNotPermitted);
  atomic_store(&fake_host_refuse, CUDA_SUCCESS);
  cr_expect_eq(cudaMallocHost(&p, 4 * KIB), cudaSuccess);
  cr_expect_eq(cudaFreeHost(p), cudaSuccess);
}

static atomic_bool stop;
static void *churn(void *arg) {
  size_t n = (size_t)(uintptr_t)arg;
  while (!atomic_load(&stop)) {
    void *p = NULL;
    if (cudaMallocHost(&p, n) != cudaSuccess) return (void *)1;
    memset(p, 1, 64);
    if (cudaFreeHost(p) != cudaSuccess) return (void *)1;
  }
  return NULL;
}

/* In a fork child: pooled allocations and frees work (its reaper, started
 * by its first free, purges as often as the parent's). */
static int child_pairs(void) {
  alarm(20); /* a deadlock ends as SIGALRM */
  for (int i = 0; i < 200; i++) {
    void *p = NULL;
    if (cudaMallocHost(&p, i % 2 ? 4 * KIB : 2 * MIB) != cudaSuccess) return 1;
    memset(p, 2, 4096);
    if (cudaFreeHost(p) != cudaSuccess) return 2;
  }
  return atomic_load(&fake_host_bad_frees) == 0 ? 0 : 3;
}

Test(hostpool, fork_child_allocates_and_frees) {
  setenv("CUDAEV_HOST_POOL_DECAY_MS", "1", 1); /* the reaper purges often */
  cr_assert_eq(cudaFreeHost(pinned(4 * KIB, 0)), cudaSuccess);
  pthread_t th[2];
  atomic_store(&stop, false);
  pthread_create(&th[0], NULL, churn, (void *)(uintptr_t)(4 * KIB));
  pthread_create(&th[1], NULL, churn, (void *)(uintptr_t)(1 * MIB));
  for (int k = 0; k < 30; k++) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(child_pairs());
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status 0x%x", k, status);
  }
  atomic_store(&stop, true);
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(th[i], &r);
    cr_expect_null(r);
  }
}

/* A capture on a stream of the context: a pooled free must not synchronise
 * the context (the driver refuses that during a capture and invalidates
 * it), so the memory is held, not reused, until the capture is over; the
 * next free after it synchronises and gives it back. */
static atomic_int capturing;
static CUresult fake_begin_capture(CUstream s, CUstreamCaptureMode m) {
  (void)s;
  (void)m;
  atomic_store(&capturing, 1);
  return CUDA_SUCCESS;
}
static CUresult fake_is_capturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = atomic_load(&capturing) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
static CUresult fake_end_capture(CUstream s, CUgraph *g) {
  (void)s;
  atomic_store(&capturing, 0);
  *g = (CUgraph)(uintptr_t)0x100a00;
  return CUDA_SUCCESS;
}
static CUresult fake_stream_create(CUstream *s, unsigned flags) {
  (void)flags;
  *s = (CUstream)(uintptr_t)0x100c00;
  return CUDA_SUCCESS;
}
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static CUresult fake_exchange_mode(CUstreamCaptureMode *m) {
  CUstreamCaptureMode old = thread_mode;
  thread_mode = *m;
  *m = old;
  return CUDA_SUCCESS;
}
/* The driver refuses to synchronise a context with a capturing stream. */
static CUresult fake_sync_refused_in_capture(CUcontext c) {
  if (atomic_load(&capturing)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return fake_host_sync(c);
}
static void capture_joins_the_fake_driver(void) {
  /* The suite's set-up installed the fake driver. */
  cudaev__drv.cuStreamBeginCapture = fake_begin_capture;
  cudaev__drv.cuStreamIsCapturing = fake_is_capturing;
  cudaev__drv.cuStreamEndCapture = fake_end_capture;
  cudaev__drv.cuStreamCreate = fake_stream_create;
  cudaev__drv.cuThreadExchangeStreamCaptureMode = fake_exchange_mode;
  cudaev__drv.cuCtxSynchronize = fake_sync_refused_in_capture;
}

Test(hostpool, a_free_during_a_capture_is_held_until_it_ends) {
  capture_joins_the_fake_driver();
  cudaStream_t s;
  cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void *a = pinned(64 * KIB, 0);
  cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  int syncs = atomic_load(&fake_host_syncs);
  cr_expect_eq(cudaFreeHost(a), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_syncs), syncs, "no context synchronisation in a capture");
  void *b = pinned(64 * KIB, 0);
  cr_expect_neq(b, a, "held memory is not handed out again");
  cr_expect_eq(cudaFreeHost(b), cudaSuccess);
  cr_expect_eq(atomic_load(&fake_host_syncs), syncs);
  cudaGraph_t g;
  cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
  void *c = pinned(4 * KIB, 0);
  cr_expect_eq(cudaFreeHost(c), cudaSuccess);
  cr_expect_geq(atomic_load(&fake_host_syncs), syncs + 2, "its own and the held frees' sync");
  void *d = pinned(64 * KIB, 0), *e = pinned(64 * KIB, 0);
  cr_expect((d == a || d == b) && (e == a || e == b) && d != e, "both are reused after it");
  cr_expect_eq(cudaFreeHost(d), cudaSuccess);
  cr_expect_eq(cudaFreeHost(e), cudaSuccess);
  cr_expect_eq(cudaGetLastError(), cudaSuccess);
}

/* Where the driver forbids a pinned free (this thread's own capture in
 * global mode), the free fails as NVIDIA's does, with the driver's refusal,
 * and the memory stays allocated: freed again after the capture, it goes. */
Test(hostpool, a_free_the_capture_forbids_is_refused_and_stays_allocated) {
  capture_joins_the_fake_driver();
  cudaStream_t s;
  cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void *a = pinned(64 * KIB, 0);
  cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  cr_expect_eq(cudaFreeHost(a), cudaErrorStreamCaptureUnsupported);
  void *b = pinned(64 * KIB, 0);
  cr_expect_neq(b, a, "the refused free left it allocated");
  cudaGraph_t g;
  cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
  cr_expect_eq(cudaFreeHost(a), cudaSuccess);
  cr_expect_eq(cudaFreeHost(b), cudaSuccess);
  cr_expect_eq(cudaFreeHost(a), cudaErrorInvalidValue, "now it is freed");
}
