/* gpu suite, Stream Ordered Memory Allocator in one process: the default
 * and current pools of a device and of a memory location, cudaMallocAsync /
 * cudaFreeAsync on the legacy, per-thread and created streams, cudaFree of
 * a stream-ordered allocation, pools created with each property, every
 * pool attribute, access descriptors, trimming, and bad input for each
 * call (NULL, freed pointers, destroyed pools and streams, bad enums). */
#include "common.h"

#include <stdint.h>

extern cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
extern cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);
extern cudaError_t cudaMallocFromPoolAsync_ptsz(void **, size_t, cudaMemPool_t, cudaStream_t);

static uint32_t sum(const void *p, size_t n) {
  const unsigned char *b = p;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

static void show_attrs(const char *what, cudaMemPool_t pool) {
  static const struct {
    enum cudaMemPoolAttr a;
    int wide;
    const char *name;
  } list[] = {
      {cudaMemPoolReuseFollowEventDependencies, 0, "followEvents"},
      {cudaMemPoolReuseAllowOpportunistic, 0, "opportunistic"},
      {cudaMemPoolReuseAllowInternalDependencies, 0, "internalDeps"},
      {cudaMemPoolAttrReleaseThreshold, 1, "releaseThreshold"},
      {cudaMemPoolAttrReservedMemCurrent, 1, "reservedCurrent"},
      {cudaMemPoolAttrReservedMemHigh, 1, "reservedHigh"},
      {cudaMemPoolAttrUsedMemCurrent, 1, "usedCurrent"},
      {cudaMemPoolAttrUsedMemHigh, 1, "usedHigh"},
  };
  printf("%s:", what);
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
    unsigned long long v = 0xdeadbeefull;
    int iv = -7;
    cudaError_t e =
        cudaMemPoolGetAttribute(pool, list[i].a, list[i].wide ? (void *)&v : (void *)&iv);
    if (e != cudaSuccess)
      printf(" %s=%s", list[i].name, cudaGetErrorName(e));
    else if (list[i].wide)
      printf(" %s=%s", list[i].name, v == 0 ? "0" : (v == 0xdeadbeefull ? "untouched" : "nonzero"));
    else
      printf(" %s=%d", list[i].name, iv);
  }
  printf(" (last %s)\n", cudaGetErrorName(cudaGetLastError()));
}

