/* Library management: a PTX image loaded with cudaLibraryLoadData, its
 * kernels found by name and by enumeration and launched through
 * cudaLaunchKernel (a cudaKernel_t cast to void*), its globals read, and
 * bad input. */
#include "common.h"

static const char ptx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .global .align 4 .u32 lib_value = 7;\n"
    ".visible .entry lib_store(.param .u64 p, .param .u32 v)\n"
    "{\n"
    "  .reg .b64 %rd<3>;\n"
    "  .reg .b32 %r<3>;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u32 %r1, [v];\n"
    "  ld.global.u32 %r2, [lib_value];\n"
    "  add.u32 %r1, %r1, %r2;\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  st.global.u32 [%rd2], %r1;\n"
    "  ret;\n"
    "}\n"
    ".visible .entry lib_empty()\n"
    "{\n"
    "  ret;\n"
    "}\n";

int main() {
  cudaLibrary_t lib = NULL;
  T(cudaLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
  unsigned count = 0;
  T(cudaLibraryGetKernelCount(&count, lib));
  printf("kernels %u\n", count);
  cudaKernel_t ks[4] = {NULL, NULL, NULL, NULL};
  T(cudaLibraryEnumerateKernels(ks, count < 4 ? count : 4, lib));
  cudaKernel_t store = NULL;
  T(cudaLibraryGetKernel(&store, lib, "lib_store"));
  int found = 0;
  for (unsigned k = 0; k < count && k < 4; k++) found += ks[k] == store;
  printf("enumerated lib_store %d\n", found);
  TC(cudaLibraryGetKernel(&store, lib, "no_such_kernel"));
  T(cudaLibraryGetKernel(&store, lib, "lib_store"));

  unsigned *d = NULL;
  CHECK(cudaMalloc(&d, sizeof *d));
  unsigned v = 35;
  void *args[] = {&d, &v};
  T(cudaLaunchKernel((const void *)store, dim3(1), dim3(1), args, 0, 0));
  unsigned h = 0;
  CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  printf("lib_store wrote %u\n", h);

  const char *name = NULL;
  T(cudaFuncGetName(&name, (const void *)store));
  printf("name %s\n", name ? name : "(null)");
  size_t off = 0, sz = 0;
  T(cudaFuncGetParamInfo((const void *)store, 1, &off, &sz));
  printf("param 1 offset %zu size %zu\n", off, sz);
  cudaFuncAttributes fa;
  T(cudaFuncGetAttributes(&fa, (const void *)store));
  printf("ptxVersion %d\n", fa.ptxVersion);

  void *g = NULL;
  size_t gsize = 0;
  T(cudaLibraryGetGlobal(&g, &gsize, lib, "lib_value"));
  printf("lib_value size %zu\n", gsize);
  unsigned nine = 9;
  CHECK(cudaMemcpy(g, &nine, sizeof nine, cudaMemcpyHostToDevice));
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(1);
  T(cudaLaunchKernelExC(&cfg, (const void *)store, args));
  CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  printf("lib_store wrote %u after the global changed\n", h);
  TC(cudaLibraryGetGlobal(&g, &gsize, lib, "no_such_global"));
  void *m = NULL;
  TC(cudaLibraryGetManaged(&m, &gsize, lib, "lib_value"));
  void *fp = NULL;
  TC(cudaLibraryGetUnifiedFunction(&fp, lib, "no_such_function"));

  TC(cudaLibraryLoadData(NULL, ptx, NULL, NULL, 0, NULL, NULL, 0));
  TC(cudaLibraryLoadData(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0));
  cudaLibrary_t bad = NULL;
  TC(cudaLibraryLoadData(&bad, "this is not an image", NULL, NULL, 0, NULL, NULL, 0));
  TC(cudaLibraryLoadFromFile(&bad, "/nonexistent/image.cubin", NULL, NULL, 0, NULL, NULL, 0));
  TC(cudaLibraryGetKernelCount(NULL, lib));

  T(cudaDeviceSynchronize());
  T(cudaLibraryUnload(lib));
  CHECK(cudaFree(d));
  printf("done\n");
  return 0;
}
