/* Destroy racing the threads that wait on the loop's GPU futures, and the
 * continuations that submit more work while destroy fails them. Waiters
 * check the GPU themselves (the completion word, or a query of the pooled
 * event): that read must never reach the loop's GPU state, its words or
 * its events after destroy freed them. Against a fake driver whose "GPU"
 * thread runs each stream in order; words come from calloc and events are
 * freed when destroyed, so ASan and TSan see a late read. Each wait must
 * end with success or CUDAEV_ERROR_LOOP_DESTROYED, and a submission made
 * by a continuation during destroy either succeeds (its future then
 * completes) or is refused with CUDAEV_ERROR_LOOP_DESTROYED. A plain
 * program (no Criterion), also run under TSan (suite tsan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "cudaev.h"
#include "driver/driver.h"
#include "fake_driver.h"

enum { STREAMS = 2, FUTURES = 8, WAITERS = 4 };

/* ---- the fake GPU ------------------------------------------------------- */

enum op_kind { OP_WRITE, OP_RECORD, OP_DELAY };
struct fev {
  atomic_int recorded, reached;
};
struct op {
  enum op_kind kind;
  uint32_t *addr;
  uint32_t val;
  struct fev *ev;
  int seq;
};
struct fstream {
  pthread_mutex_t mu;
  struct op ops[4096];
  size_t n, done;
};
static struct fstream fs[STREAMS + 1]; /* + the loop's internal stream */
static atomic_int gpu_stop, nstreams;

/* Handles 3 and 4 are the test's streams (1 and 2 would be the legacy
 * and per-thread handles); the loops' internal streams come after. */
enum { FIRST = 3 };
static struct fstream *fs_of(CUstream s) {
  uintptr_t i = (uintptr_t)s;
  return i >= FIRST && i < FIRST + STREAMS ? &fs[i - FIRST] : &fs[STREAMS];
}
static CUresult push(CUstream s, struct op o) {
  struct fstream *f = fs_of(s);
  pthread_mutex_lock(&f->mu);
  if (o.kind == OP_RECORD) o.seq = atomic_fetch_add(&o.ev->recorded, 1) + 1;
  if (f->n == sizeof f->ops / sizeof f->ops[0]) { /* a ring: rounds are short */
    memmove(f->ops, f->ops + f->done, (f->n - f->done) * sizeof f->ops[0]);
    f->n -= f->done;
    f->done = 0;
  }
  f->ops[f->n++] = o;
  pthread_mutex_unlock(&f->mu);
  return CUDA_SUCCESS;
}
static void *gpu_main(void *arg) {
  (void)arg;
  while (!atomic_load(&gpu_stop)) {
    bool any = false;
    for (int i = 0; i <= STREAMS; i++) {
      struct fstream *f = &fs[i];
      pthread_mutex_lock(&f->mu);
      if (f->done == f->n) {
        pthread_mutex_unlock(&f->mu);
        continue;
      }
      struct op o = f->ops[f->done];
      pthread_mutex_unlock(&f->mu);
      switch (o.kind) {
      case OP_WRITE: __atomic_store_n(o.addr, o.val, __ATOMIC_RELEASE); break;
      case OP_RECORD: atomic_store(&o.ev->reached, o.seq); break;
      case OP_DELAY: usleep(o.val); break;
      }
      pthread_mutex_lock(&f->mu);
      f->done++;
      pthread_mutex_unlock(&f->mu);
      any = true;
    }
    if (!any) usleep(20);
  }
  return NULL;
}
static bool idle(struct fstream *f) {
  pthread_mutex_lock(&f->mu);
  bool i = f->done == f->n;
  pthread_mutex_unlock(&f->mu);
  return i;
}

/* ---- driver entry points ------------------------------------------------ */

static CUresult f_screate(CUstream *s, unsigned fl) {
  (void)fl;
  /* The loop's internal streams (one per loop) all map to fs[STREAMS]. */
  *s = (CUstream)(uintptr_t)(FIRST + STREAMS + atomic_fetch_add(&nstreams, 1));
  return CUDA_SUCCESS;
}
static CUresult f_sdestroy(CUstream s) { return (void)s, CUDA_SUCCESS; }
static CUresult f_sgetctx(CUstream s, CUcontext *c, CUgreenCtx *green) {
  (void)s, (void)green;
  return fake_ctx_get_current(c);
}
static CUresult f_squery(CUstream s) {
  return idle(fs_of(s)) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult f_ssync(CUstream s) {
  while (!idle(fs_of(s))) usleep(50);
  return CUDA_SUCCESS;
}
static CUresult f_csync(CUcontext c) {
  (void)c;
  for (int i = 0; i <= STREAMS; i++)
    while (!idle(&fs[i])) usleep(50);
  return CUDA_SUCCESS;
}
static CUresult f_write(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned fl) {
  (void)fl;
  return push(s, (struct op){.kind = OP_WRITE, .addr = (uint32_t *)a, .val = v});
}
static CUresult f_ecreate(CUevent *e, unsigned fl) {
  (void)fl;
  *e = (CUevent)calloc(1, sizeof(struct fev));
  return CUDA_SUCCESS;
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
  /* Wakeups are not needed: the thread-mode loop's watchdog timer and
   * the waiters complete the futures. Run none, as if the stream never got
   * there, so that only destroy ends what the waiters do not. */
  (void)s, (void)fn, (void)arg;
  return CUDA_ERROR_NOT_SUPPORTED;
}
/* A "kernel" of `f` microseconds. */
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned sh, CUstream s, void **args,
                         void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)args, (void)extra;
  return push(s, (struct op){.kind = OP_DELAY, .val = (uint32_t)(uintptr_t)f});
}

