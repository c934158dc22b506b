/* The GPU source of the loop (loop/gpu*.c, hostfn.c) against a fake driver: a CPU
 * thread plays the GPU, executing each fake stream's operations in order
 * (write a word, wait on a word, host function, "kernel" delay, event
 * record, event wait) and can be told to fault (sticky error: nothing more
 * runs, queries return CUDA_ERROR_ILLEGAL_ADDRESS).
 *
 * Modelled on the real driver's semantics:
 *  - cuEventQuery: CUDA_SUCCESS for an event never recorded, else
 *    CUDA_ERROR_NOT_READY until the "GPU" reaches the latest record;
 *    cuStreamWaitEvent waits for the record current at the call;
 *  - host functions run on one driver thread (here: the GPU thread), so a
 *    blocking host function holds back the stream, and everything behind;
 *  - an enqueue blocks while its stream has QMAX operations pending (the
 *    real driver blocks launches at about a thousand). A submission blocked
 *    for 10 s aborts the test with a message: on a GPU it would deadlock. */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cudaev.h"
#include "driver/driver.h"
#include "fake_driver.h"
#include "loop_internal.h" /* the queue, for a push caught half-way */
#include "told_deadline.h"

/* ---- the fake GPU ------------------------------------------------------- */

enum op_kind { OP_WRITE, OP_WAIT, OP_HOSTFN, OP_DELAY, OP_RECORD, OP_WAITEV, OP_COPY };
struct fevent {
  atomic_int recorded; /* records enqueued */
  atomic_int reached;  /* records the GPU has passed */
  atomic_int dead;     /* destroyed, kept (keep_dead) to catch a late query */
};
struct op {
  enum op_kind kind;
  volatile uint32_t *addr;
  uint32_t val;
  CUhostFn fn;
  void *arg;
  unsigned delay_us;
  struct fevent *ev;
  int seq;
  void *cdst; /* OP_COPY */
  const void *csrc;
  size_t n;
  struct op *next;
};
struct fstream {
  struct op *head, *tail;
  unsigned depth; /* operations pending */
  CUcontext ctx;  /* current when it was created */
  struct fstream *next;
};

enum { QMAX = 1024 };
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drained = PTHREAD_COND_INITIALIZER;
static struct fstream *streams;
static atomic_int faulted, gpu_run, writes_supported = 1;
static atomic_uint hostfn_late_ms;           /* host functions run this late (a VM's, much worse) */
static atomic_long hostfns;                  /* cuLaunchHostFunc calls */
static atomic_long writes, records, queries; /* cuStreamWriteValue32, cuEventRecord, cuEventQuery */
static pthread_t gpu_th;

static struct fstream *fs_of(CUstream s) {
  /* NULL / legacy / per-thread handles map to one default stream. */
  static struct fstream dflt;
  if ((uintptr_t)s <= 2) return &dflt;
  return (struct fstream *)s;
}

static CUresult push_op(CUstream s, struct op o) {
  if (atomic_load(&faulted)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  struct op *p = malloc(sizeof *p);
  *p = o;
  p->next = NULL;
  pthread_mutex_lock(&mu);
  struct fstream *f = fs_of(s);
  if (f->depth >= QMAX) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    while (f->depth >= QMAX && !atomic_load(&faulted) && atomic_load(&gpu_run))
      if (pthread_cond_timedwait(&drained, &mu, &dl) != 0) {
        fprintf(stderr,
                "fake driver: enqueue blocked 10 s on a full stream (%u pending): "
                "a real GPU would deadlock here\n",
                f->depth);
        abort();
      }
    if (atomic_load(&faulted)) {
      pthread_mutex_unlock(&mu);
      free(p);
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
  }
  f->depth++;
  if (p->kind == OP_RECORD) p->seq = atomic_fetch_add(&p->ev->recorded, 1) + 1;
  if (p->kind == OP_WAITEV) p->seq = atomic_load(&p->ev->recorded);
  if (f->tail)
    f->tail->next = p;
  else
    f->head = p;
  f->tail = p;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

static bool run_one(struct fstream *f) {
  struct op *o = f->head;
  if (o == NULL) return false;
  switch (o->kind) {
  case OP_WAIT:
    if (__atomic_load_n(o->addr, __ATOMIC_ACQUIRE) != o->val) return false;
    break;
  case OP_WRITE: __atomic_store_n(o->addr, o->val, __ATOMIC_RELEASE); break;
  case OP_HOSTFN:
    pthread_mutex_unlock(&mu);
    for (unsigned t = 0; t < atomic_load(&hostfn_late_ms) && atomic_load(&gpu_run); t++)
      usleep(1000);
    o->fn(o->arg);
    pthread_mutex_lock(&mu);
    break;
  case OP_DELAY:
    /* In slices, so that a fault or teardown interrupts long "kernels". */
    pthread_mutex_unlock(&mu);
    for (unsigned t = 0; t < o->delay_us && atomic_load(&gpu_run) && !atomic_load(&faulted);
         t += 1000)
      usleep(o->delay_us - t < 1000 ? o->delay_us - t : 1000);
    pthread_mutex_lock(&mu);
    break;
  case OP_RECORD: atomic_store(&o->ev->reached, o->seq); break;
  case OP_WAITEV:
    if (atomic_load(&o->ev->reached) < o->seq) return false;
    break;
  case OP_COPY: memcpy(o->cdst, o->csrc, o->n); break;
  }
  f->head = o->next;
  if (f->head == NULL) f->tail = NULL;
  if (f->depth-- == QMAX) pthread_cond_broadcast(&drained);
  free(o);
  return true;
}

static void *gpu_main(void *arg) {
  while (atomic_load(&gpu_run)) {
    bool any = false;
    pthread_mutex_lock(&mu);
    if (!atomic_load(&faulted)) {
      any |= run_one(fs_of(NULL));
      for (struct fstream *f = streams; f; f = f->next) any |= run_one(f);
    }
    pthread_mutex_unlock(&mu);
    if (!any) usleep(50);
  }
  return NULL;
}

static bool stream_idle(CUstream s) {
  pthread_mutex_lock(&mu);
  bool idle = fs_of(s)->head == NULL;
  pthread_mutex_unlock(&mu);
  return idle;
}

/* ---- driver entry points --------------------------------------------------- */

static CUresult f_screate(CUstream *s, unsigned fl) {
  struct fstream *f = calloc(1, sizeof *f);
  fake_ctx_get_current(&f->ctx);
  pthread_mutex_lock(&mu);
  f->next = streams;
  streams = f;
  pthread_mutex_unlock(&mu);
  *s = (CUstream)f;
  return CUDA_SUCCESS;
}
static CUresult f_sgetctx(CUstream s, CUcontext *c, CUgreenCtx *green) {
  (void)green;
  if ((uintptr_t)s <= 2) return fake_ctx_get_current(c);
  *c = ((struct fstream *)s)->ctx;
  return CUDA_SUCCESS;
}
static CUresult f_sdestroy(CUstream s) { return CUDA_SUCCESS; /* leaked: tests are short */ }
static CUresult f_squery(CUstream s) {
  if (atomic_load(&faulted)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  return stream_idle(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult f_ssync(CUstream s) {
  while (!atomic_load(&faulted) && !stream_idle(s)) usleep(50);
  return atomic_load(&faulted) ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}
static CUresult f_csync(CUcontext c) {
  for (;;) {
    if (atomic_load(&faulted)) return CUDA_ERROR_ILLEGAL_ADDRESS;
    bool idle = stream_idle(NULL);
    pthread_mutex_lock(&mu);
    for (struct fstream *f = streams; f; f = f->next) idle = idle && f->head == NULL;
    pthread_mutex_unlock(&mu);
    if (idle) return CUDA_SUCCESS;
    usleep(50);
  }
}
static CUresult f_write(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned fl) {
  if (!atomic_load(&writes_supported)) return CUDA_ERROR_NOT_SUPPORTED;
  atomic_fetch_add(&writes, 1);
  return push_op(s, (struct op){.kind = OP_WRITE, .addr = (volatile uint32_t *)a, .val = v});
}
static CUresult f_wait(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned fl) {
  cr_assert_eq(fl, CU_STREAM_WAIT_VALUE_EQ);
  if (!atomic_load(&writes_supported)) return CUDA_ERROR_NOT_SUPPORTED;
  return push_op(s, (struct op){.kind = OP_WAIT, .addr = (volatile uint32_t *)a, .val = v});
}
static CUresult f_hostfn(CUstream s, CUhostFn fn, void *arg) {
  atomic_fetch_add(&hostfns, 1);
  return push_op(s, (struct op){.kind = OP_HOSTFN, .fn = fn, .arg = arg});
}
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned sh, CUstream s, void **args,
                         void **extra) {
  return push_op(s, (struct op){.kind = OP_DELAY, .delay_us = (unsigned)(uintptr_t)f});
}
/* A "graph" whose handle is its run time in microseconds. */
static CUresult f_glaunch(CUgraphExec g, CUstream s) {
  return push_op(s, (struct op){.kind = OP_DELAY, .delay_us = (unsigned)(uintptr_t)g});
}
static CUresult f_ecreate(CUevent *e, unsigned fl) {
  *e = (CUevent)calloc(1, sizeof(struct fevent));
  return CUDA_SUCCESS;
}
static _Thread_local unsigned slow_record_ms; /* this thread's records linger in the driver */
static CUresult f_erecord(CUevent e, CUstream s) {
  atomic_fetch_add(&records, 1);
  CUresult r = push_op(s, (struct op){.kind = OP_RECORD, .ev = (struct fevent *)e});
  if (slow_record_ms) usleep(slow_record_ms * 1000u);
  return r;
}
/* A query made by `stall_th` (once armed by stall_on) lingers in the
 * driver, as a descheduled waiter's would, until `stall_until` is set or
 * 300 ms passed; a query of an event destroyed meanwhile is counted (on a
 * real driver: a use after free). */
static atomic_int stall_on, in_stall, stall_until, dead_queries, keep_dead;
static pthread_t stall_th;
static struct fevent *graveyard[4096];
static atomic_int ngraves;
static CUresult f_equery(CUevent e) {
  atomic_fetch_add(&queries, 1);
  if (atomic_load(&stall_on) && pthread_equal(pthread_self(), stall_th)) {
    atomic_store(&stall_on, 0);
    atomic_store(&in_stall, 1);
    for (int i = 0; i < 300 && !atomic_load(&stall_until); i++) usleep(1000);
  }
  struct fevent *v = (struct fevent *)e;
  if (atomic_load(&v->dead)) atomic_fetch_add(&dead_queries, 1);
  if (atomic_load(&faulted)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  return atomic_load(&v->reached) == atomic_load(&v->recorded) ? CUDA_SUCCESS
                                                               : CUDA_ERROR_NOT_READY;
}
static atomic_long edestroys;
static CUresult f_edestroy(CUevent e) {
  atomic_fetch_add(&edestroys, 1);
  int n;
  if (atomic_load(&keep_dead) && (n = atomic_fetch_add(&ngraves, 1)) < 4096) {
    atomic_store(&((struct fevent *)e)->dead, 1);
    graveyard[n] = (struct fevent *)e;
    return CUDA_SUCCESS;
  }
  free(e);
  return CUDA_SUCCESS;
}
static void graveyard_free(void) {
  int n = atomic_exchange(&ngraves, 0);
  for (int i = 0; i < n && i < 4096; i++) free(graveyard[i]);
}
/* Copies run on the "GPU"; host memory the test declares pageable is what
 * cuPointerGetAttribute refuses, as the driver does. */
static CUresult f_memcpy_async(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s) {
  return push_op(
      s, (struct op){.kind = OP_COPY, .cdst = (void *)d, .csrc = (const void *)src, .n = n});
}
static struct {
  const char *lo;
  size_t n;
} pageable_ranges[4];
static _Atomic int npageable;
static void declare_pageable(const void *p, size_t n) {
  int i = atomic_load(&npageable);
  pageable_ranges[i].lo = p;
  pageable_ranges[i].n = n;
  atomic_store(&npageable, i + 1);
}
static CUresult f_ptr_attr(void *data, CUpointer_attribute a, CUdeviceptr p) {
  for (int i = 0; i < atomic_load(&npageable); i++)
    if ((const char *)p >= pageable_ranges[i].lo &&
        (const char *)p < pageable_ranges[i].lo + pageable_ranges[i].n)
      return CUDA_ERROR_INVALID_VALUE;
  if (a != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_INVALID_VALUE;
  *(unsigned *)data = CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}
static CUresult f_swaitev(CUstream s, CUevent e, unsigned fl) {
  return push_op(s, (struct op){.kind = OP_WAITEV, .ev = (struct fevent *)e});
}

static void setup(void) {
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
  t.cuLaunchHostFunc = f_hostfn;
  t.cuLaunchKernel = f_launch;
  t.cuEventCreate = f_ecreate;
  t.cuEventRecord = f_erecord;
  t.cuEventQuery = f_equery;
  t.cuEventDestroy = f_edestroy;
  t.cuStreamWaitEvent = f_swaitev;
  t.cuGraphLaunch = f_glaunch;
  t.cuMemcpyAsync = f_memcpy_async;
  t.cuPointerGetAttribute = f_ptr_attr;
  cudaev__driver_install(&t, 13000);
  atomic_store(&gpu_run, 1);
  pthread_create(&gpu_th, NULL, gpu_main, NULL);
}

static void teardown(void) {
  atomic_store(&gpu_run, 0);
  pthread_mutex_lock(&mu);
  pthread_cond_broadcast(&drained);
  pthread_mutex_unlock(&mu);
  pthread_join(gpu_th, NULL);
}

/* A "kernel" that takes `us` microseconds on the fake GPU. */
static cudaError_t kernel(cudaev_loop_t *loop, CUstream s, unsigned us, cudaev_future_t **f) {
  return cudaev_launch_cufunc_async(loop, (struct CUfunc_st *)(uintptr_t)us, (dim3){1, 1, 1},
                                    (dim3){1, 1, 1}, NULL, 0, (cudaStream_t)s, f);
}

static const int64_t SEC = 1000000000LL;

/* A foreign-mode loop (driven by the test) and a fresh stream. */
static cudaev_loop_t *foreign_with_stream(CUstream *s) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  f_screate(s, 0);
  return loop;
}

/* ---- tests ----------------------------------------------------------------- */

TestSuite(loop_gpu_fake, .init = setup, .fini = teardown, .timeout = 60);

struct count {
  atomic_int n;
  atomic_int bad;
  pthread_t th;
};
static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  struct count *c = u;
  if (s != cudaSuccess) atomic_fetch_add(&c->bad, 1);
  c->th = pthread_self();
  atomic_fetch_add(&c->n, 1);
}

Test(loop_gpu_fake, stream_futures_on_many_streams) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s[4];
  for (int i = 0; i < 4; i++) f_screate(&s[i], 0);
  enum { N = 2000 };
  cudaev_future_t *f[N];
  struct count c = {0};
  for (int i = 0; i < N; i++) {
    cr_assert_eq(i % 7 ? cudaev_future_new_stream(loop, (cudaStream_t)s[i % 4], &f[i])
                       : kernel(loop, s[i % 4], 20, &f[i]),
                 cudaSuccess);
    cudaev_future_then(f[i], count_cb, &c);
  }
  cudaev_future_t *all;
  cr_assert_eq(cudaev_future_new_all(loop, f, N, &all), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(all, 10 * SEC), cudaSuccess);
  for (int i = 0; i < 2000 && atomic_load(&c.n) < N; i++) usleep(1000);
  cr_expect_eq(atomic_load(&c.n), N);
  cr_expect_eq(atomic_load(&c.bad), 0);
  cr_expect(!pthread_equal(c.th, pthread_self()));
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_future_release(all);
  for (int i = 0; i < 100 && cudaev_loop_pending(loop) > 0; i++) usleep(1000);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

struct hf {
  volatile uint32_t *after; /* written by the stream after the host function */
  uint32_t seen;
  pthread_t th;
  atomic_int ran;
};
static cudaError_t host_fn(void *u) {
  struct hf *h = u;
  usleep(20000); /* the stream must wait for us */
  h->seen = __atomic_load_n(h->after, __ATOMIC_ACQUIRE);
  h->th = pthread_self();
  atomic_store(&h->ran, 1);
  return cudaErrorNotReady; /* becomes the future's outcome */
}

static cudaError_t quick_fn(void *u) {
  struct hf *h = u;
  atomic_store(&h->ran, 1);
  return cudaSuccess;
}

Test(loop_gpu_fake, host_function_runs_on_loop_and_stream_waits) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  uint32_t *after = calloc(1, 4);
  struct hf h = {.after = after};
  cudaev_future_t *k, *f;
  cr_assert_eq(kernel(loop, s, 5000, &k), cudaSuccess);
  cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, &h, &f), cudaSuccess);
  f_write(s, (CUdeviceptr)after, 1, 0);
  cr_expect_eq(cudaev_future_wait(f, 5 * SEC), cudaErrorNotReady);
  cr_expect_eq(atomic_load(&h.ran), 1);
  cr_expect_eq(h.seen, 0, "work after the host function ran before it returned");
  cr_expect(!pthread_equal(h.th, pthread_self()));
  cr_expect_eq(f_ssync(s), CUDA_SUCCESS);
  cr_expect_eq(*after, 1);
  cudaev_future_release(k);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  free(after);
}

Test(loop_gpu_fake, sticky_error_fails_pending_gpu_futures_within_1s) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s[2];
  f_screate(&s[0], 0);
  f_screate(&s[1], 0);
  cudaev_future_t *f[3], *p, *all;
  cr_assert_eq(kernel(loop, s[0], 3000000, &f[0]), cudaSuccess); /* 3 s */
  cr_assert_eq(kernel(loop, s[1], 3000000, &f[1]), cudaSuccess);
  struct hf h = {.after = calloc(1, 4)};
  cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)s[1], host_fn, &h, &f[2]),
               cudaSuccess);
  cr_assert_eq(cudaev_promise_new(loop, &p), cudaSuccess);
  cr_assert_eq(cudaev_future_new_all(loop, f, 3, &all), cudaSuccess);
  usleep(50000);
  atomic_store(&faulted, 1);
  int64_t t0 = (int64_t)time(NULL);
  cr_expect_eq(cudaev_future_wait(all, 2 * SEC), cudaErrorIllegalAddress);
  cr_expect((int64_t)time(NULL) - t0 <= 2);
  for (int i = 0; i < 3; i++) cr_expect_eq(cudaev_future_result(f[i]), cudaErrorIllegalAddress);
  cr_expect_eq(atomic_load(&h.ran), 0, "host functions do not run after a fault");
  cr_expect_eq(cudaev_future_ready(p), 0, "promises are not GPU work");
  cudaev_promise_set(p, cudaSuccess);
  for (int i = 0; i < 3; i++) cudaev_future_release(f[i]);
  cudaev_future_release(all);
  cudaev_future_release(p);
  cudaev_loop_destroy(loop);
  free((void *)h.after);
}

