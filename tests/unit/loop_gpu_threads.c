/* GPU futures submitted from many threads at once, two threads per stream,
 * against a fake driver whose "GPU" thread runs each stream's operations in
 * order with pauses (so the loop sees runs partly passed). Every future is
 * a "kernel" with a unique id followed by the loop's marker (a word or an
 * event, whichever the loop picks); its continuation checks that the
 * kernel has run: a future completed before its work (an inference across
 * submissions whose stream order the loop got wrong) fails the test.
 * Exactly-once and all-complete are checked too. Streams 2 and 4 belong to
 * a second context (the loop's state for it is made by whichever thread
 * submits first): each continuation must see its stream's context. A
 * plain program (no Criterion), also run under TSan (suite tsan). */
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

enum { STREAMS = 4, THREADS = 8, PER_THREAD = 3000, N = THREADS * PER_THREAD };

#define CHECK(c, ...)                                    \
  do {                                                   \
    if (!(c)) {                                          \
      fprintf(stderr, "loop_gpu_threads: " __VA_ARGS__); \
      fputc('\n', stderr);                               \
      exit(1);                                           \
    }                                                    \
  } while (0)

/* ---- the fake GPU ---------------------------------------------------------- */

enum op_kind { OP_WRITE, OP_RECORD, OP_KERNEL, OP_HOSTFN };
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
};
struct fstream {
  pthread_mutex_t mu;
  struct op *ops;
  size_t n, cap, done;
};
static struct fstream fs[STREAMS + 1]; /* + the loop's internal stream */
static atomic_int ran[N];              /* kernel id -> times run */
static atomic_int gpu_stop;

static struct fstream *fs_of(CUstream s) {
  uintptr_t i = (uintptr_t)s;
  return i >= 1 && i <= STREAMS + 1 ? &fs[i - 1] : &fs[STREAMS];
}
static CUresult push(CUstream s, struct op o) {
  struct fstream *f = fs_of(s);
  pthread_mutex_lock(&f->mu);
  if (o.kind == OP_RECORD) o.seq = atomic_fetch_add(&o.ev->recorded, 1) + 1;
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 1024;
    f->ops = realloc(f->ops, f->cap * sizeof *f->ops);
  }
  f->ops[f->n++] = o;
  pthread_mutex_unlock(&f->mu);
  return CUDA_SUCCESS;
}
static void *gpu_main(void *arg) {
  (void)arg;
  unsigned r = 1;
  while (!atomic_load(&gpu_stop)) {
    for (int i = 0; i <= STREAMS; i++) {
      struct fstream *f = &fs[i];
      r = r * 1103515245u + 12345u;
      unsigned burst = 1 + (r >> 16) % 24;
      for (unsigned b = 0; b < burst; b++) {
        pthread_mutex_lock(&f->mu);
        if (f->done == f->n) {
          pthread_mutex_unlock(&f->mu);
          break;
        }
        struct op o = f->ops[f->done];
        pthread_mutex_unlock(&f->mu);
        switch (o.kind) {
        case OP_WRITE: __atomic_store_n(o.addr, o.val, __ATOMIC_RELEASE); break;
        case OP_RECORD: atomic_store(&o.ev->reached, o.seq); break;
        case OP_KERNEL: atomic_fetch_add(&ran[o.val], 1); break;
        case OP_HOSTFN: o.fn(o.arg); break;
        }
        pthread_mutex_lock(&f->mu);
        f->done++;
        pthread_mutex_unlock(&f->mu);
      }
    }
    if ((r >> 20) % 4 == 0) usleep(20);
  }
  return NULL;
}
static bool idle(struct fstream *f) {
  pthread_mutex_lock(&f->mu);
  bool i = f->done == f->n;
  pthread_mutex_unlock(&f->mu);
  return i;
}

/* ---- driver entry points ----------------------------------------------------- */

static atomic_int nstreams;
static CUresult f_screate(CUstream *s, unsigned fl) {
  (void)fl;
  *s = (CUstream)(uintptr_t)(atomic_fetch_add(&nstreams, 1) + 1);
  return CUDA_SUCCESS;
}
/* The fake primary context (fake_driver.h) owns streams 1 and 3, B 2 and 4
 * (2 and 1 are also the per-thread and legacy handles: those take the
 * submitting thread's current context). */
#define CTX_A ((CUcontext)(uintptr_t)0x1000)
#define CTX_B ((CUcontext)(uintptr_t)0x2000)
static CUcontext ctx_of_stream(CUstream s) {
  uintptr_t i = (uintptr_t)s;
  return i % 2 == 0 ? CTX_B : CTX_A;
}
static CUresult f_sgetctx(CUstream s, CUcontext *c, CUgreenCtx *green) {
  (void)green;
  uintptr_t i = (uintptr_t)s;
  if (i >= 1 && i <= STREAMS) {
    *c = ctx_of_stream(s);
    return CUDA_SUCCESS;
  }
  return fake_ctx_get_current(c);
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
  for (int i = 0; i <= STREAMS; i++)
    while (!idle(&fs[i])) usleep(50);
  return CUDA_SUCCESS;
}
/* Now and then a submitting thread lingers in the driver after its marker
 * is on the stream (descheduled, say): another thread's later marker then
 * reaches the loop first. */
