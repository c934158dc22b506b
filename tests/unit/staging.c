/* The pinned staging ring for pageable copies (src/staging.c) and the
 * spin-then-sleep waits (src/wait.c) on a fake driver whose "device" is a
 * host array and whose DMAs run late: each waits in its stream's queue
 * until an event query or a synchronize lets it run. A ring that refilled
 * a buffer before its DMA ran would copy the wrong bytes. */
#include <criterion/criterion.h>

#include "fake_driver.h"

CUDAEV_DECLARE_VARIANT(cudaMemcpy, _ptds);

#define DEV_SIZE ((size_t)80 << 20)
static unsigned char *devmem;

/* ---- pointers ---- */
#define MAX_PINNED 64
static void *pinned[MAX_PINNED];
static int npinned;
static CUresult fake_host_alloc_track(void **p, size_t n, unsigned flags) {
  CUresult r = fake_host_alloc(p, n, flags);
  if (r == CUDA_SUCCESS && npinned < MAX_PINNED) pinned[npinned++] = *p;
  return r;
}
static bool is_pinned(uintptr_t p) {
  for (int i = 0; i < npinned; i++)
    if (p >= (uintptr_t)pinned[i] && p < (uintptr_t)pinned[i] + ((size_t)2 << 20)) return true;
  return false;
}
static CUresult fake_attrs(unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p) {
  bool dev = p >= (uintptr_t)devmem && p < (uintptr_t)devmem + DEV_SIZE;
  for (unsigned i = 0; i < n; i++) {
    switch (a[i]) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned *)data[i] = dev ? CU_MEMORYTYPE_DEVICE : is_pinned(p) ? CU_MEMORYTYPE_HOST : 0;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data[i] = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(CUdeviceptr *)data[i] = dev ? (CUdeviceptr)devmem : 0;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data[i] = dev ? DEV_SIZE : 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

/* ---- one queue of late operations (all streams share it: stream order
 * is kept, and more than that) ---- */
#define QMAX 4096
struct op {
  int kind; /* 0 copy, 1 event */
  void *dst;
  const void *src;
  size_t n;
  CUevent ev;
};
static struct op q[QMAX];
static size_t qhead, qtail;
static size_t ev_pos[64]; /* per event: where its last record sits in the queue */
static int nevents;
static int plain_calls, staged_dmas, queries, syncs;

static void run_one(void) {
  struct op *o = &q[qhead++ % QMAX];
  if (o->kind == 0) memcpy(o->dst, o->src, o->n);
}
static void run_all(void) {
  while (qhead < qtail) run_one();
}
static CUresult push(int kind, void *dst, const void *src, size_t n, CUevent ev) {
  cr_assert(qtail - qhead < QMAX);
  q[qtail++ % QMAX] = (struct op){kind, dst, src, n, ev};
  return CUDA_SUCCESS;
}
static CUresult fake_htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st) {
  (void)st;
  staged_dmas++;
  return push(0, (void *)d, s, n, NULL);
}
static CUresult fake_dtoh_async(void *d, CUdeviceptr s, size_t n, CUstream st) {
  (void)st;
  staged_dmas++;
  return push(0, d, (const void *)s, n, NULL);
}
static CUresult fake_htod(CUdeviceptr d, const void *s, size_t n) {
  plain_calls++;
  if (d + n > (CUdeviceptr)devmem + DEV_SIZE) return CUDA_ERROR_INVALID_VALUE;
  run_all();
  memcpy((void *)d, s, n);
  return CUDA_SUCCESS;
}
static CUresult fake_dtoh(void *d, CUdeviceptr s, size_t n) {
  plain_calls++;
  run_all();
  memcpy(d, (const void *)s, n);
  return CUDA_SUCCESS;
}
static CUresult fake_event_create(CUevent *e, unsigned flags) {
  (void)flags;
  cr_assert(nevents < 64);
  *e = (CUevent)(uintptr_t)(0x100000 + 16 * ++nevents);
  return CUDA_SUCCESS;
}
static int ev_index(CUevent e) { return (int)(((uintptr_t)e - 0x100000) / 16); }
static CUresult fake_record(CUevent e, CUstream st) {
  (void)st;
  CUresult r = push(1, NULL, NULL, 0, e);
  ev_pos[ev_index(e)] = qtail;
  return r;
}
/* A query lets one late operation run. */
static CUresult fake_event_query(CUevent e) {
  queries++;
  if (qhead < qtail) run_one();
  return qhead >= ev_pos[ev_index(e)] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult fake_event_sync(CUevent e) {
  syncs++;
  while (qhead < ev_pos[ev_index(e)]) run_one();
  return CUDA_SUCCESS;
}
static CUresult fake_stream_sync(CUstream s) {
  (void)s;
  syncs++;
  run_all();
  return CUDA_SUCCESS;
}
static CUresult fake_stream_query(CUstream s) {
  (void)s;
  queries++;
  if (qhead < qtail) run_one();
  return qhead < qtail ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
static CUresult fake_ctx_sync(CUcontext c) {
  (void)c;
  syncs++;
  run_all();
  return CUDA_SUCCESS;
}
static CUstreamCaptureStatus capture_status;
static CUresult fake_is_capturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = capture_status;
  return CUDA_SUCCESS;
}
static unsigned ctx_flags;
static CUresult fake_ctx_flags(unsigned *f) {
  *f = ctx_flags;
  return CUDA_SUCCESS;
}

static void install(void) {
  static struct cudaev_driver fake;
  fake_driver_loop(&fake);
  fake.cuMemHostAlloc = fake_host_alloc_track;
  fake.cuPointerGetAttributes = fake_attrs;
  fake.cuMemcpyHtoDAsync = fake_htod_async;
  fake.cuMemcpyDtoHAsync = fake_dtoh_async;
  fake.cuMemcpyHtoD = fake_htod;
  fake.cuMemcpyDtoH = fake_dtoh;
  fake.cuEventCreate = fake_event_create;
  fake.cuEventRecord = fake_record;
  fake.cuEventQuery = fake_event_query;
  fake.cuEventSynchronize = fake_event_sync;
  fake.cuStreamSynchronize = fake_stream_sync;
  fake.cuStreamQuery = fake_stream_query;
  fake.cuCtxSynchronize = fake_ctx_sync;
  fake.cuStreamIsCapturing = fake_is_capturing;
  fake.cuCtxGetFlags = fake_ctx_flags;
  cudaev__driver_install(&fake, 13000);
  devmem = calloc(1, DEV_SIZE);
  cr_assert(devmem != NULL);
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7 + (i >> 9));
}