/* The pooled-event fallback: cuEventQuery answers NOT_READY until the GPU
 * thread reaches each record (it must mean "not yet", never an outcome),
 * over several streams with work still running. */
Test(loop_gpu_fake, event_fallback_without_stream_memops) {
  atomic_store(&writes_supported, 0);
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s[4];
  for (int i = 0; i < 4; i++) f_screate(&s[i], 0);
  enum { N = 400 };
  cudaev_future_t *f[N];
  struct count c = {0};
  for (int i = 0; i < N; i++) {
    cr_assert_eq(i % 3 ? kernel(loop, s[i % 4], 200, &f[i])
                       : cudaev_future_new_stream(loop, (cudaStream_t)s[i % 4], &f[i]),
                 cudaSuccess);
    cudaev_future_then(f[i], count_cb, &c);
  }
  cr_expect_eq(cudaev_future_result(f[N - 1]), cudaErrorNotReady,
               "completed before the GPU got there");
  cudaev_future_t *all;
  cr_assert_eq(cudaev_future_new_all(loop, f, N, &all), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(all, 10 * SEC), cudaSuccess);
  for (int i = 0; i < N; i++) cr_expect_eq(cudaev_future_result(f[i]), cudaSuccess, "future %d", i);
  for (int i = 0; i < 2000 && atomic_load(&c.n) < N; i++) usleep(1000);
  cr_expect_eq(atomic_load(&c.n), N);
  cr_expect_eq(atomic_load(&c.bad), 0);
  /* An event future: its record is not reached before the kernel ends. */
  CUevent ev;
  f_ecreate(&ev, 0);
  cudaev_future_t *k, *e;
  cr_assert_eq(kernel(loop, s[0], 50000, &k), cudaSuccess);
  f_erecord(ev, s[0]);
  cr_assert_eq(cudaev_future_new_event(loop, (cudaEvent_t)ev, &e), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(e, 5 * SEC), cudaSuccess);
  /* (k's own future may be seen a moment later: futures of different
   * streams complete in no promised order; the GPU's order is checked.) */
  cr_expect(stream_idle(s[0]), "the event future completed before the work it follows");
  cr_expect_eq(cudaev_future_wait(k, 5 * SEC), cudaSuccess);
  cudaev_future_release(k);
  cudaev_future_release(e);
  f_edestroy(ev);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_future_release(all);
  cudaev_loop_destroy(loop);
}

/* An event whose work is done when it is awaited (or that was never
 * recorded) gives a future that is complete on return, with nothing
 * enqueued for it; one still pending takes the stream wait. */
Test(loop_gpu_fake, event_done_at_submission_completes_at_once) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  CUevent ev, fresh;
  f_ecreate(&ev, 0);
  f_ecreate(&fresh, 0);
  cudaev_future_t *k, *e, *e2, *e3;
  cr_assert_eq(kernel(loop, s, 20000, &k), cudaSuccess);
  f_erecord(ev, s);
  /* Pending: the ordinary path. */
  cr_assert_eq(cudaev_future_new_event(loop, (cudaEvent_t)ev, &e), cudaSuccess);
  cr_expect_eq(cudaev_future_result(e), cudaErrorNotReady, "completed before the GPU got there");
  cr_expect_eq(cudaev_future_wait(e, 5 * SEC), cudaSuccess);
  cr_expect(stream_idle(s));
  cr_expect_eq(cudaev_future_wait(k, 5 * SEC), cudaSuccess);
  /* Done: complete at once, no stream wait, no marker. */
  long w0 = atomic_load(&writes), r0 = atomic_load(&records);
  cr_assert_eq(cudaev_future_new_event(loop, (cudaEvent_t)ev, &e2), cudaSuccess);
  cr_expect(cudaev_future_ready(e2), "a done event's future was not complete on return");
  cr_expect_eq(cudaev_future_result(e2), cudaSuccess);
  cr_assert_eq(cudaev_future_new_event(loop, (cudaEvent_t)fresh, &e3), cudaSuccess);
  cr_expect_eq(cudaev_future_result(e3), cudaSuccess, "a never-recorded event is done");
  cr_expect_eq(atomic_load(&writes), w0, "a marker was enqueued for done work");
  cr_expect_eq(atomic_load(&records), r0, "a marker was enqueued for done work");
  /* Its continuation still runs on the loop thread, once. */
  struct count c = {0};
  cudaev_future_then(e2, count_cb, &c);
  for (int i = 0; i < 2000 && atomic_load(&c.n) < 1; i++) usleep(1000);
  cr_expect_eq(atomic_load(&c.n), 1);
  cr_expect_eq(atomic_load(&c.bad), 0);
  cudaev_future_release(k);
  cudaev_future_release(e);
  cudaev_future_release(e2);
  cudaev_future_release(e3);
  f_edestroy(ev);
  f_edestroy(fresh);
  cudaev_loop_destroy(loop);
}

/* A done event's future is complete without the loop hearing of it: a
 * thread other than the loop's asks (a Python service's wait, with the
 * loop driven by asyncio), and the loop's fd stays quiet, where a message
 * would wake the application's loop for nothing. It still counts as a
 * completion, and a continuation attached later runs on the loop's pass. */
static bool fd_readable(cudaev_loop_t *loop) {
  struct pollfd p = {.fd = cudaev_loop_fd(loop), .events = POLLIN};
  return poll(&p, 1, 0) == 1;
}

Test(loop_gpu_fake, done_event_future_does_not_wake_the_loop) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  CUevent ev;
  f_ecreate(&ev, 0);
  f_erecord(ev, s);
  cr_assert_eq(f_ssync(s), CUDA_SUCCESS);
  while (fd_readable(loop)) cudaev_loop_process(loop);
  struct cudaev_loop_stats st;
  cudaev_loop_stats(loop, &st, sizeof st);
  uint64_t done0 = st.completions, passes0 = st.passes;
  cudaev_future_t *e[8];
  for (int i = 0; i < 8; i++) {
    cr_assert_eq(cudaev_future_new_event(loop, (cudaEvent_t)ev, &e[i]), cudaSuccess);
    cr_expect_eq(cudaev_future_result(e[i]), cudaSuccess);
  }
  cr_expect_not(fd_readable(loop), "the loop was woken for work done at submission");
  cudaev_loop_stats(loop, &st, sizeof st);
  cr_expect_eq(st.completions - done0, 8, "%llu completions counted",
               (unsigned long long)(st.completions - done0));
  cr_expect_eq(st.passes, passes0);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  /* A continuation attached now: the loop hears of that, and runs it. */
  struct count c = {0};
  cr_assert_eq(cudaev_future_then(e[0], count_cb, &c), cudaSuccess);
  cr_expect(fd_readable(loop), "a continuation on a done future did not reach the loop");
  for (int i = 0; i < 100 && atomic_load(&c.n) < 1; i++) cudaev_loop_process(loop);
  cr_expect_eq(atomic_load(&c.n), 1);
  cr_expect(pthread_equal(c.th, pthread_self()), "ran off the thread driving the loop");
  cr_expect_eq(cudaev_future_cancel(e[1]), 0, "a done future was cancelled");
  for (int i = 0; i < 8; i++) cudaev_future_release(e[i]);
  f_edestroy(ev);
  cudaev_loop_destroy(loop);
}

