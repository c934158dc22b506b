/* GPU done -> callback latency of the cudaev loop, with NVIDIA's two
 * reference paths measured in the same process, and the loop thread's CPU
 * while it waits for a long kernel. Protocol: bench/common.h.
 *
 *   loop_cb_latency_us            launch of an empty kernel (+ completion
 *                                 marker) from a loop callback -> start of
 *                                 its continuation on the loop thread (the
 *                                 event-loop pattern: callbacks chain work)
 *   loop_cb_latency_xthread_us    the same, submitted from another thread
 *   loop_ref_spin_sync_us         launch + cuStreamSynchronize (spin)
 *   loop_ref_hostfunc_eventfd_us  launch + cuLaunchHostFunc writing an
 *                                 eventfd, this thread in epoll_wait
 *   loop_idle_cpu_pct             loop thread CPU (RUSAGE_THREAD) / wall
 *                                 while a 200 ms kernel runs, per wait
 * Ratios of the p50s are printed on stderr. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common.h"
#include "loop_common.h"

enum { N = 20000, WARM = 500 };

static cudaev_loop_t *loop;
static CUstream st;
static double samples[N + WARM];
static int idx;
static uint64_t t_launch;
static atomic_int chain_done;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p) {
  double *c = malloc(sizeof *c * (size_t)n);
  memcpy(c, v, sizeof *c * (size_t)n);
  qsort(c, (size_t)n, sizeof *c, cmp_d);
  double r = c[(int)(p * (n - 1))];
  free(c);
  return r;
}

static void chain_cb(cudaev_future_t *f, cudaError_t s, void *u);

static void chain_submit(void) {
  cudaev_future_t *f;
  t_launch = bench_now_ns();
  LC_RT(cudaev_launch_cufunc_async(loop, lc_empty, lc_dim(1), lc_dim(1), NULL, 0, (cudaStream_t)st,
                                   &f));
  LC_RT(cudaev_future_then(f, chain_cb, NULL));
  cudaev_future_release(f);
}

static void chain_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  samples[idx++] = bench_us(t_launch, bench_now_ns());
  if (s != cudaSuccess) DIE("future failed: %s", cudaev_error_name(s));
  if (idx < N + WARM)
    chain_submit();
  else
    atomic_store(&chain_done, 1);
}

static void chain_start(cudaev_loop_t *l, void *u) { chain_submit(); }

static double run_chain(void) {
  idx = 0;
  atomic_store(&chain_done, 0);
  LC_RT(cudaev_loop_post(loop, chain_start, NULL));
  while (!atomic_load(&chain_done)) usleep(1000);
  bench_unit("loop_cb_latency_us", "us");
  for (int i = WARM; i < N + WARM; i++) bench_sample("loop_cb_latency_us", samples[i]);
  return pct(samples + WARM, N, 0.5);
}

static void xt_cb(cudaev_future_t *f, cudaError_t s, void *u) { *(uint64_t *)u = bench_now_ns(); }

static double run_xthread(void) {
  enum { M = 5000 };
  bench_unit("loop_cb_latency_xthread_us", "us");
  for (int i = 0; i < M; i++) {
    cudaev_future_t *f;
    _Atomic uint64_t done = 0;
    uint64_t t0 = bench_now_ns();
    LC_RT(cudaev_launch_cufunc_async(loop, lc_empty, lc_dim(1), lc_dim(1), NULL, 0,
                                     (cudaStream_t)st, &f));
    LC_RT(cudaev_future_then(f, xt_cb, (void *)&done));
    while (atomic_load(&done) == 0) __builtin_ia32_pause();
    samples[i] = bench_us(t0, atomic_load(&done));
    cudaev_future_release(f);
  }
  for (int i = 0; i < M; i++) bench_sample("loop_cb_latency_xthread_us", samples[i]);
  return pct(samples, M, 0.5);
}

static double run_spin_sync(void) {
  bench_unit("loop_ref_spin_sync_us", "us");
  for (int i = 0; i < N + WARM; i++) {
    uint64_t t0 = bench_now_ns();
    LC_CU(d_cuLaunchKernel(lc_empty, 1, 1, 1, 1, 1, 1, 0, st, NULL, NULL));
    LC_CU(d_cuStreamSynchronize(st));
    samples[i] = bench_us(t0, bench_now_ns());
  }
  for (int i = WARM; i < N + WARM; i++) bench_sample("loop_ref_spin_sync_us", samples[i]);
  return pct(samples + WARM, N, 0.5);
}

static void CUDA_CB efd_write(void *u) {
  uint64_t one = 1;
  if (write(*(int *)u, &one, sizeof one) < 0) abort();
}

static double run_hostfunc(void) {
  int efd = eventfd(0, EFD_CLOEXEC);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
  bench_unit("loop_ref_hostfunc_eventfd_us", "us");
  for (int i = 0; i < N + WARM; i++) {
    uint64_t t0 = bench_now_ns();
    LC_CU(d_cuLaunchKernel(lc_empty, 1, 1, 1, 1, 1, 1, 0, st, NULL, NULL));
    LC_CU(d_cuLaunchHostFunc(st, efd_write, &efd));
    struct epoll_event got;
    while (epoll_wait(ep, &got, 1, -1) != 1) {
    }
    uint64_t v;
    if (read(efd, &v, sizeof v) != sizeof v) abort();
    samples[i] = bench_us(t0, bench_now_ns());
  }
  for (int i = WARM; i < N + WARM; i++) bench_sample("loop_ref_hostfunc_eventfd_us", samples[i]);
  close(ep);
  close(efd);
  return pct(samples + WARM, N, 0.5);
}

/* ---- idle CPU ------------------------------------------------------------- */

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}
static double idle_cpu0, idle_wall0, idle_pct;
static atomic_int idle_done;
static void idle_start(cudaev_loop_t *l, void *u) {
  idle_cpu0 = cpu_s();
  idle_wall0 = (double)bench_now_ns() / 1e9;
}
static void idle_end(cudaev_future_t *f, cudaError_t s, void *u) {
  double wall = (double)bench_now_ns() / 1e9 - idle_wall0;
  idle_pct = 100.0 * (cpu_s() - idle_cpu0) / wall;
  atomic_store(&idle_done, 1);
}

