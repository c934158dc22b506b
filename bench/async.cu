/* NVIDIA's ways to learn that GPU work finished, the references for the
 * event loop's targets. Latency = host clock from just before the
 * launch of an empty kernel until the host knows it completed.
 *
 * spin_sync_latency_us         launch + cudaStreamSynchronize (default
 *                              scheduling: spins on a machine with free cores)
 * hostfunc_eventfd_latency_us  launch + cudaLaunchHostFunc writing an eventfd;
 *                              this thread sleeps in epoll_wait and reads it
 * writevalue_spin_latency_us   launch + cuStreamWriteValue32 (entry point from
 *                              cudaGetDriverEntryPointByVersion) into mapped
 *                              pinned memory; this thread spins on the word
 *   The three are measured interleaved, one of each per iteration.
 * hostfunc_completions_per_s   64 non-blocking streams, each looping a 5 us
 *                              kernel + cudaLaunchHostFunc -> eventfd; this
 *                              thread sleeps in epoll_wait and re-submits each
 *                              stream whose host function ran. One sample =
 *                              a window of 3,200 completions.
 * spin_sync_wait_cpu_pct       CPU time of the whole process / wall time while
 *                              cudaStreamSynchronize waits for a 100 ms kernel
 * hostfunc_wait_cpu_pct        the same while epoll_wait waits for the host
 *                              function after a 100 ms kernel
 */
#include "common.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <vector>

