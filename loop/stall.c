/* Stall detection of loop-thread host functions (stall.h says who calls
 * what; docs/design.md, "Loop-thread host functions", why it is a thread).
 *
 * Nothing of the library runs while nobody drives a loop: not the loop (it
 * is not driven), not the thread hung in cudaMalloc (it is inside the
 * driver), and not the driver's host-function thread past the gate's
 * wake-up (blocking it would hold back every other host function of the
 * context). So a monitor thread of our own watches: it exists only while
 * gates are in flight or reached and not yet taken in by a pass (and a
 * short linger after, so that steady traffic keeps one thread), wakes a
 * few times per threshold, reads a few atomics per loop, and makes no CUDA
 * call (nothing a stream capture could see). */
#include "stall.h"

#include "clock.h"
#include "cudaev.h"
#include "debug.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_MS 1000u
#define LINGER_NS  2000000000ull /* the monitor outlives the last activity by this */
#define PERIOD_MAX 250u          /* ms between looks, at most */

struct cudaev__stall {
  _Atomic uint32_t refs; /* the loop's, and one per wake-up in flight */
  /* When the GPU reached the oldest gate no pass has taken in yet
   * (cudaev__now_ns; 0: none), and that gate's stream. Written by the
   * driver's thread, cleared by the loop thread, read by the monitor. */
  _Atomic uint64_t reached_ns;
  _Atomic uintptr_t stream;
  _Atomic uint64_t pass_ns; /* the loop's last pass (its tick's clock) */
  const void *loop;         /* named in the message only */
  /* The monitor's, under mu: the stall already reported (its reached_ns),
   * and the list of records. */
  uint64_t warned;
  struct cudaev__stall *next, *prev;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;             /* the monitor's sleep; stop wakes it */
static struct cudaev__stall *records; /* every live loop's, under mu */
static bool alive, started, stop;     /* under mu: the thread runs / was made / must end */
static pthread_t monitor;
static _Atomic uint32_t running; /* alive, read without mu by cudaev__stall_hold */
static _Atomic uint32_t holds;   /* wake-ups in flight, every loop */
static _Atomic uint32_t threshold_ms = UINT32_MAX; /* UINT32_MAX: not read yet */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init_once(void); /* the condition variable's clock, the fork handlers */

uint32_t cudaev__stall_ms(void) {
  uint32_t ms = atomic_load_explicit(&threshold_ms, memory_order_relaxed);
  if (ms != UINT32_MAX) return ms;
  const char *e = getenv("CUDAEV_HOSTFN_STALL_MS");
  char *end = NULL;
  unsigned long v = e != NULL && *e != '\0' ? strtoul(e, &end, 10) : DEFAULT_MS;
  if (e != NULL && *e != '\0' && (*end != '\0' || v >= UINT32_MAX)) {
    cudaev__log(CUDAEV_LOG_WARN,
                "CUDAEV_HOSTFN_STALL_MS is not a number of milliseconds: "
                "the default (1000) applies");
    v = DEFAULT_MS;
  }
  uint32_t expect = UINT32_MAX;
  atomic_compare_exchange_strong(&threshold_ms, &expect, (uint32_t)v);
  return atomic_load_explicit(&threshold_ms, memory_order_relaxed);
}

void cudaev__stall_set_ms(uint32_t ms) {
  atomic_store(&threshold_ms, ms == UINT32_MAX ? UINT32_MAX - 1 : ms);
  pthread_once(&once, init_once);
  pthread_mutex_lock(&mu);
  pthread_cond_broadcast(&cv); /* a new period at once */
  pthread_mutex_unlock(&mu);
}

/* ---- the records ----------------------------------------------------------- */

struct cudaev__stall *cudaev__stall_new(const void *loop) {
  struct cudaev__stall *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  atomic_init(&s->refs, 1);
  atomic_init(&s->pass_ns, cudaev__now_ns()); /* never driven: since creation */
  s->loop = loop;
  pthread_mutex_lock(&mu);
  s->next = records;
  if (records != NULL) records->prev = s;
  records = s;
  pthread_mutex_unlock(&mu);
  return s;
}

static void release(struct cudaev__stall *s) {
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) free(s);
}

void cudaev__stall_free(struct cudaev__stall *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&mu);
  if (s->prev != NULL)
    s->prev->next = s->next;
  else if (records == s)
    records = s->next;
  if (s->next != NULL) s->next->prev = s->prev;
  s->next = s->prev = NULL;
  pthread_mutex_unlock(&mu);
  release(s);
}

void cudaev__stall_reached(struct cudaev__stall *s, CUstream stream) {
  if (s == NULL || atomic_load_explicit(&s->reached_ns, memory_order_relaxed) != 0) return;
  atomic_store_explicit(&s->stream, (uintptr_t)stream, memory_order_relaxed);
  uint64_t zero = 0;
  atomic_compare_exchange_strong_explicit(&s->reached_ns, &zero, cudaev__now_ns(),
                                          memory_order_release, memory_order_relaxed);
}

void cudaev__stall_poll(struct cudaev__stall *s) {
  /* A load first: this runs every pass, the exchange only after a gate. */
  if (s != NULL && atomic_load_explicit(&s->reached_ns, memory_order_relaxed) != 0)
    atomic_store_explicit(&s->reached_ns, 0, memory_order_relaxed);
}

