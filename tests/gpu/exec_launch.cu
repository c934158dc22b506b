/* Execution control on nvcc-built code: <<<>>> and
 * cudaLaunchKernel with many parameter types and a 32 KiB parameter,
 * templates instantiated in two translation units, __device__ /
 * __constant__ / __managed__ variables and symbol copies, device printf,
 * device assert (sticky, in a child process), dynamic shared memory,
 * cooperative grid sync, clusters, cudaLaunchKernelExC attributes, kernel
 * attributes, occupancy, and bad input: unknown host function, bad
 * configurations, too much shared memory, NULL arguments. */
#include "common.h"
#include "exec_common.cuh"

#include <assert.h>
#include <cooperative_groups.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace cg = cooperative_groups;

#define BIG_BYTES (32 * 1024 - 256)
struct Big {
  unsigned char b[BIG_BYTES];
};

__device__ int dev_arr[16];
__constant__ int const_arr[16];
__managed__ int managed_counter = 5;
static int host_only[4];
static void host_function(void) {}

__global__ void empty_kernel() {}

__global__ void many_params(char c, short s, int i, long long ll, float f, double d, float4 f4,
                            bool b, unsigned char uc, double2 d2, long long *out) {
  out[0] = c;
  out[1] = s;
  out[2] = i;
  out[3] = ll;
  out[4] = (long long)(f * 1000.0f);
  out[5] = (long long)(d * 1000.0);
  out[6] = (long long)((f4.x + f4.y + f4.z + f4.w) * 10.0f);
  out[7] = b;
  out[8] = uc;
  out[9] = (long long)((d2.x - d2.y) * 100.0);
}

__global__ void big_param(Big big, unsigned long long *out) {
  unsigned long long s = 0;
  for (int k = threadIdx.x; k < BIG_BYTES; k += blockDim.x)
    s += big.b[k] * (unsigned long long)(k % 7 + 1);
  atomicAdd(out, s);
}

__global__ void use_symbols(int *out) {
  int i = threadIdx.x;
  out[i] = dev_arr[i] + const_arr[i] * 10;
  dev_arr[i] = i * 100;
  atomicAdd(&managed_counter, 1);
}

__global__ void say_hello(int v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) printf("device printf says %d\n", v);
}

__global__ void assert_kernel(int v) { assert(v == 0); }

__global__ void dyn_smem(int *out, int n) {
  extern __shared__ int s[];
  for (int k = threadIdx.x; k < n; k += blockDim.x) s[k] = k;
  __syncthreads();
  if (threadIdx.x == 0) {
    int sum = 0;
    for (int k = 0; k < n; k++) sum += s[k];
    *out = sum;
  }
}

__global__ void coop_sum(int *data, int *result, int n) {
  cg::grid_group g = cg::this_grid();
  for (int k = g.thread_rank(); k < n; k += g.size()) data[k] = k % 10;
  g.sync();
  if (g.thread_rank() == 0) {
    int s = 0;
    for (int k = 0; k < n; k++) s += data[k];
    *result = s;
  }
}

__global__ void __cluster_dims__(2, 1, 1) cluster_fixed(int *out) {
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) out[blockIdx.x] = (int)c.block_rank() * 10 + (int)c.num_blocks();
}

__global__ void cluster_free(int *out) {
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) out[blockIdx.x] = (int)c.block_rank() * 10 + (int)c.num_blocks();
}

/* Device assert leaves the context unusable (sticky cudaErrorAssert): run it
 * in a child, before the parent touches CUDA (a context does not survive
 * fork). */
