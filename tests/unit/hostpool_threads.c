/* The pinned host memory pool under concurrency, as a plain program so it
 * also runs under ThreadSanitizer (suite tsan; Criterion cannot start
 * there): threads allocate pooled memory of several sizes and flag sets,
 * fill it with their own pattern, check it and free it, while the reaper
 * purges every millisecond; pairs of threads race to free the same
 * pointer (exactly one may win). Exits 0 when every call answered as it
 * should, no memory was handed out twice and every chunk went back to the
 * driver once the pool was idle. */
#include "fake_host.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

enum { THREADS = 4, ROUNDS = 400, HELD = 8, RACES = 200 };

static atomic_int bad;

static void fail(const char *what, int t, int i) {
  fprintf(stderr, "hostpool_threads: thread %d round %d: %s\n", t, i, what);
  atomic_fetch_add(&bad, 1);
}

static void *worker(void *arg) {
  int t = (int)(uintptr_t)arg;
  static const size_t sizes[] = {4096, 100, 12288, 65536, 1 << 20, 3 << 20};
  unsigned char *held[HELD] = {0};
  size_t len[HELD] = {0};
  unsigned seed = (unsigned)t * 2654435761u + 1;
  for (int i = 0; i < ROUNDS; i++) {
    int k = i % HELD;
    if (held[k] != NULL) {
      for (size_t j = 0; j < len[k]; j += 512)
        if (held[k][j] != (unsigned char)(t + 1)) fail("memory changed under its owner", t, i);
      if (cudaFreeHost(held[k]) != cudaSuccess) fail("cudaFreeHost", t, i);
      held[k] = NULL;
    }
    seed = seed * 1103515245u + 12345u;
    size_t n = sizes[(seed >> 16) % (sizeof sizes / sizeof sizes[0])];
    unsigned flags = (seed >> 8) % 8;
    void *p = NULL;
    if (cudaHostAlloc(&p, n, flags) != cudaSuccess || p == NULL) {
      fail("cudaHostAlloc", t, i);
      continue;
    }
    unsigned got = 99;
    if (cudaHostGetFlags(&got, p) != cudaSuccess || got != flags) fail("flags", t, i);
    memset(p, t + 1, n);
    held[k] = p;
    len[k] = n;
  }
  for (int k = 0; k < HELD; k++)
    if (held[k] != NULL && cudaFreeHost(held[k]) != cudaSuccess) fail("final cudaFreeHost", t, k);
  return NULL;
}

/* Two threads free the same pointer: one cudaSuccess, one InvalidValue. */
static void *volatile shared;
static atomic_int wins, refusals;
static pthread_barrier_t bar;

static void *racer(void *arg) {
  (void)arg;
  for (int i = 0; i < RACES; i++) {
    pthread_barrier_wait(&bar);
    cudaError_t e = cudaFreeHost(shared);
    if (e == cudaSuccess)
      atomic_fetch_add(&wins, 1);
    else if (e == cudaErrorInvalidValue)
      atomic_fetch_add(&refusals, 1);
    pthread_barrier_wait(&bar);
  }
  return NULL;
}

int main(void) {
  setenv("CUDAEV_HOST_POOL_DECAY_MS", "1", 1);
  static struct cudaev_driver t;
  fake_driver_host(&t);
  cudaev__driver_install(&t, 13000);

  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);

  pthread_barrier_init(&bar, NULL, 3);
  pthread_t r[2];
  for (int i = 0; i < 2; i++) pthread_create(&r[i], NULL, racer, NULL);
  for (int i = 0; i < RACES; i++) {
    void *p = NULL;
    if (cudaMallocHost(&p, i % 2 ? 4096 : 65536) != cudaSuccess) fail("race alloc", -1, i);
    shared = p;
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
  }
  for (int i = 0; i < 2; i++) pthread_join(r[i], NULL);
  if (atomic_load(&wins) != RACES || atomic_load(&refusals) != RACES) {
    fprintf(stderr, "hostpool_threads: %d wins, %d refusals of %d races\n", atomic_load(&wins),
            atomic_load(&refusals), RACES);
    atomic_fetch_add(&bad, 1);
  }

  /* Idle: every chunk goes back to the driver once (the reaper, within
   * ~2 ms here; TSan is slow, so allow seconds). A racer that lost after
   * the reaper had purged the chunk asked the driver, which refused: those
   * are the only refusals. */
  int allocs = 0, freed = 0;
  for (int i = 0; i < 10000; i++) {
    allocs = atomic_load(&fake_host_allocs);
    freed = atomic_load(&fake_host_frees) - atomic_load(&fake_host_bad_frees);
    if (freed == allocs) break;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  if (freed != allocs || atomic_load(&fake_host_dead_frees) != 0 ||
      atomic_load(&fake_host_bad_frees) > RACES) {
    fprintf(stderr, "hostpool_threads: %d chunks allocated, %d freed, %d refused frees\n", allocs,
            freed, atomic_load(&fake_host_bad_frees));
    atomic_fetch_add(&bad, 1);
  }
  printf("hostpool_threads: %d chunks, %d problems\n", allocs, atomic_load(&bad));
  return atomic_load(&bad) == 0 ? 0 : 1;
}
