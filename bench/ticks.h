/* bench_ticks: a cheap timestamp for per-completion traces (the TSC on
 * x86-64, where one read costs a few ns; elsewhere CLOCK_MONOTONIC in ns). */
#ifndef CUDAEV_BENCH_TICKS_H
#define CUDAEV_BENCH_TICKS_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static inline uint64_t bench_ticks(void) {
#if defined(__x86_64__)
  return __rdtsc();
#else
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
#endif
}

#endif