static int assert_child(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    assert_kernel<<<1, 1>>>(1);
    TC(cudaGetLastError());
    T(cudaDeviceSynchronize());
    TC(cudaGetLastError());
    void *p = NULL;
    T(cudaMalloc(&p, 16));
    TC(cudaGetLastError());
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  printf("assert child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

int main() {
  assert_child();

  /* ---- plain launches ---- */
  T(cudaLaunchKernel((const void *)empty_kernel, dim3(1), dim3(1), NULL, 0, 0));
  empty_kernel<<<1, 1>>>();
  TC(cudaGetLastError());
  T(cudaDeviceSynchronize());

  long long *out = NULL;
  CHECK(cudaMalloc(&out, 16 * sizeof(long long)));
  CHECK(cudaMemset(out, 0, 16 * sizeof(long long)));
  many_params<<<1, 1>>>('A', -1234, 567890, -9876543210LL, 3.25f, -2.5, make_float4(1, 2, 3, 4.5f),
                        true, 200, make_double2(7.5, 0.25), out);
  TC(cudaGetLastError());
  long long h[16];
  CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  printf("many_params:");
  for (int k = 0; k < 10; k++) printf(" %lld", h[k]);
  printf("\n");

  /* The same kernel through cudaLaunchKernel and its args array. */
  char c = 'z';
  short s = 7;
  int i = -1;
  long long ll = 1LL << 40;
  float f = 0.5f;
  double d = 0.125;
  float4 f4 = make_float4(0.5f, 0.5f, 0.5f, 0.5f);
  bool b = false;
  unsigned char uc = 1;
  double2 d2 = make_double2(1.0, 2.0);
  void *args[] = {&c, &s, &i, &ll, &f, &d, &f4, &b, &uc, &d2, &out};
  T(cudaLaunchKernel((const void *)many_params, dim3(1), dim3(1), args, 0, 0));
  CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  printf("many_params via cudaLaunchKernel:");
  for (int k = 0; k < 10; k++) printf(" %lld", h[k]);
  printf("\n");

  /* ---- a parameter of almost 32 KiB ---- */
  static Big big;
  for (int k = 0; k < BIG_BYTES; k++) big.b[k] = (unsigned char)(k * 31 + 7);
  unsigned long long *sum = NULL;
  CHECK(cudaMalloc(&sum, sizeof *sum));
  CHECK(cudaMemset(sum, 0, sizeof *sum));
  big_param<<<1, 256>>>(big, sum);
  TC(cudaGetLastError());
  unsigned long long hs = 0, want = 0;
  CHECK(cudaMemcpy(&hs, sum, sizeof hs, cudaMemcpyDeviceToHost));
  for (int k = 0; k < BIG_BYTES; k++) want += big.b[k] * (unsigned long long)(k % 7 + 1);
  printf("big_param sum %llu (host %llu)\n", hs, want);

  /* ---- templates from two translation units ---- */
  const int n = 1000;
  float *fv = NULL;
  int *iv = NULL;
  CHECK(cudaMalloc(&fv, n * sizeof(float)));
  CHECK(cudaMalloc(&iv, n * sizeof(int)));
  CHECK(cudaMemset(fv, 0, n * sizeof(float)));
  CHECK(cudaMemset(iv, 0, n * sizeof(int)));
  exec_scale<float><<<(n + 127) / 128, 128>>>(fv, 2.0f, n);
  exec_scale<int><<<(n + 127) / 128, 128>>>(iv, 2, n);
  TC(cudaGetLastError());
  T(exec_scale_from_tu2(fv, iv, n));
  static float hf[1000];
  static int hi[1000];
  CHECK(cudaMemcpy(hf, fv, sizeof hf, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hi, iv, sizeof hi, cudaMemcpyDeviceToHost));
  printf("templates: float %016llx int %016llx\n", (unsigned long long)exec_checksum(hf, sizeof hf),
         (unsigned long long)exec_checksum(hi, sizeof hi));

  /* ---- variables ---- */
  int hv[16], hc[16];
  for (int k = 0; k < 16; k++) hv[k] = k, hc[k] = 16 - k;
  T(cudaMemcpyToSymbol(dev_arr, hv, sizeof hv));
  T(cudaMemcpyToSymbol(const_arr, hc, 8 * sizeof(int)));
  T(cudaMemcpyToSymbol(const_arr, hc + 8, 8 * sizeof(int), 8 * sizeof(int),
                       cudaMemcpyHostToDevice));
  int *sym_out = NULL;
  CHECK(cudaMalloc(&sym_out, 16 * sizeof(int)));
  printf("managed before %d\n", managed_counter);
  use_symbols<<<1, 16>>>(sym_out);
  TC(cudaGetLastError());
  T(cudaDeviceSynchronize());
  printf("managed after %d\n", managed_counter);
  CHECK(cudaMemcpy(hv, sym_out, sizeof hv, cudaMemcpyDeviceToHost));
  printf("use_symbols:");
  for (int k = 0; k < 16; k++) printf(" %d", hv[k]);
  printf("\n");
  T(cudaMemcpyFromSymbol(hv, dev_arr, sizeof hv));
  printf("dev_arr[3] %d dev_arr[15] %d\n", hv[3], hv[15]);
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  T(cudaMemcpyToSymbolAsync(dev_arr, hc, 4 * sizeof(int), 4, cudaMemcpyHostToDevice, st));
  T(cudaMemcpyFromSymbolAsync(hv, dev_arr, 8 * sizeof(int), 0, cudaMemcpyDeviceToHost, st));
  T(cudaStreamSynchronize(st));
  printf("async dev_arr[0..7]: %d %d %d %d %d %d %d %d\n", hv[0], hv[1], hv[2], hv[3], hv[4], hv[5],
         hv[6], hv[7]);
  T(cudaMemcpyToSymbol(dev_arr, sym_out, 4 * sizeof(int), 0, cudaMemcpyDeviceToDevice));
  T(cudaMemcpyFromSymbol(sym_out, const_arr, 4 * sizeof(int), 0, cudaMemcpyDefault));
  size_t sz = 0;
  T(cudaGetSymbolSize(&sz, dev_arr));
  printf("sizeof dev_arr %zu\n", sz);
  T(cudaGetSymbolSize(&sz, managed_counter));
  printf("sizeof managed_counter %zu\n", sz);
  void *addr = NULL;
  T(cudaGetSymbolAddress(&addr, const_arr));
  printf("const_arr address %s\n", addr != NULL ? "set" : "NULL");
  T(cudaGetSymbolAddress(&addr, managed_counter));
  printf("managed address is the host view %d\n", addr == (void *)&managed_counter);
  TC(cudaMemcpyToSymbol(dev_arr, hc, 17 * sizeof(int)));
  TC(cudaMemcpyToSymbol(dev_arr, hc, 4, 64));
  TC(cudaMemcpyToSymbol(dev_arr, hc, 4, 0, cudaMemcpyDeviceToHost));
  TC(cudaMemcpyFromSymbol(hc, dev_arr, 4, 0, cudaMemcpyHostToDevice));
  TC(cudaGetSymbolAddress(&addr, host_only));
  TC(cudaGetSymbolSize(&sz, host_only));
  TC(cudaMemcpyToSymbol(host_only, hc, 4));

  /* ---- device printf ---- */
  fflush(stdout);
  say_hello<<<2, 32>>>(42);
  T(cudaDeviceSynchronize());
  fflush(stdout);

  /* ---- dynamic shared memory ---- */
  int *iout = NULL;
  CHECK(cudaMalloc(&iout, 64 * sizeof(int)));
  dyn_smem<<<1, 256, 1024 * sizeof(int)>>>(iout, 1024);
  TC(cudaGetLastError());
  int hsum = 0;
  CHECK(cudaMemcpy(&hsum, iout, sizeof hsum, cudaMemcpyDeviceToHost));
  printf("dyn_smem 4 KiB: %d\n", hsum);
  dyn_smem<<<1, 256, 100 * 1024>>>(iout, 1024);
  TC(cudaGetLastError());
  dyn_smem<<<1, 256, 1024 * 1024>>>(iout, 1024);
  TC(cudaGetLastError());
  TC(cudaFuncSetAttribute((const void *)dyn_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          100 * 1024));
  dyn_smem<<<1, 256, 100 * 1024>>>(iout, 25600);
  TC(cudaGetLastError());
  CHECK(cudaMemcpy(&hsum, iout, sizeof hsum, cudaMemcpyDeviceToHost));
  printf("dyn_smem 100 KiB: %d\n", hsum);
  TC(cudaFuncSetAttribute((const void *)dyn_smem, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          1024 * 1024));
  TC(cudaFuncSetAttribute((const void *)dyn_smem, (cudaFuncAttribute)0, 1));
  TC(cudaFuncSetAttribute((const void *)dyn_smem, cudaFuncAttributePreferredSharedMemoryCarveout,
                          50));

  /* ---- bad configurations and functions ---- */
  empty_kernel<<<0, 1>>>();
  TC(cudaGetLastError());
  empty_kernel<<<1, 0>>>();
  TC(cudaGetLastError());
  empty_kernel<<<1, 2048>>>();
  TC(cudaGetLastError());
  empty_kernel<<<1, dim3(1, 1, 128)>>>();
  TC(cudaGetLastError());
  empty_kernel<<<dim3(1, 70000), 1>>>();
  TC(cudaGetLastError());
  empty_kernel<<<dim3(1, 1, 70000), 1>>>();
  TC(cudaGetLastError());
  TC(cudaLaunchKernel((const void *)host_function, dim3(1), dim3(1), NULL, 0, 0));
  TC(cudaLaunchKernel((const void *)host_only, dim3(1), dim3(1), NULL, 0, 0));
  TC(cudaLaunchKernel(NULL, dim3(1), dim3(1), NULL, 0, 0));
  TC(cudaLaunchKernel((const void *)empty_kernel, dim3(0), dim3(1), NULL, 0, 0));
  TC(cudaLaunchCooperativeKernel((const void *)host_function, dim3(1), dim3(1), NULL, 0, 0));
  T(cudaDeviceSynchronize());

  /* ---- kernel attributes ---- */
  cudaFuncAttributes fa;
  memset(&fa, 0, sizeof fa);
  T(cudaFuncGetAttributes(&fa, (const void *)many_params));
  printf("many_params: maxThreads %d binaryVersion %d ptxVersion %d local %zu const %zu\n",
         fa.maxThreadsPerBlock, fa.binaryVersion, fa.ptxVersion, fa.localSizeBytes,
         fa.constSizeBytes);
  T(cudaFuncGetAttributes(&fa, (const void *)dyn_smem));
  printf("dyn_smem: maxDynamicShared %d shared %zu carveout %d\n", fa.maxDynamicSharedSizeBytes,
         fa.sharedSizeBytes, fa.preferredShmemCarveout);
  T(cudaFuncGetAttributes(&fa, (const void *)cluster_fixed));
  printf("cluster_fixed: required %d %d %d mustBeSet %d\n", fa.requiredClusterWidth,
         fa.requiredClusterHeight, fa.requiredClusterDepth, fa.clusterDimMustBeSet);
  TC(cudaFuncGetAttributes(&fa, (const void *)host_function));
  TC(cudaFuncGetAttributes(NULL, (const void *)empty_kernel));
  const char *name = NULL;
  T(cudaFuncGetName(&name, (const void *)many_params));
  printf("name %s\n", name ? name : "(null)");
  T(cudaFuncGetName(&name, (const void *)exec_scale<float>));
  printf("name %s\n", name ? name : "(null)");
  TC(cudaFuncGetName(&name, (const void *)host_function));
  TC(cudaFuncGetName(NULL, (const void *)empty_kernel));
  for (size_t p = 0; p < 12; p++) {
    size_t off = 0, psz = 0;
    cudaError_t e = cudaFuncGetParamInfo((const void *)many_params, p, &off, &psz);
    printf("param %zu -> %s offset %zu size %zu\n", p, cudaGetErrorName(e), off, psz);
  }
  TC(cudaGetLastError());
  size_t off = 0, psz = 0;
  T(cudaFuncGetParamInfo((const void *)big_param, 0, &off, &psz));
  printf("big_param param 0: offset %zu size %zu\n", off, psz);
  TC(cudaFuncGetParamInfo((const void *)host_function, 0, &off, &psz));
  TC(cudaFuncSetCacheConfig((const void *)empty_kernel, cudaFuncCachePreferL1));
  TC(cudaFuncSetCacheConfig((const void *)host_function, cudaFuncCachePreferL1));
  TC(cudaFuncSetSharedMemConfig((const void *)empty_kernel, cudaSharedMemBankSizeFourByte));

  cudaKernel_t kern = NULL;
  T(cudaGetKernel(&kern, (const void *)empty_kernel));
  T(cudaLaunchKernel((const void *)kern, dim3(2), dim3(32), NULL, 0, 0));
  T(cudaKernelSetAttributeForDevice(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024,
                                    0));
  TC(cudaKernelSetAttributeForDevice(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024, 99));
  TC(cudaGetKernel(&kern, (const void *)host_function));
  TC(cudaGetKernel(NULL, (const void *)empty_kernel));
  cudaFunction_t fn = NULL;
  T(cudaGetFuncBySymbol(&fn, (const void *)empty_kernel));
  printf("cudaGetFuncBySymbol %s\n", fn != NULL ? "set" : "NULL");
  TC(cudaGetFuncBySymbol(&fn, (const void *)host_function));

  /* ---- occupancy ---- */
  int blocks = -1;
  T(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)dyn_smem, 256, 4096));
  printf("occupancy dyn_smem 256 threads 4 KiB: %d\n", blocks);
  T(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, (const void *)empty_kernel, 128,
                                                           0, cudaOccupancyDisableCachingOverride));
  printf("occupancy empty 128 threads: %d\n", blocks);
  TC(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, (const void *)empty_kernel,
                                                            128, 0, 77));
  TC(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)host_function, 128, 0));
  TC(cudaOccupancyMaxActiveBlocksPerMultiprocessor(NULL, (const void *)empty_kernel, 128, 0));
  int min_grid = 0, block_size = 0;
  T(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block_size, dyn_smem, 2048, 0));
  printf("potential block size %d (min grid > 0: %d)\n", block_size, min_grid > 0);
  size_t avail = 0;
  T(cudaOccupancyAvailableDynamicSMemPerBlock(&avail, (const void *)dyn_smem, 2, 256));
  printf("available dynamic smem (2 blocks of 256): %zu\n", avail);

  /* ---- cooperative launch ---- */
  int dev = 0, sms = 0, per_sm = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)coop_sum, 128, 0));
  int *data = NULL;
  const int cn = 100000;
  CHECK(cudaMalloc(&data, cn * sizeof(int)));
  void *cargs[] = {&data, &iout, (void *)&cn};
  T(cudaLaunchCooperativeKernel((const void *)coop_sum, dim3(sms), dim3(128), cargs, 0, 0));
  CHECK(cudaMemcpy(&hsum, iout, sizeof hsum, cudaMemcpyDeviceToHost));
  printf("cooperative sum %d\n", hsum);
  TC(cudaLaunchCooperativeKernel((const void *)coop_sum, dim3(sms * per_sm * 4 + 1), dim3(128),
                                 cargs, 0, 0));
  cudaLaunchAttribute coop_attr;
  memset(&coop_attr, 0, sizeof coop_attr);
  coop_attr.id = cudaLaunchAttributeCooperative;
  coop_attr.val.cooperative = 1;
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = dim3(sms);
  cfg.blockDim = dim3(128);
  cfg.attrs = &coop_attr;
  cfg.numAttrs = 1;
  CHECK(cudaMemset(iout, 0, sizeof(int)));
  T(cudaLaunchKernelExC(&cfg, (const void *)coop_sum, cargs));
  CHECK(cudaMemcpy(&hsum, iout, sizeof hsum, cudaMemcpyDeviceToHost));
  printf("cooperative (attribute) sum %d\n", hsum);

  /* ---- clusters (sm_90) ---- */
  int hcl[8];
  CHECK(cudaMemset(iout, 0xff, 8 * sizeof(int)));
  cluster_fixed<<<8, 32>>>(iout);
  TC(cudaGetLastError());
  CHECK(cudaMemcpy(hcl, iout, sizeof hcl, cudaMemcpyDeviceToHost));
  printf("cluster_fixed:");
  for (int k = 0; k < 8; k++) printf(" %d", hcl[k]);
  printf("\n");
  cluster_fixed<<<7, 32>>>(iout);
  TC(cudaGetLastError());
  cudaLaunchAttribute cl[3];
  memset(cl, 0, sizeof cl);
  cl[0].id = cudaLaunchAttributeClusterDimension;
  cl[0].val.clusterDim.x = 4;
  cl[0].val.clusterDim.y = 1;
  cl[0].val.clusterDim.z = 1;
  cl[1].id = cudaLaunchAttributePriority;
  cl[1].val.priority = 0;
  cl[2].id = cudaLaunchAttributeIgnore;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = dim3(8);
  cfg.blockDim = dim3(32);
  cfg.stream = st;
  cfg.attrs = cl;
  cfg.numAttrs = 3;
  void *clargs[] = {&iout};
  T(cudaLaunchKernelExC(&cfg, (const void *)cluster_free, clargs));
  T(cudaStreamSynchronize(st));
  CHECK(cudaMemcpy(hcl, iout, sizeof hcl, cudaMemcpyDeviceToHost));
  printf("cluster_free (4):");
  for (int k = 0; k < 8; k++) printf(" %d", hcl[k]);
  printf("\n");
  int csize = 0, nclusters = 0;
  T(cudaOccupancyMaxPotentialClusterSize(&csize, (const void *)cluster_free, &cfg));
  printf("max potential cluster size > 0: %d\n", csize > 0);
  T(cudaOccupancyMaxActiveClusters(&nclusters, (const void *)cluster_free, &cfg));
  printf("max active clusters > 0: %d\n", nclusters > 0);
  cfg.gridDim = dim3(6);
  TC(cudaLaunchKernelExC(&cfg, (const void *)cluster_free, clargs));
  cfg.gridDim = dim3(8);
  cl[0].val.clusterDim.x = 64;
  TC(cudaLaunchKernelExC(&cfg, (const void *)cluster_free, clargs));
  cl[0].val.clusterDim.x = 2;
  cl[1].id = (cudaLaunchAttributeID)99;
  TC(cudaLaunchKernelExC(&cfg, (const void *)cluster_free, clargs));
  cl[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  cl[1].val.programmaticStreamSerializationAllowed = 1;
  T(cudaLaunchKernelExC(&cfg, (const void *)cluster_free, clargs));
  cl[1].id = cudaLaunchAttributeMemSyncDomain;
  cl[1].val.memSyncDomain = cudaLaunchMemSyncDomainRemote;
  T(cudaLaunchKernelExC(&cfg, (const void *)cluster_free, clargs));
  /* NVIDIA's runtime dereferences a NULL config (it crashes). */
  TREFUSE(cudaLaunchKernelExC(NULL, (const void *)cluster_free, clargs));
  TC(cudaLaunchKernelExC(&cfg, (const void *)host_function, clargs));
  T(cudaStreamSynchronize(st));
  CHECK(cudaMemcpy(hcl, iout, sizeof hcl, cudaMemcpyDeviceToHost));
  printf("cluster_free (2):");
  for (int k = 0; k < 8; k++) printf(" %d", hcl[k]);
  printf("\n");

  T(cudaDeviceSynchronize());
  TC(cudaGetLastError());
  CHECK(cudaStreamDestroy(st));
  CHECK(cudaFree(out));
  CHECK(cudaFree(sum));
  CHECK(cudaFree(fv));
  CHECK(cudaFree(iv));
  CHECK(cudaFree(sym_out));
  CHECK(cudaFree(iout));
  CHECK(cudaFree(data));
  printf("done\n");
  return 0;
}
