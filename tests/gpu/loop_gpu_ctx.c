/* GPU test of one loop serving several contexts: the primary context of
 * device 0, a second context created on device 0, and the primary context
 * of every other device present. Submissions to all of them are
 * interleaved on one loop (explicit streams, and the NULL stream of the
 * context current on the submitting thread); each continuation must run
 * exactly once, with its own context current, after its work. A
 * loop-thread host function of the second context sees that context.
 * Linked with our libcudart.so.13 directly. Exit 0 pass, 1 fail, 77
 * skipped (no GPU). */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../../bench/loop_common.h"
#include "../check.h"

#define CTX_DRIVER(X)         \
  X(cuCtxCreate)              \
  X(cuCtxDestroy)             \
  X(cuCtxPushCurrent)         \
  X(cuCtxPopCurrent)          \
  X(cuDeviceGet)              \
  X(cuDeviceGetCount)         \
  X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease)

#define CTX_DECL(n) static __typeof__(&n) c_##n;
CTX_DRIVER(CTX_DECL)
#undef CTX_DECL

static const int64_t SEC = 1000000000LL;

enum { MAXC = 17 };
struct gctx {
  CUcontext c;
  CUfunction spin;
  CUstream s;
  int primary_dev; /* -1: created here */
};

struct rec {
  CUcontext want;
  CUcontext seen;
  atomic_int n;
};

static void on_done(cudaev_future_t *f, cudaError_t st, void *u) {
  struct rec *r = u;
  CUcontext c = NULL;
  d_cuCtxGetCurrent(&c);
  r->seen = st == cudaSuccess ? c : NULL;
  atomic_fetch_add(&r->n, 1);
}

static void ctx_setup(struct gctx *g) {
  LC_CU(c_cuCtxPushCurrent(g->c));
  CUmodule m;
  LC_CU(d_cuModuleLoadData(&m, lc_ptx));
  LC_CU(d_cuModuleGetFunction(&g->spin, m, "spin"));
  LC_CU(d_cuStreamCreate(&g->s, CU_STREAM_NON_BLOCKING));
  CUcontext c;
  LC_CU(c_cuCtxPopCurrent(&c));
}

struct hf_seen {
  CUcontext c;
};
static cudaError_t host_fn(void *u) {
  return d_cuCtxGetCurrent(&((struct hf_seen *)u)->c) == CUDA_SUCCESS ? cudaSuccess
                                                                      : cudaErrorUnknown;
}

int main(void) {
  if (access("/dev/nvidia0", F_OK) != 0) {
    printf("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)\n");
    return 77;
  }
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  lc_init();
  enum cudaDriverEntryPointQueryResult q;
#define CTX_LOAD(n)                                                                          \
  if (cudaGetDriverEntryPointByVersion(#n, (void **)&c_##n, CUDA_VERSION, cudaEnableDefault, \
                                       &q) != cudaSuccess ||                                 \
      q != cudaDriverEntryPointSuccess) {                                                    \
    fprintf(stderr, "no driver entry point %s\n", #n);                                       \
    return 1;                                                                                \
  }
  CTX_DRIVER(CTX_LOAD)
#undef CTX_LOAD
  struct gctx g[MAXC];
  memset(g, 0, sizeof g);
  int n = 0, ndev = 0;
  LC_CU(c_cuDeviceGetCount(&ndev));
  CUdevice d0;
  LC_CU(c_cuDeviceGet(&d0, 0));
  LC_CU(d_cuCtxGetCurrent(&g[n].c)); /* the loop's: device 0's primary */
  g[n++].primary_dev = -2;
  LC_CU(c_cuCtxCreate(&g[n].c, NULL, 0, d0)); /* a second context on device 0 (made current) */
  CUcontext popped;
  LC_CU(c_cuCtxPopCurrent(&popped));
  g[n++].primary_dev = -1;
  for (int d = 1; d < ndev && n < MAXC; d++) {
    CUdevice dev;
    LC_CU(c_cuDeviceGet(&dev, d));
    LC_CU(c_cuDevicePrimaryCtxRetain(&g[n].c, dev));
    g[n++].primary_dev = d;
  }
  printf("contexts: %d (devices: %d)\n", n, ndev);
  for (int i = 0; i < n; i++) ctx_setup(&g[i]);

  enum { N = 3000 };
  struct rec *r = calloc(N, sizeof *r);
  cudaev_future_t **f = calloc(N, sizeof *f);
  for (int i = 0; i < N; i++) {
    struct gctx *k = &g[i % n];
    r[i].want = k->c;
    LC_CU(c_cuCtxPushCurrent(k->c));
    unsigned long long ns = 2000 + (unsigned long long)(i % 7) * 3000;
    void *args[] = {&ns};
    if (i % 4 == 3) {
      /* The NULL stream of the context current on this thread. */
      LC_CU(d_cuLaunchKernel(k->spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
      LC_RT(cudaev_future_new_stream(loop, NULL, &f[i]));
    } else if (i % 2) {
      LC_RT(cudaev_launch_cufunc_async(loop, (struct CUfunc_st *)k->spin, lc_dim(1), lc_dim(1),
                                       args, 0, (cudaStream_t)k->s, &f[i]));
    } else {
      LC_CU(d_cuLaunchKernel(k->spin, 1, 1, 1, 1, 1, 1, 0, k->s, args, NULL));
      LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)k->s, &f[i]));
    }
    LC_CU(c_cuCtxPopCurrent(&popped));
    LC_RT(cudaev_future_then(f[i], on_done, &r[i]));
  }
  cudaev_future_t *all;
  LC_RT(cudaev_future_new_all(loop, f, N, &all));
  CHECK(cudaev_future_wait(all, 60 * SEC) == cudaSuccess);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < 5000 && atomic_load(&r[i].n) == 0; j++) usleep(1000);
  int wrong = 0, not_once = 0;
  for (int i = 0; i < N; i++) {
    if (r[i].seen != r[i].want) wrong++;
    if (atomic_load(&r[i].n) != 1) not_once++;
  }
  printf("%d futures over %d contexts: %d with another context current, %d not run once\n", N, n,
         wrong, not_once);
  CHECK(wrong == 0);
  CHECK(not_once == 0);
  for (int i = 0; i < N; i++) cudaev_future_release(f[i]);
  cudaev_future_release(all);

  /* A loop-thread host function of the second context. */
  struct hf_seen h = {NULL};
  cudaev_future_t *hf;
  LC_RT(cudaev_launch_host_func_async(loop, (cudaStream_t)g[1].s, host_fn, &h, &hf));
  CHECK(cudaev_future_wait(hf, 10 * SEC) == cudaSuccess);
  CHECK(h.c == g[1].c);
  cudaev_future_release(hf);

  for (int i = 0; i < 1000 && cudaev_loop_pending(loop) > 0; i++) usleep(1000);
  CHECK(cudaev_loop_pending(loop) == 0);
  cudaev_loop_destroy(loop);
  for (int i = 1; i < n; i++) {
    LC_CU(c_cuCtxPushCurrent(g[i].c));
    d_cuStreamDestroy(g[i].s);
    LC_CU(c_cuCtxPopCurrent(&popped));
    if (g[i].primary_dev == -1) c_cuCtxDestroy(g[i].c);
    if (g[i].primary_dev >= 0) {
      CUdevice dev;
      c_cuDeviceGet(&dev, g[i].primary_dev);
      c_cuDevicePrimaryCtxRelease(dev);
    }
  }
  free(r);
  free(f);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
