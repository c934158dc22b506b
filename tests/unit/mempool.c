/* Stream Ordered Memory Allocator, Unified Addressing (pointer attributes)
 * and Peer Access on a fake driver: the structure and enum translations,
 * the stream each call is enqueued on, and the attributes reported for
 * each kind of memory. */
#include <criterion/criterion.h>

#include "fake_driver.h"
#include "handle.h"

static struct {
  int calls;
  CUstream st;
  CUmemPoolProps props;
  const CUmemAccessDesc *descs;
  size_t count;
  CUmemPool_attribute attr;
  CUmemLocation loc;
  CUmemAllocationType type;
  CUcontext peer;
  unsigned flags;
  CUdevice dev, peer_dev;
} got;

static CUresult f_alloc_async(CUdeviceptr *p, size_t n, CUstream st) {
  got.calls++;
  got.st = st;
  got.count = n;
  *p = 0xa000;
  return CUDA_SUCCESS;
}
static CUresult f_free_async(CUdeviceptr p, CUstream st) {
  (void)p;
  got.calls++;
  got.st = st;
  return CUDA_SUCCESS;
}
static CUresult f_pool_create(CUmemoryPool *p, const CUmemPoolProps *props) {
  got.calls++;
  got.props = *props;
  *p = (CUmemoryPool)(uintptr_t)0x10b000;
  return CUDA_SUCCESS;
}
static CUresult f_set_access(CUmemoryPool p, const CUmemAccessDesc *d, size_t n) {
  (void)p;
  got.calls++;
  got.descs = d;
  got.count = n;
  return CUDA_SUCCESS;
}
static CUresult f_get_access(CUmemAccess_flags *f, CUmemoryPool p, CUmemLocation *l) {
  (void)p;
  got.loc = *l;
  *f = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return CUDA_SUCCESS;
}
static CUresult f_set_attr(CUmemoryPool p, CUmemPool_attribute a, void *v) {
  (void)p;
  (void)v;
  got.attr = a;
  return CUDA_SUCCESS;
}
static CUresult f_default_pool(CUmemoryPool *p, CUmemLocation *l, CUmemAllocationType t) {
  got.loc = *l;
  got.type = t;
  l->id = 1; /* the driver may rewrite the location */
  *p = (CUmemoryPool)(uintptr_t)0x10c000;
  return CUDA_SUCCESS;
}

/* Pointer attributes: one fake allocation of each kind. */
enum { P_DEVICE = 0x10000, P_HOST = 0x20000, P_MANAGED = 0x30000, P_PLAIN = 0x40000 };
static CUresult f_ptr_attrs(unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p) {
  for (unsigned i = 0; i < n; i++) {
    switch (a[i]) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned *)data[i] = p == P_HOST                       ? CU_MEMORYTYPE_HOST
                             : p == P_DEVICE || p == P_MANAGED ? CU_MEMORYTYPE_DEVICE
                                                               : 0;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned char *)data[i] = p == P_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      if (p != P_PLAIN) *(int *)data[i] = 1;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data[i] = p == P_PLAIN ? 0 : p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *(void **)data[i] = p == P_HOST || p == P_MANAGED ? (void *)p : NULL;
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

static CUresult f_count_two(int *n) {
  *n = 2;
  return CUDA_SUCCESS;
}
static CUresult f_retain(CUcontext *c, CUdevice d) {
  *c = (CUcontext)(uintptr_t)(0x1000 + d);
  return CUDA_SUCCESS;
}
static CUresult f_enable_peer(CUcontext c, unsigned flags) {
  got.calls++;
  got.peer = c;
  got.flags = flags;
  return CUDA_SUCCESS;
}
static CUresult f_disable_peer(CUcontext c) {
  (void)c;
  return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}
static CUresult f_can_access(int *can, CUdevice d, CUdevice p) {
  got.dev = d;
  got.peer_dev = p;
  *can = d != p;
  return CUDA_SUCCESS;
}

static void setup(void) {
  struct cudaev_driver t;
  fake_driver_base(&t);
  t.cuDeviceGetCount = f_count_two;
  t.cuDevicePrimaryCtxRetain = f_retain;
  t.cuMemAllocAsync = f_alloc_async;
  t.cuMemFreeAsync = f_free_async;
  t.cuMemPoolCreate = f_pool_create;
  t.cuMemPoolSetAccess = f_set_access;
  t.cuMemPoolGetAccess = f_get_access;
  t.cuMemPoolSetAttribute = f_set_attr;
  t.cuMemGetDefaultMemPool = f_default_pool;
  t.cuPointerGetAttributes = f_ptr_attrs;
  t.cuCtxEnablePeerAccess = f_enable_peer;
  t.cuCtxDisablePeerAccess = f_disable_peer;
  t.cuDeviceCanAccessPeer = f_can_access;
  cudaev__driver_install(&t, 13000);
}

