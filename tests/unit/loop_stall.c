/* The stall monitor of loop-thread host functions (loop/stall.c) against a
 * fake driver whose "GPU" thread runs each stream's operations in order:
 *  - a gate reached on a loop nobody drives is reported once through the
 *    log hook, at CUDAEV_LOG_WARN, naming the stream and how long the loop
 *    has not run a pass; a second stall of the same loop is reported again;
 *  - a loop driven promptly (a thread-mode loop) gives no message;
 *  - a threshold of 0 gives none;
 *  - the pooled-event path (no stream memory operations: its gate blocks
 *    the driver's host-function thread) is reported the same way.
 * The first threshold comes from CUDAEV_HOSTFN_STALL_MS (set here before
 * the library reads it), the later ones from cudaev__stall_set_ms. A plain
 * program (no Criterion), also run under TSan (suite tsan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudaev.h"
#include "driver/driver.h"
#include "fake_driver.h"
#include "stall.h"

#define CHECK(c, ...)                              \
  do {                                             \
    if (!(c)) {                                    \
      fprintf(stderr, "loop_stall: " __VA_ARGS__); \
      fputc('\n', stderr);                         \
      exit(1);                                     \
    }                                              \
  } while (0)

/* ---- the fake GPU ---------------------------------------------------------- */

enum op_kind { OP_WRITE, OP_WAIT, OP_HOSTFN, OP_RECORD };
struct fev {
  atomic_int recorded, reached;
};
struct op {
  enum op_kind kind;
  uint32_t *addr;
  uint32_t val;
  struct fev *ev;
  int seq;
  CUhostFn fn;
  void *arg;
  struct op *next;
};
enum { MAX_STREAMS = 32 };
struct fstream {
  struct op *head, *tail;
};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fstream fs[MAX_STREAMS + 1]; /* [0]: the NULL, legacy and per-thread handles */
static atomic_int nstreams, gpu_stop, no_memops, hostfns_run;

static struct fstream *fs_of(CUstream s) {
  uintptr_t i = (uintptr_t)s;
  return i >= 0x100 && i < 0x100 + MAX_STREAMS ? &fs[i - 0x100 + 1] : &fs[0];
}
static CUresult push(CUstream s, struct op o) {
  struct op *p = malloc(sizeof *p);
  CHECK(p != NULL, "out of memory");
  *p = o;
  p->next = NULL;
  pthread_mutex_lock(&mu);
  struct fstream *f = fs_of(s);
  if (o.kind == OP_RECORD) p->seq = atomic_fetch_add(&o.ev->recorded, 1) + 1;
  if (f->tail)
    f->tail->next = p;
  else
    f->head = p;
  f->tail = p;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}
/* Under mu: runs the head of f if it can; the host function without mu. */
static bool run_one(struct fstream *f) {
  struct op *o = f->head;
  if (o == NULL) return false;
  switch (o->kind) {
  case OP_WAIT:
    if (__atomic_load_n(o->addr, __ATOMIC_ACQUIRE) != o->val) return false;
    break;
  case OP_WRITE: __atomic_store_n(o->addr, o->val, __ATOMIC_RELEASE); break;
  case OP_RECORD: atomic_store(&o->ev->reached, o->seq); break;
  case OP_HOSTFN:
    pthread_mutex_unlock(&mu);
    o->fn(o->arg);
    atomic_fetch_add(&hostfns_run, 1);
    pthread_mutex_lock(&mu);
    break;
  }
  f->head = o->next;
  if (f->head == NULL) f->tail = NULL;
  free(o);
  return true;
}
static void *gpu_main(void *arg) {
  (void)arg;
  while (!atomic_load(&gpu_stop)) {
    bool any = false;
    pthread_mutex_lock(&mu);
    for (int i = 0; i <= MAX_STREAMS; i++) any |= run_one(&fs[i]);
    pthread_mutex_unlock(&mu);
    if (!any) usleep(50);
  }
  return NULL;
}
static bool idle(struct fstream *f) {
  pthread_mutex_lock(&mu);
  bool i = f->head == NULL;
  pthread_mutex_unlock(&mu);
  return i;
}

/* ---- driver entry points --------------------------------------------------- */