static const size_t sizes[] = {((size_t)1 << 20) + 1, ((size_t)3 << 20) + 7,
                               ((size_t)37 << 20) + 3};

Test(staging, host_to_device_sync_is_staged_and_exact) {
  install();
  unsigned char *src = malloc(DEV_SIZE);
  fill(src, DEV_SIZE, 3);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i], o = i * 5 + 1;
    memset(devmem, 0, DEV_SIZE);
    int before = staged_dmas;
    cr_assert_eq(cudaMemcpy(devmem + o, src + o + 2, n, cudaMemcpyHostToDevice), cudaSuccess);
    cr_expect_gt(staged_dmas, before + 1, "size %zu went through several DMAs", n);
    cr_expect_eq(qhead, qtail, "cudaMemcpy waited for its DMAs");
    cr_expect_eq(memcmp(devmem + o, src + o + 2, n), 0, "size %zu", n);
    cr_expect_eq(devmem[o - 1], 0);
    cr_expect_eq(devmem[o + n], 0);
  }
  cr_expect_eq(plain_calls, 0);
  free(src);
}

Test(staging, host_to_device_async_source_reusable_at_return) {
  install();
  size_t n = ((size_t)40 << 20) + 11;
  unsigned char *src = malloc(n), *want = malloc(n);
  fill(src, n, 9);
  memcpy(want, src, n);
  cr_assert_eq(cudaMemcpyAsync(devmem + 3, src, n, cudaMemcpyHostToDevice, NULL), cudaSuccess);
  memset(src, 0xab, n);
  cr_assert_eq(cudaStreamSynchronize(NULL), cudaSuccess);
  cr_expect_eq(memcmp(devmem + 3, want, n), 0);
  free(src);
  free(want);
}

Test(staging, device_to_host_is_complete_at_return) {
  install();
  fill(devmem, DEV_SIZE, 5);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    unsigned char *dst = calloc(1, n + 16);
    cr_assert_eq(cudaMemcpyAsync(dst + 1, devmem + 7 + i, n, cudaMemcpyDeviceToHost, NULL),
                 cudaSuccess);
    cr_expect_eq(memcmp(dst + 1, devmem + 7 + i, n), 0, "size %zu", n);
    cr_expect_eq(dst[0], 0);
    cr_expect_eq(dst[n + 1], 0);
    free(dst);
  }
  /* cudaMemcpyDefault finds the direction from the pointers. */
  unsigned char *dst = calloc(1, sizes[1]);
  cr_assert_eq(cudaMemcpy_ptds(dst, devmem + 1, sizes[1], cudaMemcpyDefault), cudaSuccess);
  cr_expect_eq(memcmp(dst, devmem + 1, sizes[1]), 0);
  free(dst);
  cr_expect_eq(plain_calls, 0);
}

