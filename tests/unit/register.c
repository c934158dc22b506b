/* nvcc's registration ABI and the launch path on a fake driver: the
 * <<<>>> configuration stack, registration bookkeeping (lazy loading, the
 * same stub from several translation units, many fat binaries,
 * unregistration), kernel handles, launch errors and last error, managed
 * variables and symbols. */
#include <criterion/criterion.h>

#include "fake_driver.h"
#include "nvcc_abi.h"
#include "register.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

struct wrapper {
  int magic, version;
  const unsigned long long *data;
  void *extra;
};

/* Two "fat binaries": the fake loader tells them apart by address. */
static const unsigned long long image_a[4] = {1}, image_b[4] = {2};
static struct wrapper wrap_a = {0x466243B1, 1, image_a, NULL};
static struct wrapper wrap_b = {0x466243B1, 1, image_b, NULL};

/* Host stubs are functions in real programs: code, readable for at least
 * 8 bytes (the launch path reads a handle's first word). */
static _Alignas(16) char stub_k1[16], stub_k2[16], stub_tmpl[16], stub_unknown[16];
static int shadow_dev[8];
static int *shadow_managed;

/* ---- the fake driver -------------------------------------------------------- */

struct fake_lib {
  const void *image;
};
static struct fake_lib libs[64];
static int loads, unloads, get_kernels, launches, launch_ex_calls;
static bool launch_needs_ctx;
static CUfunction last_f;
static CUstream last_stream;
static unsigned last_grid[3], last_block[3], last_smem;
static const CUlaunchConfig *last_cfg;
static int managed_value = 42;
static unsigned long long global_mem[8];

/* A kernel handle is "library index * 256 + name hash", never dereferenced. */
static CUresult fake_load(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv,
                          unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl) {
  (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  libs[loads].image = code;
  *lib = (CUlibrary)&libs[loads];
  loads++;
  return CUDA_SUCCESS;
}
static CUresult fake_unload(CUlibrary lib) {
  (void)lib;
  unloads++;
  return CUDA_SUCCESS;
}
static char kernel_space[64 * 256];
static CUresult fake_get_kernel(CUkernel *k, CUlibrary lib, const char *name) {
  get_kernels++;
  if (strcmp(name, "missing") == 0) return CUDA_ERROR_NOT_FOUND;
  size_t li = (size_t)((struct fake_lib *)lib - libs);
  size_t h = 0;
  for (const char *p = name; *p; p++) h = h * 31 + (unsigned char)*p;
  *k = (CUkernel)&kernel_space[li * 256 + h % 256];
  return CUDA_SUCCESS;
}
static CUresult fake_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                            void **extra) {
  (void)params, (void)extra;
  if (launch_needs_ctx && fake_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (smem > 48 * 1024) return CUDA_ERROR_INVALID_VALUE;
  launches++;
  last_f = f;
  last_stream = s;
  last_grid[0] = gx, last_grid[1] = gy, last_grid[2] = gz;
  last_block[0] = bx, last_block[1] = by, last_block[2] = bz;
  last_smem = smem;
  return CUDA_SUCCESS;
}
static CUresult fake_launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params,
                               void **extra) {
  (void)params, (void)extra;
  if (cfg->gridDimX == 0 || cfg->blockDimX == 0) return CUDA_ERROR_INVALID_VALUE;
  launch_ex_calls++;
  last_cfg = cfg;
  last_f = f;
  return CUDA_SUCCESS;
}
/* The driver validates CUkernel handles: only those fake_get_kernel hands
 * out are kernels. */
