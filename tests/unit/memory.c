/* Memory Management, Unified Addressing and Peer Access on a fake driver:
 * the argument checks only the runtime makes, which driver entry point each
 * call reaches with which arguments, and how the driver's answers come back
 * (results, error codes, last error). */
#include <criterion/criterion.h>

#include "fake_driver.h"
#include "handle.h"

/* What the last driver call received. */
static struct {
  const char *fn;
  CUdeviceptr d, s;
  const void *hsrc;
  void *hdst;
  size_t n;
  CUstream st;
  unsigned flags;
  unsigned char uc;
  CUcontext c1, c2;
  CUmemLocation loc;
  int calls;
} got;
static CUresult next = CUDA_SUCCESS;

#define RECORD(name) (got.fn = (name), got.calls++)

static CUresult f_alloc(CUdeviceptr *p, size_t n) {
  RECORD("cuMemAlloc");
  got.n = n;
  *p = 0x107000;
  return next;
}
static CUresult f_free(CUdeviceptr p) {
  RECORD("cuMemFree");
  got.d = p;
  return next;
}
static CUresult f_host_alloc(void **p, size_t n, unsigned flags) {
  RECORD("cuMemHostAlloc");
  got.n = n;
  got.flags = flags;
  *p = (void *)0x108000;
  return next;
}
static CUresult f_free_host(void *p) {
  RECORD("cuMemFreeHost");
  got.hdst = p;
  return next;
}
static CUresult f_host_register(void *p, size_t n, unsigned flags) {
  RECORD("cuMemHostRegister");
  got.hdst = p;
  got.n = n;
  got.flags = flags;
  return next;
}
static CUresult f_host_dptr(CUdeviceptr *d, void *p, unsigned flags) {
  RECORD("cuMemHostGetDevicePointer");
  got.flags = flags;
  *d = (CUdeviceptr)p;
  return next;
}
static CUresult f_managed(CUdeviceptr *p, size_t n, unsigned flags) {
  RECORD("cuMemAllocManaged");
  got.n = n;
  got.flags = flags;
  *p = 0x109000;
  return next;
}
static CUresult f_htod(CUdeviceptr d, const void *s, size_t n) {
  RECORD("HtoD");
  got.d = d;
  got.hsrc = s;
  got.n = n;
  return next;
}
static CUresult f_htod_ptds(CUdeviceptr d, const void *s, size_t n) {
  RECORD("HtoD_ptds");
  got.d = d;
  got.hsrc = s;
  got.n = n;
  return next;
}
static CUresult f_dtoh(void *d, CUdeviceptr s, size_t n) {
  RECORD("DtoH");
  got.hdst = d;
  got.s = s;
  got.n = n;
  return next;
}
static CUresult f_dtoh_ptds(void *d, CUdeviceptr s, size_t n) {
  RECORD("DtoH_ptds");
  got.hdst = d;
  got.s = s;
  got.n = n;
  return next;
}
static CUresult f_dtod(CUdeviceptr d, CUdeviceptr s, size_t n) {
  RECORD("DtoD");
  got.d = d;
  got.s = s;
  got.n = n;
  return next;
}
static CUresult f_dtod_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  RECORD("DtoD_ptds");
  got.d = d;
  got.s = s;
  got.n = n;
  return next;
}
static CUresult f_memcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  RECORD("cuMemcpy");
  got.d = d;
  got.s = s;
  got.n = n;
  return next;
}
static CUresult f_memcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  RECORD("cuMemcpy_ptds");
  got.d = d;
  got.s = s;
  got.n = n;
  return next;
}
static CUresult f_htod_a(CUdeviceptr d, const void *s, size_t n, CUstream st) {
  RECORD("HtoDAsync");
  got.d = d;
  got.hsrc = s;
  got.n = n;
  got.st = st;
  return next;
}
static CUresult f_dtoh_a(void *d, CUdeviceptr s, size_t n, CUstream st) {
  RECORD("DtoHAsync");
  got.hdst = d;
  got.s = s;
  got.n = n;
  got.st = st;
  return next;
}
static CUresult f_dtod_a(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  RECORD("DtoDAsync");
  got.d = d;
  got.s = s;
  got.n = n;
  got.st = st;
  return next;
}
static CUresult f_memcpy_a(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  RECORD("cuMemcpyAsync");
  got.d = d;
  got.s = s;
  got.n = n;
  got.st = st;
  return next;
}
static CUresult f_memset(CUdeviceptr d, unsigned char uc, size_t n) {
  RECORD("cuMemsetD8");
  got.d = d;
  got.uc = uc;
  got.n = n;
  return next;
}
static CUresult f_memset_ptds(CUdeviceptr d, unsigned char uc, size_t n) {
  RECORD("cuMemsetD8_ptds");
  got.d = d;
  got.uc = uc;
  got.n = n;
  return next;
}
static CUresult f_memset_a(CUdeviceptr d, unsigned char uc, size_t n, CUstream st) {
  RECORD("cuMemsetD8Async");
  got.d = d;
  got.uc = uc;
  got.n = n;
  got.st = st;
  return next;
}
static CUresult f_peer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  RECORD("cuMemcpyPeer");
  got.d = d;
  got.c1 = dc;
  got.s = s;
  got.c2 = sc;
  got.n = n;
  return next;
}
static CUresult f_prefetch(CUdeviceptr d, size_t n, CUmemLocation l, unsigned flags, CUstream st) {
  RECORD("cuMemPrefetchAsync");
  got.d = d;
  got.n = n;
  got.loc = l;
  got.flags = flags;
  got.st = st;
  return next;
}
static CUresult f_advise(CUdeviceptr d, size_t n, CUmem_advise a, CUmemLocation l) {
  RECORD("cuMemAdvise");
  got.d = d;
  got.n = n;
  got.flags = (unsigned)a;
  got.loc = l;
  return next;
}