/* Loop-thread host functions on the event path (no stream memory
 * operations): fn runs on the loop thread, the stream waits for it, its
 * outcome is the future's, in order with futures around it. */
Test(loop_gpu_fake, event_fallback_host_functions) {
  atomic_store(&writes_supported, 0);
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  uint32_t *after = calloc(1, 4);
  struct hf h = {.after = after};
  cudaev_future_t *k, *f, *g;
  cr_assert_eq(kernel(loop, s, 5000, &k), cudaSuccess);
  cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, &h, &f), cudaSuccess);
  cr_assert_not_null(f);
  cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &g), cudaSuccess);
  /* a marker the fake GPU passes only after the gate opened */
  CUevent ev;
  f_ecreate(&ev, 0);
  f_erecord(ev, s);
  cr_expect_eq(cudaev_future_wait(f, 5 * SEC), cudaErrorNotReady, "fn's outcome is the future's");
  cr_expect_eq(atomic_load(&h.ran), 1);
  cr_expect(!pthread_equal(h.th, pthread_self()));
  cr_expect(cudaev_future_ready(k));
  cr_expect_eq(cudaev_future_wait(g, 5 * SEC), cudaSuccess);
  cr_expect_eq(f_ssync(s), CUDA_SUCCESS);
  cr_expect_eq(f_equery(ev), CUDA_SUCCESS);
  f_edestroy(ev);
  /* Many in a row, on two streams. */
  CUstream s2;
  f_screate(&s2, 0);
  enum { M = 50 };
  struct hf hs[M];
  cudaev_future_t *fs[M];
  memset(hs, 0, sizeof hs);
  for (int i = 0; i < M; i++) {
    hs[i].after = after;
    cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)(i % 2 ? s : s2), quick_fn,
                                               &hs[i], &fs[i]),
                 cudaSuccess);
  }
  for (int i = 0; i < M; i++) {
    cr_expect_eq(cudaev_future_wait(fs[i], 5 * SEC), cudaSuccess);
    cr_expect_eq(atomic_load(&hs[i].ran), 1);
    cudaev_future_release(fs[i]);
  }
  cudaev_future_release(k);
  cudaev_future_release(f);
  cudaev_future_release(g);
  cudaev_loop_destroy(loop);
  free(after);
}

/* Event path: a query error is the outcome (no 200 ms watchdog wait), and
 * a pending host-function gate opens (fn not run) so the driver's thread
 * is released. */
Test(loop_gpu_fake, event_fallback_fault) {
  atomic_store(&writes_supported, 0);
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  cudaev_future_t *k, *f;
  struct hf h = {.after = calloc(1, 4)};
  cr_assert_eq(kernel(loop, s, 3000000, &k), cudaSuccess);
  cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, &h, &f), cudaSuccess);
  usleep(20000);
  atomic_store(&faulted, 1);
  cr_expect_eq(cudaev_future_wait(k, 2 * SEC), cudaErrorIllegalAddress);
  cr_expect_eq(cudaev_future_wait(f, 2 * SEC), cudaErrorIllegalAddress);
  cr_expect_eq(atomic_load(&h.ran), 0);
  cudaev_future_release(k);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  free((void *)h.after);
}

Test(loop_gpu_fake, destroy_with_pending_gpu_work_and_gates) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  cudaev_future_t *k, *f;
  struct hf h = {.after = calloc(1, 4)};
  cr_assert_eq(kernel(loop, s, 100000, &k), cudaSuccess);
  cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, &h, &f), cudaSuccess);
  struct count c = {0};
  cudaev_future_then(f, count_cb, &c);
  cudaev_loop_destroy(loop); /* gate opened without running fn; GPU drained */
  cr_expect_eq(cudaev_future_result(k), CUDAEV_ERROR_LOOP_DESTROYED);
  cr_expect_eq(cudaev_future_result(f), CUDAEV_ERROR_LOOP_DESTROYED);
  cr_expect_eq(atomic_load(&c.n), 1);
  cr_expect_eq(atomic_load(&h.ran), 0);
  cr_expect(stream_idle(s), "the stream went past the gate");
  cudaev_future_release(k);
  cudaev_future_release(f);
  free((void *)h.after);
}

static void set_flag(cudaev_future_t *f, cudaError_t s, void *u) {
  atomic_store((atomic_int *)u, 1);
}

static long long mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Drives a foreign loop until f completed; returns the loop's spin time. */
static uint64_t drive_until(cudaev_loop_t *loop, cudaev_future_t *f) {
  while (!cudaev_future_ready(f)) {
    int to = cudaev_loop_prepare(loop);
    struct pollfd p = {.fd = cudaev_loop_fd(loop), .events = POLLIN};
    poll(&p, 1, to < 0 || to > 50 ? 50 : to);
    cudaev_loop_process(loop);
  }
  struct cudaev_loop_stats st;
  cudaev_loop_stats(loop, &st, sizeof st);
  return st.spin_ns;
}

/* A foreign loop spinning at most spin_us that has seen n kernels of us
 * microseconds each on *s (it learnt their time); the completions then
 * stop flowing, and one more such kernel (*f) is submitted and taken in.
 * *spun: the loop's spin time so far. */
static cudaev_loop_t *learnt_loop(CUstream *s, unsigned spin_us, unsigned us, int n,
                                  cudaev_future_t **f, uint64_t *spun) {
  cudaev_loop_t *loop = foreign_with_stream(s);
  cudaev_loop_set_spin(loop, spin_us);
  for (int i = 0; i < n; i++) {
    cr_assert_eq(kernel(loop, *s, us, f), cudaSuccess);
    drive_until(loop, *f);
    cudaev_future_release(*f);
  }
  usleep(2000); /* nothing flowing any more */
  cr_assert_eq(kernel(loop, *s, us, f), cudaSuccess);
  cudaev_loop_process(loop);
  struct cudaev_loop_stats st;
  cudaev_loop_stats(loop, &st, sizeof st);
  *spun = st.spin_ns;
  return loop;
}

/* The three tests below time what the loop does against the fake GPU's
 * clock. A test thread held off its CPU for a few milliseconds (the unit
 * suite runs its tests in parallel, on a machine that may have two cores)
 * can make one attempt see what a loop doing the right thing would not:
 * work it learnt as 5 ms away is due by the time it looks, a 100 us spin
 * measures a millisecond. A loop doing the wrong thing does it on every
 * attempt. So an attempt that missed is made again, on a fresh loop, and
 * the test fails, with the last attempt's reason, only when none held. */
enum { TIMED_ATTEMPTS = 6, WHY_LEN = 160 };
typedef bool timed_attempt_fn(char why[WHY_LEN]);

/* Records why an attempt missed; returns false (the attempt's outcome). */
__attribute__((format(printf, 2, 3))) static bool missed(char why[WHY_LEN], const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, WHY_LEN, fmt, ap);
  va_end(ap);
  return false;
}

static void expect_one_attempt_holds(timed_attempt_fn *attempt) {
  char why[WHY_LEN] = "";
  int tried = 0;
  while (tried < TIMED_ATTEMPTS && !attempt(why)) tried++;
  cr_expect(tried < TIMED_ATTEMPTS, "%s (in each of %d attempts)", why, TIMED_ATTEMPTS);
}

/* The adaptive spin polls only for work expected within its window: once
 * the loop has seen this stream's kernels take 20 ms, it sleeps at once
 * (the armed wakeup comes no later), while 100 us kernels are polled for. */
static bool spin_only_within_the_window(char why[WHY_LEN]) {
  CUstream s;
  cudaev_future_t *f;
  uint64_t before;
  bool held = true;
  cudaev_loop_t *loop = learnt_loop(&s, 1000, 20000, 4, &f, &before);
  struct cudaev_loop_stats st;
  int64_t t = cudaev_loop_prepare_ns(loop);
  cudaev_loop_stats(loop, &st, sizeof st);
  if (t <= 0) {
    held = missed(why, "told %lld ns with 20 ms of work running", (long long)t);
  } else if (st.spin_ns != before) {
    held = missed(why, "spun %llu ns for work expected after the window",
                  (unsigned long long)(st.spin_ns - before));
  }
  drive_until(loop, f);
  cudaev_future_release(f);
  /* Short kernels: once the loop has seen a few, expected within the
   * window, and polled for. */
  for (int i = 0; i < 40; i++) {
    cr_assert_eq(kernel(loop, s, 100, &f), cudaSuccess);
    drive_until(loop, f);
    cudaev_future_release(f);
  }
  cudaev_loop_stats(loop, &st, sizeof st);
  if (held && st.spin_ns <= before) {
    held = missed(why, "never spun for 100 us kernels");
  }
  cudaev_loop_destroy(loop);
  return held;
}

Test(loop_gpu_fake, spin_only_for_work_expected_within_the_window) {
  expect_one_attempt_holds(spin_only_within_the_window);
}

/* Hybrid polling: once the loop knows the GPU's usual time (here 5 ms),
 * it sleeps until half a spin window before the work is due and spins into
 * it, instead of sleeping until the armed wakeup (which a VM delivers late)
 * or the watchdog; it spins a few windows at most, not the 5 ms. */
static bool hybrid_wake(char why[WHY_LEN]) {
  CUstream s;
  cudaev_future_t *f;
  uint64_t spun;
  bool held = true;
  cudaev_loop_t *loop = learnt_loop(&s, 400, 5000, 12, &f, &spun);
  struct cudaev_loop_stats st;
  int64_t t = cudaev_loop_prepare_ns(loop);
  cudaev_loop_stats(loop, &st, sizeof st);
  /* About 5 ms (the learnt time includes the test's millisecond polls);
   * without hybrid polling, until the watchdog: 200 ms. */
  if (t <= 1000000 || t >= 20000000) {
    held = missed(why, "sleeps %lld ns: want until about 5 ms", (long long)t);
  } else if (st.spin_ns != spun) {
    held = missed(why, "spun at once for work 5 ms away");
  }
  drive_until(loop, f);
  cudaev_loop_stats(loop, &st, sizeof st);
  if (held && st.spin_ns - spun > 3 * 400000) {
    held =
        missed(why, "spun %llu ns: a few windows at most", (unsigned long long)(st.spin_ns - spun));
  }
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  return held;
}

Test(loop_gpu_fake, wakes_just_before_work_is_due_and_spins_into_it) {
  expect_one_attempt_holds(hybrid_wake);
}

/* When the work takes longer than the loop learnt, the hybrid wake's spin
 * gives up before it is done. The loop then looks again at growing
 * intervals rather than wait for the wakeup it armed, which a VM may
 * deliver a millisecond late (here a second: without the looks, the
 * completion is seen by the test's 50 ms poll); and the looks do not spin. */
static bool looks_after_a_missed_spin(char why[WHY_LEN]) {
  CUstream s;
  cudaev_future_t *f;
  uint64_t spun;
  bool held = true;
  cudaev_loop_t *loop = learnt_loop(&s, 100, 2000, 12, &f, &spun);
  drive_until(loop, f);
  cudaev_future_release(f);
  atomic_store(&hostfn_late_ms, 1000);
  struct cudaev_loop_stats st;
  cudaev_loop_stats(loop, &st, sizeof st);
  uint64_t spun0 = st.spin_ns, t0 = (uint64_t)mono_ns();
  /* Half as long again as the learnt 2 ms (plus the test's polls): the
   * looks go on until about twice the learnt time. */
  cr_assert_eq(kernel(loop, s, 3000, &f), cudaSuccess);
  drive_until(loop, f);
  uint64_t took = (uint64_t)mono_ns() - t0;
  cudaev_loop_stats(loop, &st, sizeof st);
  if (took >= 20000000) {
    held = missed(why, "took %llu us for 3 ms of work", (unsigned long long)(took / 1000));
  } else if (st.spin_ns - spun0 >= 1000000) {
    held = missed(why, "spun %llu us", (unsigned long long)((st.spin_ns - spun0) / 1000));
  }
  atomic_store(&hostfn_late_ms, 0);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  return held;
}

Test(loop_gpu_fake, looks_again_soon_when_a_spin_missed) {
  expect_one_attempt_holds(looks_after_a_missed_spin);
}

/* With a deadline callback (push-style foreign mode), a pass whose spin
 * saw the GPU done is followed by the pass that completes it inside the
 * same cudaev_loop_process call, instead of a deadline of 0 and one more
 * turn of the application's loop; but not past a pass that ran a
 * continuation. */
struct kchain {
  cudaev_loop_t *loop;
  CUstream s;
  int left, done;
};
static void kchain_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  struct kchain *c = u;
  c->done++;
  if (c->left-- <= 0) return;
  cudaev_future_t *g;
  cr_assert_eq(kernel(c->loop, c->s, 200, &g), cudaSuccess);
  cr_assert_eq(cudaev_future_then(g, kchain_cb, c), cudaSuccess);
  cudaev_future_release(g);
}

