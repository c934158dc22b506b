/* cpu_loop_cost: the loop's per-completion cost with 1k and with 100k
 * futures pending, on the CPU, against a stand-in driver; the same protocol
 * as loop_completion_cost_*_us in bench/loop_throughput.c (which needs the
 * GPU), so that the loop's side can be studied without one.
 *
 * The stand-in: streams are queues of markers (word writes, event records)
 * that run only when the program says so ("the GPU passed them");
 * cuEventQuery busy-waits what the H200's took (bench/RESULTS-history.md:
 * 1.75 us for a passed event, ~0.1 us for one not yet passed; both
 * settable: CPU_LOOP_COST_QUERY_NS="passed,not_passed").
 *
 *   build/bench/cpu-loop-cost            prints both costs and their ratio,
 *                                        then both without the eviction
 *
 * Not part of the GPU harness; numbers depend on this machine's caches. */
#include "fake_driver.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudaev.h"
#include "ticks.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
static void busy(uint64_t ns) {
  uint64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

/* ---- the stand-in driver ------------------------------------------------- */

struct fev {
  int recorded, reached;
};
struct op {
  volatile uint32_t *addr; /* a word write, or */
  struct fev *ev;          /* an event record */
  uint32_t val;
  int seq;
};
struct fstream {
  struct op *ops;
  size_t n, cap, done;
};
static uint64_t q_passed_ns = 1750, q_pending_ns = 100;

static CUresult f_screate(CUstream *s, unsigned fl) {
  (void)fl;
  *s = (CUstream)calloc(1, sizeof(struct fstream));
  return CUDA_SUCCESS;
}
static CUresult f_squery(CUstream s) { return (void)s, CUDA_SUCCESS; }
static CUresult f_csync(CUcontext c) { return (void)c, CUDA_SUCCESS; }
static void push(CUstream s, struct op o) {
  struct fstream *f = (struct fstream *)s;
  if (f == NULL) return; /* the loop's internal probe on the NULL stream */
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 256;
    f->ops = realloc(f->ops, f->cap * sizeof *f->ops);
  }
  f->ops[f->n++] = o;
}
static CUresult f_write(CUstream s, CUdeviceptr a, cuuint32_t v, unsigned fl) {
  (void)fl;
  push(s, (struct op){.addr = (volatile uint32_t *)a, .val = v});
  return CUDA_SUCCESS;
}
static CUresult f_ecreate(CUevent *e, unsigned fl) {
  (void)fl;
  *e = (CUevent)calloc(1, sizeof(struct fev));
  return CUDA_SUCCESS;
}
static CUresult f_edestroy(CUevent e) { return free(e), CUDA_SUCCESS; }
static CUresult f_erecord(CUevent e, CUstream s) {
  struct fev *v = (struct fev *)e;
  push(s, (struct op){.ev = v, .seq = ++v->recorded});
  return CUDA_SUCCESS;
}
static CUresult f_equery(CUevent e) {
  struct fev *v = (struct fev *)e;
  bool passed = v->reached == v->recorded;
  busy(passed ? q_passed_ns : q_pending_ns);
  return passed ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult f_hostfn(CUstream s, CUhostFn fn, void *arg) {
  (void)s, (void)fn, (void)arg; /* wakeups: this program drives the loop itself */
  return CUDA_SUCCESS;
}
/* "The GPU" runs everything queued on s. */
static void pass(CUstream s) {
  struct fstream *f = (struct fstream *)s;
  for (; f->done < f->n; f->done++) {
    struct op *o = &f->ops[f->done];
    if (o->ev != NULL)
      o->ev->reached = o->seq;
    else
      __atomic_store_n(o->addr, o->val, __ATOMIC_RELEASE);
  }
}

/* ---- the protocol of loop_completion_cost_* ------------------------------ */

enum { NSTREAMS = 64, MEASURED = 1024, HELD_PER_STREAM = 48, WINDOWS_MAX = 101, EVICT_MIB = 32 };
static int WINDOWS = 7;
static CUstream ss[2 * NSTREAMS];
static long count, held;

/* CPU_LOOP_COST_TRACE=FILE: each window's completions, one line each
 * (pending, window, order, stream, TSC ticks since the one before), as
 * bench-loop-throughput's BENCH_LOOP_TRACE. */
static FILE *trace;
static uint64_t trace_tsc[MEASURED + 1];
static uint16_t trace_stream[MEASURED];

static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  (void)f;
  if (s != cudaSuccess) abort();
  if (trace != NULL && count < MEASURED) {
    trace_tsc[count + 1] = bench_ticks();
    trace_stream[count] = (uint16_t)(uintptr_t)u;
  }
  count++;
}
static void held_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  (void)f, (void)u;
  if (s != cudaSuccess) abort();
  held++;
}

/* Both cases start the timed part equally cold, as in
 * bench/loop_throughput.c (its comment says why): EVICT_MIB written. */
static unsigned char *evict_buf;
static void evict_caches(void) {
  unsigned char v = (unsigned char)bench_ticks();
  for (size_t i = 0; i < (size_t)EVICT_MIB << 20; i += 64) evict_buf[i] = v;
}