/* Two devices, each with its own primary context (0x1000 + ordinal). */
static CUresult f_count_two(int *n) {
  *n = 2;
  return CUDA_SUCCESS;
}
static CUresult f_retain(CUcontext *c, CUdevice d) {
  *c = (CUcontext)(uintptr_t)(0x1000 + d);
  return CUDA_SUCCESS;
}

static int memsets_2d;
static CUresult f_memset_2d(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h) {
  (void)d, (void)pitch, (void)v, (void)w, (void)h;
  memsets_2d++;
  return CUDA_SUCCESS;
}

static void setup(void) {
  /* These tests check which driver entry point each call reaches with
   * which arguments; pinned memory through the pool is tested in
   * hostpool.c. */
  setenv("CUDAEV_HOST_POOL", "0", 1);
  struct cudaev_driver t;
  fake_driver_base(&t);
  t.cuDeviceGetCount = f_count_two;
  t.cuDevicePrimaryCtxRetain = f_retain;
  t.cuMemAlloc = f_alloc;
  t.cuMemFree = f_free;
  t.cuMemHostAlloc = f_host_alloc;
  t.cuMemFreeHost = f_free_host;
  t.cuMemHostRegister = f_host_register;
  t.cuMemHostGetDevicePointer = f_host_dptr;
  t.cuMemAllocManaged = f_managed;
  t.cuMemcpyHtoD = f_htod;
  t.cuMemcpyHtoD_ptds = f_htod_ptds;
  t.cuMemcpyDtoH = f_dtoh;
  t.cuMemcpyDtoH_ptds = f_dtoh_ptds;
  t.cuMemcpyDtoD = f_dtod;
  t.cuMemcpyDtoD_ptds = f_dtod_ptds;
  t.cuMemcpy = f_memcpy;
  t.cuMemcpy_ptds = f_memcpy_ptds;
  t.cuMemcpyHtoDAsync = f_htod_a;
  t.cuMemcpyDtoHAsync = f_dtoh_a;
  t.cuMemcpyDtoDAsync = f_dtod_a;
  t.cuMemcpyAsync = f_memcpy_a;
  t.cuMemsetD8 = f_memset;
  t.cuMemsetD8_ptds = f_memset_ptds;
  t.cuMemsetD8Async = f_memset_a;
  t.cuMemcpyPeer = f_peer;
  t.cuMemPrefetchAsync = f_prefetch;
  t.cuMemAdvise = f_advise;
  t.cuMemsetD2D8 = f_memset_2d;
  cudaev__driver_install(&t, 13000);
}

TestSuite(memory, .init = setup);

