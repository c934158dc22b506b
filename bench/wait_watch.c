/* The GPU's own completion time of a CUDA event, for bench/decode_trace.py:
 * a thread spinning on cuEventQuery records CLOCK_MONOTONIC when the event
 * it was told to watch completes. It costs a core while it runs: a
 * diagnostic, never part of a measurement of CPU. Loaded with ctypes into
 * a process that already has libcuda loaded (PyTorch's); it finds libcuda
 * with RTLD_NOLOAD and makes the caller's context current on its thread.
 *
 *   int wait_watch(void *cu_event)   start watching (the first call starts the thread)
 *   int64_t wait_watch_done(void)    ns (CLOCK_MONOTONIC) it saw the event done; 0: not yet
 *   int wait_watch_counters(int64_t out[6])
 *       the calling thread's instructions and cycles retired so far (user and
 *       kernel where the PMU lets us, user only otherwise; -1 where a guest has
 *       no PMU), its CPU time in ns, its voluntary and involuntary context
 *       switches, and the CPU it runs on now (sched_getcpu). Returns 1 where
 *       instructions and cycles are counted, else 0.
 *       Counters are per thread: call it from the thread it measures, always
 *       the same one (the first call opens them for that thread).
 * Thread: wait_watch and wait_watch_done from one thread (one event at a time). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

int wait_watch(void *event);
int64_t wait_watch_done(void);
int wait_watch_counters(int64_t *out);

typedef int (*event_query_fn)(void *);
typedef int (*ctx_set_fn)(void *);
typedef int (*ctx_get_fn)(void **);

static event_query_fn event_query;
static ctx_set_fn ctx_set;
static void *ctx;
static _Atomic(void *) watched;
static _Atomic int64_t done_ns;
static int started;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *watch_main(void *arg) {
  (void)arg;
  ctx_set(ctx);
  for (;;) {
    void *e = atomic_load(&watched);
    if (e != NULL && event_query(e) == 0) {
      atomic_store(&done_ns, now_ns());
      atomic_compare_exchange_strong(&watched, &e, NULL);
    } else {
      for (int i = 0; i < 8; i++) __builtin_ia32_pause();
    }
  }
  return NULL;
}

int wait_watch(void *event) {
  if (!started) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) return -1;
    event_query = (event_query_fn)dlsym(h, "cuEventQuery");
    ctx_set = (ctx_set_fn)dlsym(h, "cuCtxSetCurrent");
    ctx_get_fn ctx_get = (ctx_get_fn)dlsym(h, "cuCtxGetCurrent");
    if (event_query == NULL || ctx_set == NULL || ctx_get == NULL || ctx_get(&ctx) != 0) return -1;
    pthread_t t;
    if (pthread_create(&t, NULL, watch_main, NULL) != 0) return -1;
    pthread_detach(t);
    started = 1;
  }
  atomic_store(&done_ns, 0);
  atomic_store(&watched, event);
  return 0;
}

int64_t wait_watch_done(void) { return atomic_load(&done_ns); }

/* A group (instructions, cycles) read in one read(2): the pair is taken at
 * the same instant, so their ratio (IPC) is meaningful for short spans. */
static int counters_fd = -2; /* -2: not tried yet; -1: no PMU */

static int open_counter(uint64_t config, int group, int exclude_kernel) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = config;
  a.exclude_hv = 1;
  a.exclude_kernel = (unsigned)exclude_kernel;
  a.read_format = PERF_FORMAT_GROUP;
  return (int)syscall(SYS_perf_event_open, &a, 0, -1, group, 0);
}

static void open_counters(void) {
  for (int exclude_kernel = 0; exclude_kernel <= 1; exclude_kernel++) {
    int lead = open_counter(PERF_COUNT_HW_INSTRUCTIONS, -1, exclude_kernel);
    if (lead < 0) continue;
    if (open_counter(PERF_COUNT_HW_CPU_CYCLES, lead, exclude_kernel) >= 0) {
      counters_fd = lead;
      return;
    }
    close(lead);
  }
  counters_fd = -1;
}

int wait_watch_counters(int64_t *out) {
  if (counters_fd == -2) open_counters();
  uint64_t v[3] = {0, 0, 0}; /* nr, instructions, cycles */
  int have = counters_fd >= 0 && read(counters_fd, v, sizeof v) == (ssize_t)sizeof v && v[0] == 2;
  out[0] = have ? (int64_t)v[1] : -1;
  out[1] = have ? (int64_t)v[2] : -1;
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  out[2] = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  out[3] = ru.ru_nvcsw;
  out[4] = ru.ru_nivcsw;
  out[5] = sched_getcpu();
  return have;
}
