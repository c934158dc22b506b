/* Copies between pageable (malloc) host memory and device memory, random
 * data, host clock. One sample = one copy.
 *
 * bw_h2d_pageable_<size>_gbps        cudaMemcpy host -> device, through the end
 *                                    of a cudaStreamSynchronize(0)
 * bw_d2h_pageable_<size>_gbps        cudaMemcpy device -> host
 * bw_h2d_pageable_async_64mib_gbps   cudaMemcpyAsync host -> device on a
 *                                    non-blocking stream + cudaStreamSynchronize
 * bw_d2h_pageable_async_64mib_gbps   cudaMemcpyAsync device -> host, same
 * for <size> in 4kib, 256kib, 768kib, 1mib, 64mib, 256mib (the ring takes
 * copies over 512 KiB: 256kib is the driver's path on both runtimes,
 * 768kib the ring's smallest kind, two chunks). GB/s = 1e9 bytes/s. Each
 * direction and size is checked against its source once, outside the
 * timing.
 */
#include "common.h"

#include <string>
#include <vector>

struct size_row {
  const char *name;
  size_t bytes;
  int samples;
};

static const size_row kRows[] = {
    {"4kib", (size_t)4 << 10, 2000},    {"256kib", (size_t)256 << 10, 500},
    {"768kib", (size_t)768 << 10, 400}, {"1mib", (size_t)1 << 20, 300},
    {"64mib", (size_t)64 << 20, 20},    {"256mib", (size_t)256 << 20, 8},
};

template <class F>
static void bandwidth(const std::string &metric, size_t bytes, int n, F copy) {
  const int warm = n / 10 + 2;
  std::vector<double> v((size_t)n);
  for (int i = -warm; i < n; i++) {
    uint64_t t0 = bench_now_ns();
    copy();
    uint64_t t1 = bench_now_ns();
    if (i >= 0) v[(size_t)i] = (double)bytes / ((double)(t1 - t0) * 1e-9) / 1e9;
  }
  bench_unit(metric.c_str(), "GB/s");
  for (double x : v) bench_sample(metric.c_str(), x);
}

static void check_equal(const void *a, const void *b, size_t n, const char *what) {
  if (memcmp(a, b, n) != 0) DIE("%s: copied data differs from its source", what);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  CHECK(cudaSetDevice(0));
  const size_t max = (size_t)256 << 20;
  char *src = (char *)malloc(max), *dst = (char *)malloc(max);
  if (src == NULL || dst == NULL) DIE("out of host memory");
  bench_fill_random(src, max, 0x3c6ef372fe94f82bull);
  memset(dst, 0, max);
  void *dev;
  CHECK(cudaMalloc(&dev, max));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  for (const size_row &r : kRows) {
    std::string b = std::string("pageable_") + r.name;
    if (bench_begin(b.c_str())) {
      bandwidth(std::string("bw_h2d_pageable_") + r.name + "_gbps", r.bytes, r.samples, [&] {
        CHECK(cudaMemcpy(dev, src, r.bytes, cudaMemcpyHostToDevice));
        CHECK(cudaStreamSynchronize(0));
      });
      bandwidth(std::string("bw_d2h_pageable_") + r.name + "_gbps", r.bytes, r.samples,
                [&] { CHECK(cudaMemcpy(dst, dev, r.bytes, cudaMemcpyDeviceToHost)); });
      check_equal(src, dst, r.bytes, b.c_str());
      memset(dst, 0, r.bytes);
      bench_end();
    }
  }

  if (bench_begin("pageable_async_64mib")) {
    const size_t n = (size_t)64 << 20;
    bandwidth("bw_h2d_pageable_async_64mib_gbps", n, 20, [&] {
      CHECK(cudaMemcpyAsync(dev, src + 1, n, cudaMemcpyHostToDevice, s));
      CHECK(cudaStreamSynchronize(s));
    });
    bandwidth("bw_d2h_pageable_async_64mib_gbps", n, 20, [&] {
      CHECK(cudaMemcpyAsync(dst + 3, dev, n, cudaMemcpyDeviceToHost, s));
      CHECK(cudaStreamSynchronize(s));
    });
    check_equal(src + 1, dst + 3, n, "pageable_async_64mib");
    bench_end();
  }

  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dev));
  free(src);
  free(dst);
  fflush(stdout);
  return 0;
}