static void linger(void) {
  static _Thread_local unsigned r = 7;
  r = r * 1103515245u + 12345u;
  if ((r >> 16) % 8 == 0) usleep(20 + (r >> 8) % 40);
}
static CUresult f_write(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned fl) {
  (void)fl;
  CUresult e = push(s, (struct op){.kind = OP_WRITE, .addr = (uint32_t *)a, .val = v});
  linger();
  return e;
}
static CUresult f_ecreate(CUevent *e, unsigned fl) {
  (void)fl;
  *e = (CUevent)calloc(1, sizeof(struct fev));
  return CUDA_SUCCESS;
}
static CUresult f_edestroy(CUevent e) { return free(e), CUDA_SUCCESS; }
static CUresult f_erecord(CUevent e, CUstream s) {
  CUresult r = push(s, (struct op){.kind = OP_RECORD, .ev = (struct fev *)e});
  linger();
  return r;
}
static CUresult f_equery(CUevent e) {
  struct fev *v = (struct fev *)e;
  return atomic_load(&v->reached) == atomic_load(&v->recorded) ? CUDA_SUCCESS
                                                               : CUDA_ERROR_NOT_READY;
}
static CUresult f_hostfn(CUstream s, CUhostFn fn, void *arg) {
  return push(s, (struct op){.kind = OP_HOSTFN, .fn = fn, .arg = arg});
}
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned sh, CUstream s, void **args,
                         void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sh, (void)args, (void)extra;
  return push(s, (struct op){.kind = OP_KERNEL, .val = (uint32_t)((uintptr_t)f - 1)});
}

/* ---- the test ------------------------------------------------------------------ */

static cudaev_loop_t *loop;
static atomic_int completions, early, bad, wrong_ctx;
static atomic_int once[N];

static void done_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  (void)f;
  int id = (int)(intptr_t)u;
  if (s != cudaSuccess) atomic_fetch_add(&bad, 1);
  if (atomic_load(&ran[id]) != 1) atomic_fetch_add(&early, 1);
  if (atomic_fetch_add(&once[id], 1) != 0) atomic_fetch_add(&bad, 1);
  CUcontext c = NULL;
  fake_ctx_get_current(&c);
  if (c != ctx_of_stream((CUstream)(uintptr_t)((id / PER_THREAD) % STREAMS + 1)))
    atomic_fetch_add(&wrong_ctx, 1);
  atomic_fetch_add(&completions, 1);
}

static void *submit_main(void *arg) {
  int t = (int)(intptr_t)arg;
  CUstream s = (CUstream)(uintptr_t)(t % STREAMS + 1); /* two threads per stream */
  for (int k = 0; k < PER_THREAD; k++) {
    int id = t * PER_THREAD + k;
    cudaev_future_t *f;
    /* As an application with that device current would: stream 2 is also
     * the per-thread handle, of the current context. */
    bool in_b = ctx_of_stream(s) == CTX_B;
    if (in_b) fake_ctx_push(CTX_B);
    CHECK(cudaev_launch_cufunc_async(loop, (struct CUfunc_st *)(uintptr_t)(id + 1), (dim3){1, 1, 1},
                                     (dim3){1, 1, 1}, NULL, 0, (cudaStream_t)s, &f) == cudaSuccess,
          "submission %d failed", id);
    if (in_b) fake_ctx_pop(NULL);
    CHECK(cudaev_future_then(f, done_cb, (void *)(intptr_t)id) == cudaSuccess, "then failed");
    cudaev_future_release(f);
  }
  return NULL;
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
  /* The loop's internal stream is the first one created: it gets the last
   * fake stream (ids 1..STREAMS are the test's). */
  atomic_store(&nstreams, STREAMS);
  CHECK(cudaev_loop_new_thread(&loop) == cudaSuccess, "no loop");
  pthread_t gpu, th[THREADS];
  pthread_create(&gpu, NULL, gpu_main, NULL);
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, submit_main, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 30000 && atomic_load(&completions) < N; i++) usleep(1000);
  int c = atomic_load(&completions), e = atomic_load(&early), b = atomic_load(&bad),
      w = atomic_load(&wrong_ctx);
  cudaev_loop_destroy(loop);
  atomic_store(&gpu_stop, 1);
  pthread_join(gpu, NULL);
  printf(
      "loop_gpu_threads: %d of %d completed, %d before their kernel ran, %d bad, %d with "
      "another context current\n",
      c, N, e, b, w);
  CHECK(c == N && e == 0 && b == 0 && w == 0, "FAIL");
  printf("PASS\n");
  return 0;
}