static int get_libraries;
static CUresult fake_kernel_get_library(CUlibrary *lib, CUkernel k) {
  get_libraries++;
  const char *p = (const char *)k;
  if (p < kernel_space || p >= kernel_space + sizeof kernel_space) return CUDA_ERROR_INVALID_HANDLE;
  *lib = (CUlibrary)&libs[(size_t)(p - kernel_space) / 256];
  return CUDA_SUCCESS;
}
static CUresult fake_kernel_get_function(CUfunction *f, CUkernel k) {
  *f = (CUfunction)k;
  return CUDA_SUCCESS;
}
static CUresult fake_kernel_get_name(const char **name, CUkernel k) {
  (void)k;
  *name = "foreign";
  return CUDA_SUCCESS;
}
static CUresult fake_dev_attr(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 0x7fffffff; break;
  default: *v = 65535; break;
  }
  return CUDA_SUCCESS;
}
static CUresult fake_get_managed(CUdeviceptr *p, size_t *n, CUlibrary lib, const char *name) {
  (void)lib, (void)name;
  *p = (CUdeviceptr)(uintptr_t)&managed_value;
  *n = sizeof managed_value;
  return CUDA_SUCCESS;
}
static CUresult fake_get_global(CUdeviceptr *p, size_t *n, CUlibrary lib, const char *name) {
  (void)lib;
  if (fake_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (strcmp(name, "dev") != 0) return CUDA_ERROR_NOT_FOUND;
  *p = (CUdeviceptr)(uintptr_t)global_mem;
  *n = sizeof global_mem;
  return CUDA_SUCCESS;
}
static size_t copied;
static CUresult fake_htod(CUdeviceptr dst, const void *src, size_t n) {
  memcpy((void *)(uintptr_t)dst, src, n);
  copied += n;
  return CUDA_SUCCESS;
}
static CUresult fake_dtoh(void *dst, CUdeviceptr src, size_t n) {
  memcpy(dst, (const void *)(uintptr_t)src, n);
  copied += n;
  return CUDA_SUCCESS;
}

static int set_attrs;
static CUresult fake_kernel_set_attr(CUfunction_attribute a, int v, CUkernel k, CUdevice d) {
  (void)a, (void)v, (void)k, (void)d;
  set_attrs++;
  return CUDA_SUCCESS;
}

static void setup(void) {
  static struct cudaev_driver t;
  fake_driver_base(&t);
  t.cuLibraryLoadData = fake_load;
  t.cuLibraryUnload = fake_unload;
  t.cuLibraryGetKernel = fake_get_kernel;
  t.cuLaunchKernel = fake_launch;
  t.cuKernelGetLibrary = fake_kernel_get_library;
  t.cuKernelGetFunction = fake_kernel_get_function;
  t.cuKernelGetName = fake_kernel_get_name;
  t.cuLaunchKernelEx = fake_launch_ex;
  t.cuDeviceGetAttribute = fake_dev_attr;
  t.cuLibraryGetManaged = fake_get_managed;
  t.cuLibraryGetGlobal = fake_get_global;
  t.cuMemcpyHtoD = fake_htod;
  t.cuMemcpyDtoH = fake_dtoh;
  t.cuKernelSetAttribute = fake_kernel_set_attr;
  cudaev__driver_install(&t, 13000);
}

static void **register_a(void) {
  void **h = __cudaRegisterFatBinary(&wrap_a);
  __cudaRegisterFunction(h, stub_k1, "k1", "k1", -1, NULL, NULL, NULL, NULL, NULL);
  __cudaRegisterFunction(h, stub_k2, "k2", "k2", -1, NULL, NULL, NULL, NULL, NULL);
  __cudaRegisterFunction(h, stub_tmpl, "tmpl", "tmpl", -1, NULL, NULL, NULL, NULL, NULL);
  __cudaRegisterVar(h, (char *)shadow_dev, "dev", "dev", 0, sizeof shadow_dev, 0, 0);
  __cudaRegisterManagedVar(h, (void **)&shadow_managed, "man", "man", 0, sizeof(int), 0, 0);
  __cudaRegisterFatBinaryEnd(h);
  return h;
}

static const dim3 one = {1, 1, 1};

TestSuite(register_, .init = setup);

/* ---- the configuration stack ------------------------------------------------ */

Test(register_, config_stack_is_lifo_and_per_thread) {
  dim3 g, b;
  size_t sm;
  cudaStream_t s;
  cr_assert_eq(__cudaPushCallConfiguration((dim3){1, 2, 3}, (dim3){4, 5, 6}, 7, (cudaStream_t)0x10),
               0);
  cr_assert_eq(
      __cudaPushCallConfiguration((dim3){8, 1, 1}, (dim3){9, 1, 1}, 10, (cudaStream_t)0x20), 0);
  cr_assert_eq(__cudaPopCallConfiguration(&g, &b, &sm, &s), cudaSuccess);
  cr_expect(g.x == 8 && b.x == 9 && sm == 10 && s == (cudaStream_t)0x20);
  cr_assert_eq(__cudaPopCallConfiguration(&g, &b, &sm, &s), cudaSuccess);
  cr_expect(g.x == 1 && g.y == 2 && g.z == 3 && b.x == 4 && b.y == 5 && b.z == 6);
  cr_expect(sm == 7 && s == (cudaStream_t)0x10);
  cr_expect_eq(cudaGetLastError(), cudaSuccess);
  cr_expect_eq(loads, 0, "the stack needs no driver");
}

Test(register_, pop_of_empty_stack_fails_and_records) {
  dim3 g, b;
  size_t sm;
  cudaStream_t s;
  cr_expect_eq(__cudaPopCallConfiguration(&g, &b, &sm, &s), cudaErrorMissingConfiguration);
  cr_expect_eq(cudaGetLastError(), cudaErrorMissingConfiguration);
}

Test(register_, push_overflow_refuses_the_launch) {
  unsigned r = 0;
  for (int i = 0; i < 100 && r == 0; i++) r = __cudaPushCallConfiguration(one, one, 0, NULL);
  cr_expect_neq(r, 0u);
}

/* ---- registration and lazy loading ------------------------------------------- */

Test(register_, registration_touches_no_driver_and_launch_loads_once) {
  register_a();
  cr_expect_eq(loads, 0);
  cudaKernel_t h = NULL;
  cr_assert_eq(__cudaGetKernel(&h, &stub_k1), cudaSuccess);
  cr_expect_not_null(h);
  cr_expect_eq(loads, 0, "the handle is written without loading");
  cr_assert_eq(__cudaLaunchKernel(h, (dim3){2, 1, 1}, (dim3){32, 1, 1}, NULL, 16, NULL),
               cudaSuccess);
  cr_expect_eq(loads, 1);
  cr_expect_eq(libs[0].image, image_a);
  cr_expect_eq(launches, 1);
  cr_expect(last_grid[0] == 2 && last_block[0] == 32 && last_smem == 16);
  cr_expect_null(last_stream);
  CUfunction first = last_f;
  cr_assert_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, NULL), cudaSuccess);
  cr_expect_eq(loads, 1, "loaded once");
  cr_expect_eq(get_kernels, 1, "resolved once");
  cr_expect_eq(last_f, first);
  cr_assert_eq(cudaLaunchKernel(&stub_k2, one, one, NULL, 0, NULL), cudaSuccess);
  cr_expect_eq(loads, 1, "one library per fat binary");
  cr_expect_neq(last_f, first);
}