/* ---- the test ----------------------------------------------------------- */

static cudaError_t kernel(cudaev_loop_t *loop, unsigned stream, unsigned us, cudaev_future_t **f) {
  return cudaev_launch_cufunc_async(loop, (struct CUfunc_st *)(uintptr_t)us, (dim3){1, 1, 1},
                                    (dim3){1, 1, 1}, NULL, 0,
                                    (cudaStream_t)(uintptr_t)(FIRST + stream % STREAMS), f);
}

static atomic_int bad_wait, bad_submit, resubmitted, refused;

struct waiter {
  pthread_t th;
  cudaev_future_t *f[FUTURES / WAITERS];
};
static void *wait_main(void *arg) {
  struct waiter *w = arg;
  for (int i = 0; i < FUTURES / WAITERS; i++) {
    cudaError_t e = cudaev_future_wait(w->f[i], -1);
    if (e != cudaSuccess && e != CUDAEV_ERROR_LOOP_DESTROYED) atomic_fetch_add(&bad_wait, 1);
  }
  return NULL;
}

/* A continuation that submits more work on the loop, as a retrying
 * application would, also while destroy fails its future. */
static void resubmit_cb(cudaev_future_t *f, cudaError_t s, void *user) {
  (void)s, (void)user;
  cudaev_future_t *g = NULL;
  cudaError_t e = kernel(cudaev_future_loop(f), 0, 10, &g);
  if (e == cudaSuccess && g != NULL) {
    atomic_fetch_add(&resubmitted, 1);
    cudaev_future_release(g);
  } else if (e == CUDAEV_ERROR_LOOP_DESTROYED && g == NULL) {
    atomic_fetch_add(&refused, 1);
  } else {
    atomic_fetch_add(&bad_submit, 1);
  }
}

static void round_once(unsigned r) {
  cudaev_loop_t *loop;
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess);
  cudaev_future_t *f[FUTURES];
  for (int i = 0; i < FUTURES; i++) {
    /* Behind kernels of 1-400 us: word markers first on each stream, then
     * event markers (the stream has futures of ours outstanding). */
    cudaError_t e = kernel(loop, (unsigned)i, 1 + (r * 7 + (unsigned)i * 53) % 400, &f[i]);
    if (e != cudaSuccess)
      fprintf(stderr, "round %u: submission %d: %s\n", r, i, cudaev_error_name(e));
    CHECK(e == cudaSuccess);
    if (i % 3 == 0) CHECK(cudaev_future_then(f[i], resubmit_cb, NULL) == cudaSuccess);
  }
  struct waiter w[WAITERS];
  for (int k = 0; k < WAITERS; k++) {
    for (int i = 0; i < FUTURES / WAITERS; i++) w[k].f[i] = f[k + i * WAITERS];
    pthread_create(&w[k].th, NULL, wait_main, &w[k]);
  }
  usleep(r % 5 * 60); /* destroy at different points of the waits */
  cudaev_loop_destroy(loop);
  for (int k = 0; k < WAITERS; k++) pthread_join(w[k].th, NULL);
  for (int i = 0; i < FUTURES; i++) {
    CHECK(cudaev_future_ready(f[i]));
    cudaev_future_release(f[i]);
  }
}

int main(void) {
  static struct cudaev_driver t;
  fake_driver_loop(&t);
  t.cuStreamCreate = f_screate;
  t.cuStreamDestroy = f_sdestroy;
  t.cuStreamGetCtx = f_sgetctx;
  t.cuStreamQuery = f_squery;
  t.cuStreamSynchronize = f_ssync;
  t.cuCtxSynchronize = f_csync;
  t.cuStreamWriteValue32 = f_write;
  t.cuEventCreate = f_ecreate;
  t.cuEventDestroy = f_edestroy;
  t.cuEventRecord = f_erecord;
  t.cuEventQuery = f_equery;
  t.cuLaunchHostFunc = f_hostfn;
  t.cuLaunchKernel = f_launch;
  cudaev__driver_install(&t, 13000);
  for (int i = 0; i <= STREAMS; i++) pthread_mutex_init(&fs[i].mu, NULL);
  pthread_t gpu;
  pthread_create(&gpu, NULL, gpu_main, NULL);
  const char *env = getenv("CUDAEV_TEST_ROUNDS");
  unsigned rounds = env != NULL ? (unsigned)atoi(env) : 200;
  uint64_t t0 = now_ns();
  for (unsigned r = 0; r < rounds; r++) round_once(r);
  atomic_store(&gpu_stop, 1);
  pthread_join(gpu, NULL);
  printf("loop_destroy_threads: %u rounds in %.1f s; %d resubmissions taken, %d refused\n", rounds,
         (double)(now_ns() - t0) / 1e9, atomic_load(&resubmitted), atomic_load(&refused));
  CHECK(atomic_load(&bad_wait) == 0);
  CHECK(atomic_load(&bad_submit) == 0);
  return failures != 0;
}
