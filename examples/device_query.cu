// device_query: prints what the CUDA runtime reports about each GPU, in the
// spirit of NVIDIA's deviceQuery sample. Built with `nvcc -cudart shared`,
// so the same binary runs on NVIDIA's libcudart.so.13 or on cudaev's:
//
//   LD_LIBRARY_PATH=build ./build/examples/device_query
#include <cuda_runtime_api.h>
#include <stdio.h>

static int check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    printf("%s failed: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
  }
  return 0;
}

int main(void) {
  int driver = 0, runtime = 0, n = 0;
  if (check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion") ||
      check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion"))
    return 1;
  printf("CUDA driver %d.%d, runtime %d.%d\n", driver / 1000, driver % 1000 / 10, runtime / 1000,
         runtime % 1000 / 10);
  if (check(cudaGetDeviceCount(&n), "cudaGetDeviceCount")) return 1;
  printf("%d CUDA device(s)\n", n);
  for (int d = 0; d < n; d++) {
    cudaDeviceProp p;
    if (check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties")) return 1;
    char bus[32];
    if (check(cudaDeviceGetPCIBusId(bus, sizeof bus, d), "cudaDeviceGetPCIBusId")) return 1;
    int clock = 0, memclock = 0;
    cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, d);
    cudaDeviceGetAttribute(&memclock, cudaDevAttrMemoryClockRate, d);
    printf("\nDevice %d: \"%s\"  (PCI %s)\n", d, p.name, bus);
    printf("  compute capability                %d.%d\n", p.major, p.minor);
    printf("  global memory                     %.0f MiB\n", p.totalGlobalMem / 1048576.0);
    printf("  multiprocessors                   %d\n", p.multiProcessorCount);
    printf("  GPU clock                         %d MHz\n", clock / 1000);
    printf("  memory clock, bus width           %d MHz, %d bits\n", memclock / 1000,
           p.memoryBusWidth);
    printf("  L2 cache                          %d KiB\n", p.l2CacheSize / 1024);
    printf("  constant memory                   %zu bytes\n", p.totalConstMem);
    printf("  shared memory per block (optin)   %zu (%zu) bytes\n", p.sharedMemPerBlock,
           p.sharedMemPerBlockOptin);
    printf("  shared memory per multiprocessor  %zu bytes\n", p.sharedMemPerMultiprocessor);
    printf("  registers per block               %d\n", p.regsPerBlock);
    printf("  warp size                         %d\n", p.warpSize);
    printf("  max threads per SM / per block    %d / %d\n", p.maxThreadsPerMultiProcessor,
           p.maxThreadsPerBlock);
    printf("  max block dims                    %d x %d x %d\n", p.maxThreadsDim[0],
           p.maxThreadsDim[1], p.maxThreadsDim[2]);
    printf("  max grid dims                     %d x %d x %d\n", p.maxGridSize[0], p.maxGridSize[1],
           p.maxGridSize[2]);
    printf("  async engines                     %d\n", p.asyncEngineCount);
    printf("  unified addressing / managed      %d / %d\n", p.unifiedAddressing, p.managedMemory);
    printf("  concurrent kernels / cooperative  %d / %d\n", p.concurrentKernels,
           p.cooperativeLaunch);
    printf("  ECC                               %s\n", p.ECCEnabled ? "on" : "off");
    printf("  cluster launch / memory pools     %d / %d\n", p.clusterLaunch,
           p.memoryPoolsSupported);
    int lo = 0, hi = 0;
    if (check(cudaSetDevice(d), "cudaSetDevice") ||
        check(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange"))
      return 1;
    printf("  stream priorities                 %d (lowest) .. %d (highest)\n", lo, hi);
    for (int peer = 0; peer < n; peer++) {
      int rank = 0, access = 0;
      if (peer == d) continue;
      cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, d, peer);
      cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, d, peer);
      printf("  peer access to device %d           %s (rank %d)\n", peer, access ? "yes" : "no",
             rank);
    }
  }
  return 0;
}