Test(register_, ptsz_launch_uses_the_per_thread_stream) {
  register_a();
  cudaKernel_t h;
  cr_assert_eq(__cudaGetKernel(&h, &stub_k1), cudaSuccess);
  cr_assert_eq(__cudaLaunchKernel_ptsz(h, one, one, NULL, 0, NULL), cudaSuccess);
  cr_expect_eq(last_stream, CU_STREAM_PER_THREAD);
  cr_assert_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, (cudaStream_t)0x77000), cudaSuccess);
  cr_expect_eq(last_stream, (CUstream)0x77000);
}

/* A stream no object can be (src/handle.h) never reaches the driver's
 * launch, which would crash on it. */
Test(register_, launch_refuses_a_stream_that_can_be_no_object) {
  register_a();
  cr_assert_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, NULL), cudaSuccess);
  int before = launches;
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, (cudaStream_t)0x1234),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(launches, before, "the driver was not called");
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, NULL), cudaSuccess);
}

Test(register_, launch_makes_a_context_current_when_none_is) {
  register_a();
  launch_needs_ctx = true;
  cr_expect_null(fake_current);
  cr_assert_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, NULL), cudaSuccess);
  cr_expect_not_null(fake_current);
  cr_expect_eq(launches, 1);
}

Test(register_, cuda_get_kernel_gives_a_launchable_cukernel) {
  register_a();
  cudaKernel_t k = NULL;
  cr_assert_eq(cudaGetKernel(&k, &stub_k2), cudaSuccess);
  cr_assert_eq(cudaLaunchKernel((const void *)k, one, one, NULL, 0, NULL), cudaSuccess);
  cr_expect_eq((void *)last_f, (void *)k);
  CUkernel viak;
  cr_expect_eq(cudaev__kernel_lookup(k, &viak), cudaSuccess);
  cr_expect_eq((void *)viak, (void *)k);
}