Test(memory, malloc_zero_and_null) {
  void *p = (void *)1;
  cr_expect_eq(cudaMalloc(&p, 0), cudaSuccess);
  cr_expect_null(p);
  cr_expect_eq(got.calls, 0, "size 0 never reaches cuMemAlloc");
  cr_expect_eq(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaMalloc(&p, 16), cudaSuccess);
  cr_expect_eq(got.n, 16);
  cr_expect_eq((uintptr_t)p, 0x107000);
  next = CUDA_ERROR_OUT_OF_MEMORY;
  cr_expect_eq(cudaMalloc(&p, 1ull << 50), cudaErrorMemoryAllocation);
  cr_expect_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
}

Test(memory, free_null_and_invalid) {
  cr_expect_eq(cudaFree(NULL), cudaSuccess);
  cr_expect_eq(got.calls, 0);
  cr_expect_not_null(fake_current, "cudaFree(0) makes a context current");
  next = CUDA_ERROR_INVALID_VALUE; /* what cuMemFree says of a freed pointer */
  cr_expect_eq(cudaFree((void *)0x107000), cudaErrorInvalidValue);
  cr_expect_eq(got.d, 0x107000);
  cr_expect_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
}

Test(memory, host_alloc_flags) {
  void *p = (void *)1;
  cr_expect_eq(cudaHostAlloc(&p, 64, 8), cudaErrorInvalidValue);
  cr_expect_eq(got.calls, 0);
  cr_expect_eq(cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocWriteCombined),
               cudaSuccess);
  cr_expect_eq(got.flags, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED);
  cr_expect_eq(cudaMallocHost(&p, 32), cudaSuccess);
  cr_expect_eq(got.flags, 0);
  cr_expect_eq(got.n, 32);
  cr_expect_eq(cudaMallocHost(&p, 0), cudaSuccess);
  cr_expect_null(p);
  cr_expect_eq(cudaHostAlloc(NULL, 8, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaFreeHost(NULL), cudaSuccess);
  cr_expect_eq(cudaFreeHost((void *)0x108000), cudaSuccess);
  cr_expect_eq(got.hdst, (void *)0x108000);
}