static void run_idle(void) {
  bench_unit("loop_idle_cpu_pct", "pct");
  for (int i = 0; i < 5; i++) {
    atomic_store(&idle_done, 0);
    LC_RT(cudaev_loop_post(loop, idle_start, NULL));
    usleep(2000); /* the start mark runs before the kernel is submitted */
    cudaev_future_t *f;
    unsigned long long ns = 200000000ull;
    void *args[] = {&ns};
    LC_RT(cudaev_launch_cufunc_async(loop, lc_spin, lc_dim(1), lc_dim(1), args, 0, (cudaStream_t)st,
                                     &f));
    LC_RT(cudaev_future_then(f, idle_end, NULL));
    while (!atomic_load(&idle_done)) usleep(1000);
    bench_sample("loop_idle_cpu_pct", idle_pct);
    cudaev_future_release(f);
  }
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  LC_RT(cudaev_loop_new_thread(&loop));
  lc_init();
  LC_CU(d_cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  double ours = 0, xt = 0, spin = 0, hf = 0;
  if (bench_begin("loop_ref_spin_sync")) {
    spin = run_spin_sync();
    bench_end();
  }
  if (bench_begin("loop_cb_latency")) {
    ours = run_chain();
    bench_end();
  }
  if (bench_begin("loop_cb_latency_xthread")) {
    xt = run_xthread();
    bench_end();
  }
  if (bench_begin("loop_ref_hostfunc_eventfd")) {
    hf = run_hostfunc();
    bench_end();
  }
  if (bench_begin("loop_idle_cpu")) {
    run_idle();
    bench_end();
  }
  fprintf(stderr,
          "p50: loop %.2f us, loop (other thread) %.2f us, spin sync %.2f us, hostfunc+eventfd "
          "%.2f us; "
          "loop/spin %.3f (target <= 1.15), loop/hostfunc %.3f\n",
          ours, xt, spin, hf, spin > 0 ? ours / spin : 0, hf > 0 ? ours / hf : 0);
  LC_CU(d_cuStreamDestroy(st));
  cudaev_loop_destroy(loop);
  return 0;
}
