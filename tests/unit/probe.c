/* cudart-probe: a transcript of runtime calls that need no GPU, for the
 * differential test (diff.c). Linked against libcudart.so.13 by name, with
 * no rpath, so LD_LIBRARY_PATH picks NVIDIA's or ours. Prints the mapped
 * library on stderr ("[cudart] /path"). */
#include <cuda_runtime_api.h>
#include <cuda_profiler_api.h>
#include <stdio.h>
#include <string.h>

#include "../gpu/common.h"

int main(void) {
  for (int c = -2; c <= 1100; c++)
    printf("%d %s | %s\n", c, cudaGetErrorName((cudaError_t)c), cudaGetErrorString((cudaError_t)c));
  /* cudaErrorApiFailureBase, the one name above 1000. */
  for (int c = 9999; c <= 10001; c++)
    printf("%d %s | %s\n", c, cudaGetErrorName((cudaError_t)c), cudaGetErrorString((cudaError_t)c));

  int n = -7, v = -7, d = -7;
  size_t z = 7;
  unsigned u = 7;
  char bus[64] = "unset";
  struct cudaDeviceProp prop;
  memset(&prop, 0, sizeof prop);
  T(cudaRuntimeGetVersion(&v));
  printf("runtime version %d\n", v);
  T(cudaRuntimeGetVersion(NULL));
  TC(cudaDriverGetVersion(NULL));
  /* Everything else depends on whether a driver is there; the order matters:
   * the first call that initialises fixes the init error. */
  T(cudaPeekAtLastError());
  TC(cudaGetDeviceCount(&n));
  printf("count %d\n", n);
  TC(cudaGetDeviceCount(NULL));
  TC(cudaGetDevice(&d));
  TC(cudaGetDevice(NULL));
  TC(cudaSetDevice(-1));
  TC(cudaSetDevice(4096));
  TC(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 4096));
  TC(cudaDeviceGetAttribute(NULL, cudaDevAttrWarpSize, 0));
  TC(cudaGetDeviceProperties(NULL, 0));
  TC(cudaGetDeviceProperties(&prop, -1));
  TC(cudaDeviceGetPCIBusId(bus, (int)sizeof bus, 4096));
  TC(cudaDeviceGetByPCIBusId(&d, "0000:ff:1f.0"));
  TC(cudaChooseDevice(NULL, &prop));
  TC(cudaGetDeviceFlags(NULL));
  TC(cudaSetDeviceFlags(0xffff));
  TC(cudaDeviceGetLimit(NULL, cudaLimitStackSize));
  TC(cudaDeviceGetStreamPriorityRange(NULL, NULL));
  TC(cudaProfilerStart());
  TC(cudaProfilerStop());
  TC(cudaInitDevice(-1, 0, 0));
  T(cudaGetLastError());
  T(cudaGetLastError());
  T(cudaPeekAtLastError());
  (void)z;
  (void)u;
  return 0;
}
