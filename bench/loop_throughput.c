/* Completion throughput of one loop thread, and per-completion cost against
 * the number of futures pending. Protocol: bench/common.h.
 *
 *   loop_completions_per_s          64 streams of empty kernels, each with a
 *                                   future; all queued behind a gate, the
 *                                   gate opened, completions / wall time
 *                                   until the last continuation ran
 *   loop_marker_completions_per_s   the same with stream futures only (no
 *                                   kernels): the loop's side without the
 *                                   GPU's kernel rate
 *   loop_completion_cost_1k_pending_us, _100k_pending_us
 *                                   foreign-mode loop: N futures pending,
 *                                   GPU already finished, loop time per
 *                                   completion (flat in N is the target)
 *
 * Work queued behind a closed gate must stay well under the driver's queue
 * depth per stream (enqueues block at about a thousand pending operations
 * on a stream, and the gate opens only after queueing): 96 futures (192
 * operations) per stream for the rates; the pending-cost runs spread their
 * futures over 512 streams (196 per stream for 100k). Queueing 512 kernels
 * per stream behind the gate was the old hang: the main thread blocked in
 * cuLaunchKernel waiting for a GPU that waited for the main thread.
 *
 * Progress goes to stderr at each phase; a watchdog thread ends the program
 * (exit 3) with the phase and step it was in when one runs past its time
 * limit, also when a thread is stuck inside a driver call. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common.h"
#include "loop_common.h"

enum { NSTREAMS = 64, NSTREAMS_COST = 512, PER_RATE = 96 };
static CUstream ss[NSTREAMS_COST]; /* the rates use the first NSTREAMS */
static volatile uint32_t *gate;
static CUdeviceptr gate_dev;
static uint32_t round_no;

/* ---- progress and the watchdog ------------------------------------------- */

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static char wd_what[256];
static uint64_t wd_deadline, wd_t0, prog_t0;

/* Names the step now running and the most it may take. */
static void watch(double limit_s, const char *fmt, ...) {
  pthread_mutex_lock(&wd_mu);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(wd_what, sizeof wd_what, fmt, ap);
  va_end(ap);
  wd_t0 = bench_now_ns();
  wd_deadline = wd_t0 + (uint64_t)(limit_s * 1e9);
  pthread_mutex_unlock(&wd_mu);
}

static void progress(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bench-loop-throughput [%6.2f s] ", (double)(bench_now_ns() - prog_t0) / 1e9);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static atomic_long count;

static void *watchdog_main(void *arg) {
  (void)arg;
  for (;;) {
    usleep(100000);
    pthread_mutex_lock(&wd_mu);
    uint64_t now = bench_now_ns();
    if (wd_deadline != 0 && now > wd_deadline) {
      fprintf(stderr,
              "bench-loop-throughput: STUCK for %.1f s in: %s (completions counted: %ld); "
              "giving up\n",
              (double)(now - wd_t0) / 1e9, wd_what, atomic_load(&count));
      fflush(stdout);
      _exit(3);
    }
    pthread_mutex_unlock(&wd_mu);
  }
  return NULL;
}

static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  if (s != cudaSuccess) DIE("future failed: %s", cudaev_error_name(s));
  atomic_store_explicit(&count, atomic_load_explicit(&count, memory_order_relaxed) + 1,
                        memory_order_release);
}

/* Queues per-stream work behind the gate: kernels or markers. */
static void queue(cudaev_loop_t *loop, int nstreams, long per_stream, int kernels, int with_then) {
  round_no++;
  for (int i = 0; i < nstreams; i++)
    LC_CU(d_cuStreamWaitValue32(ss[i], gate_dev, round_no, CU_STREAM_WAIT_VALUE_GEQ));
  for (long k = 0; k < per_stream; k++)
    for (int i = 0; i < nstreams; i++) {
      cudaev_future_t *f;
      if (kernels)
        LC_RT(cudaev_launch_cufunc_async(loop, lc_empty, lc_dim(1), lc_dim(1), NULL, 0,
                                         (cudaStream_t)ss[i], &f));
      else
        LC_RT(cudaev_stream_future(loop, (cudaStream_t)ss[i], &f));
      if (with_then) LC_RT(cudaev_future_then(f, count_cb, NULL));
      cudaev_future_release(f);
    }
}