Test(loop_gpu_fake, foreign_process_completes_what_its_spin_saw) {
  CUstream s;
  cudaev_future_t *f;
  uint64_t spun;
  cudaev_loop_t *loop = learnt_loop(&s, 20000, 200, 8, &f, &spun);
  drive_until(loop, f);
  cudaev_future_release(f);
  usleep(2000);
  struct told_deadline t = {0, 0};
  cudaev_loop_set_timer_cb(loop, told_deadline_cb, &t);
  cr_expect_eq(t.ns, -1, "nothing pending: no deadline");
  /* One kernel: taken in, spun for, completed, all in one call. On a
   * loaded machine the fake GPU may come after the spin window: then the
   * loop sleeps (a deadline > 0); what must never happen is a deadline of
   * 0 (the spin saw it) with the kernel not completed. */
  int in_one_call = 0;
  for (int i = 0; i < 20; i++) {
    struct kchain c = {.loop = loop, .s = s, .left = 0};
    /* Afresh: the loop tells only a deadline that moved (by 10 us), so the
     * one told by drive_until's last call could stand for this one. */
    cudaev_loop_set_timer_cb(loop, told_deadline_cb, &t);
    cr_assert_eq(kernel(loop, s, 200, &f), cudaSuccess);
    cr_assert_eq(cudaev_future_then(f, kchain_cb, &c), cudaSuccess);
    cudaev_loop_process(loop);
    if (c.done == 1) {
      in_one_call++;
      cr_expect_eq(t.ns, -1, "told %lld: nothing is left", (long long)t.ns);
    } else {
      cr_expect_gt(t.ns, 0, "told %lld, and the kernel not completed", (long long)t.ns);
    }
    drive_until(loop, f);
    cudaev_future_release(f);
  }
  cr_expect_gt(in_one_call, 0, "no kernel completed in the call that spun for it");
  /* A chain of 50 (each continuation submits the next kernel): a pass
   * that ran a continuation returns to the application, which may have
   * work to do because of it, so one per call at most. */
  struct kchain c = {.loop = loop, .s = s, .left = 49};
  cr_assert_eq(kernel(loop, s, 200, &f), cudaSuccess);
  cr_assert_eq(cudaev_future_then(f, kchain_cb, &c), cudaSuccess);
  cudaev_loop_process(loop);
  cr_expect(c.done <= 1, "%d of the chain's kernels in one call", c.done);
  drive_until(loop, f);
  cudaev_future_release(f);
  while (c.done < 50) {
    struct pollfd p = {.fd = cudaev_loop_fd(loop), .events = POLLIN};
    poll(&p, 1, t.ns < 0 ? 50 : (int)((t.ns + 999999) / 1000000));
    cudaev_loop_process(loop);
  }
  cudaev_loop_set_timer_cb(loop, NULL, NULL);
  cudaev_loop_destroy(loop);
}

Test(loop_gpu_fake, foreign_loop_sleeps_and_is_woken_by_armed_host_function) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  cudaev_future_t *f;
  cr_assert_eq(kernel(loop, s, 100000, &f), cudaSuccess); /* 100 ms */
  atomic_int flag = 0;
  cudaev_future_then(f, set_flag, &flag);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, cudaev_loop_fd(loop), &ev);
  int iters = 0, longest = 0;
  while (!atomic_load(&flag) && iters < 1000) {
    int to = cudaev_loop_prepare(loop);
    if (to > longest) longest = to;
    struct epoll_event got;
    epoll_wait(ep, &got, 1, to);
    cudaev_loop_process(loop);
    iters++;
  }
  cr_expect_eq(atomic_load(&flag), 1);
  cr_expect(iters < 20, "the loop polled instead of sleeping (%d passes)", iters);
  cr_expect(longest >= 100, "sleeps until the watchdog's deadline (%d ms)", longest);
  close(ep);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

Test(loop_gpu_fake, wait_completes_from_the_word_without_a_running_loop) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess); /* never driven */
  CUstream s;
  f_screate(&s, 0);
  cudaev_future_t *f;
  cr_assert_eq(kernel(loop, s, 1000, &f), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

/* Markers: a stream with none of our futures outstanding gets a word (the
 * latency case); submissions queued behind outstanding ones get pooled
 * events (free on a GPU, unlike a word's fence), a word every 16th. The
 * loop completes a passed run of events with a query or two, not one
 * each, in stream order. */
struct order {
  int next, bad;
};
struct stamp {
  atomic_llong at;
};
static void stamp_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  (void)f;
  (void)s;
  atomic_store(&((struct stamp *)u)->at, mono_ns());
}

static void order_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  struct order *o = u;
  if (s != cudaSuccess || (intptr_t)cudaev_future_user(f) != o->next) o->bad++;
  o->next++;
}

Test(loop_gpu_fake, backlogged_stream_gets_events_and_completes_in_order) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  enum { N = 101 };
  cudaev_future_t *f[N];
  struct order o = {0, 0};
  long w0 = atomic_load(&writes), r0 = atomic_load(&records);
  cr_assert_eq(kernel(loop, s, 100000, &f[0]), cudaSuccess); /* 100 ms */
  for (int i = 1; i < N; i++)
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &f[i]), cudaSuccess);
  for (int i = 0; i < N; i++) {
    cudaev_future_set_user(f[i], (void *)(intptr_t)i, NULL);
    cr_assert_eq(cudaev_future_then(f[i], order_cb, &o), cudaSuccess);
  }
  long nw = atomic_load(&writes) - w0, nr = atomic_load(&records) - r0;
  cr_expect_eq(nw + nr, N);
  cr_expect_eq(nw, 1 + (N - 1) / 16, "a word first, then one every 16th: %ld words", nw);
  cr_expect_gt(nr, 0);
  cr_expect_eq(f_ssync(s), CUDA_SUCCESS);
  long q0 = atomic_load(&queries);
  for (int i = 0; i < 100 && o.next < N; i++) cudaev_loop_process(loop);
  cr_expect_eq(o.next, N);
  cr_expect_eq(o.bad, 0, "completed out of order or with an error");
  cr_expect_leq(atomic_load(&queries) - q0, 3, "%ld event queries for a passed run",
                atomic_load(&queries) - q0);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}

/* A backlog behind a long kernel: the loop puts one word marker of its own
 * behind the tail, and the whole run then completes without a query. */
Test(loop_gpu_fake, loop_flush_marker_completes_a_run_without_queries) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  enum { N = 12 };
  cudaev_future_t *f[N];
  struct order o = {0, 0};
  cr_assert_eq(kernel(loop, s, 100000, &f[0]), cudaSuccess);
  for (int i = 1; i < N; i++) cr_assert_eq(kernel(loop, s, 10, &f[i]), cudaSuccess);
  for (int i = 0; i < N; i++) {
    cudaev_future_set_user(f[i], (void *)(intptr_t)i, NULL);
    cr_assert_eq(cudaev_future_then(f[i], order_cb, &o), cudaSuccess);
  }
  long w0 = atomic_load(&writes);
  cudaev_loop_process(loop); /* takes them in; the head is not there yet */
  cudaev_loop_process(loop);
  cr_expect_eq(atomic_load(&writes) - w0, 1, "one flush marker, not %ld",
               atomic_load(&writes) - w0);
  cr_expect_eq(cudaev_loop_pending(loop), N, "the flush marker is not a pending future");
  cr_expect_eq(f_ssync(s), CUDA_SUCCESS);
  long q0 = atomic_load(&queries);
  for (int i = 0; i < 100 && o.next < N; i++) cudaev_loop_process(loop);
  cr_expect_eq(o.next, N);
  cr_expect_eq(o.bad, 0);
  cr_expect_eq(atomic_load(&queries) - q0, 0, "%ld queries", atomic_load(&queries) - q0);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_loop_destroy(loop);
}

/* A short job queued before a long one on a backlogged stream completes
 * when it is done, not when the next word marker (after the long one)
 * passes: the head's event is queried, less often as it ages. */
Test(loop_gpu_fake, short_job_before_a_long_one_is_not_held_back) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  cudaev_future_t *k0, *a, *b;
  cr_assert_eq(kernel(loop, s, 30000, &k0), cudaSuccess); /* a word */
  cr_assert_eq(kernel(loop, s, 1000, &a), cudaSuccess);   /* events */
  cr_assert_eq(kernel(loop, s, 800000, &b), cudaSuccess);
  long long t0 = mono_ns();
  struct stamp sa = {0};
  cudaev_future_then(a, stamp_cb, &sa);
  cr_expect_eq(cudaev_future_wait(b, 5 * SEC), cudaSuccess);
  cr_expect_neq(atomic_load(&sa.at), 0);
  cr_expect_lt(atomic_load(&sa.at) - t0, 400000000LL,
               "the 1 ms job after a 30 ms one completed %.0f ms after submission",
               (atomic_load(&sa.at) - t0) / 1e6);
  cudaev_future_release(k0);
  cudaev_future_release(a);
  cudaev_future_release(b);
  cudaev_loop_destroy(loop);
}

/* A stream too deep for the loop to enqueue on (hundreds of our futures
 * outstanding: it could block behind work that waits for the loop): no
 * wakeup is armed there, and the loop polls it instead of sleeping until
 * the watchdog. The first future completes soon after its kernel. */
Test(loop_gpu_fake, deep_stream_without_a_wakeup_is_polled) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  enum { N = 300 };
  cudaev_future_t *f[N];
  cr_assert_eq(kernel(loop, s, 40000, &f[0]), cudaSuccess); /* 40 ms */
  for (int i = 1; i < N; i++)
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &f[i]), cudaSuccess);
  cudaev_loop_set_spin(loop, 0);
  cudaev_loop_process(loop); /* takes them in */
  long h0 = atomic_load(&hostfns);
  int ms = cudaev_loop_prepare(loop);
  cr_expect_eq(atomic_load(&hostfns) - h0, 0, "a wakeup was armed on a stream that deep");
  cr_expect(ms >= 0 && ms <= 1, "told to sleep %d ms with no wakeup armed", ms);
  /* Driven like an application's loop would: all complete. */
  long long t0 = mono_ns();
  while (cudaev_future_result(f[N - 1]) == cudaErrorNotReady && mono_ns() - t0 < 5 * SEC) {
    int t = cudaev_loop_prepare(loop);
    struct pollfd p = {.fd = cudaev_loop_fd(loop), .events = POLLIN};
    poll(&p, 1, t);
    cudaev_loop_process(loop);
  }
  for (int i = 0; i < N; i++) cr_expect_eq(cudaev_future_result(f[i]), cudaSuccess);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_loop_destroy(loop);
}

/* The per-thread default stream is another stream on each thread: the
 * loop never enqueues on it (no flush marker, no armed wakeup); each
 * submission brings its own wakeup, and its futures complete. */
static void *per_thread_main(void *arg) {
  cudaev_loop_t *loop = arg;
  cudaev_future_t *f[20];
  for (int i = 0; i < 20; i++) {
    if (i % 5 == 0)
      cr_assert_eq(kernel(loop, CU_STREAM_PER_THREAD, 2000, &f[i]), cudaSuccess);
    else
      cr_assert_eq(cudaev_future_new_stream(loop, cudaStreamPerThread, &f[i]), cudaSuccess);
  }
  for (int i = 0; i < 20; i++) {
    cr_expect_eq(cudaev_future_wait(f[i], 5 * SEC), cudaSuccess);
    cudaev_future_release(f[i]);
  }
  return NULL;
}

Test(loop_gpu_fake, per_thread_stream_futures) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  long h0 = atomic_load(&hostfns), r0 = atomic_load(&records);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, per_thread_main, loop);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  cr_expect_eq(atomic_load(&hostfns) - h0, 40, "one wakeup per submission, none of the loop's");
  cr_expect_eq(atomic_load(&records) - r0, 0, "words only");
  cudaev_loop_destroy(loop);
}

/* A stream FIFO (a ring) grows while it is not at the start of its
 * storage, with the loop's flush word in it: when that word passes, what
 * completes is exactly the run up to it, not the entries queued behind a
 * second gate (positions are rebased with the ring). */
Test(loop_gpu_fake, ring_growth_keeps_the_flush_word_position) {
  setenv("CUDAEV_LOOP_WORD_EVERY", "1024", 1); /* no words but the first and the flush */
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  unsetenv("CUDAEV_LOOP_WORD_EVERY");
  cudaev_future_t *p[10], *a[15], *b[16];
  for (int i = 0; i < 10; i++)
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &p[i]), cudaSuccess);
  cr_expect_eq(f_ssync(s), CUDA_SUCCESS);
  for (int i = 0; i < 100 && cudaev_future_result(p[9]) == cudaErrorNotReady; i++) {
    cudaev_loop_process(loop);
    f_ssync(s);
  }
  cr_assert_eq(cudaev_future_result(p[9]), cudaSuccess);
  uint32_t *gate = calloc(2, 4);
  f_wait(s, (CUdeviceptr)&gate[0], 1, CU_STREAM_WAIT_VALUE_EQ);
  for (int i = 0; i < 15; i++)
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &a[i]), cudaSuccess);
  cudaev_loop_process(loop); /* a[] in the FIFO, then the loop's flush word */
  f_wait(s, (CUdeviceptr)&gate[1], 1, CU_STREAM_WAIT_VALUE_EQ);
  for (int i = 0; i < 16; i++)
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &b[i]), cudaSuccess);
  cudaev_loop_process(loop); /* b[] in: the ring grows */
  __atomic_store_n(&gate[0], 1, __ATOMIC_RELEASE);
  usleep(50000); /* the fake GPU passes a[] and the flush word, stops at gate[1] */
  cudaev_loop_process(loop);
  for (int i = 0; i < 15; i++) cr_expect_eq(cudaev_future_result(a[i]), cudaSuccess, "a[%d]", i);
  for (int i = 0; i < 16; i++)
    cr_expect_eq(cudaev_future_result(b[i]), cudaErrorNotReady, "b[%d] completed behind a gate", i);
  __atomic_store_n(&gate[1], 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 2000 && cudaev_future_result(b[15]) == cudaErrorNotReady; i++) {
    usleep(1000);
    cudaev_loop_process(loop);
  }
  for (int i = 0; i < 16; i++) cr_expect_eq(cudaev_future_result(b[i]), cudaSuccess);
  for (int i = 0; i < 10; i++) cudaev_future_release(p[i]);
  for (int i = 0; i < 15; i++) cudaev_future_release(a[i]);
  for (int i = 0; i < 16; i++) cudaev_future_release(b[i]);
  cudaev_loop_destroy(loop);
  free(gate);
}

