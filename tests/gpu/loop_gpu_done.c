/* GPU test of cudaev_future_new_work_done: a future over a long kernel followed by
 * a kernel that writes a buffer (pinned, mapped host memory) is cancelled;
 * the future from cudaev_future_new_work_done must complete only after the GPU
 * wrote the buffer, so that a continuation may free it. Both markers (a
 * completion word, and a pooled event behind an outstanding future), and
 * loop destroy with the watch pending. Linked with our libcudart.so.13
 * directly. Exit 0 pass, 1 fail, 77 skipped (no GPU). */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "../../bench/loop_common.h"
#include "../check.h"

static const int64_t SEC = 1000000000LL;

struct watch {
  volatile uint32_t *buf;
  uint32_t seen;
  atomic_int ran;
};
static void free_cb(cudaev_future_t *g, cudaError_t st, void *u) {
  struct watch *w = u;
  (void)g;
  w->seen = st == cudaSuccess ? __atomic_load_n(w->buf, __ATOMIC_ACQUIRE) : 0;
  atomic_store(&w->ran, 1);
}

/* On s: spin 300 ms, then write v to buf; a future behind both. */
static cudaev_future_t *long_write(cudaev_loop_t *loop, CUstream s, CUdeviceptr dbuf, uint32_t v) {
  lc_spin_on(s, 300000000ull);
  void *args[] = {&dbuf, &v};
  LC_CU(d_cuLaunchKernel(lc_mark_rel, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  cudaev_future_t *f;
  LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)s, &f));
  return f;
}

static void one(cudaev_loop_t *loop, CUstream s, uint32_t *buf, CUdeviceptr dbuf, bool backlog,
                bool destroy) {
  cudaev_future_t *first = NULL, *f, *g;
  *buf = 0;
  if (backlog) LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)s, &first));
  f = long_write(loop, s, dbuf, 7);
  CHECK(cudaev_future_cancel(f) == 1);
  LC_RT(cudaev_future_new_work_done(f, &g));
  struct watch w = {.buf = buf};
  LC_RT(cudaev_future_then(g, free_cb, &w));
  CHECK(__atomic_load_n(buf, __ATOMIC_ACQUIRE) == 0); /* still spinning */
  if (destroy) {
    usleep(10000);
    cudaev_loop_destroy(loop);
  } else {
    CHECK(cudaev_future_wait(g, 10 * SEC) == cudaSuccess);
    for (int i = 0; i < 5000 && !atomic_load(&w.ran); i++) usleep(1000);
  }
  CHECK(atomic_load(&w.ran));
  CHECK(w.seen == 7);
  printf("done after cancel (%s%s): buffer %u when done's continuation ran\n",
         backlog ? "event marker" : "word marker", destroy ? ", at loop destroy" : "", w.seen);
  cudaev_future_release(first);
  cudaev_future_release(f);
  cudaev_future_release(g);
}

int main(void) {
  if (access("/dev/nvidia0", F_OK) != 0) {
    printf("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)\n");
    return 77;
  }
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_thread(&loop));
  lc_init();
  CUstream s;
  LC_CU(d_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void *h;
  CUdeviceptr dbuf;
  LC_CU(d_cuMemHostAlloc(&h, 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  LC_CU(d_cuMemHostGetDevicePointer(&dbuf, h, 0));
  one(loop, s, h, dbuf, false, false);
  one(loop, s, h, dbuf, true, false);
  one(loop, s, h, dbuf, false, true); /* destroys the loop */
  LC_CU(d_cuStreamSynchronize(s));
  LC_CU(d_cuStreamDestroy(s));
  LC_CU(d_cuMemFreeHost(h));
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