static void rate(const char *metric, int kernels) {
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  bench_unit(metric, "per_s");
  const long per = PER_RATE, total = per * NSTREAMS;
  for (int w = 0; w < 6; w++) {
    atomic_store(&count, 0);
    watch(5, "%s window %d: queueing %ld futures behind the gate (%d streams)", metric, w, total,
          NSTREAMS);
    queue(loop, NSTREAMS, per, kernels, 1);
    usleep(20000); /* the loop has taken every submission */
    watch(5, "%s window %d: gate open, waiting for %ld continuations", metric, w, total);
    uint64_t t0 = bench_now_ns();
    __atomic_store_n(gate, round_no, __ATOMIC_RELEASE);
    while (atomic_load_explicit(&count, memory_order_acquire) < total) __builtin_ia32_pause();
    double s = (double)(bench_now_ns() - t0) / 1e9;
    if (w > 0) bench_sample(metric, (double)total / s); /* first window warms up */
    progress("%s window %d: %.0f completions/s", metric, w, (double)total / s);
  }
  watch(10, "%s: cudaev_loop_destroy", metric);
  cudaev_loop_destroy(loop);
}

static void cost(const char *metric, long n) {
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_foreign(&loop));
  bench_unit(metric, "us");
  long per = n / NSTREAMS_COST;
  long total = per * NSTREAMS_COST;
  for (int w = 0; w < 6; w++) {
    atomic_store(&count, 0);
    watch(10, "%s window %d: queueing %ld futures behind the gate (%d streams)", metric, w, total,
          NSTREAMS_COST);
    queue(loop, NSTREAMS_COST, per, 0, 1);
    /* Take the submissions in (not timed), then let the GPU finish. */
    watch(10, "%s window %d: loop taking in %ld submissions", metric, w, total);
    while (cudaev_loop_pending(loop) < (size_t)total) cudaev_loop_process(loop);
    watch(10, "%s window %d: gate open, synchronizing %d streams", metric, w, NSTREAMS_COST);
    __atomic_store_n(gate, round_no, __ATOMIC_RELEASE);
    for (int i = 0; i < NSTREAMS_COST; i++) LC_CU(d_cuStreamSynchronize(ss[i]));
    watch(10, "%s window %d: completing %ld futures", metric, w, total);
    uint64_t t0 = bench_now_ns();
    while (atomic_load(&count) < total) cudaev_loop_process(loop);
    double us = bench_us(t0, bench_now_ns()) / (double)total;
    if (w > 0) bench_sample(metric, us);
    progress("%s window %d: %.3f us per completion, %ld pending", metric, w, us, total);
  }
  watch(10, "%s: cudaev_loop_destroy", metric);
  cudaev_loop_destroy(loop);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  prog_t0 = bench_now_ns();
  pthread_t wd;
  watch(30, "start: cudaev_loop_new_foreign, lc_init, %d streams", NSTREAMS_COST);
  if (pthread_create(&wd, NULL, watchdog_main, NULL) != 0) DIE("no watchdog thread");
  progress("start");
  cudaev_loop_t *boot;
  LC_RT(cudaev_loop_new_foreign(&boot)); /* makes the primary context current */
  lc_init();
  for (int i = 0; i < NSTREAMS_COST; i++)
    LC_CU(d_cuStreamCreate(&ss[i], CU_STREAM_NON_BLOCKING));
  LC_CU(d_cuMemHostAlloc((void **)&gate, 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  LC_CU(d_cuMemHostGetDevicePointer(&gate_dev, (void *)gate, 0));
  *gate = 0;
  if (bench_begin("loop_completions")) {
    progress("loop_completions: begin");
    rate("loop_completions_per_s", 1);
    bench_end();
  }
  if (bench_begin("loop_marker_completions")) {
    progress("loop_marker_completions: begin");
    rate("loop_marker_completions_per_s", 0);
    bench_end();
  }
  if (bench_begin("loop_completion_cost")) {
    progress("loop_completion_cost: begin");
    cost("loop_completion_cost_1k_pending_us", 1024);
    cost("loop_completion_cost_100k_pending_us", 100352);
    bench_end();
  }
  watch(30, "teardown");
  for (int i = 0; i < NSTREAMS_COST; i++) LC_CU(d_cuStreamDestroy(ss[i]));
  LC_CU(d_cuMemFreeHost((void *)gate));
  cudaev_loop_destroy(boot);
  progress("done");
  fflush(stdout);
  return 0;
}
