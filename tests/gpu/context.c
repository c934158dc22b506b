/* gpu suite, context semantics of the runtime reference's "Interactions
 * with the CUDA Driver API": lazy initialisation, cudaSetDevice making the
 * primary context current, cudaDeviceReset, a non-primary context used as
 * it is, per-thread device selection. The test reads the driver's state
 * through libcuda itself. */
#include "common.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

static CUresult (*get_current)(CUcontext *);
static CUresult (*set_current)(CUcontext);
static CUresult (*retain)(CUcontext *, CUdevice);
static CUresult (*release)(CUdevice);
static CUresult (*state)(CUdevice, unsigned *, int *);
static CUresult (*create)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice);
static CUresult (*destroy)(CUcontext);
static CUresult (*cu_init)(unsigned);

static void show(const char *when) {
  CUcontext c = NULL, p = NULL;
  get_current(&c);
  unsigned fl = 0;
  int active = -1;
  state(0, &fl, &active);
  if (active) {
    retain(&p, 0);
    release(0);
  }
  printf("%-32s current=%s primary active=%d flags=0x%x\n", when,
         c == NULL ? "none" : (c == p ? "primary" : "other"), active, fl);
}

static void *thread_main(void *arg) {
  (void)arg;
  int d = -1;
  show("thread start");
  T(cudaGetDevice(&d));
  printf("thread device %d\n", d);
  T(cudaDeviceSynchronize());
  show("thread after sync");
  return NULL;
}

int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == NULL) {
    printf("no libcuda\n");
    return 1;
  }
  get_current = (CUresult(*)(CUcontext *))dlsym(h, "cuCtxGetCurrent");
  set_current = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
  retain = (CUresult(*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
  release = (CUresult(*)(CUdevice))dlsym(h, "cuDevicePrimaryCtxRelease_v2");
  state = (CUresult(*)(CUdevice, unsigned *, int *))dlsym(h, "cuDevicePrimaryCtxGetState");
  create =
      (CUresult(*)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice))dlsym(h, "cuCtxCreate_v4");
  destroy = (CUresult(*)(CUcontext))dlsym(h, "cuCtxDestroy_v2");
  cu_init = (CUresult(*)(unsigned))dlsym(h, "cuInit");
  if (!get_current || !set_current || !retain || !release || !state || !create || !destroy ||
      !cu_init) {
    printf("missing driver symbols\n");
    return 1;
  }
  cu_init(0);
  show("before any runtime call");
  int n = 0, d = -1;
  T(cudaGetDeviceCount(&n));
  show("after cudaGetDeviceCount");
  T(cudaGetDevice(&d));
  printf("device %d\n", d);
  show("after cudaGetDevice");
  unsigned flags = 0;
  T(cudaGetDeviceFlags(&flags));
  printf("flags before init 0x%x\n", flags);
  TC(cudaSetDeviceFlags(cudaDeviceScheduleYield));
  show("after cudaSetDeviceFlags(yield)");
  T(cudaGetDeviceFlags(&flags));
  printf("flags 0x%x\n", flags);
  T(cudaDeviceSynchronize());
  show("after cudaDeviceSynchronize");
  TC(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  show("after SetDeviceFlags on active");
  T(cudaGetDeviceFlags(&flags));
  printf("flags 0x%x\n", flags);

  pthread_t t;
  pthread_create(&t, NULL, thread_main, NULL);
  pthread_join(t, NULL);

  T(cudaDeviceReset());
  show("after cudaDeviceReset");
  T(cudaGetDeviceFlags(&flags));
  printf("flags after reset 0x%x\n", flags);
  T(cudaDeviceSynchronize());
  show("after sync post-reset");
  T(cudaSetDevice(0));
  show("after cudaSetDevice(0)");

  /* A context the application made itself is used as it is. */
  CUcontext mine = NULL;
  if (create(&mine, NULL, 0, 0) != CUDA_SUCCESS) {
    printf("cuCtxCreate failed\n");
    return 1;
  }
  show("after cuCtxCreate");
  T(cudaDeviceSynchronize());
  T(cudaGetDevice(&d));
  printf("device with own context %d\n", d);
  size_t lim = 0;
  T(cudaDeviceGetLimit(&lim, cudaLimitPrintfFifoSize));
  show("after runtime calls in own ctx");
  set_current(NULL);
  destroy(mine);
  show("after destroying own ctx");
  T(cudaDeviceSynchronize());
  show("after sync");
  T(cudaDeviceReset());
  show("after second reset");
  T(cudaGetLastError());
  return 0;
}