Test(register_, same_stub_from_two_translation_units) {
  void **a = register_a();
  void **b = __cudaRegisterFatBinary(&wrap_b);
  __cudaRegisterFunction(b, stub_tmpl, "tmpl", "tmpl", -1, NULL, NULL, NULL, NULL, NULL);
  cr_assert_eq(cudaLaunchKernel(&stub_tmpl, one, one, NULL, 0, NULL), cudaSuccess);
  cr_expect_eq(libs[loads - 1].image, image_a, "the first registration is used");
  __cudaUnregisterFatBinary(a);
  cr_expect_eq(unloads, 1);
  cr_assert_eq(cudaLaunchKernel(&stub_tmpl, one, one, NULL, 0, NULL), cudaSuccess,
               "the other translation unit's copy takes over");
  cr_expect_eq(libs[loads - 1].image, image_b);
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, NULL), cudaErrorInvalidResourceHandle,
               "k1 only lived in the unregistered one: now an unknown pointer");
  __cudaUnregisterFatBinary(b);
  cr_expect_eq(cudaLaunchKernel(&stub_tmpl, one, one, NULL, 0, NULL),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

Test(register_, unregister_without_load_calls_no_driver) {
  void **h = register_a();
  __cudaUnregisterFatBinary(h);
  __cudaUnregisterFatBinary(h); /* twice: harmless */
  __cudaUnregisterFatBinary(NULL);
  cr_expect_eq(loads, 0);
  cr_expect_eq(unloads, 0);
}

Test(register_, many_translation_units) {
  enum { FATBINS = 40, PER = 100 };
  static char stubs[FATBINS][PER];
  static char names[FATBINS][PER][16];
  void **h[FATBINS];
  for (int i = 0; i < FATBINS; i++) {
    h[i] = __cudaRegisterFatBinary(&wrap_a);
    for (int j = 0; j < PER; j++) {
      snprintf(names[i][j], sizeof names[i][j], "k_%d_%d", i, j);
      __cudaRegisterFunction(h[i], &stubs[i][j], names[i][j], names[i][j], -1, NULL, NULL, NULL,
                             NULL, NULL);
    }
  }
  for (int i = 0; i < FATBINS; i++)
    for (int j = 0; j < PER; j++) {
      struct cudaev__kfunc *f = cudaev__kfunc_find(&stubs[i][j]);
      cr_assert_not_null(f);
      cr_assert_str_eq(f->name, names[i][j]);
    }
  cr_expect_null(cudaev__kfunc_find(&stub_unknown));
  for (int i = 0; i < FATBINS; i += 2) __cudaUnregisterFatBinary(h[i]);
  for (int i = 0; i < FATBINS; i++)
    cr_expect_eq(cudaev__kfunc_find(&stubs[i][0]) != NULL, i % 2 == 1);
}

/* ---- launch errors ---------------------------------------------------------- */

/* NVIDIA's runtime takes a pointer it does not know for a cudaKernel_t and
 * lets the driver validate it: an unregistered host function is an invalid
 * resource handle, NULL an invalid device function. */
Test(register_, unknown_function_is_invalid_resource_handle) {
  register_a();
  cr_expect_eq(cudaLaunchKernel(&stub_unknown, one, one, NULL, 0, NULL),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_gt(get_libraries, 0, "the driver was asked to validate it");
  cr_expect_eq(cudaLaunchCooperativeKernel(&stub_unknown, one, one, NULL, 0, NULL),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaLaunchKernel(NULL, one, one, NULL, 0, NULL), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cudaKernel_t h = (cudaKernel_t)0x1;
  cr_expect_eq(__cudaGetKernel(&h, &stub_unknown), cudaErrorInvalidDeviceFunction);
  cr_expect_eq((void *)h, (void *)&stub_unknown, "the handle is written before failing");
  cr_expect_eq(__cudaLaunchKernel(h, one, one, NULL, 0, NULL), cudaErrorInvalidResourceHandle);
  cr_expect_eq(__cudaGetKernel(NULL, &stub_k1), cudaErrorInvalidValue);
  /* The other calls that take a function or a kernel follow the same rule. */
  struct cudaFuncAttributes fa;
  const char *name = NULL;
  size_t off, sz;
  int blocks;
  cr_expect_eq(cudaFuncGetAttributes(&fa, &stub_unknown), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaFuncGetName(&name, &stub_unknown), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaFuncGetParamInfo(&stub_unknown, 0, &off, &sz), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaFuncSetCacheConfig(&stub_unknown, cudaFuncCachePreferL1),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &stub_unknown, 128, 0),
               cudaErrorInvalidResourceHandle);
  cudaLaunchConfig_t cfg = {.gridDim = {1, 1, 1}, .blockDim = {1, 1, 1}};
  cr_expect_eq(cudaLaunchKernelExC(&cfg, &stub_unknown, NULL), cudaErrorInvalidResourceHandle);
  /* ... except those that take an entry address only. */
  cudaKernel_t kern;
  cudaFunction_t fn;
  cr_expect_eq(cudaGetKernel(&kern, &stub_unknown), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGetFuncBySymbol(&fn, &stub_unknown), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(launches, 0);
}

/* A CUkernel of a library loaded through the driver API, which the runtime
 * never saw: the driver knows it, so it launches. */
Test(register_, foreign_cukernel_launches) {
  register_a();
  const void *foreign = &kernel_space[3 * 256 + 17];
  cr_assert_eq(cudaLaunchKernel(foreign, one, one, NULL, 0, NULL), cudaSuccess);
  cr_expect_eq((const void *)last_f, foreign);
  const char *name = NULL;
  cr_expect_eq(cudaFuncGetName(&name, foreign), cudaSuccess);
  cr_expect_str_eq(name, "foreign");
  CUkernel k;
  cr_expect_eq(cudaev__kernel_lookup(foreign, &k), cudaSuccess);
  cr_expect_eq((const void *)k, foreign);
  cr_expect_eq(cudaev__kernel_lookup_registered(foreign, &k), cudaErrorInvalidDeviceFunction);
}

/* A kernel of an unloaded library: NVIDIA's runtime answers a settable
 * attribute with success, its driver reading the freed kernel to do so;
 * ours answers the same without handing the handle to the driver. The
 * driver may hand the address out again for a new library's kernel. */
Test(register_, unloaded_library_kernel_takes_an_attribute_without_the_driver) {
  cudaLibrary_t lib;
  cudaKernel_t k;
  int at = loads;
  cr_assert_eq(cudaLibraryLoadData(&lib, "code", NULL, NULL, 0, NULL, NULL, 0), cudaSuccess);
  cr_assert_eq(cudaLibraryGetKernel(&k, lib, "k"), cudaSuccess);
  cr_expect_eq(
      cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 0, 0),
      cudaSuccess);
  cr_expect_eq(set_attrs, 1);
  cr_assert_eq(cudaLibraryUnload(lib), cudaSuccess);
  cr_expect_eq(
      cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 0, 0),
      cudaSuccess);
  cr_expect_eq(cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMax, 0, 0),
               cudaErrorInvalidValue);
  cr_expect_eq(
      cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 0, 7),
      cudaErrorInvalidDevice);
  cr_expect_eq(set_attrs, 1, "the driver saw the unloaded kernel");
  cr_expect_eq(cudaLibraryUnload(lib), cudaErrorInvalidResourceHandle);
  /* The same library slot again: the same kernel address, live. */
  loads = at;
  cudaLibrary_t again;
  cudaKernel_t k2;
  cr_assert_eq(cudaLibraryLoadData(&again, "code", NULL, NULL, 0, NULL, NULL, 0), cudaSuccess);
  cr_assert_eq(cudaLibraryGetKernel(&k2, again, "k"), cudaSuccess);
  cr_assert_eq(k2, k);
  cr_expect_eq(
      cudaKernelSetAttributeForDevice(k2, cudaFuncAttributeMaxDynamicSharedMemorySize, 0, 0),
      cudaSuccess);
  cr_expect_eq(set_attrs, 2);
  cr_expect_eq(cudaLibraryUnload(again), cudaSuccess);
}

