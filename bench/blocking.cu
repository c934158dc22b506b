/* Waits under cudaDeviceScheduleBlockingSync (set before the context is
 * created): how long after an empty kernel a blocking wait returns, and
 * how much CPU a blocking wait for a long kernel burns.
 *
 * blocking_stream_sync_rtt_us   empty launch + cudaStreamSynchronize
 *                               (non-blocking stream)
 * blocking_device_sync_rtt_us   empty launch on the legacy default stream
 *                               + cudaDeviceSynchronize
 * blocking_event_sync_rtt_us    empty launch + cudaEventRecord (default
 *                               event) + cudaEventSynchronize
 * blocking_sync_wait_cpu_pct    CPU time of the whole process / wall time
 *                               while cudaStreamSynchronize waits for a
 *                               100 ms kernel
 * blocking_event_wait_cpu_pct   the same for cudaEventSynchronize on a
 *                               cudaEventBlockingSync event
 * (event_blocking_sync_rtt_us of bench-launch is the BlockingSync event
 * under the default schedule.)
 */
#include "common.h"

#include <sys/resource.h>

#include <vector>

__global__ void spin_kernel(unsigned long long ns) {
  if (ns == 0) return;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

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

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

template <class F>
static void wait_cpu(const char *metric, F wait_long_kernel) {
  const int n = 5;
  std::vector<double> v((size_t)n);
  for (int i = 0; i < n; i++) {
    double c0 = cpu_s();
    uint64_t t0 = bench_now_ns();
    wait_long_kernel();
    v[(size_t)i] = 100.0 * (cpu_s() - c0) / ((double)(bench_now_ns() - t0) / 1e9);
  }
  bench_unit(metric, "%");
  for (double x : v) bench_sample(metric, x);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  CHECK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  CHECK(cudaSetDevice(0));
  unsigned flags = 0;
  CHECK(cudaGetDeviceFlags(&flags));
  if ((flags & cudaDeviceScheduleMask) != cudaDeviceScheduleBlockingSync)
    DIE("the context is not blocking-sync (flags %#x)", flags);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  spin_kernel<<<1, 1, 0, s>>>(0);
  CHECK_LAUNCH();
  CHECK(cudaStreamSynchronize(s));
  const unsigned long long long_ns = 100000000ull;

  if (bench_begin("blocking_stream_sync_rtt")) {
    latency("blocking_stream_sync_rtt_us", 200, 5000, [&] {
      spin_kernel<<<1, 1, 0, s>>>(0);
      CHECK_LAUNCH();
      CHECK(cudaStreamSynchronize(s));
    });
    bench_end();
  }

  if (bench_begin("blocking_device_sync_rtt")) {
    latency("blocking_device_sync_rtt_us", 200, 5000, [&] {
      spin_kernel<<<1, 1>>>(0);
      CHECK_LAUNCH();
      CHECK(cudaDeviceSynchronize());
    });
    bench_end();
  }

  if (bench_begin("blocking_event_sync_rtt")) {
    cudaEvent_t ev;
    CHECK(cudaEventCreate(&ev));
    latency("blocking_event_sync_rtt_us", 200, 5000, [&] {
      spin_kernel<<<1, 1, 0, s>>>(0);
      CHECK_LAUNCH();
      CHECK(cudaEventRecord(ev, s));
      CHECK(cudaEventSynchronize(ev));
    });
    CHECK(cudaEventDestroy(ev));
    bench_end();
  }

  if (bench_begin("blocking_wait_cpu")) {
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventBlockingSync | cudaEventDisableTiming));
    wait_cpu("blocking_sync_wait_cpu_pct", [&] {
      spin_kernel<<<1, 1, 0, s>>>(long_ns);
      CHECK_LAUNCH();
      CHECK(cudaStreamSynchronize(s));
    });
    wait_cpu("blocking_event_wait_cpu_pct", [&] {
      spin_kernel<<<1, 1, 0, s>>>(long_ns);
      CHECK_LAUNCH();
      CHECK(cudaEventRecord(ev, s));
      CHECK(cudaEventSynchronize(ev));
    });
    CHECK(cudaEventDestroy(ev));
    bench_end();
  }

  CHECK(cudaStreamDestroy(s));
  fflush(stdout);
  return 0;
}
