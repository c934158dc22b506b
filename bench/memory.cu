/* Allocation costs. Each sample is one call (or one pair).
 *
 * malloc_1mib_us              cudaMalloc 1 MiB
 * free_1mib_us                cudaFree of it
 * malloc_host_free_4kib_us    cudaMallocHost 4 KiB + cudaFreeHost
 * malloc_host_free_64mib_us   cudaMallocHost 64 MiB + cudaFreeHost
 */
#include "common.h"

#include <vector>

int main(int argc, char **argv) {
  bench_init(argc, argv);
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(0));

  if (bench_begin("malloc_free_1mib")) {
    const int warm = 50, n = 2000;
    std::vector<double> a((size_t)n), f((size_t)n);
    for (int i = -warm; i < n; i++) {
      void *p;
      uint64_t t0 = bench_now_ns();
      CHECK(cudaMalloc(&p, 1 << 20));
      uint64_t t1 = bench_now_ns();
      CHECK(cudaFree(p));
      uint64_t t2 = bench_now_ns();
      if (i >= 0) {
        a[(size_t)i] = bench_us(t0, t1);
        f[(size_t)i] = bench_us(t1, t2);
      }
    }
    bench_unit("malloc_1mib_us", "us");
    for (double x : a) bench_sample("malloc_1mib_us", x);
    bench_unit("free_1mib_us", "us");
    for (double x : f) bench_sample("free_1mib_us", x);
    bench_end();
  }

  struct {
    const char *bench, *metric;
    size_t bytes;
    int warm, n;
  } host[] = {
      {"malloc_host_free_4kib", "malloc_host_free_4kib_us", 4096, 50, 2000},
      {"malloc_host_free_64mib", "malloc_host_free_64mib_us", (size_t)64 << 20, 3, 30},
  };
  for (auto &h : host) {
    if (!bench_begin(h.bench)) continue;
    std::vector<double> v((size_t)h.n);
    for (int i = -h.warm; i < h.n; i++) {
      void *p;
      uint64_t t0 = bench_now_ns();
      CHECK(cudaMallocHost(&p, h.bytes));
      CHECK(cudaFreeHost(p));
      uint64_t t1 = bench_now_ns();
      if (i >= 0) v[(size_t)i] = bench_us(t0, t1);
    }
    bench_unit(h.metric, "us");
    for (double x : v) bench_sample(h.metric, x);
    bench_end();
  }
  fflush(stdout);
  return 0;
}