/* With every pointer NULL, NVIDIA's runtime answers the function first;
 * an unregistered function with a NULL output is still an invalid value,
 * and the occupancy flags still come before the function's lookup. */
Test(register_, null_function_answers_before_null_output) {
  register_a();
  int gets = get_libraries;
  cr_expect_eq(cudaFuncGetParamInfo(NULL, 0, NULL, NULL), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaFuncGetParamInfo(&stub_unknown, 0, NULL, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaOccupancyMaxActiveBlocksPerMultiprocessor(NULL, NULL, 128, 0),
               cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(NULL, NULL, 128, 0, 0x100),
               cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(NULL, &stub_unknown, 128, 0,
                                                                      cudaOccupancyDefault),
               cudaErrorInvalidValue);
  int blocks;
  cr_expect_eq(
      cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, &stub_unknown, 128, 0, 0x100),
      cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(get_libraries, gets, "the driver was asked about a function");
}

/* cudaKernelSetAttributeForDevice judges the attribute before the device
 * (NVIDIA's answer when both are bad is the attribute's), and before the
 * kernel. */
Test(register_, kernel_attribute_judged_before_device) {
  cudaLibrary_t lib;
  cudaKernel_t k;
  cr_assert_eq(cudaLibraryLoadData(&lib, "code", NULL, NULL, 0, NULL, NULL, 0), cudaSuccess);
  cr_assert_eq(cudaLibraryGetKernel(&k, lib, "k"), cudaSuccess);
  cr_expect_eq(cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMax, 0, 7),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaKernelSetAttributeForDevice(k, (enum cudaFuncAttribute)(-1), 0, -1),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaKernelSetAttributeForDevice(NULL, cudaFuncAttributeMax, 0, 7),
               cudaErrorInvalidValue);
  /* One bad at a time, as before. */
  cr_expect_eq(
      cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 0, 7),
      cudaErrorInvalidDevice);
  cr_expect_eq(
      cudaKernelSetAttributeForDevice(NULL, cudaFuncAttributeMaxDynamicSharedMemorySize, 0, 0),
      cudaErrorInvalidResourceHandle);
  cr_expect_eq(set_attrs, 0, "the driver saw a refused call");
  cr_expect_eq(cudaLibraryUnload(lib), cudaSuccess);
}