/* Half a backlog passed: the loop completes exactly the passed prefix
 * (found by halves), the rest later. */
Test(loop_gpu_fake, backlog_partly_passed_completes_the_prefix) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  enum { N = 40 };
  cudaev_future_t *f[N + 1];
  struct order o = {0, 0};
  uint32_t *gate = calloc(1, 4);
  for (int i = 0; i < N; i++) {
    if (i == 25) f_wait(s, (CUdeviceptr)gate, 1, CU_STREAM_WAIT_VALUE_EQ);
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &f[i]), cudaSuccess);
    cudaev_future_set_user(f[i], (void *)(intptr_t)i, NULL);
    cr_assert_eq(cudaev_future_then(f[i], order_cb, &o), cudaSuccess);
  }
  for (int i = 0; i < 2000 && o.next < 25; i++) {
    cudaev_loop_process(loop);
    usleep(500);
  }
  usleep(20000);
  cudaev_loop_process(loop);
  cr_expect_eq(o.next, 25, "completed %d of the 25 passed", o.next);
  __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 2000 && o.next < N; i++) {
    cudaev_loop_process(loop);
    usleep(500);
  }
  cr_expect_eq(o.next, N);
  cr_expect_eq(o.bad, 0);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_loop_destroy(loop);
  free(gate);
}

/* Two threads submitting to one stream at once: A's marker is enqueued
 * first but A hands its future over last (its record lingers in the
 * driver), while B queues a long kernel and its own future behind it. The
 * stream FIFO can then disagree with the GPU's order, and A passing must
 * not be taken as B having passed: B completes only after the kernel. */
struct slow_sub {
  cudaev_loop_t *loop;
  CUstream s;
  cudaev_future_t *f;
};
static void *slow_sub_main(void *arg) {
  struct slow_sub *a = arg;
  slow_record_ms = 50;
  cr_assert_eq(cudaev_future_new_stream(a->loop, (cudaStream_t)a->s, &a->f), cudaSuccess);
  return NULL;
}

Test(loop_gpu_fake, concurrent_submitters_on_one_stream_never_complete_early) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  uint32_t *gate = calloc(1, 4);
  cudaev_future_t *p0, *h, *k, *b;
  /* p0 (a word) makes the stream backlogged: every marker after it is an
   * event, and the passed head h is found by a query, with what follows. */
  cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &p0), cudaSuccess);
  f_wait(s, (CUdeviceptr)gate, 1, CU_STREAM_WAIT_VALUE_EQ);
  cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &h), cudaSuccess);
  struct slow_sub a = {loop, s, NULL};
  pthread_t th;
  pthread_create(&th, NULL, slow_sub_main, &a);
  usleep(10000); /* A's record is on the stream; A is still inside the driver */
  cr_assert_eq(kernel(loop, s, 300000, &k), cudaSuccess); /* 300 ms */
  cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &b), cudaSuccess);
  pthread_join(th, NULL);
  /* The FIFO now reads h k b a (a's bracket ended last), the GPU's order
   * is (gate) h a kernel k b: h and a, head and tail, pass together, 300 ms
   * before k and b. */
  struct stamp sb = {0}, sk = {0};
  cudaev_future_then(b, stamp_cb, &sb);
  cudaev_future_then(k, stamp_cb, &sk);
  usleep(20000); /* the loop has taken every submission in */
  long long opened = mono_ns();
  __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
  cr_expect_eq(cudaev_future_wait(a.f, 5 * SEC), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(b, 5 * SEC), cudaSuccess);
  for (int i = 0; i < 1000 && (atomic_load(&sb.at) == 0 || atomic_load(&sk.at) == 0); i++)
    usleep(1000);
  cr_expect_geq(atomic_load(&sb.at) - opened, 250000000LL,
                "B completed %.1f ms after the gate opened, before its 300 ms kernel ended",
                (atomic_load(&sb.at) - opened) / 1e6);
  cr_expect_geq(atomic_load(&sk.at) - opened, 250000000LL);
  cudaev_future_t *all[] = {p0, h, k, b, a.f};
  for (int i = 0; i < 5; i++) cudaev_future_release(all[i]);
  cudaev_loop_destroy(loop);
  free(gate);
}

/* A future marked by an event (queued behind another) completes in wait()
 * with nobody driving the loop, like a word-marked one. */
Test(loop_gpu_fake, wait_completes_an_event_marked_future_without_a_running_loop) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess); /* never driven */
  CUstream s;
  f_screate(&s, 0);
  cudaev_future_t *k, *f;
  long r0 = atomic_load(&records);
  cr_assert_eq(kernel(loop, s, 20000, &k), cudaSuccess);
  cr_assert_eq(kernel(loop, s, 1000, &f), cudaSuccess);
  cr_expect_eq(atomic_load(&records) - r0, 1, "the second marker is an event");
  cr_expect_eq(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(k, 5 * SEC), cudaSuccess);
  cudaev_future_release(k);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
}

/* A fault with a backlog of event-marked futures: all fail with the
 * context's error, none succeeds. */
Test(loop_gpu_fake, sticky_error_fails_a_backlog_of_event_markers) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  enum { N = 30 };
  cudaev_future_t *f[N], *all;
  cr_assert_eq(kernel(loop, s, 3000000, &f[0]), cudaSuccess);
  for (int i = 1; i < N; i++) cr_assert_eq(kernel(loop, s, 10, &f[i]), cudaSuccess);
  cr_assert_eq(cudaev_future_new_all(loop, f, N, &all), cudaSuccess);
  usleep(20000);
  atomic_store(&faulted, 1);
  cr_expect_eq(cudaev_future_wait(all, 2 * SEC), cudaErrorIllegalAddress);
  for (int i = 0; i < N; i++) cr_expect_eq(cudaev_future_result(f[i]), cudaErrorIllegalAddress);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_future_release(all);
  cudaev_loop_destroy(loop);
}

/* A loop-thread host function behind a long kernel, then more than QMAX
 * operations on the same stream from another thread: the submitter blocks
 * (the stream is full behind the gate) until the loop opens the gate. The
 * loop must never itself enqueue on that stream meanwhile (an armed
 * wakeup): it would block in the driver with the gate closed, and nothing
 * would move again (the fake aborts after 10 s). */
struct flood {
  cudaev_loop_t *loop;
  CUstream s;
  int n;
  cudaev_future_t **f;
};
static void *flood_main(void *arg) {
  struct flood *fl = arg;
  for (int i = 0; i < fl->n; i++)
    cr_assert_eq(cudaev_future_new_stream(fl->loop, (cudaStream_t)fl->s, &fl->f[i]), cudaSuccess);
  return NULL;
}

static void gate_then_flood(void) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  cudaev_future_t *k, *f;
  struct hf h = {.after = calloc(1, 4)};
  cr_assert_eq(kernel(loop, s, 300000, &k), cudaSuccess); /* 300 ms */
  cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)s, quick_fn, &h, &f), cudaSuccess);
  struct flood fl = {loop, s, QMAX + 200, calloc(QMAX + 200, sizeof(cudaev_future_t *))};
  pthread_t th;
  pthread_create(&th, NULL, flood_main, &fl);
  cr_expect_eq(cudaev_future_wait(f, 10 * SEC), cudaSuccess);
  pthread_join(th, NULL);
  cr_expect_eq(cudaev_future_wait(fl.f[fl.n - 1], 10 * SEC), cudaSuccess);
  for (int i = 0; i < fl.n; i++) cudaev_future_release(fl.f[i]);
  free(fl.f);
  cudaev_future_release(k);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  free((void *)h.after);
}

Test(loop_gpu_fake, full_stream_behind_host_function_gate) { gate_then_flood(); }
Test(loop_gpu_fake, full_stream_behind_host_function_gate_events) {
  atomic_store(&writes_supported, 0);
  gate_then_flood();
}

/* The throughput benchmark's shapes. (1) Many streams of short kernels,
 * thread-mode loop: every future completes once, and the loop arms at most
 * one wakeup per stream at a time (no host function per operation).
 * (2) 100k futures pending at once (foreign loop, 512 streams held by a
 * gate so that no stream exceeds the driver's queue): the loop takes them
 * all in, then completes every one when the gate opens; words are
 * recycled. Queueing 100k behind a gate on 64 streams would exceed QMAX
 * per stream and block the submitter forever (the benchmark's old hang). */
struct ctr {
  long n, bad;
};
static void ctr_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  struct ctr *c = u; /* loop thread only */
  c->n++;
  if (s != cudaSuccess) c->bad++;
}

Test(loop_gpu_fake, many_streams_short_kernels) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  enum { NS = 64, PER = 300 };
  CUstream s[NS];
  for (int i = 0; i < NS; i++) f_screate(&s[i], 0);
  struct ctr c = {0, 0};
  atomic_store(&hostfns, 0);
  cudaev_future_t *last[NS];
  for (int k = 0; k < PER; k++)
    for (int i = 0; i < NS; i++) {
      cudaev_future_t *f;
      cr_assert_eq(kernel(loop, s[i], k % 50 == 0 ? 100 : 1, &f), cudaSuccess);
      cr_assert_eq(cudaev_future_then(f, ctr_cb, &c), cudaSuccess);
      if (k == PER - 1)
        last[i] = f;
      else
        cudaev_future_release(f);
    }
  for (int i = 0; i < NS; i++) {
    cr_expect_eq(cudaev_future_wait(last[i], 20 * SEC), cudaSuccess, "stream %d", i);
    cudaev_future_release(last[i]);
  }
  for (int i = 0; i < 5000 && cudaev_loop_pending(loop) > 0; i++) usleep(1000);
  cudaev_loop_destroy(loop); /* runs what is queued; c is final after */
  cr_expect_eq(c.n, (long)NS * PER);
  cr_expect_eq(c.bad, 0);
  cr_expect(atomic_load(&hostfns) < NS * PER / 4, "%ld host functions for %d completions",
            atomic_load(&hostfns), NS * PER);
}

/* A posted call that sets a flag. The loop's queue is FIFO: once a call
 * posted after some submissions ran, the loop has taken those in
 * (cudaev_loop_pending cannot say so: it counts a future from the moment
 * it is made). */
static void flag_fn(cudaev_loop_t *loop, void *u) { atomic_store((atomic_int *)u, 1); }

static void pending_round(cudaev_loop_t *loop, CUstream *s, int ns, int per, uint32_t *gate,
                          uint32_t round) {
  struct ctr c = {0, 0};
  for (int i = 0; i < ns; i++)
    cr_assert_eq(f_wait(s[i], (CUdeviceptr)gate, round, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);
  for (int k = 0; k < per; k++)
    for (int i = 0; i < ns; i++) {
      cudaev_future_t *f;
      cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s[i], &f), cudaSuccess);
      cr_assert_eq(cudaev_future_then(f, ctr_cb, &c), cudaSuccess);
      cudaev_future_release(f);
    }
  size_t n = (size_t)ns * per;
  time_t t0 = time(NULL);
  atomic_int in = 0;
  cr_assert_eq(cudaev_loop_post(loop, flag_fn, &in), cudaSuccess);
  while (!atomic_load(&in)) {
    cr_assert(time(NULL) - t0 < 20, "intake stuck");
    cudaev_loop_process(loop);
  }
  cr_expect_eq(cudaev_loop_pending(loop), n);
  cr_expect_eq(c.n, 0, "completed before the gate opened");
  __atomic_store_n(gate, round, __ATOMIC_RELEASE);
  while (c.n < (long)n) {
    cr_assert(time(NULL) - t0 < 40, "completion stuck at %ld of %zu", c.n, n);
    cudaev_loop_process(loop);
  }
  cr_expect_eq(c.bad, 0);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
}

