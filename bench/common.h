/* Shared by the benchmark programs in bench/ (CUDA C++ and C).
 *
 * Output protocol, read by bench/benchstat.py (documented in bench/README.md):
 *   stdout  "unit <metric> <unit>"      once per metric, before its samples
 *           "sample <metric> <value>"   one line per sample
 *           "bench <name>"              a benchmark starts (optional)
 *           "end <name> <seconds>"      it finished; its samples are complete
 *   stderr  "cudart <path>"             from a constructor: the libcudart the
 *                                       process mapped, read from /proc/self/maps
 * Samples of a benchmark that never printed its "end" line are dropped (the
 * program failed in the middle of it). Every CUDA call is checked: a failure
 * prints a message on stderr and exits with status 1.
 *
 * A program takes optional arguments: names of benchmarks to run (default:
 * all), so one benchmark can be run alone while debugging.
 */
#ifndef CUDAEV_BENCH_COMMON_H
#define CUDAEV_BENCH_COMMON_H

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void bench_report_cudart(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  if (f == NULL) {
    fprintf(stderr, "cudart none (cannot read /proc/self/maps)\n");
    return;
  }
  while (fgets(line, sizeof line, f)) {
    char *path = strchr(line, '/');
    if (path == NULL || strstr(path, "libcudart.so") == NULL) continue;
    path[strcspn(path, "\n")] = '\0';
    fprintf(stderr, "cudart %s\n", path);
    found = 1;
    break;
  }
  fclose(f);
  if (!found) fprintf(stderr, "cudart none\n");
}

__attribute__((constructor)) static void bench_report_cudart_ctor(void) { bench_report_cudart(); }

#define CHECK(expr)                                                                    \
  do {                                                                                 \
    cudaError_t c_e_ = (expr);                                                         \
    if (c_e_ != cudaSuccess) {                                                         \
      fprintf(stderr, "bench: %s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #expr, \
              cudaGetErrorName(c_e_), cudaGetErrorString(c_e_));                       \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* After a batch of launches: a launch error stays in the last error. */
#define CHECK_LAUNCH() CHECK(cudaGetLastError())

#define DIE(...)                            \
  do {                                      \
    fprintf(stderr, "bench: " __VA_ARGS__); \
    fprintf(stderr, "\n");                  \
    exit(1);                                \
  } while (0)

static inline uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double bench_us(uint64_t t0, uint64_t t1) { return (double)(t1 - t0) / 1e3; }

/* Benchmark selection and bookkeeping. */
static int bench_argc;
static char **bench_argv;
static const char *bench_current;
static uint64_t bench_t0;

static inline void bench_init(int argc, char **argv) {
  bench_argc = argc;
  bench_argv = argv;
  setvbuf(stdout, NULL, _IOFBF, 1 << 20);
}

/* Returns nonzero when benchmark `name` is selected, and announces it. */
static inline int bench_begin(const char *name) {
  int selected = bench_argc <= 1;
  for (int i = 1; i < bench_argc && !selected; i++) selected = strcmp(bench_argv[i], name) == 0;
  if (!selected) return 0;
  bench_current = name;
  bench_t0 = bench_now_ns();
  printf("bench %s\n", name);
  return 1;
}

static inline void bench_end(void) {
  double s = (double)(bench_now_ns() - bench_t0) / 1e9;
  printf("end %s %.3f\n", bench_current, s);
  fflush(stdout);
  fprintf(stderr, "bench: %s done in %.2f s\n", bench_current, s);
}

/* A second build of one program names its metrics apart: the loop
 * programs built beside NVIDIA's runtime (bench/meson.build) append
 * "_beside" to every metric, so one table holds both builds' rows. */
#ifndef BENCH_METRIC_SUFFIX
#define BENCH_METRIC_SUFFIX ""
#endif

static inline void bench_unit(const char *metric, const char *unit) {
  printf("unit %s" BENCH_METRIC_SUFFIX " %s\n", metric, unit);
}

static inline void bench_sample(const char *metric, double value) {
  printf("sample %s" BENCH_METRIC_SUFFIX " %.6g\n", metric, value);
}

/* Fills a host buffer with a non-zero pseudo-random pattern (xorshift64). */
static inline void bench_fill_random(void *p, size_t bytes, uint64_t seed) {
  uint64_t x = seed | 1;
  uint64_t *w = (uint64_t *)p;
  size_t n = bytes / sizeof(uint64_t);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w[i] = x;
  }
  for (size_t i = n * sizeof(uint64_t); i < bytes; i++)
    ((unsigned char *)p)[i] = (unsigned char)(i | 1);
}

#endif