/* cudaLibraryLoadFromFile: NVIDIA's runtime opens the file before it
 * judges the options, so a file that cannot be read answers as it does
 * with good options (here the fake driver's file-not-found). */
static int file_loads;
static unsigned file_nj, file_nl;
static bool file_any; /* load whatever is named, as if it appeared meanwhile */
static CUresult fake_load_file(CUlibrary *lib, const char *name, CUjit_option *jo, void **jv,
                               unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl) {
  file_loads++;
  file_nj = nj;
  file_nl = nl;
  if (!file_any && access(name, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
  if ((nj > 0 && (jo == NULL || jv == NULL)) || (nl > 0 && (lo == NULL || lv == NULL)))
    return CUDA_ERROR_INVALID_VALUE;
  return fake_load(lib, name, jo, jv, nj, lo, lv, nl);
}

Test(register_, library_file_read_before_options) {
  cudaev__drv.cuLibraryLoadFromFile = fake_load_file;
  const char *missing = "/nonexistent/cudaev-library.fatbin";
  cudaLibrary_t lib = NULL;
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, missing, NULL, NULL, 0, NULL, NULL, 0),
               cudaErrorFileNotFound);
  /* Option counts with no lists, or too many options: the file first, and
   * the driver is asked about it with no options. */
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, missing, NULL, NULL, 0, NULL, NULL, 1),
               cudaErrorFileNotFound);
  cr_expect_eq(cudaGetLastError(), cudaErrorFileNotFound);
  cr_expect_eq(file_nl, 0);
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, missing, NULL, NULL, 3, NULL, NULL, 0),
               cudaErrorFileNotFound);
  cr_expect_eq(file_nj, 0);
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, missing, NULL, NULL, 0, NULL, NULL, 0xffffffffu),
               cudaErrorFileNotFound);
  cr_expect_eq(file_nl, 0);
  cr_expect_eq(file_loads, 4);
  /* A readable file: the options are judged, too many before the driver. */
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, "/dev/null", NULL, NULL, 0, NULL, NULL, 0xffffffffu),
               cudaErrorInvalidValue);
  cr_expect_eq(file_loads, 4);
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, "/dev/null", NULL, NULL, 0, NULL, NULL, 1),
               cudaErrorInvalidValue);
  cr_expect_eq(file_loads, 5);
  cr_expect_eq(file_nl, 1);
  /* The arguments the runtime judges itself still come first. */
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0xffffffffu),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaLibraryLoadFromFile(NULL, missing, NULL, NULL, 0, NULL, NULL, 1),
               cudaErrorInvalidValue);
  cr_expect_eq(file_loads, 5);
  /* A file that became readable between the two looks: the library the
   * driver loaded without options is unloaded, and the options judged. */
  file_any = true;
  int unloaded = unloads;
  cr_expect_eq(cudaLibraryLoadFromFile(&lib, missing, NULL, NULL, 0, NULL, NULL, 0xffffffffu),
               cudaErrorInvalidValue);
  cr_expect_eq(unloads, unloaded + 1);
  cr_expect_eq(lib, NULL, "the output was written");
}