Test(loop_gpu_fake, hundred_thousand_pending_on_many_streams) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  enum { NS = 512, PER = 196 }; /* 100,352 futures; 197 operations per stream */
  CUstream *s = calloc(NS, sizeof *s);
  for (int i = 0; i < NS; i++) f_screate(&s[i], 0);
  uint32_t *gate = calloc(1, 4);
  pending_round(loop, s, NS, 2, gate, 1);   /* 1k */
  pending_round(loop, s, NS, PER, gate, 2); /* 100k */
  pending_round(loop, s, NS, PER, gate, 3); /* again: recycled words */
  cudaev_loop_destroy(loop);
  free(gate);
  free(s);
}

Test(loop_gpu_fake, graph_launch_future) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  cudaev_future_t *f;
  cr_assert_eq(
      cudaev_graph_launch_async(loop, (cudaGraphExec_t)(uintptr_t)0x130000, (cudaStream_t)s, &f),
      cudaSuccess);
  cr_expect_eq(cudaev_future_result(f), cudaErrorNotReady);
  cr_expect_eq(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  /* An armed wakeup may still follow the marker on the stream. */
  cr_expect_eq(f_ssync(s), CUDA_SUCCESS);
  cudaev_future_release(f);
  cr_expect_eq(cudaev_graph_launch_async(NULL, NULL, (cudaStream_t)s, &f), cudaErrorInvalidValue);
  cudaev_loop_destroy(loop);
}

/* ---- stream records and process exit ------------------------------------------ */

/* Test-only counter of stream records (loop/gpu_ctx.h). */
size_t cudaev__gpu_tracks(cudaev_loop_t *loop);

/* Waits until the loop has retired everything, then until a posted call
 * ran (so that what the loop did before is visible here). */
static void loop_settle(cudaev_loop_t *loop) {
  for (int i = 0; i < 5000 && cudaev_loop_pending(loop) != 0; i++) usleep(1000);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  atomic_int done = 0;
  cr_assert_eq(cudaev_loop_post(loop, flag_fn, &done), cudaSuccess);
  for (int i = 0; i < 5000 && !atomic_load(&done); i++) usleep(1000);
  cr_assert(atomic_load(&done));
}

Test(loop_gpu_fake, stream_records_bounded_with_many_short_lived_streams) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  enum { NSTREAMS = 10000, BATCH = 100, IDLE_MAX = 1024 /* loop/gpu_stream.c's */ };
  for (int b = 0; b < NSTREAMS / BATCH; b++) {
    cudaev_future_t *f[BATCH];
    for (int i = 0; i < BATCH; i++) {
      CUstream s;
      f_screate(&s, 0); /* never the same handle twice: each stream used once */
      cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &f[i]), cudaSuccess);
    }
    for (int i = 0; i < BATCH; i++) {
      cr_expect_eq(cudaev_future_wait(f[i], 5 * SEC), cudaSuccess);
      cudaev_future_release(f[i]);
    }
    /* Waiters complete futures from their words; the loop retires the
     * FIFOs a little later. Once it has, only idle records remain. */
    if (b % 10 == 9) {
      loop_settle(loop);
      cr_expect_leq(cudaev__gpu_tracks(loop), IDLE_MAX, "%zu records after %d idle streams",
                    cudaev__gpu_tracks(loop), (b + 1) * BATCH);
    }
  }
  /* A few streams used over and over keep their (cached) records. */
  CUstream s[8];
  for (int i = 0; i < 8; i++) f_screate(&s[i], 0);
  for (int r = 0; r < 50; r++) {
    cudaev_future_t *f;
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s[r % 8], &f), cudaSuccess);
    cr_expect_eq(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
    cudaev_future_release(f);
  }
  loop_settle(loop);
  cr_expect_leq(cudaev__gpu_tracks(loop), IDLE_MAX);
  cudaev_loop_destroy(loop);
}

/* More streams than idle records are cached, each round: records are
 * reused for other streams, some while the old stream's armed wakeup is
 * still queued; every completion still arrives. */
Test(loop_gpu_fake, stream_records_reused_across_streams) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  cudaev_loop_set_spin(loop, 0); /* sleep at once: every stream gets a wakeup armed */
  enum { N = 1500, IDLE_MAX = 1024 /* loop/gpu_stream.c's */ };
  CUstream *s = calloc(N, sizeof *s);
  for (int i = 0; i < N; i++) f_screate(&s[i], 0);
  struct count c = {0};
  cudaev_future_t *f[N];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      cr_assert_eq(kernel(loop, s[i], i % 3 ? 1 : 300, &f[i]), cudaSuccess);
      cudaev_future_then(f[i], count_cb, &c);
    }
    for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
    for (int i = 0; i < 10000 && atomic_load(&c.n) < (round + 1) * N; i++) usleep(1000);
    cr_expect_eq(atomic_load(&c.n), (round + 1) * N);
  }
  cr_expect_eq(atomic_load(&c.bad), 0);
  loop_settle(loop);
  cr_expect_leq(cudaev__gpu_tracks(loop), IDLE_MAX);
  cudaev_loop_destroy(loop);
  free(s);
}

/* A continuation that drives the loop itself (a pass inside the pass that
 * runs it): the inner pass drains every other stream, more of them than
 * idle records are kept, while the outer pass is still finishing its own
 * stream's future. The outer stream's record must stay valid under it
 * (the ASan build reads it after the callback returns), and every future
 * completes once. */
struct nested {
  cudaev_loop_t *loop;
  int calls, bad;
};
static void nested_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  (void)f;
  struct nested *n = u;
  if (s != cudaSuccess) n->bad++;
  if (n->calls++ == 0) cudaev_loop_process(n->loop);
}

Test(loop_gpu_fake, pass_inside_a_continuation_drains_the_other_streams) {
  CUstream s0;
  cudaev_loop_t *loop = foreign_with_stream(&s0);
  enum { N = 1200, IDLE_MAX = 1024 /* loop/gpu_stream.c's */ };
  CUstream *s = calloc(N, sizeof *s);
  cr_assert_not_null(s);
  s[0] = s0;
  for (int i = 1; i < N; i++) f_screate(&s[i], 0);
  struct nested n = {.loop = loop};
  cudaev_future_t **f = calloc(N, sizeof *f);
  cr_assert_not_null(f);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(kernel(loop, s[i], 1, &f[i]), cudaSuccess);
    cr_assert_eq(cudaev_future_then(f[i], nested_cb, &n), cudaSuccess);
  }
  for (int i = 0; i < N; i++) cr_assert_eq(f_ssync(s[i]), CUDA_SUCCESS);
  for (int k = 0; k < 100 && n.calls < N; k++) cudaev_loop_process(loop);
  cr_expect_eq(n.calls, N);
  cr_expect_eq(n.bad, 0);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cr_expect_leq(cudaev__gpu_tracks(loop), IDLE_MAX);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_loop_destroy(loop);
  free(f);
  free(s);
}

/* ---- one loop, several contexts -------------------------------------------- */

/* Context handles of the fake: A is the primary context the loop is made
 * in (device 0), B "device 1"'s, C a second context on device 0. */
#define CTX_B ((CUcontext)(uintptr_t)0x2000)
#define CTX_C ((CUcontext)(uintptr_t)0x3000)

struct ctx_rec {
  CUcontext want;
  _Atomic(CUcontext) seen;
  atomic_int n;
};
static void ctx_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  struct ctx_rec *r = u;
  CUcontext c = NULL;
  fake_ctx_get_current(&c);
  if (s != cudaSuccess) c = NULL;
  atomic_store(&r->seen, c);
  atomic_fetch_add(&r->n, 1);
}

static CUstream stream_in(CUcontext c) {
  CUstream s;
  fake_ctx_push(c);
  f_screate(&s, 0);
  fake_ctx_pop(NULL);
  return s;
}

Test(loop_gpu_fake, one_loop_serves_two_devices_and_two_contexts_of_one) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUcontext a = NULL;
  fake_ctx_get_current(&a);
  cr_assert_not_null(a);
  CUstream sa, sb = stream_in(CTX_B), sc = stream_in(CTX_C);
  f_screate(&sa, 0);
  CUstream by[3] = {sa, sb, sc};
  CUcontext want[3] = {a, CTX_B, CTX_C};
  enum { N = 900 };
  static struct ctx_rec rec[N];
  cudaev_future_t **f = calloc(N, sizeof *f);
  for (int i = 0; i < N; i++) {
    int k = i % 3;
    rec[i].want = want[k];
    atomic_store(&rec[i].seen, NULL);
    atomic_store(&rec[i].n, 0);
    if (i % 5 == 4) {
      /* The NULL stream: the submitting thread's current context's. */
      fake_ctx_push(want[k]);
      cr_assert_eq(cudaev_future_new_stream(loop, NULL, &f[i]), cudaSuccess);
      fake_ctx_pop(NULL);
    } else {
      cr_assert_eq(i % 2 ? cudaev_future_new_stream(loop, (cudaStream_t)by[k], &f[i])
                         : kernel(loop, by[k], 1 + i % 40, &f[i]),
                   cudaSuccess);
    }
    CUcontext now = NULL;
    fake_ctx_get_current(&now);
    cr_assert_eq(now, a, "a submission left another context current");
    cr_assert_eq(cudaev_future_then(f[i], ctx_cb, &rec[i]), cudaSuccess);
  }
  cudaev_future_t *all;
  cr_assert_eq(cudaev_future_new_all(loop, f, N, &all), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(all, 10 * SEC), cudaSuccess);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < 5000 && atomic_load(&rec[i].n) == 0; j++) usleep(1000);
  int wrong = 0, twice = 0;
  for (int i = 0; i < N; i++) {
    if (atomic_load(&rec[i].seen) != rec[i].want) wrong++;
    if (atomic_load(&rec[i].n) != 1) twice++;
  }
  cr_expect_eq(wrong, 0, "%d continuations ran with another context current", wrong);
  cr_expect_eq(twice, 0, "%d continuations did not run exactly once", twice);
  /* Added after the future fired (a deferred continuation): its context too. */
  struct ctx_rec late = {.want = CTX_B};
  cr_assert_eq(cudaev_future_then(f[1], ctx_cb, &late), cudaSuccess);
  for (int j = 0; j < 5000 && atomic_load(&late.n) == 0; j++) usleep(1000);
  cr_expect_eq(atomic_load(&late.seen), CTX_B);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_future_release(all);
  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) > 0; i++) usleep(1000);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
  free(f);
}

struct ctx_hf {
  _Atomic(CUcontext) seen;
};
static cudaError_t ctx_host_fn(void *u) {
  CUcontext c = NULL;
  fake_ctx_get_current(&c);
  atomic_store(&((struct ctx_hf *)u)->seen, c);
  return cudaSuccess;
}

/* A host function and a waiter-completed future of a second context; and
 * destroy with work of both pending fails all of it. */
Test(loop_gpu_fake, second_context_host_function_wait_and_destroy) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream sc = stream_in(CTX_C);
  struct ctx_hf h = {NULL};
  cudaev_future_t *hf, *k1, *k, *w;
  cr_assert_eq(cudaev_launch_host_func_async(loop, (cudaStream_t)sc, ctx_host_fn, &h, &hf),
               cudaSuccess);
  cr_expect_eq(cudaev_future_wait(hf, 5 * SEC), cudaSuccess);
  cr_expect_eq(atomic_load(&h.seen), CTX_C);
  cr_assert_eq(kernel(loop, sc, 2000, &k1), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(k1, 5 * SEC), cudaSuccess);
  struct ctx_rec r = {.want = CTX_C};
  cr_assert_eq(cudaev_future_then(k1, ctx_cb, &r), cudaSuccess);
  for (int j = 0; j < 5000 && atomic_load(&r.n) == 0; j++) usleep(1000);
  cr_expect_eq(atomic_load(&r.seen), CTX_C);
  /* Pending on both at destroy. */
  CUstream sa;
  f_screate(&sa, 0);
  cr_assert_eq(kernel(loop, sc, 300000, &k), cudaSuccess);
  cr_assert_eq(kernel(loop, sa, 300000, &w), cudaSuccess);
  cudaev_loop_destroy(loop);
  cr_expect_eq(cudaev_future_result(k), CUDAEV_ERROR_LOOP_DESTROYED);
  cr_expect_eq(cudaev_future_result(w), CUDAEV_ERROR_LOOP_DESTROYED);
  cudaev_future_release(hf);
  cudaev_future_release(k1);
  cudaev_future_release(k);
  cudaev_future_release(w);
}

/* ---- cudaev_future_new_work_done: when the GPU is done with the memory ------------- */

/* A "buffer" the GPU writes at the end of the work (after a long kernel);
 * g's continuation frees it: the write must have happened before. */
struct buf_watch {
  volatile uint32_t *buf;
  uint32_t seen; /* the buffer when g's continuation ran */
  cudaError_t st;
  atomic_int ran;
};
static void buf_free_cb(cudaev_future_t *g, cudaError_t st, void *u) {
  struct buf_watch *w = u;
  w->seen = __atomic_load_n(w->buf, __ATOMIC_ACQUIRE);
  w->st = st;
  atomic_store(&w->ran, 1);
}

/* On s: a kernel of `us`, then the GPU writes 1 to buf; a future behind
 * both (an event marker when `backlog`: a future already outstanding). */