Test(memory, host_register) {
  char buf[64];
  cr_expect_eq(cudaHostRegister(buf, sizeof buf, 0x10), cudaErrorInvalidValue);
  cr_expect_eq(got.calls, 0);
  cr_expect_eq(
      cudaHostRegister(buf, sizeof buf, cudaHostRegisterReadOnly | cudaHostRegisterIoMemory),
      cudaSuccess);
  cr_expect_eq(got.flags, CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_IOMEMORY);
  next = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  cr_expect_eq(cudaHostRegister(buf, sizeof buf, 0), cudaErrorHostMemoryAlreadyRegistered);
  cr_expect_eq(cudaGetLastError(), cudaErrorHostMemoryAlreadyRegistered);
  void *d;
  next = CUDA_SUCCESS;
  cr_expect_eq(cudaHostGetDevicePointer(&d, buf, 1), cudaErrorInvalidValue);
  cr_expect_eq(cudaHostGetDevicePointer(NULL, buf, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaHostGetDevicePointer(&d, buf, 0), cudaSuccess);
  cr_expect_eq(d, (void *)buf);
}

Test(memory, managed_flags) {
  void *p;
  cr_expect_eq(cudaMallocManaged(&p, 64, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocManaged(&p, 64, cudaMemAttachSingle), cudaErrorInvalidValue);
  cr_expect_eq(got.calls, 0);
  cr_expect_eq(cudaMallocManaged(&p, 64, cudaMemAttachHost), cudaSuccess);
  cr_expect_eq(got.flags, CU_MEM_ATTACH_HOST);
}

/* Size 0 succeeds with NULL (NVIDIA's, measured), after the pointer check
 * and before the flags (measured on an H100: flags 0 with size 0 succeed). */
Test(memory, managed_zero) {
  void *p = (void *)1;
  cr_expect_eq(cudaMallocManaged(&p, 0, cudaMemAttachGlobal), cudaSuccess);
  cr_expect_null(p);
  cr_expect_eq(cudaPeekAtLastError(), cudaSuccess);
  cr_expect_eq(got.calls, 0, "size 0 never reaches cuMemAllocManaged");
  cr_expect_eq(cudaMallocManaged(NULL, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocManaged(&p, 0, 0), cudaSuccess);
  cr_expect_eq(cudaMallocManaged(&p, 64, 0), cudaErrorInvalidValue);
}

CUDAEV_DECLARE_VARIANT(cudaMemcpy, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemset, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemsetAsync, _ptsz);

Test(memory, memcpy_kinds) {
  char h[8] = {0};
  void *dv = (void *)0x107000;
  cr_expect_eq(cudaMemcpy(dv, h, 8, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_str_eq(got.fn, "HtoD");
  cr_expect_eq(got.d, 0x107000);
  cr_expect_eq(got.hsrc, h);
  cr_expect_eq(cudaMemcpy(h, dv, 7, cudaMemcpyDeviceToHost), cudaSuccess);
  cr_expect_str_eq(got.fn, "DtoH");
  cr_expect_eq(got.n, 7);
  cr_expect_eq(cudaMemcpy(dv, dv, 3, cudaMemcpyDeviceToDevice), cudaSuccess);
  cr_expect_str_eq(got.fn, "DtoD");
  cr_expect_eq(cudaMemcpy(h, h, 3, cudaMemcpyHostToHost), cudaSuccess);
  cr_expect_str_eq(got.fn, "cuMemcpy");
  cr_expect_eq(cudaMemcpy(dv, h, 3, cudaMemcpyDefault), cudaSuccess);
  cr_expect_str_eq(got.fn, "cuMemcpy");
  cr_expect_eq(cudaMemcpy_ptds(dv, h, 3, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect_str_eq(got.fn, "HtoD_ptds");
  cr_expect_eq(cudaMemcpy_ptds(h, dv, 3, cudaMemcpyDeviceToHost), cudaSuccess);
  cr_expect_str_eq(got.fn, "DtoH_ptds");
  cr_expect_eq(cudaMemcpy_ptds(dv, dv, 3, cudaMemcpyDeviceToDevice), cudaSuccess);
  cr_expect_str_eq(got.fn, "DtoD_ptds");
  cr_expect_eq(cudaMemcpy_ptds(dv, dv, 3, cudaMemcpyDefault), cudaSuccess);
  cr_expect_str_eq(got.fn, "cuMemcpy_ptds");
  int before = got.calls;
  cr_expect_eq(cudaMemcpy(dv, h, 3, (enum cudaMemcpyKind)5), cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpy(dv, h, 3, (enum cudaMemcpyKind) - 1), cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpy(dv, h, 0, cudaMemcpyHostToDevice), cudaSuccess);
  cudaGetLastError();
  /* size 0 is checked before the kind (NVIDIA's, measured) */
  cr_expect_eq(cudaMemcpy(dv, h, 0, (enum cudaMemcpyKind)9), cudaSuccess);
  cr_expect_eq(cudaMemcpy_ptds(dv, h, 0, (enum cudaMemcpyKind)9), cudaSuccess);
  cr_expect_eq(cudaMemcpyAsync(dv, h, 0, (enum cudaMemcpyKind)9, 0), cudaSuccess);
  cr_expect_eq(cudaPeekAtLastError(), cudaSuccess);
  cr_expect_eq(got.calls, before, "bad kinds and empty copies reach no driver call");
  next = CUDA_ERROR_INVALID_VALUE;
  cr_expect_eq(cudaMemcpy(h, h, 3, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  cr_expect_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
}

Test(memory, memcpy_async_streams) {
  char h[8] = {0};
  void *dv = (void *)0x107000;
  cudaStream_t s = (cudaStream_t)(uintptr_t)0x104242;
  cr_expect_eq(cudaMemcpyAsync(dv, h, 8, cudaMemcpyHostToDevice, s), cudaSuccess);
  cr_expect_str_eq(got.fn, "HtoDAsync");
  cr_expect_eq(got.st, (CUstream)s);
  cr_expect_eq(cudaMemcpyAsync(h, dv, 8, cudaMemcpyDeviceToHost, 0), cudaSuccess);
  cr_expect_str_eq(got.fn, "DtoHAsync");
  cr_expect_null(got.st, "stream 0 is the legacy default stream");
  cr_expect_eq(cudaMemcpyAsync_ptsz(dv, dv, 8, cudaMemcpyDeviceToDevice, 0), cudaSuccess);
  cr_expect_str_eq(got.fn, "DtoDAsync");
  cr_expect_eq(got.st, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaMemcpyAsync_ptsz(dv, dv, 8, cudaMemcpyDefault, cudaStreamLegacy), cudaSuccess);
  cr_expect_str_eq(got.fn, "cuMemcpyAsync");
  cr_expect_eq(got.st, CU_STREAM_LEGACY);
  cr_expect_eq(cudaMemcpyAsync(dv, h, 8, (enum cudaMemcpyKind)7, s),
               cudaErrorInvalidMemcpyDirection);
}

Test(memory, memset_value_and_streams) {
  void *dv = (void *)0x107000;
  cr_expect_eq(cudaMemset(dv, 0x1ab, 5), cudaSuccess);
  cr_expect_str_eq(got.fn, "cuMemsetD8");
  cr_expect_eq(got.uc, 0xab);
  cr_expect_eq(got.n, 5);
  cr_expect_eq(cudaMemset_ptds(dv, -1, 5), cudaSuccess);
  cr_expect_str_eq(got.fn, "cuMemsetD8_ptds");
  cr_expect_eq(got.uc, 0xff);
  cr_expect_eq(cudaMemsetAsync_ptsz(dv, 1, 5, 0), cudaSuccess);
  cr_expect_eq(got.st, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaMemsetAsync(dv, 1, 5, 0), cudaSuccess);
  cr_expect_null(got.st);
}

Test(memory, memcpy_peer) {
  char *a = (char *)0x107000, *b = (char *)0x107100;
  cr_expect_eq(cudaMemcpyPeer(a, 2, b, 0, 4), cudaErrorInvalidDevice);
  cr_expect_eq(cudaMemcpyPeer(a, 0, b, -1, 4), cudaErrorInvalidDevice);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDevice);
  /* size 0 succeeds before the devices are checked (NVIDIA's, measured) */
  int before = got.calls;
  cr_expect_eq(cudaMemcpyPeer(a, 2, b, 0, 0), cudaSuccess);
  cr_expect_eq(cudaMemcpyPeerAsync(a, 0, b, -1, 0, 0), cudaSuccess);
  cr_expect_eq(cudaPeekAtLastError(), cudaSuccess);
  cr_expect_eq(got.calls, before);
  cr_expect_eq(cudaMemcpyPeer(a, 1, b, 0, 4), cudaSuccess);
  cr_expect_str_eq(got.fn, "cuMemcpyPeer");
  cr_expect_eq(got.c1, (CUcontext)(uintptr_t)0x1001, "destination: device 1's primary context");
  cr_expect_eq(got.c2, (CUcontext)(uintptr_t)0x1000);
  cr_expect_eq(got.d, 0x107000);
  cr_expect_eq(got.s, 0x107100);
}

/* A stream destroyed through the runtime never reaches the driver. */
Test(memory, destroyed_stream_refused) {
  char h[8] = {0};
  void *dv = (void *)0x107000;
  cudaStream_t s = (cudaStream_t)(uintptr_t)0x104240;
  cudaev__handle_bury(s);
  int before = got.calls;
  cr_expect_eq(cudaMemcpyAsync(dv, h, 8, cudaMemcpyHostToDevice, s),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaMemsetAsync(dv, 0, 8, s), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaMemcpyPeerAsync(dv, 0, dv, 0, 8, s), cudaErrorInvalidResourceHandle);
  struct cudaMemLocation l = {cudaMemLocationTypeDevice, 0};
  cr_expect_eq(cudaMemPrefetchAsync((void *)0x109000, 64, l, 0, s), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(got.calls, before);
  cudaev__handle_revive(s);
  cr_expect_eq(cudaMemcpyAsync(dv, h, 8, cudaMemcpyHostToDevice, s), cudaSuccess);
}

Test(memory, prefetch_and_advise_locations) {
  struct cudaMemLocation l = {cudaMemLocationTypeDevice, 1};
  cudaStream_t s = (cudaStream_t)(uintptr_t)0x100055;
  cr_expect_eq(cudaMemPrefetchAsync((void *)0x109000, 64, l, 0, s), cudaSuccess);
  cr_expect_eq(got.loc.type, CU_MEM_LOCATION_TYPE_DEVICE);
  cr_expect_eq(got.loc.id, 1);
  cr_expect_eq(got.st, (CUstream)s);
  struct cudaMemLocation host = {cudaMemLocationTypeHost, 0};
  cr_expect_eq(cudaMemAdvise((void *)0x109000, 64, cudaMemAdviseSetPreferredLocation, host),
               cudaSuccess);
  cr_expect_eq(got.loc.type, CU_MEM_LOCATION_TYPE_HOST);
  cr_expect_eq(got.flags, CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
}

/* Rows past the end of the address space never reach the driver (it does
 * not return from 2^62 of them); the driver takes the pitch as signed, so
 * SIZE_MAX is rows one byte apart, which NVIDIA's runtime passes on. */
Test(memory, memset2d_rows_past_the_address_space) {
  void *d = (void *)(uintptr_t)0x7f0000000000ull;
  cr_expect_eq(cudaMemset2D(d, 64, 0, 16, (size_t)1 << 62), cudaErrorInvalidValue);
  cr_expect_eq(cudaMemset2D(d, (size_t)1 << 46, 0, 16, 16), cudaErrorInvalidValue);
  cr_expect_eq(memsets_2d, 0);
  cr_expect_eq(cudaMemset2D(d, SIZE_MAX, 0, 16, 16), cudaSuccess);
  cr_expect_eq(cudaMemset2D(d, 64, 0, 16, 16), cudaSuccess);
  cr_expect_eq(memsets_2d, 2);
  cr_expect_eq(cudaMemset2D(d, SIZE_MAX, 0, 16, (size_t)1 << 62), cudaErrorInvalidValue);
  cr_expect_eq(memsets_2d, 2);
}

/* The range queries and the persisting-L2 reset use the calling thread's
 * context and make none current, as NVIDIA's do: on a thread with none the
 * driver answers, cudaErrorDeviceUninitialized (NVIDIA's code there, also
 * for a good pointer; measured on an H200). */
static CUresult f_range(void *data, size_t n, CUmem_range_attribute a, CUdeviceptr d, size_t c) {
  (void)data, (void)n, (void)a, (void)d, (void)c;
  return fake_current == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
static CUresult f_ranges(void **data, size_t *n, CUmem_range_attribute *a, size_t na, CUdeviceptr d,
                         size_t c) {
  (void)data, (void)n, (void)a, (void)na, (void)d, (void)c;
  return fake_current == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
static CUresult f_l2(void) {
  return fake_current == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

Test(memory, range_queries_and_l2_reset_make_no_context_current) {
  cudaev__drv.cuMemRangeGetAttribute = f_range;
  cudaev__drv.cuMemRangeGetAttributes = f_ranges;
  cudaev__drv.cuCtxResetPersistingL2Cache = f_l2;
  int v, *pv = &v;
  size_t sz = sizeof v;
  enum cudaMemRangeAttribute at = cudaMemRangeAttributeReadMostly;
  int dev = -1;
  cr_expect_eq(cudaGetDevice(&dev), cudaSuccess); /* makes none current either */
  cr_expect_eq(cudaMemRangeGetAttribute(&v, sizeof v, at, (void *)0x7000000, 64),
               cudaErrorDeviceUninitialized);
  cr_expect_eq(cudaMemRangeGetAttributes((void **)&pv, &sz, &at, 1, (void *)0x7000000, 64),
               cudaErrorDeviceUninitialized);
  cr_expect_eq(cudaCtxResetPersistingL2Cache(), cudaErrorDeviceUninitialized);
  cr_expect_eq(cudaGetLastError(), cudaErrorDeviceUninitialized);
  cr_expect_null(fake_current);
  cr_assert_eq(cudaSetDevice(0), cudaSuccess); /* makes device 0's current */
  cr_expect_eq(cudaMemRangeGetAttribute(&v, sizeof v, at, (void *)0x7000000, 64), cudaSuccess);
  cr_expect_eq(cudaMemRangeGetAttributes((void **)&pv, &sz, &at, 1, (void *)0x7000000, 64),
               cudaSuccess);
  cr_expect_eq(cudaCtxResetPersistingL2Cache(), cudaSuccess);
}