int main(void) {
  cudaMemPool_t def = NULL, cur = NULL, pool = NULL, p2 = NULL;
  TC(cudaDeviceGetDefaultMemPool(&def, 0));
  TC(cudaDeviceGetMemPool(&cur, 0));
  printf("current is default: %d\n", def == cur);
  TC(cudaDeviceGetDefaultMemPool(NULL, 0));
  TC(cudaDeviceGetDefaultMemPool(&p2, 99));

  struct cudaMemLocation loc = {cudaMemLocationTypeDevice, 0};
  TC(cudaMemGetDefaultMemPool(&p2, &loc, cudaMemAllocationTypePinned));
  printf("location default is device default: %d loc=%d/%d\n", p2 == def, (int)loc.type, loc.id);
  TC(cudaMemGetMemPool(&p2, &loc, cudaMemAllocationTypePinned));
  printf("location current is device current: %d\n", p2 == cur);
  TC(cudaMemGetDefaultMemPool(&p2, NULL, cudaMemAllocationTypePinned));
  TC(cudaMemGetDefaultMemPool(NULL, &loc, cudaMemAllocationTypePinned));
  TC(cudaMemGetDefaultMemPool(&p2, &loc, cudaMemAllocationTypeInvalid));
  struct cudaMemLocation hloc = {cudaMemLocationTypeHost, 0};
  TC(cudaMemGetDefaultMemPool(&p2, &hloc, cudaMemAllocationTypePinned));
  TC(cudaMemGetDefaultMemPool(&p2, &hloc, cudaMemAllocationTypeManaged));
  struct cudaMemLocation badloc = {cudaMemLocationTypeDevice, 77};
  TC(cudaMemGetDefaultMemPool(&p2, &badloc, cudaMemAllocationTypePinned));
  show_attrs("default pool", def);

  /* stream-ordered allocations on the default pool */
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *a = NULL, *b = NULL, *c = NULL;
  TC(cudaMallocAsync(&a, 1000, s));
  TC(cudaMallocAsync(&b, 12345, 0));
  TC(cudaMallocAsync_ptsz(&c, 3, 0));
  TC(cudaMemsetAsync(a, 0x3c, 1000, s));
  char host[1000];
  TC(cudaMemcpyAsync(host, a, 1000, cudaMemcpyDeviceToHost, s));
  TC(cudaStreamSynchronize(s));
  printf("pool memory sum=%08x\n", sum(host, 1000));
  struct cudaPointerAttributes pa;
  TC(cudaPointerGetAttributes(&pa, a));
  printf("pool pointer type=%d device=%d\n", (int)pa.type, pa.device);
  show_attrs("default pool in use", def);
  TC(cudaFreeAsync(a, s));
  TC(cudaFreeAsync_ptsz(c, 0));
  TC(cudaStreamSynchronize(s));
  TC(cudaFree(b)); /* cudaFree of a stream-ordered allocation */
  TC(cudaFree(b));
  TC(cudaFreeAsync(b, s));
  TC(cudaMallocAsync(NULL, 10, s));
  void *z = (void *)1;
  TC(cudaMallocAsync(&z, 0, s));
  printf("cudaMallocAsync(0) pointer: %s\n", z == NULL ? "null" : "non-null");
  TC(cudaFreeAsync(NULL, s));
  TC(cudaMallocAsync(&z, (size_t)1 << 62, s));
  int on_stack;
  TC(cudaFreeAsync(&on_stack, s));
  TC(cudaStreamSynchronize(s));
  TC(cudaMemPoolTrimTo(def, 0));
  show_attrs("default pool trimmed", def);

  /* pools created with properties */
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  TC(cudaMemPoolCreate(&pool, &props));
  TC(cudaMemPoolCreate(NULL, &props));
  TC(cudaMemPoolCreate(&p2, NULL));
  struct cudaMemPoolProps badp = props;
  badp.allocType = cudaMemAllocationTypeInvalid;
  TC(cudaMemPoolCreate(&p2, &badp));
  badp = props;
  badp.location.id = 55;
  TC(cudaMemPoolCreate(&p2, &badp));
  badp = props;
  badp.location.type = cudaMemLocationTypeInvalid;
  TC(cudaMemPoolCreate(&p2, &badp));
  badp = props;
  badp.handleTypes = (enum cudaMemAllocationHandleType)0x40;
  TC(cudaMemPoolCreate(&p2, &badp));
  badp = props;
  badp.reserved[0] = 1;
  TC(cudaMemPoolCreate(&p2, &badp));
  if (cudaGetLastError() == cudaSuccess && p2 != NULL) cudaMemPoolDestroy(p2);
  badp = props;
  badp.maxSize = (size_t)64 << 20;
  p2 = NULL;
  TC(cudaMemPoolCreate(&p2, &badp));
  if (p2 != NULL) {
    void *big = NULL;
    TC(cudaMallocFromPoolAsync(&big, (size_t)128 << 20, p2, s));
    TC(cudaMallocFromPoolAsync(&big, (size_t)1 << 20, p2, s));
    TC(cudaFreeAsync(big, s));
    TC(cudaStreamSynchronize(s));
    TC(cudaMemPoolDestroy(p2));
  }

  show_attrs("created pool", pool);
  int one = 1, zero = 0;
  unsigned long long thr = 1 << 20, huge = ~0ull, zero64 = 0;
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &zero));
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &zero));
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &one));
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero64));
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero64));
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &zero64));
  TC(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &huge));
  TC(cudaMemPoolSetAttribute(pool, (enum cudaMemPoolAttr)0, &one));
  TC(cudaMemPoolSetAttribute(pool, (enum cudaMemPoolAttr)99, &one));
  /* NULL values crash NVIDIA's runtime (run7: the Set one): forked. */
  TREFUSE(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, NULL));
  TREFUSE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, NULL));
  TC(cudaMemPoolGetAttribute(pool, (enum cudaMemPoolAttr)99, &thr));
  TC(cudaMemPoolGetAttribute(NULL, cudaMemPoolAttrReleaseThreshold, &thr));
  show_attrs("created pool after set", pool);

  void *x = NULL, *y = NULL;
  TC(cudaMallocFromPoolAsync(&x, 4097, pool, s));
  TC(cudaMallocFromPoolAsync_ptsz(&y, 1, pool, 0));
  TC(cudaMallocFromPoolAsync(NULL, 10, pool, s));
  TC(cudaMallocFromPoolAsync(&y, 10, NULL, s));
  TC(cudaMemsetAsync(x, 0x11, 4097, s));
  TC(cudaStreamSynchronize(s));
  show_attrs("created pool in use", pool);
  TC(cudaFreeAsync(x, s));
  TC(cudaFreeAsync(y, s));
  TC(cudaStreamSynchronize(s));
  TC(cudaMemPoolTrimTo(pool, 0));
  TC(cudaMemPoolTrimTo(pool, (size_t)1 << 40));
  TC(cudaMemPoolTrimTo(NULL, 0));
  show_attrs("created pool trimmed", pool);

  /* access */
  enum cudaMemAccessFlags fl = (enum cudaMemAccessFlags)77;
  struct cudaMemLocation l0 = {cudaMemLocationTypeDevice, 0};
  TC(cudaMemPoolGetAccess(&fl, pool, &l0));
  printf("access from device 0: %d\n", (int)fl);
  /* NULL in/out pointers the runtime converts: forked, as NVIDIA's may
   * crash on them as on the NULL attribute values above. */
  TREFUSE(cudaMemPoolGetAccess(NULL, pool, &l0));
  TREFUSE(cudaMemPoolGetAccess(&fl, pool, NULL));
  struct cudaMemLocation lbad = {cudaMemLocationTypeDevice, 42};
  TC(cudaMemPoolGetAccess(&fl, pool, &lbad));
  struct cudaMemAccessDesc desc = {{cudaMemLocationTypeDevice, 0}, cudaMemAccessFlagsProtReadWrite};
  TC(cudaMemPoolSetAccess(pool, &desc, 1));
  TC(cudaMemPoolSetAccess(pool, &desc, 0));
  TREFUSE(cudaMemPoolSetAccess(pool, NULL, 1));
  desc.flags = cudaMemAccessFlagsProtNone;
  TC(cudaMemPoolSetAccess(pool, &desc, 1));
  desc.flags = (enum cudaMemAccessFlags)9;
  TC(cudaMemPoolSetAccess(pool, &desc, 1));
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  desc.location.id = 42;
  TC(cudaMemPoolSetAccess(pool, &desc, 1));
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  for (int d = 1; d < n; d++) {
    struct cudaMemAccessDesc pd = {{cudaMemLocationTypeDevice, d}, cudaMemAccessFlagsProtReadWrite};
    cudaError_t e = cudaMemPoolSetAccess(pool, &pd, 1);
    printf("set access from device %d -> %s (last %s)\n", d, cudaGetErrorName(e),
           cudaGetErrorName(cudaGetLastError()));
    struct cudaMemLocation ld = {cudaMemLocationTypeDevice, d};
    fl = (enum cudaMemAccessFlags)77;
    TC(cudaMemPoolGetAccess(&fl, pool, &ld));
    printf("access from device %d: %d\n", d, (int)fl);
  }

  /* the device's current pool, set and restored */
  TC(cudaDeviceSetMemPool(0, pool));
  TC(cudaDeviceGetMemPool(&p2, 0));
  printf("current is created: %d\n", p2 == pool);
  TC(cudaMallocAsync(&x, 100, s));
  TC(cudaPointerGetAttributes(&pa, x));
  TC(cudaFreeAsync(x, s));
  TC(cudaStreamSynchronize(s));
  TC(cudaMemSetMemPool(&loc, cudaMemAllocationTypePinned, def));
  TC(cudaMemGetMemPool(&p2, &loc, cudaMemAllocationTypePinned));
  printf("current is default again: %d\n", p2 == def);
  TC(cudaMemSetMemPool(NULL, cudaMemAllocationTypePinned, def));
  TC(cudaMemSetMemPool(&loc, cudaMemAllocationTypePinned, NULL));

  /* destruction */
  TC(cudaMemPoolDestroy(def));
  TC(cudaMemPoolDestroy(NULL));
  TC(cudaMallocFromPoolAsync(&x, 100, pool, s));
  TC(cudaMemPoolDestroy(pool)); /* with an allocation outstanding */
  TC(cudaFreeAsync(x, s));
  TC(cudaStreamSynchronize(s));
  TC(cudaStreamDestroy(s));
  TREFUSE(cudaMallocAsync(&x, 100, s)); /* destroyed stream */
  TC(cudaDeviceSynchronize());
  return 0;
}
