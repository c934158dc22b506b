/* Enqueue costs of stream operations. One sample = host time of a
 * batch of 100 calls / 100; the stream is drained between batches (not
 * timed), so the queue never fills and the samples measure the call itself.
 *
 * memcpy_async_d2d_enqueue_us   cudaMemcpyAsync 4 KiB device to device
 * memcpy_async_h2d_enqueue_us   cudaMemcpyAsync 4 KiB pinned host to device
 * event_record_enqueue_us       cudaEventRecord (default flags)
 * stream_query_idle_us          cudaStreamQuery on an idle stream
 * stream_query_busy_us          cudaStreamQuery while a 2 ms kernel runs
 * stream_wait_event_enqueue_us  cudaStreamWaitEvent on a completed event
 * malloc_async_free_async_us    cudaMallocAsync 1 MiB + cudaFreeAsync, per pair
 */
#include "common.h"

#include <vector>

static const int kBatch = 100;

__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

/* Runs `warm` + `batches` batches of kBatch calls of f(); `before` runs
 * untimed before each batch, `after` untimed after it. */
template <class B, class F, class A>
static void enqueue(const char *metric, int warm, int batches, B before, F f, A after) {
  std::vector<double> v((size_t)batches);
  for (int b = -warm; b < batches; b++) {
    before();
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < kBatch; i++) f(i);
    uint64_t t1 = bench_now_ns();
    after();
    if (b >= 0) v[(size_t)b] = bench_us(t0, t1) / kBatch;
  }
  bench_unit(metric, "us");
  for (double x : v) bench_sample(metric, x);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  cudaStream_t s, s2;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  const size_t small = 4096;
  void *dsrc, *ddst, *hsrc;
  CHECK(cudaMalloc(&dsrc, small));
  CHECK(cudaMalloc(&ddst, small));
  CHECK(cudaMallocHost(&hsrc, small));
  bench_fill_random(hsrc, small, 1);
  CHECK(cudaMemcpy(dsrc, hsrc, small, cudaMemcpyHostToDevice));
  auto nothing = [] {};
  auto drain = [&] { CHECK(cudaStreamSynchronize(s)); };

  if (bench_begin("memcpy_async_d2d_enqueue")) {
    enqueue(
        "memcpy_async_d2d_enqueue_us", 20, 500, nothing,
        [&](int) { CHECK(cudaMemcpyAsync(ddst, dsrc, small, cudaMemcpyDeviceToDevice, s)); },
        drain);
    bench_end();
  }

  if (bench_begin("memcpy_async_h2d_enqueue")) {
    enqueue(
        "memcpy_async_h2d_enqueue_us", 20, 500, nothing,
        [&](int) { CHECK(cudaMemcpyAsync(ddst, hsrc, small, cudaMemcpyHostToDevice, s)); }, drain);
    bench_end();
  }

  if (bench_begin("event_record_enqueue")) {
    cudaEvent_t ev;
    CHECK(cudaEventCreate(&ev));
    enqueue(
        "event_record_enqueue_us", 20, 500, nothing, [&](int) { CHECK(cudaEventRecord(ev, s)); },
        drain);
    CHECK(cudaEventDestroy(ev));
    bench_end();
  }

  if (bench_begin("stream_query_idle")) {
    enqueue(
        "stream_query_idle_us", 20, 500, nothing, [&](int) { CHECK(cudaStreamQuery(s)); }, nothing);
    bench_end();
  }

  if (bench_begin("stream_query_busy")) {
    int not_ready = 0;
    enqueue(
        "stream_query_busy_us", 5, 200,
        [&] {
          spin_kernel<<<1, 1, 0, s>>>(2000000ull);
          CHECK_LAUNCH();
        },
        [&](int) {
          cudaError_t e = cudaStreamQuery(s);
          if (e == cudaErrorNotReady)
            not_ready++;
          else
            CHECK(e);
        },
        drain);
    if (not_ready == 0) DIE("stream_query_busy: cudaStreamQuery never returned cudaErrorNotReady");
    bench_end();
  }

  if (bench_begin("stream_wait_event_enqueue")) {
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CHECK(cudaEventRecord(ev, s2));
    CHECK(cudaStreamSynchronize(s2));
    enqueue(
        "stream_wait_event_enqueue_us", 20, 500, nothing,
        [&](int) { CHECK(cudaStreamWaitEvent(s, ev, 0)); }, drain);
    CHECK(cudaEventDestroy(ev));
    bench_end();
  }

  if (bench_begin("malloc_async_free_async")) {
    enqueue(
        "malloc_async_free_async_us", 20, 500, nothing,
        [&](int) {
          void *p;
          CHECK(cudaMallocAsync(&p, 1 << 20, s));
          CHECK(cudaFreeAsync(p, s));
        },
        drain);
    bench_end();
  }

  CHECK(cudaFree(dsrc));
  CHECK(cudaFree(ddst));
  CHECK(cudaFreeHost(hsrc));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(s2));
  fflush(stdout);
  return 0;
}