Test(register_, missing_device_function_is_invalid_device_function) {
  void **h = __cudaRegisterFatBinary(&wrap_a);
  __cudaRegisterFunction(h, stub_k1, "missing", "missing", -1, NULL, NULL, NULL, NULL, NULL);
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 0, NULL), cudaErrorInvalidDeviceFunction);
}

/* NVIDIA's runtime (CUDA 13) leaves the dimensions to the driver: every
 * bad configuration is cudaErrorInvalidValue, and an unknown function's
 * error comes first. */
Test(register_, bad_configuration_is_invalid_value) {
  register_a();
  cr_expect_eq(cudaLaunchKernel(&stub_k1, (dim3){0, 1, 1}, one, NULL, 0, NULL),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, (dim3){1, 1, 0}, NULL, 0, NULL),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, (dim3){2048, 1, 1}, NULL, 0, NULL),
               cudaErrorInvalidValue, "block over the device's limit");
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, 64 * 1024, NULL), cudaErrorInvalidValue,
               "too much shared memory");
  cr_expect_eq(cudaLaunchKernel(&stub_k1, one, one, NULL, (size_t)1 << 33, NULL),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaLaunchKernel(&stub_unknown, (dim3){0, 1, 1}, one, NULL, 0, NULL),
               cudaErrorInvalidResourceHandle, "the function is checked first");
  cr_expect_eq(cudaLaunchKernel(NULL, one, one, NULL, (size_t)1 << 33, NULL),
               cudaErrorInvalidDeviceFunction);
  cudaKernel_t h;
  cr_assert_eq(__cudaGetKernel(&h, &stub_k2), cudaSuccess);
  cr_expect_eq(__cudaLaunchKernel(h, (dim3){1, 0, 1}, one, NULL, 0, NULL), cudaErrorInvalidValue,
               "first launch (kernel not loaded yet)");
  cr_expect_eq(__cudaLaunchKernel(h, one, (dim3){1, 1, 0}, NULL, 0, NULL), cudaErrorInvalidValue,
               "fast path");
  cr_expect_eq(__cudaLaunchKernel(h, one, one, NULL, (size_t)1 << 33, NULL), cudaErrorInvalidValue,
               "fast path, shared memory over 32 bits");
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(launches, 0);
}

