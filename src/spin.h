/* What the runtime's short spins need (src/wait.c, src/staging.c): a
 * monotonic clock in nanoseconds and the CPU's spin-wait hint.
 *
 * Thread: any. */
#ifndef CUDAEV_SPIN_H
#define CUDAEV_SPIN_H

#include <time.h>

static inline long long cudaev__mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Tells the core this is a spin (x86 pause, arm64 yield): the sibling
 * hyperthread gets the pipeline meanwhile. */
static inline void cudaev__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
