/* Copy bandwidth, 256 MiB, on random data. Device time from
 * events around each copy; GB/s = 1e9 bytes/s.
 *
 * bw_h2d_pinned_gbps    cudaMemcpyAsync pinned host -> device
 * bw_d2h_pinned_gbps    cudaMemcpyAsync device -> pinned host
 * bw_d2d_gbps           cudaMemcpyAsync device -> device, bytes read + written
 * bw_h2d_pageable_gbps  cudaMemcpy pageable host -> device, host clock
 *                       (through the end of a stream sync)
 * bw_h2d_pinned_64mib_gbps, bw_d2h_pinned_64mib_gbps
 *                       the pinned copies at 64 MiB, from and to buffers
 *                       that were allocated, freed and allocated again
 *                       (with cudaev: memory reused from its pinned pool)
 * Each result is checked against its source once, outside the timing.
 */
#include "common.h"

#include <vector>

static const size_t kBytes = (size_t)256 << 20;

static void verify(const void *expect, const void *dev, void *scratch, const char *what) {
  CHECK(cudaMemcpy(scratch, dev, kBytes, cudaMemcpyDeviceToHost));
  if (memcmp(expect, scratch, kBytes) != 0) DIE("%s: copied data differs from its source", what);
}

template <class F>
static void timed_events(const char *metric, double bytes_moved, cudaStream_t s, F copy) {
  const int warm = 3, n = 20;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<double> v((size_t)n);
  for (int i = -warm; i < n; i++) {
    CHECK(cudaEventRecord(a, s));
    copy();
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 0) v[(size_t)i] = bytes_moved / (ms * 1e-3) / 1e9;
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  bench_unit(metric, "GB/s");
  for (double x : v) bench_sample(metric, x);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *hsrc, *hdst, *d1, *d2;
  CHECK(cudaMallocHost(&hsrc, kBytes));
  CHECK(cudaMallocHost(&hdst, kBytes));
  CHECK(cudaMalloc(&d1, kBytes));
  CHECK(cudaMalloc(&d2, kBytes));
  bench_fill_random(hsrc, kBytes, 0x9e3779b97f4a7c15ull);
  CHECK(cudaMemcpy(d1, hsrc, kBytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d2, 0x5a, kBytes));

  if (bench_begin("bw_h2d_pinned")) {
    timed_events("bw_h2d_pinned_gbps", (double)kBytes, s,
                 [&] { CHECK(cudaMemcpyAsync(d2, hsrc, kBytes, cudaMemcpyHostToDevice, s)); });
    verify(hsrc, d2, hdst, "bw_h2d_pinned");
    bench_end();
  }

  if (bench_begin("bw_d2h_pinned")) {
    memset(hdst, 0xa5, kBytes);
    timed_events("bw_d2h_pinned_gbps", (double)kBytes, s,
                 [&] { CHECK(cudaMemcpyAsync(hdst, d1, kBytes, cudaMemcpyDeviceToHost, s)); });
    if (memcmp(hsrc, hdst, kBytes) != 0) DIE("bw_d2h_pinned: copied data differs from its source");
    bench_end();
  }

  if (bench_begin("bw_d2d")) {
    CHECK(cudaMemset(d2, 0x5a, kBytes));
    timed_events("bw_d2d_gbps", 2.0 * (double)kBytes, s,
                 [&] { CHECK(cudaMemcpyAsync(d2, d1, kBytes, cudaMemcpyDeviceToDevice, s)); });
    verify(hsrc, d2, hdst, "bw_d2d");
    bench_end();
  }

  if (bench_begin("bw_h2d_pageable")) {
    const int warm = 2, n = 10;
    char *page = (char *)malloc(kBytes);
    if (page == NULL) DIE("out of host memory");
    bench_fill_random(page, kBytes, 0x2545f4914f6cdd1dull);
    std::vector<double> v((size_t)n);
    for (int i = -warm; i < n; i++) {
      uint64_t t0 = bench_now_ns();
      CHECK(cudaMemcpy(d2, page, kBytes, cudaMemcpyHostToDevice));
      CHECK(cudaStreamSynchronize(0));
      uint64_t t1 = bench_now_ns();
      if (i >= 0) v[(size_t)i] = (double)kBytes / ((double)(t1 - t0) * 1e-9) / 1e9;
    }
    bench_unit("bw_h2d_pageable_gbps", "GB/s");
    for (double x : v) bench_sample("bw_h2d_pageable_gbps", x);
    verify(page, d2, hdst, "bw_h2d_pageable");
    free(page);
    bench_end();
  }

  if (bench_begin("bw_pinned_64mib")) {
    const size_t n = (size_t)64 << 20;
    void *a, *b;
    CHECK(cudaMallocHost(&a, n));
    CHECK(cudaMallocHost(&b, n));
    CHECK(cudaFreeHost(a));
    CHECK(cudaFreeHost(b));
    CHECK(cudaMallocHost(&a, n));
    CHECK(cudaMallocHost(&b, n));
    bench_fill_random(a, n, 0x6a09e667f3bcc909ull);
    timed_events("bw_h2d_pinned_64mib_gbps", (double)n, s,
                 [&] { CHECK(cudaMemcpyAsync(d2, a, n, cudaMemcpyHostToDevice, s)); });
    memset(b, 0xa5, n);
    timed_events("bw_d2h_pinned_64mib_gbps", (double)n, s,
                 [&] { CHECK(cudaMemcpyAsync(b, d2, n, cudaMemcpyDeviceToHost, s)); });
    if (memcmp(a, b, n) != 0) DIE("bw_pinned_64mib: copied data differs from its source");
    CHECK(cudaFreeHost(a));
    CHECK(cudaFreeHost(b));
    bench_end();
  }

  CHECK(cudaFree(d1));
  CHECK(cudaFree(d2));
  CHECK(cudaFreeHost(hsrc));
  CHECK(cudaFreeHost(hdst));
  CHECK(cudaStreamDestroy(s));
  fflush(stdout);
  return 0;
}