Test(staging, what_the_ring_does_not_take_goes_to_the_driver) {
  install();
  unsigned char *src = calloc(1, (size_t)4 << 20);
  /* 512 KiB: at the threshold */
  cr_assert_eq(cudaMemcpy(devmem, src, (size_t)512 << 10, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_eq(plain_calls, 1);
  /* past the device allocation */
  cr_assert_eq(cudaMemcpy(devmem + DEV_SIZE - ((size_t)2 << 20), src, (size_t)3 << 20,
                          cudaMemcpyHostToDevice),
               cudaErrorInvalidValue);
  cr_expect_eq(plain_calls, 2);
  /* a capturing stream */
  capture_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  cr_assert_eq(cudaMemcpy(devmem, src, (size_t)3 << 20, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_eq(plain_calls, 3);
  capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
  /* pinned host memory (the ring's own buffers are pinned) */
  void *pin;
  cr_assert_eq(cudaev__drv.cuMemHostAlloc(&pin, (size_t)2 << 20, 0), CUDA_SUCCESS);
  cr_assert_eq(cudaMemcpy(devmem, pin, (size_t)2 << 20, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_eq(plain_calls, 4);
  cr_expect_eq(staged_dmas, 0);
  free(src);
}

Test(wait, blocking_event_spins_then_sleeps) {
  install();
  setenv("CUDAEV_BLOCKING_SPIN_US", "1000000", 1);
  cudaEvent_t plain, blocking;
  cr_assert_eq(cudaEventCreate(&plain), cudaSuccess);
  cr_assert_eq(cudaEventCreateWithFlags(&blocking, cudaEventBlockingSync), cudaSuccess);
  unsigned char *src = calloc(1, 64);
  push(0, devmem, src, 64, NULL);
  push(0, devmem, src, 64, NULL);
  cr_assert_eq(cudaEventRecord(plain, NULL), cudaSuccess);
  cr_assert_eq(cudaEventSynchronize(plain), cudaSuccess);
  cr_expect_eq(queries, 0, "a default event goes to the driver's wait");
  cr_expect_eq(syncs, 1);
  push(0, devmem, src, 64, NULL);
  push(0, devmem, src, 64, NULL);
  cr_assert_eq(cudaEventRecord(blocking, NULL), cudaSuccess);
  cr_assert_eq(cudaEventSynchronize(blocking), cudaSuccess);
  cr_expect_geq(queries, 2, "a BlockingSync event is polled first");
  cr_expect_eq(syncs, 1, "and found done within the window");
  /* Under blocking-sync scheduling the stream and device waits poll too
   * (flags set as cudaSetDeviceFlags would: the cached answer is dropped). */
  ctx_flags = CU_CTX_SCHED_BLOCKING_SYNC;
  atomic_fetch_add(&cudaev__rt.flags_gen, 1);
  push(0, devmem, src, 64, NULL);
  queries = 0;
  cr_assert_eq(cudaStreamSynchronize(NULL), cudaSuccess);
  cr_expect_geq(queries, 1);
  cr_expect_eq(syncs, 1);
  cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
  cr_expect_eq(syncs, 2, "cuCtxSynchronize always has the last word");
  free(src);
}

Test(wait, zero_window_goes_to_the_driver) {
  install();
  setenv("CUDAEV_BLOCKING_SPIN_US", "0", 1);
  ctx_flags = CU_CTX_SCHED_BLOCKING_SYNC;
  unsigned char *src = calloc(1, 64);
  push(0, devmem, src, 64, NULL);
  push(0, devmem, src, 64, NULL);
  cr_assert_eq(cudaStreamSynchronize(NULL), cudaSuccess);
  cr_expect_eq(queries, 1);
  cr_expect_eq(syncs, 1);
  free(src);
}

/* CUDAEV_STAGING_MIN moves the threshold (never below 64 KiB) and
 * CUDAEV_STAGING_THREADS=0 leaves the host copies to the caller; the
 * bytes stay exact either way. */
Test(staging, the_threshold_and_the_threads_follow_the_environment) {
  setenv("CUDAEV_STAGING_MIN", "262144", 1);
  setenv("CUDAEV_STAGING_THREADS", "0", 1);
  install();
  size_t n = (size_t)1 << 20;
  unsigned char *src = malloc(n), *back = calloc(1, n);
  fill(src, n, 11);
  cr_assert_eq(cudaMemcpy(devmem + 5, src, n, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_eq(plain_calls, 0, "1 MiB is over a threshold of 256 KiB");
  cr_expect_gt(staged_dmas, 0);
  cr_assert_eq(cudaMemcpy(back, devmem + 5, n, cudaMemcpyDeviceToHost), cudaSuccess);
  cr_expect_eq(memcmp(back, src, n), 0);
  cr_assert_eq(cudaMemcpy(devmem, src, (size_t)256 << 10, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_eq(plain_calls, 1, "256 KiB is at the threshold");
  free(src);
  free(back);
}

Test(staging, a_threshold_below_the_floor_is_ignored) {
  setenv("CUDAEV_STAGING_MIN", "4096", 1);
  install();
  unsigned char *src = calloc(1, (size_t)1 << 20);
  cr_assert_eq(cudaMemcpy(devmem, src, (size_t)512 << 10, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_eq(plain_calls, 1, "out of range: the default threshold (512 KiB) holds");
  cr_assert_eq(cudaMemcpy(devmem, src, (size_t)1 << 20, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_eq(plain_calls, 1, "1 MiB goes through the ring");
  free(src);
}
