/* The loop's clock: CLOCK_MONOTONIC in nanoseconds. Inline because the
 * loop reads it several times per pass and per submission (the adaptive
 * spin, the watchdog, submit times), and the vDSO call is all it costs. */
#ifndef CUDAEV_CLOCK_H
#define CUDAEV_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Thread: any. */
static inline uint64_t cudaev__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