static CUresult f_screate(CUstream *s, unsigned fl) {
  (void)fl;
  int i = atomic_fetch_add(&nstreams, 1);
  CHECK(i < MAX_STREAMS, "too many streams");
  *s = (CUstream)(uintptr_t)(0x100 + i);
  return CUDA_SUCCESS;
}
static CUresult f_sgetctx(CUstream s, CUcontext *c, CUgreenCtx *green) {
  (void)s, (void)green;
  *c = (CUcontext)(uintptr_t)0x1000; /* the fake primary context */
  return CUDA_SUCCESS;
}
static CUresult f_sdestroy(CUstream s) { return (void)s, CUDA_SUCCESS; }
static CUresult f_squery(CUstream s) {
  return idle(fs_of(s)) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult f_ssync(CUstream s) {
  while (!idle(fs_of(s))) usleep(50);
  return CUDA_SUCCESS;
}
static CUresult f_csync(CUcontext c) {
  (void)c;
  for (int i = 0; i <= MAX_STREAMS; i++)
    while (!idle(&fs[i])) usleep(50);
  return CUDA_SUCCESS;
}
static CUresult f_write(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned fl) {
  (void)fl;
  if (atomic_load(&no_memops)) return CUDA_ERROR_NOT_SUPPORTED;
  return push(s, (struct op){.kind = OP_WRITE, .addr = (uint32_t *)a, .val = v});
}
static CUresult f_wait(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned fl) {
  (void)fl;
  if (atomic_load(&no_memops)) return CUDA_ERROR_NOT_SUPPORTED;
  return push(s, (struct op){.kind = OP_WAIT, .addr = (uint32_t *)a, .val = v});
}
static CUresult f_ecreate(CUevent *e, unsigned fl) {
  (void)fl;
  *e = (CUevent)calloc(1, sizeof(struct fev));
  return *e != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_edestroy(CUevent e) { return free(e), CUDA_SUCCESS; }
static CUresult f_erecord(CUevent e, CUstream s) {
  return push(s, (struct op){.kind = OP_RECORD, .ev = (struct fev *)e});
}
static CUresult f_equery(CUevent e) {
  struct fev *v = (struct fev *)e;
  return atomic_load(&v->reached) == atomic_load(&v->recorded) ? CUDA_SUCCESS
                                                               : CUDA_ERROR_NOT_READY;
}
static CUresult f_hostfn(CUstream s, CUhostFn fn, void *arg) {
  return push(s, (struct op){.kind = OP_HOSTFN, .fn = fn, .arg = arg});
}

/* ---- the log hook ---------------------------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int nmsg, nwarn;
static char last[512];

static void hook(int level, const char *msg, void *user) {
  (void)user;
  pthread_mutex_lock(&log_mu);
  nmsg++;
  if (level == CUDAEV_LOG_WARN) nwarn++;
  snprintf(last, sizeof last, "%s", msg);
  pthread_mutex_unlock(&log_mu);
}
static int messages(void) {
  pthread_mutex_lock(&log_mu);
  int n = nmsg;
  pthread_mutex_unlock(&log_mu);
  return n;
}
/* Waits up to `ms` for the count of messages to reach n. */
static int wait_messages(int n, int ms) {
  for (int i = 0; i < ms && messages() < n; i++) usleep(1000);
  return messages();
}
/* The last message names `stream` and says how long the loop went undriven. */
static void check_last(CUstream stream, const char *what) {
  char want[64];
  snprintf(want, sizeof want, "on stream %#llx ", (unsigned long long)(uintptr_t)stream);
  pthread_mutex_lock(&log_mu);
  bool named = strstr(last, want) != NULL, warn = nwarn == nmsg,
       undriven = strstr(last, "has not run a pass for") != NULL &&
                  strstr(last, "cudaev: a loop-thread host function") == last;
  pthread_mutex_unlock(&log_mu);
  CHECK(named && warn && undriven, "%s: unexpected message \"%s\" (wanted \"%s\", WARN)", what,
        last, want);
}

/* ---- the tests ------------------------------------------------------------- */

static atomic_int fn_runs;
static cudaError_t host_fn(void *u) {
  (void)u;
  atomic_fetch_add(&fn_runs, 1);
  return cudaSuccess;
}

/* Drives a foreign loop until f is ready (5 s at most). */
static void drive_until(cudaev_loop_t *loop, cudaev_future_t *f, const char *what) {
  for (int i = 0; i < 50000 && !cudaev_future_ready(f); i++) {
    cudaev_loop_process(loop);
    usleep(100);
  }
  CHECK(cudaev_future_ready(f) && cudaev_future_result(f) == cudaSuccess,
        "%s: the host function's future did not complete once the loop was driven", what);
}

static void destroy(cudaev_loop_t *loop, const char *what) {
  for (int i = 0; i < 5000 && cudaev_loop_pending(loop) > 0; i++) {
    cudaev_loop_process(loop);
    usleep(1000);
  }
  CHECK(cudaev_loop_pending(loop) == 0, "%s: %zu futures still pending", what,
        cudaev_loop_pending(loop));
  cudaev_loop_destroy(loop);
}

/* A foreign loop nobody drives: one message per stall, twice. */
static void undriven(const char *what, int threshold_ms) {
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_foreign(&loop) == cudaSuccess, "%s: no loop", what);
  CUstream s;
  f_screate(&s, 0);
  int base = messages(), runs = atomic_load(&fn_runs);
  for (int round = 1; round <= 2; round++) {
    cudaev_future_t *f;
    CHECK(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, NULL, &f) == cudaSuccess,
          "%s: submission failed", what);
    int n = wait_messages(base + round, 10000);
    CHECK(n == base + round, "%s: %d messages after 10 s of an undriven loop, want %d", what,
          n - base, round);
    check_last(s, what);
    /* Once per stall: nothing more while it goes on. */
    usleep((useconds_t)threshold_ms * 4000);
    CHECK(messages() == base + round, "%s: %d messages for %d stalls", what, messages() - base,
          round);
    CHECK(atomic_load(&fn_runs) == runs + round - 1, "%s: fn ran on an undriven loop", what);
    drive_until(loop, f, what);
    CHECK(atomic_load(&fn_runs) == runs + round, "%s: fn did not run once", what);
    cudaev_future_release(f);
  }
  destroy(loop, what);
}

