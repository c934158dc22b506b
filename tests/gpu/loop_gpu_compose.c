/* GPU test of composition: cudaev_launch_ex_async (a cudaKernel_t from
 * cudaLibraryLoadData, launched through cudaLaunchKernelExC with a launch
 * attribute) and cudaev_future_then_chain (a continuation that submits the
 * next kernel; the chain's future completes with that kernel's outcome,
 * after it). Linked with our libcudart.so.13 directly. Exit 0 pass, 1
 * fail, 77 skipped (no GPU). */
#include <time.h>
#include <unistd.h>

#include "../../bench/loop_common.h"
#include "../check.h"

static cudaKernel_t spin;
static CUstream stream;
static unsigned long long spin_ns = 50000000ull;

static cudaError_t launch_spin(cudaev_loop_t *loop, cudaev_future_t **f) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributePriority;
  attr.val.priority = 0;
  cudaLaunchConfig_t cfg = {0};
  cfg.gridDim = lc_dim(1);
  cfg.blockDim = lc_dim(1);
  cfg.stream = (cudaStream_t)stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  void *args[] = {&spin_ns};
  return cudaev_launch_ex_async(loop, &cfg, (const void *)spin, args, f);
}

static int steps;
static cudaev_future_t *next_step(cudaev_future_t *f, cudaError_t st, void *user) {
  cudaev_loop_t *loop = user;
  (void)f;
  if (st != cudaSuccess || steps++ == 2) return NULL;
  cudaev_future_t *n = NULL;
  return launch_spin(loop, &n) == cudaSuccess ? n : NULL;
}

int main(void) {
  if (access("/dev/nvidia0", F_OK) != 0) {
    printf("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)\n");
    return 77;
  }
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  lc_init();
  LC_CU(d_cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  cudaLibrary_t lib;
  LC_RT(cudaLibraryLoadData(&lib, lc_ptx, NULL, NULL, 0, NULL, NULL, 0));
  LC_RT(cudaLibraryGetKernel(&spin, lib, "spin"));
  uint64_t t0 = now_ns();
  cudaev_future_t *f, *out, *out2;
  LC_RT(launch_spin(loop, &f));
  CHECK(cudaev_future_wait(f, 10 * 1000000000LL) == cudaSuccess);
  CHECK(now_ns() - t0 >= 45000000ull);
  printf("launch_ex_async: a 50 ms kernel with a launch attribute completed after it ran\n");
  /* f, then two more kernels submitted by the chain's steps. */
  t0 = now_ns();
  LC_RT(launch_spin(loop, &f));
  LC_RT(cudaev_future_then_chain(f, next_step, loop, &out));
  LC_RT(cudaev_future_then_chain(out, next_step, loop, &out2));
  CHECK(cudaev_future_wait(out2, 10 * 1000000000LL) == cudaSuccess);
  CHECK(cudaev_future_result(out) == cudaSuccess);
  CHECK(steps == 2);
  CHECK(now_ns() - t0 >= 3 * 45000000ull);
  printf("then_chain: three kernels in sequence, the chains completed after the last\n");
  cudaev_future_release(f);
  cudaev_future_release(out);
  cudaev_future_release(out2);
  CHECK(cudaev_launch_ex_async(loop, NULL, (const void *)spin, NULL, &f) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaev_loop_destroy(loop);
  LC_RT(cudaLibraryUnload(lib));
  LC_CU(d_cuStreamDestroy(stream));
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