static cudaev_future_t *write_after(cudaev_loop_t *loop, CUstream s, unsigned us, uint32_t *buf,
                                    bool backlog, cudaev_future_t **first) {
  cudaev_future_t *f;
  *first = NULL;
  if (backlog) cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, first), cudaSuccess);
  f_launch((CUfunction)(uintptr_t)us, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  f_write(s, (CUdeviceptr)buf, 1, 0);
  cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &f), cudaSuccess);
  return f;
}

static void cancel_then_done(bool backlog) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  uint32_t *buf = calloc(1, 4);
  cudaev_future_t *first, *f = write_after(loop, s, 100000, buf, backlog, &first), *g;
  cr_expect_eq(cudaev_future_cancel(f), 1);
  cr_expect_eq(cudaev_future_result(f), CUDAEV_ERROR_CANCELLED);
  cr_assert_eq(cudaev_future_new_work_done(f, &g), cudaSuccess);
  struct buf_watch w = {.buf = buf};
  cr_assert_eq(cudaev_future_then(g, buf_free_cb, &w), cudaSuccess);
  usleep(20000);
  cr_expect_eq(cudaev_future_ready(g), 0, "done before the GPU finished");
  cr_expect_eq(cudaev_future_wait(g, 5 * SEC), cudaSuccess);
  for (int i = 0; i < 5000 && !atomic_load(&w.ran); i++) usleep(1000);
  cr_expect_eq(atomic_load(&w.ran), 1);
  cr_expect_eq(w.seen, 1, "g completed before the GPU wrote the buffer");
  cr_expect_eq(w.st, cudaSuccess);
  /* Asked again after the marker passed: at once. */
  cudaev_future_t *g2;
  cr_assert_eq(cudaev_future_new_work_done(f, &g2), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(g2, 5 * SEC), cudaSuccess);
  cudaev_future_release(g2);
  cudaev_future_release(g);
  cudaev_future_release(f);
  cudaev_future_release(first);
  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) > 0; i++) usleep(1000);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
  free(buf);
}

Test(loop_gpu_fake, done_after_cancel_waits_for_the_gpu_word_marker) { cancel_then_done(false); }
Test(loop_gpu_fake, done_after_cancel_waits_for_the_gpu_event_marker) { cancel_then_done(true); }

/* Destroy with a cancelled future watched: g completes inside destroy,
 * after the GPU wrote the buffer (the context synchronisation). A
 * promise's done completes when the promise does. */
Test(loop_gpu_fake, done_at_destroy_and_for_a_promise) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  uint32_t *buf = calloc(1, 4);
  cudaev_future_t *first, *f = write_after(loop, s, 100000, buf, false, &first), *g, *p, *pg;
  cr_expect_eq(cudaev_future_cancel(f), 1);
  cr_assert_eq(cudaev_future_new_work_done(f, &g), cudaSuccess);
  struct buf_watch w = {.buf = buf};
  cr_assert_eq(cudaev_future_then(g, buf_free_cb, &w), cudaSuccess);
  cr_assert_eq(cudaev_promise_new(loop, &p), cudaSuccess);
  cr_assert_eq(cudaev_future_new_work_done(p, &pg), cudaSuccess);
  cr_expect_eq(cudaev_promise_set(g, cudaErrorInvalidValue), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_promise_set(pg, cudaErrorInvalidValue), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_future_ready(pg), 0, "a refused set left done's future pending");
  cr_expect_eq(cudaev_promise_set(p, cudaErrorInvalidValue), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(pg, 5 * SEC), cudaErrorInvalidValue);
  usleep(10000); /* the watch reaches the loop */
  cudaev_loop_destroy(loop);
  cr_expect_eq(atomic_load(&w.ran), 1);
  cr_expect_eq(w.seen, 1, "g completed before the GPU wrote the buffer");
  cr_expect_eq(cudaev_future_result(g), cudaSuccess);
  cudaev_future_t *none;
  cr_expect_eq(cudaev_future_new_work_done(NULL, &none), cudaErrorInvalidValue);
  cr_expect_null(none);
  cudaev_future_release(g);
  cudaev_future_release(f);
  cudaev_future_release(p);
  cudaev_future_release(pg);
  free(buf);
}

/* ---- copies with pageable host memory go through pinned staging ---------- */

struct copy_seen {
  const uint8_t *dst;
  uint8_t first; /* dst[0] when the continuation ran */
  atomic_int ran;
};
static void copy_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  struct copy_seen *c = u;
  c->first = st == cudaSuccess ? c->dst[0] : 0;
  atomic_store(&c->ran, 1);
}

Test(loop_gpu_fake, pageable_copies_are_staged_and_never_block) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_thread(&loop), cudaSuccess);
  CUstream s;
  f_screate(&s, 0);
  enum { N = 1 << 16 };
  uint8_t *host = malloc(N), *back = calloc(1, N), *dev = calloc(1, N);
  declare_pageable(host, N);
  declare_pageable(back, N);
  memset(host, 0x5a, N);
  /* H2D behind a 100 ms kernel: the call returns at once, and the source
   * may be reused at once (it was copied on this thread). */
  cudaev_future_t *k, *h2d, *d2h;
  cr_assert_eq(kernel(loop, s, 100000, &k), cudaSuccess);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cr_assert_eq(
      cudaev_memcpy_async(loop, dev, host, N, cudaMemcpyHostToDevice, (cudaStream_t)s, &h2d),
      cudaSuccess);
  memset(host, 0, N);
  cr_assert_eq(cudaev_memcpy_async(loop, back, dev, N, cudaMemcpyDefault, (cudaStream_t)s, &d2h),
               cudaSuccess);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  cr_expect_lt((t1.tv_sec - t0.tv_sec) * SEC + (t1.tv_nsec - t0.tv_nsec), 50000000,
               "a pageable copy blocked the caller");
  cr_expect_eq(cudaev_future_ready(d2h), 0);
  /* Neither is a promise: a set would complete d2h before `back` is
   * written. Refused, and both stay pending. */
  cr_expect_eq(cudaev_promise_set(d2h, cudaSuccess), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_promise_set(k, cudaSuccess), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_future_ready(d2h), 0);
  cr_expect_eq(cudaev_future_ready(k), 0);
  struct copy_seen c = {.dst = back};
  cr_assert_eq(cudaev_future_then(d2h, copy_cb, &c), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(d2h, 5 * SEC), cudaSuccess);
  /* The future completed after the user's memory was written. */
  cr_expect_eq(back[0], 0x5a);
  cr_expect_eq(back[N - 1], 0x5a);
  cr_expect_eq(dev[N / 2], 0x5a);
  cr_expect_eq(cudaev_future_wait(h2d, 5 * SEC), cudaSuccess);
  for (int i = 0; i < 5000 && !atomic_load(&c.ran); i++) usleep(1000);
  cr_expect_eq(c.first, 0x5a);
  /* A cancelled D2H never writes the user's memory. */
  memset(back, 0, N);
  cudaev_future_t *k2, *d2, *g;
  cr_assert_eq(kernel(loop, s, 50000, &k2), cudaSuccess);
  cr_assert_eq(
      cudaev_memcpy_async(loop, back, dev, N, cudaMemcpyDeviceToHost, (cudaStream_t)s, &d2),
      cudaSuccess);
  cr_expect_eq(cudaev_future_cancel(d2), 1);
  cr_assert_eq(cudaev_future_new_work_done(d2, &g), cudaSuccess);
  cr_expect_eq(cudaev_future_wait(k2, 5 * SEC), cudaSuccess);
  cr_expect_eq(f_ssync(s), CUDA_SUCCESS);
  usleep(20000);
  cr_expect_eq(back[0], 0, "a cancelled copy wrote the user's memory");
  cudaev_future_release(g);
  cudaev_future_release(k2);
  cudaev_future_release(d2);
  cudaev_future_release(k);
  cudaev_future_release(h2d);
  cudaev_future_release(d2h);
  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) > 0; i++) usleep(1000);
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
  free(host);
  free(back);
  free(dev);
}

Test(loop_gpu_fake, launch_ex_async_needs_a_config) {
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  cudaev_future_t *f = (cudaev_future_t *)1;
  cr_expect_eq(cudaev_launch_ex_async(loop, NULL, NULL, NULL, &f), cudaErrorInvalidValue);
  cr_expect_null(f);
  cudaLaunchConfig_t cfg = {.gridDim = {1, 1, 1}, .blockDim = {1, 1, 1}};
  cr_expect_eq(cudaev_launch_ex_async(NULL, &cfg, NULL, NULL, &f), cudaErrorInvalidValue);
  cudaev_loop_destroy(loop);
}

/* exit(0) with the default loop running and GPU work pending on it,
 * including a loop-thread host function whose gate is still closed behind
 * a 200 ms "kernel". The exit handler stops and joins the loop thread and
 * opens the gate without running fn, so the stream drains: an exit handler
 * registered before the loop (it runs after ours) checks that, then leaves
 * with _exit so that nothing else the test runner registered runs in the
 * child. Run in a forked child, without this suite's fixture: the child
 * sets up its own fake GPU. */
static CUstream exit_stream;
static struct hf exit_hf;
static void check_stream_drains_after_exit(void) {
  for (int i = 0; i < 3000 && !stream_idle(exit_stream); i++) usleep(1000);
  if (!stream_idle(exit_stream)) _exit(7);
  if (atomic_load(&exit_hf.ran)) _exit(8);
  _exit(0);
}

static void exit_child(void) {
  alarm(20);
  setup();
  atexit(check_stream_drains_after_exit);
  cudaev_loop_t *d = cudaev_loop_default();
  if (d == NULL) _exit(2);
  f_screate(&exit_stream, 0);
  static uint32_t after;
  exit_hf.after = &after;
  cudaev_future_t *k, *h, *g;
  if (kernel(d, exit_stream, 200000, &k) != cudaSuccess ||
      cudaev_launch_host_func_async(d, (cudaStream_t)exit_stream, host_fn, &exit_hf, &h) !=
          cudaSuccess ||
      cudaev_future_new_stream(d, (cudaStream_t)exit_stream, &g) != cudaSuccess)
    _exit(3);
  /* The loop has taken all four in (kernel, gate trigger, host function,
   * marker): a call posted after them has run. */
  static atomic_int in;
  if (cudaev_loop_post(d, flag_fn, &in) != cudaSuccess) _exit(4);
  for (int i = 0; i < 5000 && !atomic_load(&in); i++) usleep(1000);
  if (!atomic_load(&in) || cudaev_loop_pending(d) < 4) _exit(4);
  exit(0);
}

Test(loop_exit_fake, exit_with_pending_gpu_work_opens_gates, .timeout = 60) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) exit_child();
  cr_assert_gt(pid, 0);
  int st = -1;
  for (int i = 0; i < 3000; i++) {
    if (waitpid(pid, &st, WNOHANG) == pid) break;
    st = -1;
    usleep(10000);
  }
  if (st == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  cr_expect(st != -1, "the child hung at exit");
  cr_expect(st != -1 && WIFEXITED(st), "the child died of signal %d",
            st != -1 && WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit code %d",
            st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* ---- lifetimes: waiters, late submissions and destroy ------------------- */

/* A waiter checks an event-marked future itself (cuEventQuery) and is
 * held up inside the query while another thread destroys the loop:
 * destroy must not destroy that event (nor free the loop's GPU state)
 * before the query returned, and the wait ends with the destroy's
 * outcome. */
struct stall_waiter {
  cudaev_future_t *f;
  cudaError_t got;
};
static void *stall_wait_main(void *arg) {
  struct stall_waiter *w = arg;
  stall_th = pthread_self();
  atomic_store(&stall_on, 1);
  w->got = cudaev_future_wait(w->f, 5 * SEC);
  return NULL;
}

Test(loop_gpu_fake, waiter_inside_an_event_query_outlives_destroy) {
  atomic_store(&writes_supported, 0); /* every marker is a pooled event */
  atomic_store(&keep_dead, 1);
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s); /* never driven */
  struct stall_waiter w = {.got = cudaErrorUnknown};
  cr_assert_eq(kernel(loop, s, 20000, &w.f), cudaSuccess); /* 20 ms */
  pthread_t th;
  pthread_create(&th, NULL, stall_wait_main, &w);
  for (int i = 0; i < 2000 && !atomic_load(&in_stall); i++) usleep(1000);
  cr_assert(atomic_load(&in_stall), "the waiter never queried the event");
  cudaev_loop_destroy(loop);
  atomic_store(&stall_until, 1);
  pthread_join(th, NULL);
  cr_expect_eq(atomic_load(&dead_queries), 0,
               "the waiter's query ran on an event destroy had destroyed");
  cr_expect_eq(w.got, CUDAEV_ERROR_LOOP_DESTROYED, "wait gave %d", w.got);
  cr_expect(atomic_load(&edestroys) > 0, "destroy destroys the pooled events");
  cudaev_future_release(w.f);
  graveyard_free();
}

/* Continuations that destroy runs (on the destroying thread) and that
 * submit more GPU work: refused with CUDAEV_ERROR_LOOP_DESTROYED and no
 * future, both while the GPU source fails its futures and in the passes
 * after it is gone. */
struct late {
  CUstream s;
  cudaError_t rc[2];
  cudaev_future_t *out[2];
  int ran[2];
};
static void late2_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  struct late *l = u;
  l->ran[1]++;
  l->out[1] = (cudaev_future_t *)(uintptr_t)1;
  l->rc[1] = kernel(cudaev_future_loop(f), l->s, 1, &l->out[1]);
}
static void late1_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  struct late *l = u;
  l->ran[0]++;
  l->out[0] = (cudaev_future_t *)(uintptr_t)1;
  l->rc[0] = kernel(cudaev_future_loop(f), l->s, 1, &l->out[0]);
  /* f fired: this one runs in a later pass, after the sources' fini. */
  cudaev_future_then(f, late2_cb, l);
}