TestSuite(mempool, .init = setup);

CUDAEV_DECLARE_VARIANT(cudaMallocAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaFreeAsync, _ptsz);

Test(mempool, async_streams) {
  void *p;
  cr_expect_eq(cudaMallocAsync(&p, 100, 0), cudaSuccess);
  cr_expect_null(got.st);
  cr_expect_eq(got.count, 100);
  cr_expect_eq(cudaMallocAsync_ptsz(&p, 100, 0), cudaSuccess);
  cr_expect_eq(got.st, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaFreeAsync_ptsz(p, 0), cudaSuccess);
  cr_expect_eq(got.st, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaFreeAsync(p, cudaStreamPerThread), cudaSuccess);
  cr_expect_eq(got.st, CU_STREAM_PER_THREAD);
}

Test(mempool, create_translates_props) {
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 1;
  props.maxSize = 1 << 20;
  props.usage = 3;
  props.reserved[53] = 7; /* the driver, not the runtime, judges reserved bytes */
  cudaMemPool_t pool;
  cr_expect_eq(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  cr_expect_eq((uintptr_t)pool, 0x10b000);
  cr_expect_eq(got.props.allocType, CU_MEM_ALLOCATION_TYPE_PINNED);
  cr_expect_eq(got.props.handleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  cr_expect_eq(got.props.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  cr_expect_eq(got.props.location.id, 1);
  cr_expect_eq(got.props.maxSize, 1 << 20);
  cr_expect_eq(got.props.usage, 3);
  cr_expect_eq(got.props.reserved[53], 7);
  cr_expect_eq(cudaMemPoolCreate(&pool, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaMemPoolCreate(NULL, &props), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

Test(mempool, access_and_attributes) {
  struct cudaMemAccessDesc d[2] = {
      {{cudaMemLocationTypeDevice, 0}, cudaMemAccessFlagsProtReadWrite},
      {{cudaMemLocationTypeDevice, 1}, cudaMemAccessFlagsProtRead},
  };
  cudaMemPool_t pool = (cudaMemPool_t)(uintptr_t)0x10b000;
  cr_expect_eq(cudaMemPoolSetAccess(pool, d, 2), cudaSuccess);
  cr_expect_eq(got.count, 2);
  cr_expect_eq(got.descs[1].location.id, 1);
  cr_expect_eq(got.descs[1].flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
  enum cudaMemAccessFlags f = cudaMemAccessFlagsProtNone;
  struct cudaMemLocation l = {cudaMemLocationTypeDevice, 1};
  cr_expect_eq(cudaMemPoolGetAccess(&f, pool, &l), cudaSuccess);
  cr_expect_eq(f, cudaMemAccessFlagsProtReadWrite);
  cr_expect_eq(got.loc.id, 1);
  unsigned long long thr = 1;
  cr_expect_eq(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr), cudaSuccess);
  cr_expect_eq(got.attr, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
}

/* NULL in/out pointers crash NVIDIA's runtime (cudaMemPoolSetAttribute,
 * measured): ours refuses them before the driver. */
Test(mempool, null_pointers_refused) {
  cudaMemPool_t pool = (cudaMemPool_t)(uintptr_t)0x10b000;
  cr_expect_eq(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, NULL),
               cudaErrorInvalidValue);
  cr_expect_eq(got.calls, 0);
  cr_expect_eq(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, NULL),
               cudaErrorInvalidValue);
  enum cudaMemAccessFlags f;
  struct cudaMemLocation l = {cudaMemLocationTypeDevice, 0};
  cr_expect_eq(cudaMemPoolGetAccess(NULL, pool, &l), cudaErrorInvalidValue);
  cr_expect_eq(cudaMemPoolGetAccess(&f, pool, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaMemPoolSetAccess(pool, NULL, 1), cudaErrorInvalidValue);
  /* A list no address space could hold: NVIDIA's copy of it fails. */
  struct cudaMemAccessDesc one = {{cudaMemLocationTypeDevice, 0}, cudaMemAccessFlagsProtReadWrite};
  cr_expect_eq(cudaMemPoolSetAccess(pool, &one, SIZE_MAX), cudaErrorMemoryAllocation);
  cr_expect_eq(cudaMemPoolSetAccess(pool, &one, (size_t)1 << 62), cudaErrorMemoryAllocation);
  cr_expect_eq(cudaMemPoolSetAccess(pool, &one, (size_t)1 << 50), cudaErrorMemoryAllocation);
  cr_expect_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
  cr_expect_eq(got.calls, 0);
  void *p;
  cr_expect_eq(cudaMallocFromPoolAsync(NULL, 16, pool, 0), cudaErrorInvalidValue);
  struct cudaMemPoolPtrExportData x;
  cr_expect_eq(cudaMemPoolExportPointer(NULL, (void *)0x7000), cudaErrorInvalidValue);
  cr_expect_eq(cudaMemPoolImportPointer(NULL, pool, &x), cudaErrorInvalidValue);
  cr_expect_eq(cudaMemPoolImportPointer(&p, pool, NULL), cudaErrorInvalidValue);
  cr_expect_eq(
      cudaMemPoolExportToShareableHandle(NULL, pool, cudaMemHandleTypePosixFileDescriptor, 0),
      cudaErrorInvalidValue);
  cr_expect_eq(cudaMemPoolImportFromShareableHandle(NULL, (void *)3,
                                                    cudaMemHandleTypePosixFileDescriptor, 0),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

/* A stream destroyed through the runtime never reaches the driver. */
Test(mempool, destroyed_stream_refused) {
  cudaStream_t s = (cudaStream_t)(uintptr_t)0x104240;
  cudaev__handle_bury(s);
  void *p;
  cr_expect_eq(cudaMallocAsync(&p, 100, s), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaFreeAsync((void *)0x7000, s), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaMallocFromPoolAsync(&p, 100, (cudaMemPool_t)(uintptr_t)0x10b000, s),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(got.calls, 0);
}

Test(mempool, default_pool_location) {
  cudaMemPool_t pool;
  struct cudaMemLocation l = {cudaMemLocationTypeDevice, 0};
  cr_expect_eq(cudaMemGetDefaultMemPool(&pool, NULL, cudaMemAllocationTypePinned),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaMemGetDefaultMemPool(&pool, &l, cudaMemAllocationTypeManaged), cudaSuccess);
  cr_expect_eq(got.type, CU_MEM_ALLOCATION_TYPE_MANAGED);
  cr_expect_eq(got.loc.type, CU_MEM_LOCATION_TYPE_DEVICE);
  cr_expect_eq(l.id, 1, "the driver's rewrite of the location comes back");
  cr_expect_eq((uintptr_t)pool, 0x10c000);
}

Test(mempool, pointer_attributes_each_kind) {
  struct cudaPointerAttributes a;
  cr_expect_eq(cudaPointerGetAttributes(NULL, (void *)P_DEVICE), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);

  cr_assert_eq(cudaPointerGetAttributes(&a, (void *)P_DEVICE), cudaSuccess);
  cr_expect_eq(a.type, cudaMemoryTypeDevice);
  cr_expect_eq(a.device, 1);
  cr_expect_eq(a.devicePointer, (void *)P_DEVICE);
  cr_expect_null(a.hostPointer);

  cr_assert_eq(cudaPointerGetAttributes(&a, (void *)P_HOST), cudaSuccess);
  cr_expect_eq(a.type, cudaMemoryTypeHost);
  cr_expect_eq(a.hostPointer, (void *)P_HOST);
  cr_expect_eq(a.devicePointer, (void *)P_HOST);

  cr_assert_eq(cudaPointerGetAttributes(&a, (void *)P_MANAGED), cudaSuccess);
  cr_expect_eq(a.type, cudaMemoryTypeManaged);
  cr_expect_eq(a.device, 1);

  memset(&a, 0x5a, sizeof a);
  cr_assert_eq(cudaPointerGetAttributes(&a, (void *)P_PLAIN), cudaSuccess);
  cr_expect_eq(a.type, cudaMemoryTypeUnregistered);
  cr_expect_eq(a.device, cudaInvalidDeviceId);
  cr_expect_eq(a.hostPointer, (void *)P_PLAIN);
  cr_expect_null(a.devicePointer);
  cr_expect_eq(a.reserved[7], 0);
  cr_expect_eq(cudaPeekAtLastError(), cudaSuccess);
}

Test(mempool, peer_access) {
  int can = 0;
  cr_expect_eq(cudaDeviceCanAccessPeer(NULL, 0, 1), cudaErrorInvalidValue);
  cr_expect_eq(cudaDeviceCanAccessPeer(&can, 0, 2), cudaErrorInvalidDevice);
  cr_expect_eq(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  cr_expect_eq(can, 1);
  cr_expect_eq(got.peer_dev, 1);
  cr_expect_eq(cudaDeviceEnablePeerAccess(5, 0), cudaErrorInvalidDevice);
  cr_expect_eq(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);
  cr_expect_eq(got.calls, 0);
  cr_expect_eq(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported,
               "no access to itself (NVIDIA's, measured)");
  cr_expect_eq(cudaGetLastError(), cudaErrorPeerAccessUnsupported);
  cr_expect_eq(got.calls, 0);
  cr_expect_eq(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  cr_expect_eq(got.peer, (CUcontext)(uintptr_t)0x1001, "the peer's primary context");
  cr_expect_eq(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  cr_expect_eq(cudaGetLastError(), cudaErrorPeerAccessNotEnabled);
}
