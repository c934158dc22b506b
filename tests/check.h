/* CHECK for the plain test programs (no Criterion: the ones that must also
 * run under ThreadSanitizer, and the gpu-suite loop programs): a failed
 * check is reported with its place and counted in `failures`, which the
 * program turns into its exit code; and a monotonic clock in ns. */
#ifndef CUDAEV_TESTS_CHECK_H
#define CUDAEV_TESTS_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static int failures;
#define CHECK(c)                                                            \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
      failures++;                                                           \
    }                                                                       \
  } while (0)

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