/* A push another thread has begun but not finished (between the queue's
 * exchange and its link: a waiter completing a future, preempted) hides
 * the message queued just before it from the loop until it links. Destroy
 * waits for it: a GPU submission queued before the destroy is taken in and
 * fails (or completes) with the other pending work, instead of reaching
 * the GPU source after that was finalized (a crash in its tracking). */
struct half_push {
  struct cudaev__run_msg rm;
  struct cudaev__mpsc_node *prev;
  atomic_int linked, ran;
};
static void half_push_ran(struct cudaev_loop *loop, struct cudaev__msg *m) {
  (void)loop;
  atomic_fetch_add(&((struct half_push *)(void *)m)->ran, 1);
}
static void *half_push_finish(void *arg) {
  struct half_push *h = arg;
  usleep(100000); /* destroy has begun meanwhile */
  atomic_store(&h->linked, 1);
  atomic_store_explicit(&h->prev->next, &h->rm.msg.node, memory_order_release);
  return NULL;
}

Test(loop_gpu_fake, destroy_waits_for_a_push_caught_half_way) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  cudaev_future_t *f;
  cr_assert_eq(kernel(loop, s, 1000, &f), cudaSuccess); /* queued: no pass ran */
  static struct half_push h;
  atomic_init(&h.rm.msg.node.next, NULL);
  h.rm.msg.kind = CUDAEV__MSG_RUN;
  h.rm.run = half_push_ran;
  h.prev = atomic_exchange_explicit(&loop->q.tail, &h.rm.msg.node, memory_order_seq_cst);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, half_push_finish, &h), 0);
  cudaev_loop_destroy(loop);
  cr_expect_eq(atomic_load(&h.linked), 1, "destroy returned before the push was linked");
  cr_expect_eq(atomic_load(&h.ran), 1);
  cr_expect(cudaev_future_ready(f));
  cudaError_t r = cudaev_future_result(f);
  cr_expect(r == cudaSuccess || r == CUDAEV_ERROR_LOOP_DESTROYED, "%s", cudaev_error_name(r));
  pthread_join(th, NULL);
  cudaev_future_release(f);
}

Test(loop_gpu_fake, submissions_during_destroy_are_refused) {
  struct late l = {.rc = {cudaErrorUnknown, cudaErrorUnknown}};
  cudaev_loop_t *loop = foreign_with_stream(&l.s);
  cudaev_future_t *f;
  cr_assert_eq(kernel(loop, l.s, 50000, &f), cudaSuccess);
  cr_assert_eq(cudaev_future_then(f, late1_cb, &l), cudaSuccess);
  cudaev_loop_destroy(loop);
  cr_expect_eq(cudaev_future_result(f), CUDAEV_ERROR_LOOP_DESTROYED);
  for (int i = 0; i < 2; i++) {
    cr_expect_eq(l.ran[i], 1, "continuation %d ran %d times", i, l.ran[i]);
    cr_expect_eq(l.rc[i], CUDAEV_ERROR_LOOP_DESTROYED, "submission %d gave %d", i, l.rc[i]);
    cr_expect_null(l.out[i], "submission %d left a future", i);
  }
  cudaev_future_release(f);
}

/* The pool gives back events it made, all at once, and destroys none of
 * them while the loop lives (a waiter may still query one). */
Test(loop_gpu_fake, pooled_events_live_as_long_as_the_loop) {
  atomic_store(&writes_supported, 0);
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  enum { N = 2000 };
  cudaev_future_t *f[N];
  for (int i = 0; i < N; i++) cr_assert_eq(kernel(loop, s, 1, &f[i]), cudaSuccess);
  for (int i = 0; i < 10000 && cudaev_future_ready(f[N - 1]) == 0; i++) {
    cudaev_loop_process(loop);
    usleep(200);
  }
  cr_assert(cudaev_future_ready(f[N - 1]));
  cr_expect_eq(atomic_load(&edestroys), 0, "an event was destroyed while the loop lives");
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_loop_destroy(loop);
  cr_expect(atomic_load(&edestroys) > 0);
}

/* ---- cudaev_loop_stats: the GPU counters ---------------------------------- */

static uint64_t hist_total(const struct cudaev_loop_stats *st) {
  uint64_t n = 0;
  for (int i = 0; i < CUDAEV_LOOP_LATENCY_BUCKETS; i++) n += st->gpu_latency_log2_ns[i];
  return n;
}

static void stats_after(bool events) {
  if (events) atomic_store(&writes_supported, 0);
  CUstream s[4];
  cudaev_loop_t *loop;
  cr_assert_eq(cudaev_loop_new_foreign(&loop), cudaSuccess);
  for (int i = 0; i < 4; i++) f_screate(&s[i], 0);
  enum { N = 300 };
  cudaev_future_t *f[N];
  uint64_t t0 = (uint64_t)mono_ns();
  for (int i = 0; i < N; i++) cr_assert_eq(kernel(loop, s[i % 4], 100, &f[i]), cudaSuccess);
  cudaev_future_cancel(f[7]); /* its marker still passes: it counts */
  while ((uint64_t)mono_ns() - t0 < 10ull * SEC) {
    bool all = true;
    for (int k = 0; k < N && all; k++) all = cudaev_future_ready(f[k]);
    struct cudaev_loop_stats st;
    cudaev_loop_stats(loop, &st, sizeof st);
    if (all && st.gpu_completions == N) break;
    int to = cudaev_loop_prepare(loop);
    struct pollfd p = {.fd = cudaev_loop_fd(loop), .events = POLLIN};
    poll(&p, 1, to < 0 || to > 5 ? 5 : to);
    cudaev_loop_process(loop);
  }
  uint64_t took = (uint64_t)mono_ns() - t0;
  struct cudaev_loop_stats st;
  memset(&st, 0xff, sizeof st);
  cr_assert_eq(cudaev_loop_stats(loop, &st, sizeof st), cudaSuccess);
  cr_expect_eq(st.size, sizeof st);
  cr_expect_eq(st.gpu_completions, N, "%llu GPU completions",
               (unsigned long long)st.gpu_completions);
  cr_expect_eq(st.gpu_word_markers + st.gpu_event_markers, N);
  if (events)
    cr_expect_eq(st.gpu_word_markers, 0);
  else
    cr_expect(st.gpu_word_markers > 0 && st.gpu_event_markers > 0, "words %llu, events %llu",
              (unsigned long long)st.gpu_word_markers, (unsigned long long)st.gpu_event_markers);
  cr_expect_eq(st.gpu_failed, 0);
  cr_expect_eq(hist_total(&st), N, "the histogram holds %llu", (unsigned long long)hist_total(&st));
  /* Every latency lies between 100 us (the kernel) and the whole run. */
  for (int i = 0; i < CUDAEV_LOOP_LATENCY_BUCKETS; i++)
    if (st.gpu_latency_log2_ns[i] != 0) {
      cr_expect(i >= 16, "a completion %d ns after its submission", 1 << i);
      cr_expect((1ull << i) <= took, "bucket %d: longer than the whole run", i);
    }
  cr_expect(st.completions >= N - 1, "fired %llu", (unsigned long long)st.completions);
  /* A caller built against the first, shorter struct gets just that. */
  struct cudaev_loop_stats old;
  memset(&old, 0xab, sizeof old);
  size_t first = offsetof(struct cudaev_loop_stats, gpu_completions);
  cr_assert_eq(cudaev_loop_stats(loop, &old, first), cudaSuccess);
  cr_expect_eq(old.size, first);
  cr_expect_eq(old.passes, st.passes);
  cr_expect_eq(old.gpu_completions, 0xababababababababull, "wrote past the size given");
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_loop_destroy(loop);
}

Test(loop_gpu_fake, stats_count_gpu_completions_by_marker_with_latencies) { stats_after(false); }
Test(loop_gpu_fake, stats_count_gpu_completions_by_event_marker) { stats_after(true); }

/* The watchdog's checks, the one that found a sticky error, and the futures
 * it failed; and the wakeups the loop armed while it slept. */
Test(loop_gpu_fake, stats_count_watchdog_failures_and_wakeups) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  cudaev_future_t *a, *b;
  cr_assert_eq(kernel(loop, s, 20000, &a), cudaSuccess);
  for (int i = 0; i < 5000 && !cudaev_future_ready(a); i++) {
    int to = cudaev_loop_prepare(loop);
    struct pollfd p = {.fd = cudaev_loop_fd(loop), .events = POLLIN};
    poll(&p, 1, to);
    cudaev_loop_process(loop);
  }
  cr_assert(cudaev_future_ready(a));
  struct cudaev_loop_stats st;
  cr_assert_eq(cudaev_loop_stats(loop, &st, sizeof st), cudaSuccess);
  cr_expect(st.gpu_wakeups_armed >= 1, "the loop slept without arming a wakeup");
  cr_expect_eq(st.gpu_completions, 1);
  cr_expect_eq(st.watchdog_errors, 0);
  cr_assert_eq(kernel(loop, s, 3000000, &b), cudaSuccess); /* 3 s */
  atomic_store(&faulted, 1);
  for (int i = 0; i < 5000 && !cudaev_future_ready(b); i++) {
    usleep(1000);
    cudaev_loop_process(loop);
  }
  cr_expect_eq(cudaev_future_result(b), cudaErrorIllegalAddress);
  cr_assert_eq(cudaev_loop_stats(loop, &st, sizeof st), cudaSuccess);
  cr_expect(st.watchdog_checks >= 1);
  cr_expect_eq(st.watchdog_errors, 1);
  cr_expect_eq(st.gpu_failed, 1);
  cr_expect_eq(st.gpu_completions, 1);
  cr_expect_eq(hist_total(&st), 1);
  cudaev_future_release(a);
  cudaev_future_release(b);
  cudaev_loop_destroy(loop);
}

/* cudaev_loop_set_markers(EVENTS): lone submissions, which get words by
 * default, get pooled events, and the loop adds no flush word of its own;
 * they complete in order as before. Back to AUTO, a lone one is a word
 * again. Bad arguments are refused. */
Test(loop_gpu_fake, set_markers_events_puts_no_word_on_the_stream) {
  CUstream s;
  cudaev_loop_t *loop = foreign_with_stream(&s);
  cr_expect_eq(cudaev_loop_set_markers(NULL, CUDAEV_MARKERS_EVENTS), cudaErrorInvalidValue);
  cr_expect_eq(cudaev_loop_set_markers(loop, (cudaev_markers_t)7), cudaErrorInvalidValue);
  cr_assert_eq(cudaev_loop_set_markers(loop, CUDAEV_MARKERS_EVENTS), cudaSuccess);
  enum { N = 40 };
  cudaev_future_t *f[N];
  struct order o = {0, 0};
  long w0 = atomic_load(&writes), r0 = atomic_load(&records);
  cr_assert_eq(kernel(loop, s, 20000, &f[0]), cudaSuccess); /* 20 ms: the rest queue behind */
  for (int i = 1; i < N; i++)
    cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &f[i]), cudaSuccess);
  for (int i = 0; i < N; i++) {
    cudaev_future_set_user(f[i], (void *)(intptr_t)i, NULL);
    cr_assert_eq(cudaev_future_then(f[i], order_cb, &o), cudaSuccess);
  }
  /* Drive the loop while the GPU is busy, then until all are done: a
   * default loop would put its flush word behind the run here. */
  for (int i = 0; i < 2000 && o.next < N; i++) {
    cudaev_loop_process(loop);
    usleep(100);
  }
  cr_expect_eq(o.next, N);
  cr_expect_eq(o.bad, 0, "completed out of order or with an error");
  cr_expect_eq(atomic_load(&writes) - w0, 0, "%ld words with EVENTS", atomic_load(&writes) - w0);
  cr_expect_eq(atomic_load(&records) - r0, N);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);

  cr_assert_eq(cudaev_loop_set_markers(loop, CUDAEV_MARKERS_AUTO), cudaSuccess);
  cudaev_future_t *g;
  w0 = atomic_load(&writes);
  cr_assert_eq(cudaev_future_new_stream(loop, (cudaStream_t)s, &g), cudaSuccess);
  cr_expect_eq(atomic_load(&writes) - w0, 1, "a lone submission is a word again");
  cr_expect_eq(cudaev_future_wait(g, 5 * SEC), cudaSuccess);
  cudaev_future_release(g);
  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) != 0; i++) {
    cudaev_loop_process(loop); /* the loop retires what the wait saw done */
    usleep(100);
  }
  cr_expect_eq(cudaev_loop_pending(loop), 0);
  cudaev_loop_destroy(loop);
}
