/* GPU tests of the loop: every completion source, loop-thread
 * host functions calling CUDA, blocking calls from other threads while the
 * loop runs, notifications, the pooled-event fallback, and a faulting
 * kernel (in a child process) failing every pending future within 1 s.
 * Linked with our libcudart.so.13 directly (cudaev_* do not exist in
 * NVIDIA's). Exit 0 pass, 1 fail, 77 skipped (no GPU). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../bench/loop_common.h"
#include "../check.h"

#define CHECK_EQ_ERR(a, b)                                                                        \
  do {                                                                                            \
    cudaError_t x_ = (a), y_ = (b);                                                               \
    if (x_ != y_) {                                                                               \
      fprintf(stderr, "%s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #a, cudaev_error_name(x_), \
              cudaev_error_name(y_));                                                             \
      failures++;                                                                                 \
    }                                                                                             \
  } while (0)

static const int64_t SEC = 1000000000LL;
static CUcontext ctx;

struct on_thread {
  atomic_int ran;
  pthread_t th;
  cudaError_t st;
};
static void note_thread(cudaev_future_t *f, cudaError_t st, void *u) {
  struct on_thread *o = u;
  o->th = pthread_self();
  o->st = st;
  atomic_store(&o->ran, 1);
}

static void test_sources(cudaev_loop_t *loop, const char *label) {
  int f0 = failures; /* this section's own verdict */
  CUstream s;
  LC_CU(d_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  cudaev_future_t *f;

  /* stream: everything enqueued so far (a 20 ms kernel) */
  uint64_t t0 = now_ns();
  lc_spin_on(s, 20000000ull);
  CHECK_EQ_ERR(cudaev_future_new_stream(loop, (cudaStream_t)s, &f), cudaSuccess);
  struct on_thread o = {0};
  cudaev_future_then(f, note_thread, &o);
  CHECK_EQ_ERR(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  CHECK(now_ns() - t0 >= 19000000ull);
  for (int i = 0; i < 5000 && !atomic_load(&o.ran); i++) usleep(1000);
  CHECK(atomic_load(&o.ran) && !pthread_equal(o.th, pthread_self()));
  cudaev_future_release(f);

  /* event */
  CUevent ev;
  LC_CU(d_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  lc_spin_on(s, 5000000ull);
  LC_CU(d_cuEventRecord(ev, s));
  CHECK_EQ_ERR(cudaev_future_new_event(loop, (cudaEvent_t)ev, &f), cudaSuccess);
  CHECK_EQ_ERR(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  CHECK(d_cuStreamQuery(s) == CUDA_SUCCESS);
  cudaev_future_release(f);
  CHECK_EQ_ERR(cudaev_future_new_event(loop, NULL, &f), cudaErrorInvalidResourceHandle);
  CHECK(f == NULL);
  cudaGetLastError();

  /* malloc / memset / memcpy */
  void *d = NULL;
  CHECK_EQ_ERR(cudaev_malloc_async(loop, &d, 1 << 20, (cudaStream_t)s, &f), cudaSuccess);
  CHECK(d != NULL);
  CHECK_EQ_ERR(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  cudaev_future_release(f);
  CHECK_EQ_ERR(cudaev_memset_async(loop, d, 0x5a, 1 << 20, (cudaStream_t)s, &f), cudaSuccess);
  cudaev_future_release(f); /* still tracked; the copy below is ordered after it */
  unsigned char *h = malloc(1 << 20);
  memset(h, 0, 1 << 20);
  CHECK_EQ_ERR(
      cudaev_memcpy_async(loop, h, d, 1 << 20, cudaMemcpyDeviceToHost, (cudaStream_t)s, &f),
      cudaSuccess);
  CHECK_EQ_ERR(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  CHECK(h[0] == 0x5a && h[(1 << 20) - 1] == 0x5a);
  cudaev_future_release(f);
  CHECK_EQ_ERR(cudaev_memcpy_async(loop, h, d, 16, (enum cudaMemcpyKind)42, (cudaStream_t)s, &f),
               cudaErrorInvalidMemcpyDirection);
  cudaGetLastError();
  LC_CU(d_cuMemFreeAsync((CUdeviceptr)d, s));
  free(h);

  /* kernel launch (driver function) */
  unsigned long long ns = 1000000;
  void *args[] = {&ns};
  CHECK_EQ_ERR(
      cudaev_launch_cufunc_async(loop, lc_spin, lc_dim(1), lc_dim(1), args, 0, (cudaStream_t)s, &f),
      cudaSuccess);
  CHECK_EQ_ERR(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  cudaev_future_release(f);

  /* many futures on several streams, when_all */
  enum { NS = 8, PER = 2000 };
  CUstream ss[NS];
  cudaev_future_t **all = malloc(sizeof *all * NS * PER);
  for (int i = 0; i < NS; i++) LC_CU(d_cuStreamCreate(&ss[i], CU_STREAM_NON_BLOCKING));
  for (int k = 0; k < PER; k++)
    for (int i = 0; i < NS; i++)
      CHECK_EQ_ERR(cudaev_launch_cufunc_async(loop, lc_empty, lc_dim(1), lc_dim(1), NULL, 0,
                                              (cudaStream_t)ss[i], &all[k * NS + i]),
                   cudaSuccess);
  cudaev_future_t *w;
  CHECK_EQ_ERR(cudaev_future_new_all(loop, all, NS * PER, &w), cudaSuccess);
  CHECK_EQ_ERR(cudaev_future_wait(w, 20 * SEC), cudaSuccess);
  for (int i = 0; i < NS * PER; i++) {
    CHECK_EQ_ERR(cudaev_future_result(all[i]), cudaSuccess);
    cudaev_future_release(all[i]);
  }
  cudaev_future_release(w);
  free(all);
  for (int i = 0; i < NS; i++) LC_CU(d_cuStreamDestroy(ss[i]));

  /* cancel a pending GPU future: the waiter detaches, the work goes on */
  lc_spin_on(s, 50000000ull);
  CHECK_EQ_ERR(cudaev_future_new_stream(loop, (cudaStream_t)s, &f), cudaSuccess);
  CHECK(cudaev_future_cancel(f) == 1);
  CHECK_EQ_ERR(cudaev_future_wait(f, 0), CUDAEV_ERROR_CANCELLED);
  cudaev_future_release(f);
  LC_CU(d_cuStreamSynchronize(s));

  LC_CU(d_cuEventDestroy(ev));
  LC_CU(d_cuStreamDestroy(s));
  fprintf(stderr, "sources (%s): %s\n", label, failures > f0 ? "FAIL" : "ok");
}

/* ---- loop-thread host functions ---------------------------------------- */

struct hf {
  CUdeviceptr buf;
  pthread_t th;
  atomic_int ran;
};

static cudaError_t host_fn(void *u) {
  struct hf *h = u;
  h->th = pthread_self();
  /* CUDA from inside the host function: a synchronous memset (NVIDIA
   * forbids this in cudaLaunchHostFunc callbacks). */
  CUresult r = d_cuMemsetD32(h->buf, 42, 1);
  atomic_store(&h->ran, 1);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

static void test_host_func(cudaev_loop_t *loop, const char *label) {
  int f0 = failures; /* this section's own verdict */
  CUstream s;
  LC_CU(d_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  struct hf h = {0};
  LC_CU(d_cuMemAlloc(&h.buf, 4));
  LC_CU(d_cuMemsetD32(h.buf, 7, 1));
  lc_spin_on(s, 10000000ull);
  cudaev_future_t *f;
  CHECK_EQ_ERR(cudaev_launch_host_func_async(loop, (cudaStream_t)s, host_fn, &h, &f), cudaSuccess);
  /* Enqueued after the host function: must see its write. */
  unsigned v = 0;
  CUdeviceptr hv;
  unsigned *pv;
  LC_CU(d_cuMemHostAlloc((void **)&pv, 4, CU_MEMHOSTALLOC_DEVICEMAP));
  LC_CU(d_cuMemHostGetDevicePointer(&hv, pv, 0));
  *pv = 0;
  cudaev_future_t *g;
  CHECK_EQ_ERR(
      cudaev_memcpy_async(loop, pv, (void *)h.buf, 4, cudaMemcpyDeviceToHost, (cudaStream_t)s, &g),
      cudaSuccess);
  CHECK_EQ_ERR(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
  CHECK_EQ_ERR(cudaev_future_wait(g, 5 * SEC), cudaSuccess);
  v = *pv;
  CHECK(atomic_load(&h.ran) == 1);
  CHECK(!pthread_equal(h.th, pthread_self()));
  CHECK(v == 42);
  cudaev_future_release(f);
  cudaev_future_release(g);
  LC_CU(d_cuMemFreeHost(pv));
  LC_CU(d_cuMemFree(h.buf));
  LC_CU(d_cuStreamDestroy(s));
  fprintf(stderr, "host functions (%s): %s\n", label, failures > f0 ? "FAIL" : "ok");
}

/* ---- blocking calls from other threads while the loop runs --------------- */

static void *blocker(void *arg) {
  LC_CU(d_cuCtxSetCurrent(ctx));
  CUstream s;
  LC_CU(d_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 50; i++) {
    lc_spin_on(s, 200000ull);
    LC_CU(d_cuStreamSynchronize(s));
  }
  LC_CU(d_cuStreamDestroy(s));
  return NULL;
}

static void test_blocking_threads(cudaev_loop_t *loop) {
  int f0 = failures; /* this section's own verdict */
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, blocker, NULL);
  CUstream s;
  LC_CU(d_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 200; i++) {
    cudaev_future_t *f;
    CHECK_EQ_ERR(cudaev_launch_cufunc_async(loop, lc_empty, lc_dim(1), lc_dim(1), NULL, 0,
                                            (cudaStream_t)s, &f),
                 cudaSuccess);
    CHECK_EQ_ERR(cudaev_future_wait(f, 5 * SEC), cudaSuccess);
    cudaev_future_release(f);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  LC_CU(d_cuStreamDestroy(s));
  fprintf(stderr, "blocking calls on other threads: %s\n", failures > f0 ? "FAIL" : "ok");
}

/* ---- foreign mode (raw epoll) with GPU work ------------------------------ */

static void set_flag(cudaev_future_t *f, cudaError_t st, void *u) {
  atomic_store((atomic_int *)u, 1);
}

static void test_foreign_gpu(void) {
  int f0 = failures; /* this section's own verdict */
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_foreign(&loop));
  CUstream s;
  LC_CU(d_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  lc_spin_on(s, 30000000ull); /* long enough that the loop must sleep */
  cudaev_future_t *f;
  CHECK_EQ_ERR(cudaev_future_new_stream(loop, (cudaStream_t)s, &f), cudaSuccess);
  atomic_int flag = 0;
  cudaev_future_then(f, set_flag, &flag);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, cudaev_loop_fd(loop), &ev);
  uint64_t t0 = now_ns();
  int wakeups = 0;
  while (!atomic_load(&flag) && now_ns() - t0 < 5 * (uint64_t)SEC) {
    int to = cudaev_loop_prepare(loop);
    struct epoll_event got;
    if (epoll_wait(ep, &got, 1, to) > 0) wakeups++;
    cudaev_loop_process(loop);
  }
  CHECK(atomic_load(&flag));
  CHECK(wakeups < 50); /* slept, woken by the armed host function, not polling */
  close(ep);
  cudaev_future_release(f);
  LC_CU(d_cuStreamDestroy(s));
  cudaev_loop_destroy(loop);
  fprintf(stderr, "foreign mode (epoll) with GPU work: %s (%d wakeups)\n",
          failures > f0 ? "FAIL" : "ok", wakeups);
}

/* ---- notifications ---------------------------------------------------- */

static void on_notify(cudaev_notify_t *n, const void *info, void *u) {}

static void test_notify(cudaev_loop_t *loop) {
  int f0 = failures; /* this section's own verdict */
  cudaev_notify_t *n = NULL;
  cudaError_t e = cudaev_notify_register(loop, 0, on_notify, NULL, &n);
  CHECK(e == cudaSuccess || e == cudaErrorNotSupported);
  if (e == cudaSuccess) CHECK_EQ_ERR(cudaev_notify_unregister(n), cudaSuccess);
  CHECK_EQ_ERR(cudaev_notify_register(loop, 9999, on_notify, NULL, &n), cudaErrorInvalidDevice);
  fprintf(stderr, "notifications: register -> %s; %s\n", cudaev_error_name(e),
          failures > f0 ? "FAIL" : "ok");
}

/* ---- a faulting kernel fails every pending future within 1 s ----------- */

static int fault_child(void) {
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  lc_init();
  CUstream s[3];
  for (int i = 0; i < 3; i++) LC_CU(d_cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
  cudaev_future_t *f[5];
  lc_spin_on(s[1], 5000000000ull); /* 5 s: must not be waited for */
  LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)s[1], &f[0]));
  lc_spin_on(s[2], 5000000000ull);
  struct hf h = {0};
  LC_CU(d_cuMemAlloc(&h.buf, 4));
  LC_RT(cudaev_launch_host_func_async(loop, (cudaStream_t)s[2], host_fn, &h, &f[1]));
  cudaev_future_t *p;
  LC_RT(cudaev_promise_new(loop, &p)); /* not GPU: must stay pending */
  lc_spin_on(s[0], 100000000ull);      /* 100 ms, then the fault */
  unsigned long long bad = 0x10;
  void *args[] = {&bad};
  LC_RT(cudaev_launch_cufunc_async(loop, lc_fault, lc_dim(1), lc_dim(1), args, 0,
                                   (cudaStream_t)s[0], &f[2]));
  LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)s[0], &f[3]));
  LC_RT(cudaev_future_new_all(loop, f, 4, &f[4]));
  uint64_t t0 = now_ns();
  cudaError_t e = cudaev_future_wait(f[4], 3 * SEC);
  double s_el = (double)(now_ns() - t0) / 1e9;
  int bad_n = 0;
  for (int i = 0; i < 4; i++) {
    cudaError_t r = cudaev_future_result(f[i]);
    fprintf(stderr, "  future %d -> %s\n", i, cudaev_error_name(r));
    if (r != cudaErrorIllegalAddress && r != cudaErrorLaunchFailure) bad_n++;
  }
  fprintf(stderr, "  all failed after %.3f s with %s; host function ran: %d\n", s_el,
          cudaev_error_name(e), atomic_load(&h.ran));
  /* 100 ms of kernel before the fault + at most 1 s to notice it */
  int ok = bad_n == 0 && s_el < 1.1 && !cudaev_future_ready(p) && atomic_load(&h.ran) == 0;
  _exit(ok ? 0 : 1);
}

static void test_fault(const char *label) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    /* A fresh process: the parent's CUDA state is not usable after fork;
     * exec ourselves in fault mode. */
    extern char **environ;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) _exit(2);
    exe[n] = 0;
    char *argv[] = {exe, "--fault-child", NULL};
    execve(exe, argv, environ);
    _exit(2);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  fprintf(stderr, "faulting kernel fails every pending future within 1 s (%s): %s\n", label,
          WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "FAIL");
}

int main(int argc, char **argv) {
  if (access("/dev/nvidia0", F_OK) != 0) {
    printf("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)\n");
    return 77;
  }
  if (argc > 1 && strcmp(argv[1], "--fault-child") == 0) return fault_child();
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  lc_init();
  LC_CU(d_cuCtxGetCurrent(&ctx));
  test_sources(loop, "completion words");
  test_host_func(loop, "completion words");
  test_blocking_threads(loop);
  test_notify(loop);
  cudaev_loop_destroy(loop);
  test_foreign_gpu();
  /* The pooled-event fallback (devices without stream memory operations). */
  setenv("CUDAEV_LOOP_EVENTS", "1", 1);
  LC_RT(cudaev_loop_new_thread(&loop));
  test_sources(loop, "pooled events");
  /* Loop-thread host functions on the event path: a driver host function
   * that blocks until the loop has run fn, then a pooled event. */
  test_host_func(loop, "pooled events");
  test_blocking_threads(loop);
  cudaev_loop_destroy(loop);
  test_fault("pooled events"); /* the child inherits CUDAEV_LOOP_EVENTS=1 */
  unsetenv("CUDAEV_LOOP_EVENTS");
  test_fault("completion words");
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