static double cost(long n, cudaev_future_t **promises, int evict) {
  cudaev_loop_t *loop;
  if (cudaev_loop_new_foreign(&loop) != cudaSuccess) abort();
  long per_h = n > MEASURED ? HELD_PER_STREAM : 0;
  long nprom = n > MEASURED ? n - MEASURED - per_h * NSTREAMS : 0;
  double best[WINDOWS_MAX];
  for (int w = 0; w < WINDOWS; w++) {
    count = held = 0;
    cudaev_future_t *f;
    for (int k = 0; k < MEASURED / NSTREAMS; k++)
      for (int i = 0; i < NSTREAMS; i++) {
        cudaev_future_new_stream(loop, (cudaStream_t)ss[i], &f);
        cudaev_future_then(f, count_cb, (void *)(uintptr_t)i);
        cudaev_future_release(f);
      }
    for (int k = 0; k < per_h; k++)
      for (int i = NSTREAMS; i < 2 * NSTREAMS; i++) {
        cudaev_future_new_stream(loop, (cudaStream_t)ss[i], &f);
        cudaev_future_then(f, held_cb, NULL);
        cudaev_future_release(f);
      }
    for (long k = 0; k < nprom; k++) {
      cudaev_promise_new(loop, &promises[k]);
      cudaev_future_then(promises[k], held_cb, NULL);
    }
    while (cudaev_loop_pending(loop) < (size_t)(MEASURED + per_h * NSTREAMS + nprom))
      cudaev_loop_process(loop);
    for (int i = 0; i < NSTREAMS; i++) pass(ss[i]);
    /* The trace's own stores: to lines written just now, or each 8th
     * completion's would miss in the 100k case only (evicted by then). */
    if (trace != NULL) {
      memset(trace_tsc, 0, sizeof trace_tsc);
      memset(trace_stream, 0, sizeof trace_stream);
    }
    if (evict) evict_caches();
    uint64_t t0 = now_ns();
    trace_tsc[0] = bench_ticks();
    while (count < MEASURED) cudaev_loop_process(loop);
    best[w] = (double)(now_ns() - t0) / 1e3 / MEASURED;
    if (trace != NULL)
      for (int c = 1; c <= MEASURED; c++)
        fprintf(trace, "%ld %d %d %u %llu\n", n, w, c - 1, trace_stream[c - 1],
                (unsigned long long)(trace_tsc[c] - trace_tsc[c - 1]));
    for (int i = NSTREAMS; i < 2 * NSTREAMS; i++) pass(ss[i]);
    for (long k = 0; k < nprom; k++) {
      cudaev_promise_set(promises[k], cudaSuccess);
      cudaev_future_release(promises[k]);
    }
    while (held < per_h * NSTREAMS + nprom) cudaev_loop_process(loop);
  }
  cudaev_loop_destroy(loop);
  /* The median of the windows after the first. */
  for (int i = 1; i < WINDOWS; i++)
    for (int j = i + 1; j < WINDOWS; j++)
      if (best[j] < best[i]) {
        double x = best[i];
        best[i] = best[j];
        best[j] = x;
      }
  return best[1 + (WINDOWS - 1) / 2];
}

int main(void) {
  const char *q = getenv("CPU_LOOP_COST_QUERY_NS");
  if (q != NULL && sscanf(q, "%lu,%lu", &q_passed_ns, &q_pending_ns) != 2) {
    fprintf(stderr, "CPU_LOOP_COST_QUERY_NS: want \"passed,not_passed\" in ns\n");
    return 2;
  }
  const char *nw = getenv("CPU_LOOP_COST_WINDOWS"); /* for profiling: more windows */
  if (nw != NULL && atoi(nw) >= 2 && atoi(nw) <= WINDOWS_MAX) WINDOWS = atoi(nw);
  const char *tp = getenv("CPU_LOOP_COST_TRACE");
  if (tp != NULL && (trace = fopen(tp, "w")) == NULL) {
    perror(tp);
    return 2;
  }
  static struct cudaev_driver t;
  fake_driver_loop(&t); /* tests/unit/fake_driver.h */
  t.cuStreamCreate = f_screate;
  t.cuStreamQuery = f_squery;
  t.cuStreamSynchronize = (__typeof__(t.cuStreamSynchronize))f_squery;
  t.cuStreamDestroy = (__typeof__(t.cuStreamDestroy))f_squery;
  t.cuCtxSynchronize = f_csync;
  t.cuStreamWriteValue32 = f_write;
  t.cuEventCreate = f_ecreate;
  t.cuEventDestroy = f_edestroy;
  t.cuEventRecord = f_erecord;
  t.cuEventQuery = f_equery;
  t.cuLaunchHostFunc = f_hostfn;
  cudaev__driver_install(&t, 13000);
  for (int i = 0; i < 2 * NSTREAMS; i++) f_screate(&ss[i], 0);
  enum { NMAX = 100352 };
  cudaev_future_t **promises = malloc(NMAX * sizeof *promises);
  evict_buf = malloc((size_t)EVICT_MIB << 20);
  if (promises == NULL || evict_buf == NULL) return 2;
  double c1 = cost(MEASURED, promises, 1);
  double c100 = cost(NMAX, promises, 1);
  double u1 = cost(MEASURED, promises, 0);
  double u100 = cost(NMAX, promises, 0);
  printf(
      "cost per completion: 1k pending %.3f us, 100k pending %.3f us, ratio %.2f "
      "(unswept: %.3f, %.3f, ratio %.2f; event query %lu / %lu ns)\n",
      c1, c100, c100 / c1, u1, u100, u100 / u1, q_passed_ns, q_pending_ns);
  free(evict_buf);
  free(promises);
  if (trace != NULL) fclose(trace);
  return 0;
}
