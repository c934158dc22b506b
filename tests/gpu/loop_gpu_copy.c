/* GPU test of cudaev_memcpy_async with pageable host memory: behind a
 * 300 ms kernel, a host-to-device and a device-to-host copy of malloc'd
 * memory return at once (staged through pinned memory, not made
 * synchronous by the driver), the source may be overwritten right after
 * the call, and the device-to-host future completes only once the user's
 * buffer holds the data. Linked with our libcudart.so.13 directly. Exit 0
 * pass, 1 fail, 77 skipped (no GPU). */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../bench/loop_common.h"
#include "../check.h"

static int first_seen = -1;
static void seen_cb(cudaev_future_t *f, cudaError_t st, void *u) {
  (void)f;
  first_seen = st == cudaSuccess ? ((unsigned char *)u)[0] : -2;
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
  enum { N = 8 << 20 };
  unsigned char *host = malloc(N), *back = calloc(1, N);
  CUdeviceptr dev;
  LC_CU(d_cuMemAlloc(&dev, N));
  memset(host, 0x5a, N);
  lc_spin_on(s, 300000000ull);
  uint64_t t0 = now_ns();
  cudaev_future_t *h2d, *d2h;
  LC_RT(cudaev_memcpy_async(loop, (void *)dev, host, N, cudaMemcpyHostToDevice, (cudaStream_t)s,
                            &h2d));
  memset(host, 0, N); /* staged: the copy already took it */
  LC_RT(cudaev_memcpy_async(loop, back, (void *)dev, N, cudaMemcpyDefault, (cudaStream_t)s, &d2h));
  uint64_t dt = now_ns() - t0;
  printf("two pageable copies behind a 300 ms kernel returned in %s\n",
         dt < 100000000ull ? "under 100 ms" : "100 ms or more");
  CHECK(dt < 100000000ull);
  CHECK(!cudaev_future_ready(d2h));
  LC_RT(cudaev_future_then(d2h, seen_cb, back));
  CHECK(cudaev_future_wait(d2h, 10 * 1000000000LL) == cudaSuccess);
  CHECK(back[0] == 0x5a && back[N - 1] == 0x5a);
  CHECK(cudaev_future_wait(h2d, 10 * 1000000000LL) == cudaSuccess);
  for (int i = 0; i < 5000 && first_seen == -1; i++) usleep(1000);
  CHECK(first_seen == 0x5a);
  cudaev_future_release(h2d);
  cudaev_future_release(d2h);
  cudaev_loop_destroy(loop);
  LC_CU(d_cuMemFree(dev));
  LC_CU(d_cuStreamDestroy(s));
  free(host);
  free(back);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