/* A thread-mode loop runs every gate at once: no message. */
static void driven(void) {
  cudaev__stall_set_ms(300);
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess, "driven: no loop");
  CUstream s;
  f_screate(&s, 0);
  int base = messages();
  enum { N = 50 };
  cudaev_future_t *f[N];
  for (int i = 0; i < N; i++) {
    CHECK(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, NULL, &f[i]) == cudaSuccess,
          "driven: submission failed");
    usleep(2000);
  }
  for (int i = 0; i < N; i++) CHECK(cudaev_future_wait(f[i], 10000000000LL) == cudaSuccess, "wait");
  usleep(600000); /* twice the threshold */
  CHECK(messages() == base, "driven: %d messages for a loop driven promptly (\"%s\")",
        messages() - base, last);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) > 0; i++) usleep(1000);
  CHECK(cudaev_loop_pending(loop) == 0, "driven: futures still pending");
  cudaev_loop_destroy(loop);
}

/* Threshold 0: the gate is reached and waits, and nothing is said. */
static void disabled(void) {
  cudaev__stall_set_ms(0);
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_foreign(&loop) == cudaSuccess, "disabled: no loop");
  CUstream s;
  f_screate(&s, 0);
  int base = messages(), ran = atomic_load(&hostfns_run);
  cudaev_future_t *f;
  CHECK(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, NULL, &f) == cudaSuccess,
        "disabled: submission failed");
  for (int i = 0; i < 10000 && atomic_load(&hostfns_run) == ran; i++) usleep(1000);
  CHECK(atomic_load(&hostfns_run) > ran, "disabled: the fake GPU never reached the gate");
  usleep(500000);
  CHECK(messages() == base, "disabled: %d messages with the threshold at 0", messages() - base);
  drive_until(loop, f, "disabled");
  cudaev_future_release(f);
  destroy(loop, "disabled");
}

int main(void) {
  setenv("CUDAEV_HOSTFN_STALL_MS", "100", 1);
  static struct cudaev_driver t;
  fake_driver_loop(&t);
  t.cuStreamCreate = f_screate;
  t.cuStreamDestroy = f_sdestroy;
  t.cuStreamGetCtx = f_sgetctx;
  t.cuStreamQuery = f_squery;
  t.cuStreamSynchronize = f_ssync;
  t.cuCtxSynchronize = f_csync;
  t.cuStreamWriteValue32 = f_write;
  t.cuStreamWaitValue32 = f_wait;
  t.cuEventCreate = f_ecreate;
  t.cuEventDestroy = f_edestroy;
  t.cuEventRecord = f_erecord;
  t.cuEventQuery = f_equery;
  t.cuLaunchHostFunc = f_hostfn;
  cudaev__driver_install(&t, 13000);
  cudaev_log_set(hook, NULL);
  pthread_t gpu;
  pthread_create(&gpu, NULL, gpu_main, NULL);

  undriven("word path", 100); /* the environment's threshold */
  CHECK(cudaev__stall_ms() == 100, "CUDAEV_HOSTFN_STALL_MS=100 read as %u", cudaev__stall_ms());
  driven();
  disabled();
  cudaev__stall_set_ms(100);
  atomic_store(&no_memops, 1); /* loops made from here use pooled events */
  undriven("event path", 100);

  atomic_store(&gpu_stop, 1);
  pthread_join(gpu, NULL);
  cudaev_log_set(NULL, NULL);
  printf("loop_stall: %d messages, the last: %s\nPASS\n", messages(), last);
  return 0;
}
