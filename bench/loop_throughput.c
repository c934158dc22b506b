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
 *                                   completion (flat in N is the target) */
#include <stdatomic.h>
#include <unistd.h>

#include "common.h"
#include "loop_common.h"

enum { NSTREAMS = 64 };
static CUstream ss[NSTREAMS];
static volatile uint32_t *gate;
static CUdeviceptr gate_dev;
static uint32_t round_no;
static atomic_long count;

static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  if (s != cudaSuccess) DIE("future failed: %s", cudaev_error_name(s));
  atomic_store_explicit(&count, atomic_load_explicit(&count, memory_order_relaxed) + 1,
                        memory_order_release);
}

/* Queues per-stream work behind the gate: kernels or markers. */
static void queue(cudaev_loop_t *loop, long per_stream, int kernels, int with_then) {
  round_no++;
  for (int i = 0; i < NSTREAMS; i++)
    LC_CU(d_cuStreamWaitValue32(ss[i], gate_dev, round_no, CU_STREAM_WAIT_VALUE_GEQ));
  for (long k = 0; k < per_stream; k++)
    for (int i = 0; i < NSTREAMS; i++) {
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
  const long per = 512, total = per * NSTREAMS;
  for (int w = 0; w < 6; w++) {
    atomic_store(&count, 0);
    queue(loop, per, kernels, 1);
    usleep(20000); /* the loop has taken every submission */
    uint64_t t0 = bench_now_ns();
    __atomic_store_n(gate, round_no, __ATOMIC_RELEASE);
    while (atomic_load_explicit(&count, memory_order_acquire) < total) __builtin_ia32_pause();
    double s = (double)(bench_now_ns() - t0) / 1e9;
    if (w > 0) bench_sample(metric, (double)total / s); /* first window warms up */
  }
  cudaev_loop_destroy(loop);
}

static void cost(const char *metric, long n) {
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_foreign(&loop));
  bench_unit(metric, "us");
  long per = n / NSTREAMS;
  for (int w = 0; w < 6; w++) {
    atomic_store(&count, 0);
    queue(loop, per, 0, 1);
    /* Take the submissions in (not timed), then let the GPU finish. */
    while (cudaev_loop_pending(loop) < (size_t)(per * NSTREAMS)) cudaev_loop_process(loop);
    __atomic_store_n(gate, round_no, __ATOMIC_RELEASE);
    for (int i = 0; i < NSTREAMS; i++) LC_CU(d_cuStreamSynchronize(ss[i]));
    uint64_t t0 = bench_now_ns();
    while (atomic_load(&count) < per * NSTREAMS) cudaev_loop_process(loop);
    double us = bench_us(t0, bench_now_ns()) / (double)(per * NSTREAMS);
    if (w > 0) bench_sample(metric, us);
  }
  cudaev_loop_destroy(loop);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  cudaev_loop_t *boot;
  LC_RT(cudaev_loop_new_foreign(&boot)); /* makes the primary context current */
  lc_init();
  for (int i = 0; i < NSTREAMS; i++) LC_CU(d_cuStreamCreate(&ss[i], CU_STREAM_NON_BLOCKING));
  LC_CU(d_cuMemHostAlloc((void **)&gate, 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  LC_CU(d_cuMemHostGetDevicePointer(&gate_dev, (void *)gate, 0));
  *gate = 0;
  if (bench_begin("loop_completions")) {
    rate("loop_completions_per_s", 1);
    bench_end();
  }
  if (bench_begin("loop_marker_completions")) {
    rate("loop_marker_completions_per_s", 0);
    bench_end();
  }
  if (bench_begin("loop_completion_cost")) {
    cost("loop_completion_cost_1k_pending_us", 1024);
    cost("loop_completion_cost_100k_pending_us", 100032);
    bench_end();
  }
  for (int i = 0; i < NSTREAMS; i++) LC_CU(d_cuStreamDestroy(ss[i]));
  LC_CU(d_cuMemFreeHost((void *)gate));
  cudaev_loop_destroy(boot);
  return 0;
}
