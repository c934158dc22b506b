/* The GPU's own completion time of a CUDA event, for bench/decode_trace.py:
 * a thread spinning on cuEventQuery records CLOCK_MONOTONIC when the event
 * it was told to watch completes. It costs a core while it runs: a
 * diagnostic, never part of a measurement of CPU. Loaded with ctypes into
 * a process that already has libcuda loaded (PyTorch's); it finds libcuda
 * with RTLD_NOLOAD and makes the caller's context current on its thread.
 *
 *   int wait_watch(void *cu_event)   start watching (the first call starts the thread)
 *   int64_t wait_watch_done(void)    ns (CLOCK_MONOTONIC) it saw the event done; 0: not yet
 * Thread: wait_watch and wait_watch_done from one thread (one event at a time). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

int wait_watch(void *event);
int64_t wait_watch_done(void);

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
