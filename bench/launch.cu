/* Launch and synchronisation costs.
 *
 * launch_enqueue_us           100,000 empty <<<1,1>>> launches back to back on a
 *                             non-blocking stream; one sample = host time of a
 *                             batch of 1,000 launches / 1,000 (no sync in between,
 *                             as NVIDIA's reference figure was taken).
 * launch_enqueue_batch_us     the same with the queue never full: batches of 256
 *                             launches, stream drained between batches (untimed).
 * launch_enqueue_driver_us    the floor under both: the same batches, launched
 *                             with the driver's cuLaunchKernel directly (entry
 *                             point from cudaGetDriverEntryPointByVersion, the
 *                             kernel from cudaGetKernel), no runtime in between.
 * launch_sync_rtt_us          empty launch + cudaStreamSynchronize.
 * stream_sync_idle_us         cudaStreamSynchronize on an idle stream.
 * event_sync_rtt_us           launch + cudaEventRecord + cudaEventSynchronize,
 *                             default event (spin/yield wait).
 * event_blocking_sync_rtt_us  the same with a cudaEventBlockingSync event.
 * event_query_spin_rtt_us     launch + record + cudaEventQuery until it is done.
 * device_sync_rtt_us          empty launch + cudaDeviceSynchronize.
 */
#include "common.h"

#include <cuda.h>

#include <vector>

__global__ void empty_kernel() {}

template <class F>
static void latency(const char *metric, int warm, int n, F f) {
  std::vector<double> v((size_t)n);
  for (int i = 0; i < warm; i++) f();
  for (int i = 0; i < n; i++) {
    uint64_t t0 = bench_now_ns();
    f();
    v[(size_t)i] = bench_us(t0, bench_now_ns());
  }
  bench_unit(metric, "us");
  for (double x : v) bench_sample(metric, x);
}

/* Batches of 256 enqueues into a drained stream (the drain is not timed):
 * one sample = host time of a batch / 256. */
template <class F>
static void enqueue_batches(const char *metric, cudaStream_t s, F launch_one) {
  const int batch = 256, warm = 10, batches = 200;
  std::vector<double> v(batches);
  for (int b = -warm; b < batches; b++) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < batch; i++) launch_one();
    uint64_t t1 = bench_now_ns();
    CHECK_LAUNCH();
    CHECK(cudaStreamSynchronize(s));
    if (b >= 0) v[(size_t)b] = bench_us(t0, t1) / batch;
  }
  bench_unit(metric, "us");
  for (double x : v) bench_sample(metric, x);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  cudaStream_t s;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  empty_kernel<<<1, 1, 0, s>>>();
  CHECK_LAUNCH();
  CHECK(cudaStreamSynchronize(s));

  if (bench_begin("launch_enqueue")) {
    const int batch = 1000, batches = 100;
    std::vector<double> v(batches);
    for (int i = 0; i < 10 * batch; i++) empty_kernel<<<1, 1, 0, s>>>();
    CHECK_LAUNCH();
    CHECK(cudaStreamSynchronize(s));
    uint64_t t0 = bench_now_ns();
    for (int b = 0; b < batches; b++) {
      for (int i = 0; i < batch; i++) empty_kernel<<<1, 1, 0, s>>>();
      uint64_t t1 = bench_now_ns();
      v[(size_t)b] = bench_us(t0, t1) / batch;
      t0 = t1;
    }
    CHECK_LAUNCH();
    CHECK(cudaStreamSynchronize(s));
    bench_unit("launch_enqueue_us", "us");
    for (double x : v) bench_sample("launch_enqueue_us", x);
    bench_end();
  }

  if (bench_begin("launch_enqueue_batch")) {
    // The same call with the queue never full: batches of 256 launches, the
    // stream drained between batches (not timed). If launch_enqueue_us is
    // bound by the GPU's rate of empty kernels, this one still shows the
    // host-side cost.
    enqueue_batches("launch_enqueue_batch_us", s, [&] { empty_kernel<<<1, 1, 0, s>>>(); });
    bench_end();
  }

  if (bench_begin("launch_enqueue_driver")) {
    typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, CUstream, void **, void **);
    void *p = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 12000, cudaEnableDefault, &q));
    launch_fn launch = (launch_fn)p;
    cudaKernel_t k;
    CHECK(cudaGetKernel(&k, (const void *)empty_kernel));
    enqueue_batches("launch_enqueue_driver_us", s,
                    [&] { launch((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, (CUstream)s, NULL, NULL); });
    bench_end();
  }

  if (bench_begin("launch_sync_rtt")) {
    latency("launch_sync_rtt_us", 500, 10000, [&] {
      empty_kernel<<<1, 1, 0, s>>>();
      CHECK_LAUNCH();
      CHECK(cudaStreamSynchronize(s));
    });
    bench_end();
  }

  if (bench_begin("stream_sync_idle")) {
    latency("stream_sync_idle_us", 500, 10000, [&] { CHECK(cudaStreamSynchronize(s)); });
    bench_end();
  }

  if (bench_begin("event_sync_rtt")) {
    cudaEvent_t ev;
    CHECK(cudaEventCreate(&ev));
    latency("event_sync_rtt_us", 500, 5000, [&] {
      empty_kernel<<<1, 1, 0, s>>>();
      CHECK_LAUNCH();
      CHECK(cudaEventRecord(ev, s));
      CHECK(cudaEventSynchronize(ev));
    });
    CHECK(cudaEventDestroy(ev));
    bench_end();
  }

  if (bench_begin("event_blocking_sync_rtt")) {
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventBlockingSync));
    latency("event_blocking_sync_rtt_us", 200, 5000, [&] {
      empty_kernel<<<1, 1, 0, s>>>();
      CHECK_LAUNCH();
      CHECK(cudaEventRecord(ev, s));
      CHECK(cudaEventSynchronize(ev));
    });
    CHECK(cudaEventDestroy(ev));
    bench_end();
  }

  if (bench_begin("event_query_spin_rtt")) {
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    latency("event_query_spin_rtt_us", 500, 10000, [&] {
      empty_kernel<<<1, 1, 0, s>>>();
      CHECK_LAUNCH();
      CHECK(cudaEventRecord(ev, s));
      cudaError_t e;
      while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
      }
      CHECK(e);
    });
    CHECK(cudaEventDestroy(ev));
    bench_end();
  }

  if (bench_begin("device_sync_rtt")) {
    latency("device_sync_rtt_us", 500, 5000, [&] {
      empty_kernel<<<1, 1, 0, s>>>();
      CHECK_LAUNCH();
      CHECK(cudaDeviceSynchronize());
    });
    bench_end();
  }

  CHECK(cudaStreamDestroy(s));
  fflush(stdout);
  return 0;
}
