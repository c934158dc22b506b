/* gpu suite, 1D copies and memsets: every cudaMemcpyKind between pageable,
 * pinned, device and managed memory with odd sizes and unaligned offsets
 * (results printed as checksums), wrong kinds whose "host" side is real
 * host memory (so no run can fault), invalid kinds, sizes past the
 * allocation, the legacy default stream's ordering with a blocking stream,
 * per-thread default stream variants, a destroyed stream, and managed
 * memory prefetch / advice / range attributes. */
#include "common.h"

#include <stdint.h>

/* Exports of both libraries that cuda_runtime_api.h only declares under
 * --default-stream per-thread. */
extern cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
extern cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind,
                                        cudaStream_t);
extern cudaError_t cudaMemset_ptds(void *, int, size_t);
extern cudaError_t cudaMemsetAsync_ptsz(void *, int, size_t, cudaStream_t);
extern cudaError_t cudaMemPrefetchAsync_ptsz(const void *, size_t, struct cudaMemLocation, unsigned,
                                             cudaStream_t);

static uint32_t sum(const void *p, size_t n) {
  const unsigned char *b = p;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

static void fill(void *p, size_t n, unsigned seed) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed + i * 7 + (i >> 8));
}

#define N 10007 /* odd on purpose */

int main(void) {
  char *src = malloc(N + 128), *dst = malloc(N + 128);
  char *pin = NULL, *pin2 = NULL, *dev = NULL, *dev2 = NULL, *man = NULL;
  CHECK(cudaMallocHost((void **)&pin, N + 64));
  CHECK(cudaMallocHost((void **)&pin2, N + 64));
  CHECK(cudaMalloc((void **)&dev, N + 64));
  CHECK(cudaMalloc((void **)&dev2, N + 64));
  CHECK(cudaMallocManaged((void **)&man, N + 64, cudaMemAttachGlobal));
  fill(src, N + 64, 1);
  fill(pin, N + 64, 2);

  /* each kind, odd sizes, unaligned offsets */
  static const size_t sizes[] = {1, 3, 4095, 4097, N};
  static const size_t offs[] = {0, 1, 7, 33};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++) {
      size_t n = sizes[si], o = offs[oi];
      memset(dst, 0, N + 64);
      CHECK(cudaMemset(dev, 0, N + 64));
      CHECK(cudaMemset(dev2, 0xee, N + 64));
      cudaError_t e1 = cudaMemcpy(dev + o, src + (o ^ 1), n, cudaMemcpyHostToDevice);
      cudaError_t e2 = cudaMemcpy(dev2 + (o * 3 % 64), dev + o, n, cudaMemcpyDeviceToDevice);
      cudaError_t e3 = cudaMemcpy(pin2 + o, dev2 + (o * 3 % 64), n, cudaMemcpyDeviceToHost);
      cudaError_t e4 = cudaMemcpy(dst + 5, pin2 + o, n, cudaMemcpyHostToHost);
      cudaError_t e5 = cudaMemcpy(man + o, dst + 5, n, cudaMemcpyDefault);
      printf("copy n=%zu off=%zu: %s %s %s %s %s sum=%08x whole=%08x\n", n, o, cudaGetErrorName(e1),
             cudaGetErrorName(e2), cudaGetErrorName(e3), cudaGetErrorName(e4), cudaGetErrorName(e5),
             sum(man + o, n), sum(dst, N + 64));
    }
  }

  /* memsets: value conversion, odd sizes, sync and async, pinned target */
  TC(cudaMemset(dev + 3, 0x1ab, 1001));
  TC(cudaMemset(dev, -1, 3));
  TC(cudaMemcpy(dst, dev, 1100, cudaMemcpyDeviceToHost));
  printf("memset sum=%08x\n", sum(dst, 1100));
  TC(cudaMemset(pin, 0x42, 777));
  printf("memset pinned sum=%08x\n", sum(pin, 1000));
  TC(cudaMemset(man + 1, 0x17, 999));
  TC(cudaDeviceSynchronize());
  printf("memset managed sum=%08x\n", sum(man, 1000));
  TC(cudaMemset(dev, 0, 0));
  TC(cudaMemset(NULL, 0, 0));
  TC(cudaMemset(NULL, 0, 10));
  TC(cudaMemset(dev, 0, N + 65));
  TC(cudaMemset(dev, 0, (size_t)1 << 40));
  TC(cudaMemset(src, 0, 10));
  TC(cudaMemset_ptds(dev, 5, 10));
  TC(cudaMemsetAsync(dev, 1, 10, 0));
  TC(cudaMemsetAsync_ptsz(dev + 10, 2, 10, 0));
  TC(cudaMemsetAsync(dev + 20, 3, 10, cudaStreamPerThread));
  TC(cudaMemcpy(dst, dev, 40, cudaMemcpyDeviceToHost));
  printf("memset async sum=%08x\n", sum(dst, 40));

  /* bad kinds, sizes, pointers */
  TC(cudaMemcpy(dev, src, 10, (enum cudaMemcpyKind)5));
  TC(cudaMemcpy(dev, src, 10, (enum cudaMemcpyKind) - 1));
  TC(cudaMemcpy(dev, src, 0, (enum cudaMemcpyKind)9));
  TC(cudaMemcpyAsync(dev, src, 10, (enum cudaMemcpyKind)5, 0));
  TC(cudaMemcpyAsync(dev, src, 0, (enum cudaMemcpyKind)9, 0));
  TC(cudaMemcpy(dev, src, 0, cudaMemcpyHostToDevice));
  TC(cudaMemcpy(NULL, NULL, 0, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy(NULL, src, 10, cudaMemcpyHostToDevice));
  TC(cudaMemcpy(dst, NULL, 10, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy(dev, dev2, N + 65, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy(dst, dev, N + 65, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy(dev, src, N + 65, cudaMemcpyHostToDevice));
  /* wrong kinds: the side declared "device" is host memory */
  TC(cudaMemcpy(dst, src, 10, cudaMemcpyHostToDevice));
  TC(cudaMemcpy(dst, src, 10, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy(dst, src, 10, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy(dev, src, 10, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy(dst, dev, 10, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy(pin2, pin, 10, cudaMemcpyHostToDevice));
  TC(cudaMemcpy(pin2, pin, 10, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy(pin2, pin, 10, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy(dst, src, 10, cudaMemcpyDefault));
  TC(cudaMemcpy(man, pin, 10, cudaMemcpyHostToDevice));
  TC(cudaMemcpy(pin, man, 10, cudaMemcpyDeviceToHost));
  TC(cudaMemcpyAsync(dst, src, 10, cudaMemcpyHostToDevice, 0));
  TC(cudaMemcpyAsync(dst, src, 10, cudaMemcpyDeviceToDevice, 0));
  TC(cudaMemcpy(dev, dev, 10, cudaMemcpyDeviceToDevice));
  TC(cudaDeviceSynchronize());
  printf("after wrong kinds dst sum=%08x pin2 sum=%08x\n", sum(dst, 10), sum(pin2, 10));

  /* async copies: legacy stream, blocking stream, per-thread */
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  fill(pin, N, 9);
  TC(cudaMemcpyAsync(dev, pin, N, cudaMemcpyHostToDevice, s));
  /* the legacy stream waits for s: this copy sees dev as s left it */
  TC(cudaMemcpyAsync(dev2, dev, N, cudaMemcpyDeviceToDevice, 0));
  TC(cudaMemcpyAsync(pin2, dev2, N, cudaMemcpyDeviceToHost, s));
  TC(cudaStreamSynchronize(s));
  printf("legacy ordering sum=%08x expect=%08x\n", sum(pin2, N), sum(pin, N));
  memset(pin2, 0, N);
  TC(cudaMemcpyAsync_ptsz(dev2 + 1, dev, N - 1, cudaMemcpyDeviceToDevice, 0));
  TC(cudaMemcpyAsync_ptsz(pin2, dev2 + 1, N - 1, cudaMemcpyDeviceToHost, cudaStreamPerThread));
  TC(cudaStreamSynchronize(cudaStreamPerThread));
  printf("per-thread sum=%08x\n", sum(pin2, N - 1));
  memset(dst, 0, N);
  TC(cudaMemcpy_ptds(dev2, src, N, cudaMemcpyHostToDevice));
  TC(cudaMemcpy_ptds(dst, dev2, N, cudaMemcpyDefault));
  printf("ptds sum=%08x expect=%08x\n", sum(dst, N), sum(src, N));
  TC(cudaMemcpyAsync(dst, dev, 100, cudaMemcpyDeviceToHost, s)); /* pageable */
  TC(cudaMemcpyAsync(dev, dst, 100, cudaMemcpyDefault, s));
  TC(cudaMemcpyAsync(dev, dst, 0, cudaMemcpyDefault, s));
  TC(cudaStreamSynchronize(s));

  /* managed memory: advice, prefetch, range attributes */
  struct cudaMemLocation d0 = {cudaMemLocationTypeDevice, 0};
  struct cudaMemLocation host = {cudaMemLocationTypeHost, 0};
  struct cudaMemLocation bad = {cudaMemLocationTypeDevice, 999};
  TC(cudaMemAdvise(man, N, cudaMemAdviseSetReadMostly, d0));
  int rm = -1;
  TC(cudaMemRangeGetAttribute(&rm, sizeof rm, cudaMemRangeAttributeReadMostly, man, N));
  printf("read mostly=%d\n", rm);
  TC(cudaMemAdvise(man, N, cudaMemAdviseUnsetReadMostly, d0));
  TC(cudaMemAdvise(man, N, cudaMemAdviseSetPreferredLocation, host));
  TC(cudaMemAdvise(man, N, cudaMemAdviseSetAccessedBy, d0));
  TC(cudaMemAdvise(man, N, (enum cudaMemoryAdvise)42, d0));
  TC(cudaMemAdvise(man, N, cudaMemAdviseSetPreferredLocation, bad));
  TC(cudaMemAdvise(dev, N, cudaMemAdviseSetReadMostly, d0));
  TC(cudaMemAdvise(NULL, N, cudaMemAdviseSetReadMostly, d0));
  TC(cudaMemPrefetchAsync(man, N, d0, 0, s));
  TC(cudaMemPrefetchAsync(man, N, host, 0, s));
  TC(cudaMemPrefetchAsync_ptsz(man, N, d0, 0, 0));
  TC(cudaMemPrefetchAsync(man, N, bad, 0, s));
  TC(cudaMemPrefetchAsync(man, N, d0, 1, s));
  TC(cudaMemPrefetchAsync(dev, N, d0, 0, s));
  TC(cudaMemPrefetchAsync(man, 0, d0, 0, s));
  TC(cudaDeviceSynchronize());
  int loc = -5, lt = -5, pl = -5, pt = -5;
  TC(cudaMemRangeGetAttribute(&loc, sizeof loc, cudaMemRangeAttributeLastPrefetchLocation, man, N));
  TC(cudaMemRangeGetAttribute(&lt, sizeof lt, cudaMemRangeAttributeLastPrefetchLocationType, man,
                              N));
  TC(cudaMemRangeGetAttribute(&pl, sizeof pl, cudaMemRangeAttributePreferredLocation, man, N));
  TC(cudaMemRangeGetAttribute(&pt, sizeof pt, cudaMemRangeAttributePreferredLocationType, man, N));
  printf("last prefetch=%d type=%d preferred=%d type=%d\n", loc, lt, pl, pt);
  int acc[4] = {-5, -5, -5, -5};
  TC(cudaMemRangeGetAttribute(acc, sizeof acc, cudaMemRangeAttributeAccessedBy, man, N));
  printf("accessed by %d %d %d %d\n", acc[0], acc[1], acc[2], acc[3]);
  TC(cudaMemRangeGetAttribute(&loc, 3, cudaMemRangeAttributeReadMostly, man, N));
  TC(cudaMemRangeGetAttribute(NULL, 4, cudaMemRangeAttributeReadMostly, man, N));
  TC(cudaMemRangeGetAttribute(&loc, 4, (enum cudaMemRangeAttribute)99, man, N));
  TC(cudaMemRangeGetAttribute(&loc, 4, cudaMemRangeAttributeReadMostly, dev, N));
  void *datas[2] = {&rm, &loc};
  size_t dsz[2] = {sizeof rm, sizeof loc};
  enum cudaMemRangeAttribute at[2] = {cudaMemRangeAttributeReadMostly,
                                      cudaMemRangeAttributeLastPrefetchLocation};
  TC(cudaMemRangeGetAttributes(datas, dsz, at, 2, man, N));
  printf("attributes %d %d\n", rm, loc);
  TC(cudaMemRangeGetAttributes(datas, dsz, at, 0, man, N));

  /* batched prefetch / discard (CUDA 13) */
  void *ptrs[2] = {man, man + 4096};
  size_t lens[2] = {4096, 1000};
  struct cudaMemLocation locs[1] = {{cudaMemLocationTypeDevice, 0}};
  size_t idx[1] = {0};
  TC(cudaMemPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 1, 0, s));
  TC(cudaMemPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 1, 1, s));
  TC(cudaMemPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 1, 0, 0));
  TC(cudaMemPrefetchBatchAsync(NULL, lens, 2, locs, idx, 1, 0, s));
  TC(cudaMemDiscardAndPrefetchBatchAsync(ptrs, lens, 2, locs, idx, 1, 0, s));
  TC(cudaMemDiscardBatchAsync(ptrs, lens, 2, 0, s));
  TC(cudaMemDiscardBatchAsync(ptrs, lens, 2, 0, 0));
  TC(cudaStreamSynchronize(s));

  /* a destroyed stream (last: the driver judges a stale handle) */
  TC(cudaStreamDestroy(s));
  /* A destroyed stream crashes NVIDIA's runtime (run7): forked. */
  TREFUSE(cudaMemcpyAsync(dev, pin, 16, cudaMemcpyHostToDevice, s));
  TREFUSE(cudaMemsetAsync(dev, 0, 16, s));

  TC(cudaDeviceSynchronize());
  CHECK(cudaFree(man));
  CHECK(cudaFree(dev));
  CHECK(cudaFree(dev2));
  CHECK(cudaFreeHost(pin));
  CHECK(cudaFreeHost(pin2));
  free(src);
  free(dst);
  return 0;
}
