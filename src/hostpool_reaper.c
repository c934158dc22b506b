/* The pinned pool's reaper thread: jemalloc's decay while freed memory is
 * cached, a purge once the pool has been idle for the decay time
 * (contract: hostpool_internal.h).
 * Calls: hostpool_held.c, hostpool_arena.c (what a pass releases). */
#include "capture.h"
#include "hostpool_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

/* CUDAEV_HOST_POOL_DECAY_MS, set once before the pool is switched on. */
static long decay_ms;

static atomic_bool pool_dirty;     /* freed memory may be cached: the reaper has work */
static atomic_ulong pool_activity; /* bumped by every pooled allocation and free */
static struct {
  pthread_mutex_t mu; /* guards the fields below */
  pthread_cond_t cv;
  pthread_t th;
  bool running, stop, hooked;
} reaper = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &a);
  pthread_condattr_destroy(&a);
}

/* jemalloc's decay only runs when its arena is used; this thread runs it
 * while the pool holds freed memory, every quarter of the decay time, and
 * purges everything once no pooled call happened for a whole decay time. */
static void *reaper_main(void *arg) {
  (void)arg;
  /* Its frees are no part of any capture (driver.h). */
  (void)cudaev__capture_relax();
  uint64_t period = (uint64_t)decay_ms * 250000u, decay = (uint64_t)decay_ms * 1000000u;
  if (period < 1000000u) period = 1000000u;
  pthread_mutex_lock(&reaper.mu);
  unsigned long seen = atomic_load(&pool_activity);
  uint64_t idle_since = now_ns();
  while (!reaper.stop) {
    if (!atomic_load(&pool_dirty)) {
      pthread_cond_wait(&reaper.cv, &reaper.mu);
      seen = atomic_load(&pool_activity);
      idle_since = now_ns();
      continue;
    }
    uint64_t until = now_ns() + period;
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u),
                          .tv_nsec = (long)(until % 1000000000u)};
    while (!reaper.stop && pthread_cond_timedwait(&reaper.cv, &reaper.mu, &ts) == 0) {
    }
    if (reaper.stop) break;
    pthread_mutex_unlock(&reaper.mu);
    uint64_t t = now_ns();
    unsigned long a = atomic_load(&pool_activity);
    if (a != seen) {
      seen = a;
      idle_since = t;
    }
    bool idle = t - idle_since >= decay;
    cudaev__hostpool_release_held();
    cudaev__hostpool_purge(idle);
    pthread_mutex_lock(&reaper.mu);
    /* Dekker with cudaev__hostpool_note_free: it bumps the activity, then reads the flag;
     * this clears the flag, then reads the activity. One of the two sees
     * the other, so a free is never left without a reaper. */
    if (idle && cudaev__hostpool_nheld() == 0) {
      atomic_store(&pool_dirty, false);
      if (atomic_load(&pool_activity) != seen) atomic_store(&pool_dirty, true);
    }
  }
  pthread_mutex_unlock(&reaper.mu);
  return NULL;
}

/* Process exit (atexit: before the driver's own exit handlers, registered
 * at cuInit, which came first) and dlclose: stops the reaper and joins it,
 * so that no purge runs while the driver tears down. */
void cudaev__hostpool_reaper_stop(void) {
  pthread_mutex_lock(&reaper.mu);
  bool join = reaper.running && !pthread_equal(reaper.th, pthread_self());
  pthread_t th = reaper.th;
  reaper.stop = true;
  pthread_cond_signal(&reaper.cv);
  pthread_mutex_unlock(&reaper.mu);
  if (join) pthread_join(th, NULL);
  pthread_mutex_lock(&reaper.mu);
  reaper.running = false;
  pthread_mutex_unlock(&reaper.mu);
}

static void reaper_kick(void) {
  pthread_mutex_lock(&reaper.mu);
  atomic_store(&pool_dirty, true);
  if (reaper.running) {
    pthread_cond_signal(&reaper.cv);
  } else if (!reaper.stop) {
    if (!reaper.hooked) {
      reaper.hooked = true;
      atexit(cudaev__hostpool_reaper_stop);
    }
    /* Signals go to the application's threads, never to this one. If no
     * thread can be made, jemalloc's own decay (on pool activity) is all
     * that returns memory: the flag stays set so no free tries again. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    reaper.running = pthread_create(&reaper.th, NULL, reaper_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  pthread_mutex_unlock(&reaper.mu);
}

void cudaev__hostpool_note_free(void) {
  atomic_fetch_add(&pool_activity, 1);
  if (!atomic_load(&pool_dirty)) reaper_kick();
}

void cudaev__hostpool_note_alloc(void) {
  atomic_fetch_add_explicit(&pool_activity, 1, memory_order_relaxed);
}

void cudaev__hostpool_reaper_init(long ms) {
  decay_ms = ms;
  cond_init_monotonic(&reaper.cv);
}

void cudaev__hostpool_reaper_fork_lock(void) { pthread_mutex_lock(&reaper.mu); }
void cudaev__hostpool_reaper_fork_unlock(void) { pthread_mutex_unlock(&reaper.mu); }
void cudaev__hostpool_reaper_fork_reinit(void) {
  pthread_mutex_init(&reaper.mu, NULL);
  cond_init_monotonic(&reaper.cv);
  reaper.running = false;
  reaper.stop = false;
  atomic_store(&pool_dirty, false);
}