void cudaev__stall_tick(struct cudaev__stall *s, uint64_t now) {
  if (s != NULL) atomic_store_explicit(&s->pass_ns, now, memory_order_relaxed);
}

/* ---- the monitor ----------------------------------------------------------- */

/* Under mu: the message for s if its stall passed the threshold and was not
 * reported yet (written into buf; false otherwise). Whether s is active
 * (a stall on record) goes to *active. */
static bool look(struct cudaev__stall *s, uint64_t now, uint64_t thr_ns, char *buf, size_t n,
                 bool *active) {
  uint64_t r = atomic_load_explicit(&s->reached_ns, memory_order_acquire);
  if (r == 0) return false;
  *active = true;
  if (now < r || now - r < thr_ns || s->warned == r) return false;
  s->warned = r;
  uint64_t pass = atomic_load_explicit(&s->pass_ns, memory_order_relaxed);
  uintptr_t st = atomic_load_explicit(&s->stream, memory_order_relaxed);
  snprintf(buf, n,
           "a loop-thread host function on stream %#llx has waited %llu ms for its loop "
           "(loop %p has not run a pass for %llu ms): threads that synchronize (cudaMalloc, "
           "cudaMallocHost, cudaDeviceSynchronize, ...) wait for it; drive the loop, or use "
           "cudaev_loop_new_thread",
           (unsigned long long)st, (unsigned long long)((now - r) / 1000000u), s->loop,
           (unsigned long long)(now > pass ? (now - pass) / 1000000u : 0));
  return true;
}

static void *monitor_main(void *arg) {
  (void)arg;
  char msg[400];
  pthread_mutex_lock(&mu);
  uint64_t last_active = cudaev__now_ns();
  while (!stop) {
    uint32_t ms = cudaev__stall_ms();
    uint64_t now = cudaev__now_ns();
    bool active = atomic_load(&holds) > 0, said = false;
    if (ms != 0)
      for (struct cudaev__stall *s = records; s != NULL && !said; s = s->next)
        said = look(s, now, (uint64_t)ms * 1000000u, msg, sizeof msg, &active);
    if (said) {
      /* The hook is the application's: never under our lock. The record
       * may go meanwhile; the message is a copy. The next look goes on
       * with the other records. */
      pthread_mutex_unlock(&mu);
      cudaev__log(CUDAEV_LOG_WARN, msg);
      pthread_mutex_lock(&mu);
      continue;
    }
    if (active) last_active = now;
    if (now - last_active > LINGER_NS) {
      /* Leave, unless a hold began meanwhile (cudaev__stall_hold checks
       * `running` after its increment; this checks `holds` after the
       * clear: one of the two sees the other). */
      atomic_store(&running, 0);
      if (atomic_load(&holds) == 0) break;
      atomic_store(&running, 1);
      last_active = now;
    }
    uint32_t period = ms / 4;
    if (period == 0) period = 1;
    if (period > PERIOD_MAX || ms == 0) period = PERIOD_MAX;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)period * 1000000u;
    until.tv_sec += (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    pthread_cond_timedwait(&cv, &mu, &until);
  }
  alive = false;
  atomic_store(&running, 0);
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* In the child of a fork the monitor does not exist: a later hold starts
 * the child's own. The parent's loops are abandoned there (backend_thread.c):
 * their records leave the list, so that the child reports only its own. */
static void fork_prepare(void) { pthread_mutex_lock(&mu); }
static void fork_parent(void) { pthread_mutex_unlock(&mu); }
static void fork_child(void) {
  for (struct cudaev__stall *s = records, *n; s != NULL; s = n) {
    n = s->next;
    s->next = s->prev = NULL;
  }
  records = NULL;
  alive = started = stop = false;
  atomic_store(&running, 0);
  atomic_store(&holds, 0);
  pthread_mutex_unlock(&mu);
}

static void init_once(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&cv, &a);
  pthread_condattr_destroy(&a);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Under mu: starts the monitor (joining a previous one that left). A
 * failure leaves detection off until the next hold tries again. */
static void start_locked(void) {
  if (alive || stop) return;
  if (started) pthread_join(monitor, NULL); /* it left: alive is false */
  started = false;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = pthread_create(&monitor, NULL, monitor_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r != 0) return;
  started = alive = true;
  atomic_store(&running, 1);
}

void cudaev__stall_hold(struct cudaev__stall *s) {
  if (s == NULL) return;
  atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  atomic_fetch_add(&holds, 1);
  if (atomic_load(&running) || cudaev__stall_ms() == 0) return;
  pthread_once(&once, init_once);
  pthread_mutex_lock(&mu);
  start_locked();
  pthread_mutex_unlock(&mu);
}

void cudaev__stall_unhold(struct cudaev__stall *s) {
  if (s == NULL) return;
  atomic_fetch_sub(&holds, 1);
  release(s);
}

/* Exit and dlclose: the monitor's code must not be unmapped under it. */
__attribute__((destructor)) static void monitor_fini(void) {
  pthread_mutex_lock(&mu);
  bool join = started && !pthread_equal(monitor, pthread_self());
  stop = true;
  if (started) pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  if (join) pthread_join(monitor, NULL);
}