__global__ void spin_kernel(unsigned long long ns) {
  if (ns == 0) return;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

static void CUDART_CB write_eventfd(void *arg) {
  uint64_t one = 1;
  if (write(*(int *)arg, &one, sizeof one) != (ssize_t)sizeof one) abort();
}

static int efd, epfd;

static void wait_eventfd(void) {
  struct epoll_event ev;
  int r;
  do r = epoll_wait(epfd, &ev, 1, -1);
  while (r < 0 && errno == EINTR);
  if (r != 1) DIE("epoll_wait: %s", strerror(errno));
  uint64_t v;
  if (read(efd, &v, sizeof v) != (ssize_t)sizeof v) DIE("read eventfd: %s", strerror(errno));
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

struct slot {
  std::atomic<int> done;
  cudaStream_t s;
};

static void CUDART_CB mark_done(void *arg) {
  ((slot *)arg)->done.store(1, std::memory_order_release);
  uint64_t one = 1;
  if (write(efd, &one, sizeof one) != (ssize_t)sizeof one) abort();
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (efd < 0 || epfd < 0) DIE("eventfd/epoll_create1: %s", strerror(errno));
  struct epoll_event want = {};
  want.events = EPOLLIN;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &want) != 0) DIE("epoll_ctl: %s", strerror(errno));

  if (bench_begin("completion_latency")) {
    PFN_cuStreamWriteValue32_v11070 write_value = NULL;
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", (void **)&write_value, 13000,
                                           cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || write_value == NULL)
      DIE("cuStreamWriteValue32 not found (%d)", (int)q);
    volatile uint32_t *word;
    void *dword;
    CHECK(cudaHostAlloc((void **)&word, 64, cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer(&dword, (void *)word, 0));
    *word = 0;
    uint32_t seq = 0;
    const int warm = 500, n = 10000;
    std::vector<double> sp((size_t)n), hf((size_t)n), wv((size_t)n);
    for (int i = -warm; i < n; i++) {
      uint64_t t0 = bench_now_ns();
      spin_kernel<<<1, 1, 0, s>>>(0);
      CHECK_LAUNCH();
      CHECK(cudaStreamSynchronize(s));
      uint64_t t1 = bench_now_ns();

      spin_kernel<<<1, 1, 0, s>>>(0);
      CHECK_LAUNCH();
      CHECK(cudaLaunchHostFunc(s, write_eventfd, &efd));
      wait_eventfd();
      uint64_t t2 = bench_now_ns();

      seq++;
      spin_kernel<<<1, 1, 0, s>>>(0);
      CHECK_LAUNCH();
      CUresult r = write_value((CUstream)s, (CUdeviceptr)(uintptr_t)dword, seq,
                               CU_STREAM_WRITE_VALUE_DEFAULT);
      if (r != CUDA_SUCCESS) DIE("cuStreamWriteValue32 failed: CUresult %d", (int)r);
      while (*word != seq) {
      }
      uint64_t t3 = bench_now_ns();
      if (i >= 0) {
        sp[(size_t)i] = bench_us(t0, t1);
        hf[(size_t)i] = bench_us(t1, t2);
        wv[(size_t)i] = bench_us(t2, t3);
      }
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFreeHost((void *)word));
    bench_unit("spin_sync_latency_us", "us");
    for (double x : sp) bench_sample("spin_sync_latency_us", x);
    bench_unit("hostfunc_eventfd_latency_us", "us");
    for (double x : hf) bench_sample("hostfunc_eventfd_latency_us", x);
    bench_unit("writevalue_spin_latency_us", "us");
    for (double x : wv) bench_sample("writevalue_spin_latency_us", x);
    bench_end();
  }

  if (bench_begin("hostfunc_completions")) {
    const int nstreams = 64, window = 3200, warm = 1, windows = 20;
    std::vector<slot> slots(nstreams);
    for (auto &sl : slots) {
      sl.done.store(0);
      CHECK(cudaStreamCreateWithFlags(&sl.s, cudaStreamNonBlocking));
    }
    auto submit = [&](slot &sl) {
      spin_kernel<<<1, 1, 0, sl.s>>>(5000);
      CHECK_LAUNCH();
      CHECK(cudaLaunchHostFunc(sl.s, mark_done, &sl));
    };
    std::vector<double> v(windows);
    for (auto &sl : slots) submit(sl);
    for (int w = -warm; w < windows; w++) {
      int got = 0;
      uint64_t t0 = bench_now_ns();
      while (got < window) {
        wait_eventfd();
        for (auto &sl : slots) {
          if (sl.done.load(std::memory_order_acquire) &&
              sl.done.exchange(0, std::memory_order_acq_rel)) {
            got++;
            submit(sl);
          }
        }
      }
      if (w >= 0) v[(size_t)w] = (double)got / ((double)(bench_now_ns() - t0) / 1e9);
    }
    CHECK(cudaDeviceSynchronize());
    uint64_t drain;
    while (read(efd, &drain, sizeof drain) == (ssize_t)sizeof drain) {
    }
    for (auto &sl : slots) CHECK(cudaStreamDestroy(sl.s));
    bench_unit("hostfunc_completions_per_s", "1/s");
    for (double x : v) bench_sample("hostfunc_completions_per_s", x);
    bench_end();
  }

  if (bench_begin("wait_cpu")) {
    const int n = 5;
    const unsigned long long kernel_ns = 100000000ull;
    std::vector<double> a(n), b(n);
    for (int i = 0; i < n; i++) {
      double c0 = cpu_s();
      uint64_t t0 = bench_now_ns();
      spin_kernel<<<1, 1, 0, s>>>(kernel_ns);
      CHECK_LAUNCH();
      CHECK(cudaStreamSynchronize(s));
      a[(size_t)i] = 100.0 * (cpu_s() - c0) / ((double)(bench_now_ns() - t0) / 1e9);

      c0 = cpu_s();
      t0 = bench_now_ns();
      spin_kernel<<<1, 1, 0, s>>>(kernel_ns);
      CHECK_LAUNCH();
      CHECK(cudaLaunchHostFunc(s, write_eventfd, &efd));
      wait_eventfd();
      b[(size_t)i] = 100.0 * (cpu_s() - c0) / ((double)(bench_now_ns() - t0) / 1e9);
    }
    bench_unit("spin_sync_wait_cpu_pct", "%");
    for (double x : a) bench_sample("spin_sync_wait_cpu_pct", x);
    bench_unit("hostfunc_wait_cpu_pct", "%");
    for (double x : b) bench_sample("hostfunc_wait_cpu_pct", x);
    bench_end();
  }

  CHECK(cudaStreamDestroy(s));
  close(efd);
  close(epfd);
  fflush(stdout);
  return 0;
}