Test(register_, launch_ex_passes_attributes_through) {
  register_a();
  cudaLaunchAttribute attr[2];
  memset(attr, 0, sizeof attr);
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributePriority;
  attr[1].val.priority = -1;
  cudaLaunchConfig_t cfg = {.gridDim = {4, 1, 1},
                            .blockDim = {64, 1, 1},
                            .dynamicSmemBytes = 8,
                            .stream = NULL,
                            .attrs = attr,
                            .numAttrs = 2};
  cr_assert_eq(cudaLaunchKernelExC(&cfg, &stub_k1, NULL), cudaSuccess);
  cr_expect_eq(launch_ex_calls, 1);
  cr_expect_eq(cudaLaunchKernelExC(NULL, &stub_k1, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaLaunchKernelExC(&cfg, &stub_unknown, NULL), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaLaunchKernelExC(&cfg, NULL, NULL), cudaErrorInvalidDeviceFunction);
  cfg.gridDim.x = 0;
  cr_expect_eq(cudaLaunchKernelExC(&cfg, &stub_k1, NULL), cudaErrorInvalidValue);
}

/* ---- variables -------------------------------------------------------------- */

Test(register_, init_module_writes_the_managed_shadow) {
  void **h = register_a();
  cr_expect_null(shadow_managed);
  cr_assert_eq(__cudaInitModule(h), 1);
  cr_assert_eq(shadow_managed, &managed_value);
  void *p = NULL;
  cr_expect_eq(cudaGetSymbolAddress(&p, shadow_managed), cudaSuccess,
               "host code names a managed variable by its managed address");
  cr_expect_eq(p, &managed_value);
}

Test(register_, symbols) {
  register_a();
  void *p = NULL;
  size_t n = 0;
  cr_assert_eq(cudaGetSymbolAddress(&p, shadow_dev), cudaSuccess);
  cr_expect_eq(p, global_mem);
  cr_assert_eq(cudaGetSymbolSize(&n, shadow_dev), cudaSuccess);
  cr_expect_eq(n, sizeof global_mem);
  cr_expect_eq(cudaGetSymbolAddress(&p, &stub_unknown), cudaErrorInvalidSymbol);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidSymbol);
  unsigned long long v[2] = {5, 6}, back[2] = {0, 0};
  cr_assert_eq(cudaMemcpyToSymbol(shadow_dev, v, sizeof v, 8, cudaMemcpyHostToDevice), cudaSuccess);
  cr_expect(global_mem[1] == 5 && global_mem[2] == 6);
  cr_assert_eq(cudaMemcpyFromSymbol(back, shadow_dev, sizeof back, 8, cudaMemcpyDeviceToHost),
               cudaSuccess);
  cr_expect(back[0] == 5 && back[1] == 6);
  cr_expect_eq(cudaMemcpyToSymbol(shadow_dev, v, sizeof v, 60, cudaMemcpyHostToDevice),
               cudaErrorInvalidValue, "past the end");
  cr_expect_eq(cudaMemcpyToSymbol(shadow_dev, v, sizeof v, 0, cudaMemcpyDeviceToHost),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpyFromSymbol(back, shadow_dev, sizeof back, 0, cudaMemcpyHostToDevice),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(copied, 2 * sizeof v);
}

/* ---- concurrency ------------------------------------------------------------- */

/* Lookups take no lock: readers probing while a writer registers (and the
 * map grows) and unregisters must always find the stubs registered before
 * they started. */
enum { CONC_FATBINS = 20, CONC_PER = 200 };
static char conc_stubs[CONC_FATBINS][CONC_PER];
static char conc_names[CONC_FATBINS][CONC_PER][16];
static atomic_bool conc_done;
static atomic_int conc_misses;

static void *conc_reader(void *arg) {
  (void)arg;
  while (!atomic_load(&conc_done)) {
    if (cudaev__kfunc_find(&stub_k1) == NULL) atomic_fetch_add(&conc_misses, 1);
    struct cudaev__kfunc *f = cudaev__kfunc_find(&stub_k2);
    if (f == NULL || f->magic != CUDAEV_KFUNC_MAGIC) atomic_fetch_add(&conc_misses, 1);
  }
  return NULL;
}

Test(register_, lookups_race_registration) {
  register_a();
  pthread_t r[3];
  for (int i = 0; i < 3; i++) pthread_create(&r[i], NULL, conc_reader, NULL);
  void *h[CONC_FATBINS];
  for (int i = 0; i < CONC_FATBINS; i++) {
    h[i] = __cudaRegisterFatBinary(&wrap_b);
    for (int j = 0; j < CONC_PER; j++) {
      snprintf(conc_names[i][j], sizeof conc_names[i][j], "c_%d_%d", i, j);
      __cudaRegisterFunction(h[i], &conc_stubs[i][j], conc_names[i][j], conc_names[i][j], -1, NULL,
                             NULL, NULL, NULL, NULL);
    }
  }
  for (int i = 0; i < CONC_FATBINS; i++) __cudaUnregisterFatBinary(h[i]);
  atomic_store(&conc_done, true);
  for (int i = 0; i < 3; i++) pthread_join(r[i], NULL);
  cr_expect_eq(atomic_load(&conc_misses), 0);
  cr_expect_null(cudaev__kfunc_find(&conc_stubs[3][7]));
}
