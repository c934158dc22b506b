/* cpu_launch_path: what our runtime adds to a <<<>>> launch, on the CPU.
 *
 * The nvcc-generated sequence (__cudaPushCallConfiguration,
 * __cudaPopCallConfiguration, __cudaLaunchKernel with the handle from
 * __cudaGetKernel) is timed against a driver stand-in whose cuLaunchKernel
 * only counts, installed through the driver table seam; the bare call to the
 * stand-in is timed beside it. The difference is the runtime's own share of
 * a launch, which on the GPU sits on top of the driver's ~2.35 us
 * (bench/RESULTS-history.md). Runs anywhere; not part of the GPU harness.
 *
 *   build/bench/cpu-launch-path
 */
#include "nvcc_abi.h"
#include <stdio.h>
#include <string.h>
#include <time.h>
struct wrapper {
  int magic, version;
  const unsigned long long *data;
  void *extra;
};
static const unsigned long long image[4] = {1, 2, 3, 4};
static struct wrapper wrap = {0x466243B1, 1, image, NULL};
static _Alignas(16) char stub[16];
static CUresult f_init(unsigned x) {
  (void)x;
  return 0;
}
static CUresult f_count(int *n) {
  *n = 1;
  return 0;
}
static CUresult f_get(CUdevice *d, int o) {
  *d = o;
  return 0;
}
static CUcontext cur = (CUcontext)0x1000;
static CUresult f_cur(CUcontext *c) {
  *c = cur;
  return 0;
}
static CUresult f_load(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                       CUlibraryOption *lo, void **lv, unsigned nl) {
  *lib = (CUlibrary)0x10;
  return 0;
}
static char ks[16];
static CUresult f_getk(CUkernel *k, CUlibrary lib, const char *name) {
  *k = (CUkernel)ks;
  return 0;
}
static volatile unsigned long n;
static CUresult f_launch(CUfunction f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,
                         unsigned g, unsigned s, CUstream st, void **p, void **x) {
  n++;
  return 0;
}
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
int main(void) {
  /* The stand-in driver: one device, a current context, a library whose
   * kernel is a dummy handle. */
  static struct cudaev_driver t;
  memset(&t, 0, sizeof t);
  t.cuInit = f_init;
  t.cuDeviceGetCount = f_count;
  t.cuDeviceGet = f_get;
  t.cuCtxGetCurrent = f_cur;
  t.cuLibraryLoadData = f_load;
  t.cuLibraryGetKernel = f_getk;
  t.cuLaunchKernel = f_launch;
  cudaev__driver_install(&t, 13000);
  void **h = __cudaRegisterFatBinary(&wrap);
  __cudaRegisterFunction(h, stub, "k", "k", -1, NULL, NULL, NULL, NULL, NULL);
  cudaKernel_t k;
  __cudaGetKernel(&k, stub);
  dim3 g = {1, 1, 1}, b = {1, 1, 1};
  const long N = 20000000;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now();
    for (long i = 0; i < N; i++) {
      __cudaPushCallConfiguration(g, b, 0, NULL);
      dim3 gg, bb;
      size_t sm;
      cudaStream_t s;
      __cudaPopCallConfiguration(&gg, &bb, &sm, &s);
      void *args[1];
      __cudaLaunchKernel(k, gg, bb, args, sm, s);
    }
    double t1 = now();
    for (long i = 0; i < N; i++)
      cudaev__drv.cuLaunchKernel((CUfunction)ks, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    double t2 = now();
    printf("runtime path %.2f ns/launch, driver call alone %.2f ns\n", (t1 - t0) / N,
           (t2 - t1) / N);
  }
  return 0;
}
