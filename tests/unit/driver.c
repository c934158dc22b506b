/* The driver loader and the context rules, on CPU: without a driver, with
 * the toolkit's stub libcuda, and with a fake driver table. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "fake_driver.h"

static bool have_real_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL) h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == NULL) return false;
  /* The toolkit's stub has this SONAME too; it is not a driver. */
  void *fn = dlsym(h, "cuInit");
  bool real = fn != NULL && ((CUresult(*)(unsigned))fn)(0) != CUDA_ERROR_STUB_LIBRARY;
  return real;
}

Test(driver, no_libcuda_is_insufficient_driver) {
  if (have_real_driver()) cr_skip_test("a CUDA driver is installed here");
  void *stub = dlopen("libcuda.so.1", RTLD_NOW);
  if (stub != NULL) cr_skip_test("a libcuda.so.1 is on the search path");
  cr_expect_eq(cudaev__driver_load(), CUDAEV__DRIVER_NOT_FOUND);
  int n = -1, v = -1;
  cr_expect_eq(cudaGetDeviceCount(&n), cudaErrorInsufficientDriver);
  cr_expect_eq(n, -1);
  cr_expect_eq(cudaDriverGetVersion(&v), cudaSuccess);
  cr_expect_eq(v, 0);
  cr_expect_eq(cudaSetDevice(0), cudaErrorInsufficientDriver);
  cr_expect_eq(cudaGetLastError(), cudaErrorInsufficientDriver);
  cr_expect_eq(cudaGetLastError(), cudaErrorInsufficientDriver);
}

Test(driver, stub_library_is_reported) {
  const char *tk = getenv("CUDAEV_TOOLKIT");
  char path[4096];
  snprintf(path, sizeof path, "%s/lib64/stubs/libcuda.so", tk ? tk : "/usr/local/cuda");
  if (have_real_driver()) cr_skip_test("a CUDA driver is installed here");
  /* Loaded first by path: the runtime's dlopen("libcuda.so.1") then finds
   * it by its SONAME, as if the stub were on the search path. */
  void *stub = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  cr_assert_not_null(stub, "%s: %s", path, dlerror());
  int n = -1;
  cr_expect_eq(cudaGetDeviceCount(&n), cudaErrorStubLibrary);
  cr_expect_eq(cudaev__driver_load(), CUDAEV__DRIVER_INIT_FAILED);
  cr_expect_eq(cudaev__driver_error(), CUDA_ERROR_STUB_LIBRARY);
  cr_expect_eq(cudaGetLastError(), cudaErrorStubLibrary);
  int v = -1;
  cr_expect_eq(cudaDriverGetVersion(&v), cudaSuccess);
  cr_expect_eq(v, 0);
}

static struct cudaev_driver fake;

Test(driver, missing_entry_points_return_not_supported) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  cr_assert_eq(cudaev__driver_load(), CUDAEV__DRIVER_OK);
  cr_assert_not_null(cudaev__drv.cuMemAlloc);
  CUdeviceptr p;
  cr_expect_eq(cudaev__drv.cuMemAlloc(&p, 16), CUDA_ERROR_NOT_SUPPORTED);
  cr_expect_eq(cudaev__driver_version(), 13000);
}

Test(driver, table_has_per_thread_variants) {
  /* The _ptsz/_ptds members exist beside the legacy ones. */
  cr_expect(offsetof(struct cudaev_driver, cuMemcpyAsync_ptsz) !=
            offsetof(struct cudaev_driver, cuMemcpyAsync));
  cr_expect(offsetof(struct cudaev_driver, cuMemcpy_ptds) !=
            offsetof(struct cudaev_driver, cuMemcpy));
}

Test(context, lazy_init_retains_primary_once_and_makes_it_current) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  int n;
  cr_assert_eq(cudaGetDeviceCount(&n), cudaSuccess);
  cr_expect_eq(fake_retains, 0, "counting devices must not create a context");
  cr_expect_null(fake_current);
  cr_expect_eq(cudaev__ctx(), cudaSuccess);
  cr_expect_eq(fake_retains, 1);
  cr_expect_eq(fake_current, (CUcontext)(uintptr_t)0x1000);
  fake_current = NULL;
  cr_expect_eq(cudaev__ctx(), cudaSuccess);
  cr_expect_eq(fake_retains, 1, "the primary context is retained once per process");
}

Test(context, a_current_context_is_used_as_it_is) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  fake_current = (CUcontext)(uintptr_t)0x2000;
  cr_expect_eq(cudaev__ctx(), cudaSuccess);
  cr_expect_eq(fake_current, (CUcontext)(uintptr_t)0x2000);
  cr_expect_eq(fake_retains, 0);
}

Test(context, set_device_initialises_and_checks_ordinals) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  cr_expect_eq(cudaSetDevice(1), cudaErrorInvalidDevice);
  cr_expect_eq(cudaSetDevice(-1), cudaErrorInvalidDevice);
  cr_expect_eq(fake_retains, 0);
  cr_expect_eq(cudaSetDevice(0), cudaSuccess);
  cr_expect_eq(fake_retains, 1);
  cr_expect_eq(fake_current, (CUcontext)(uintptr_t)0x1000);
  int d = -1;
  cr_expect_eq(cudaGetDevice(&d), cudaSuccess);
  cr_expect_eq(d, 0);
}

static int resets;
static CUresult fake_reset(CUdevice d) {
  (void)d;
  resets++;
  return CUDA_SUCCESS;
}

Test(context, reset_gives_the_primary_context_back) {
  fake_driver_base(&fake);
  fake.cuDevicePrimaryCtxReset = fake_reset;
  cudaev__driver_install(&fake, 13000);
  cr_assert_eq(cudaSetDevice(0), cudaSuccess);
  cr_expect_eq(cudaDeviceReset(), cudaSuccess);
  cr_expect_eq(resets, 1);
  cr_expect_eq(fake_retains, 0);
  /* As with NVIDIA's runtime, the reset primary context stays current... */
  cr_expect_eq(fake_current, (CUcontext)(uintptr_t)0x1000);
  /* ...and the next call that needs a context initialises it again. */
  cr_expect_eq(cudaev__ctx(), cudaSuccess);
  cr_expect_eq(fake_retains, 1);
  cr_expect_eq(cudaev__ctx(), cudaSuccess);
  cr_expect_eq(fake_retains, 1, "once");
}

/* After a sticky fault the real driver refuses the device's next primary
 * context with the fault's code, reset or not; NVIDIA's runtime then
 * answers cudaErrorDevicesUnavailable to every call, asking again each time
 * (tests/gpu/fault_reset.cu). */
static int refuse_retain, refused;
static CUresult (*retain_ok)(CUcontext *, CUdevice);
static CUresult retain_after_fault(CUcontext *c, CUdevice d) {
  if (!refuse_retain) return retain_ok(c, d);
  refused++;
  return CUDA_ERROR_ILLEGAL_ADDRESS;
}

Test(context, a_device_that_refuses_a_new_context_is_unavailable) {
  fake_driver_base(&fake);
  fake.cuDevicePrimaryCtxReset = fake_reset;
  retain_ok = fake.cuDevicePrimaryCtxRetain;
  fake.cuDevicePrimaryCtxRetain = retain_after_fault;
  cudaev__driver_install(&fake, 13000);
  cr_assert_eq(cudaSetDevice(0), cudaSuccess);
  cr_expect_eq(cudaDeviceReset(), cudaSuccess);
  refuse_retain = 1;
  cr_expect_eq(cudaev__ctx(), cudaErrorDevicesUnavailable);
  cr_expect_eq(cudaev__ctx(), cudaErrorDevicesUnavailable, "every call asks again");
  cr_expect_eq(refused, 2);
  refuse_retain = 0;
  cr_expect_eq(cudaev__ctx(), cudaSuccess, "a device that takes contexts again serves");
  cr_expect_eq(cudaev__ctx(), cudaSuccess);
  cr_expect_eq(refused, 2);
}

Test(device, flags_are_checked_before_the_driver) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  cr_expect_eq(cudaSetDeviceFlags(0x100), cudaErrorInvalidValue);
  cr_expect_eq(cudaSetDeviceFlags(cudaDeviceScheduleSpin | cudaDeviceScheduleYield),
               cudaErrorInvalidValue);
  /* cudaInitDevice ignores device flags cudaSetDeviceFlags refuses, as
   * NVIDIA's does (measured on an H100) */
  cr_expect_eq(cudaInitDevice(0, 0x100, 0), cudaSuccess);
  cr_expect_eq(cudaInitDevice(3, 0, 0), cudaErrorInvalidDevice);
}

Test(device, set_valid_devices_checks_ordinals_and_length) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  int ok[] = {0}, dup[] = {0, 0}, bad[] = {1};
  cr_expect_eq(cudaSetValidDevices(ok, 1), cudaSuccess);
  cr_expect_eq(cudaSetValidDevices(bad, 1), cudaErrorInvalidDevice);
  /* Longer than the one device: refused before the entries are read. */
  cr_expect_eq(cudaSetValidDevices(dup, 2), cudaErrorInvalidValue);
  cr_expect_eq(cudaSetValidDevices(ok, INT_MAX), cudaErrorInvalidValue);
  cr_expect_eq(cudaSetValidDevices(NULL, 1), cudaErrorInvalidValue);
  cr_expect_eq(cudaSetValidDevices(NULL, 0), cudaSuccess);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

static CUresult two_devices(int *n) {
  *n = 2;
  return CUDA_SUCCESS;
}

/* With two devices a device listed twice is accepted, as NVIDIA's does on
 * two H200s; three entries are one too many. */
Test(device, set_valid_devices_takes_a_repeated_device) {
  fake_driver_base(&fake);
  fake.cuDeviceGetCount = two_devices;
  cudaev__driver_install(&fake, 13000);
  int dup[] = {0, 0}, both[] = {1, 0}, three[] = {0, 1, 0}, bad[] = {0, 2};
  cr_expect_eq(cudaSetValidDevices(dup, 2), cudaSuccess);
  cr_expect_eq(cudaSetValidDevices(both, 2), cudaSuccess);
  cr_expect_eq(cudaSetValidDevices(three, 3), cudaErrorInvalidValue);
  cr_expect_eq(cudaSetValidDevices(bad, 2), cudaErrorInvalidDevice);
}

/* A primary context that faulted and was reset: the driver keeps its
 * handle current, but the context answers nothing (not even
 * cuCtxGetDevice) until it is retained again. */
static int faulted, alive = 1, unavailable, retain_calls;
/* What any call in the context answers. */
static CUresult dead_state(void) {
  if (!alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  return faulted ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}
static CUresult dead_get_device(CUdevice *d, CUcontext c) {
  (void)c;
  CUresult r = dead_state();
  if (r == CUDA_SUCCESS) *d = 0;
  return r;
}
static CUresult dead_reset(CUdevice d) {
  (void)d;
  faulted = 0;
  alive = 0;
  return CUDA_SUCCESS;
}
static CUresult dead_retain(CUcontext *c, CUdevice d) {
  retain_calls++;
  if (unavailable) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  alive = 1;
  return fake_primary_retain(c, d);
}
static CUresult dead_alloc(CUdeviceptr *p, size_t n) {
  (void)n;
  CUresult r = dead_state();
  if (r == CUDA_SUCCESS) *p = 0x100000;
  return r;
}
static CUresult dead_free(CUdeviceptr p) {
  (void)p;
  return CUDA_SUCCESS;
}

static void install_dead(void) {
  fake_driver_base(&fake);
  fake.cuCtxGetDevice = dead_get_device;
  fake.cuDevicePrimaryCtxReset = dead_reset;
  fake.cuDevicePrimaryCtxRetain = dead_retain;
  fake.cuMemAlloc = dead_alloc;
  fake.cuMemFree = dead_free;
  cudaev__driver_install(&fake, 13000);
}

Test(context, reset_after_a_fault_retains_the_primary_context_again) {
  install_dead();
  cr_assert_eq(cudaSetDevice(0), cudaSuccess);
  void *p = NULL;
  faulted = 1;
  cr_expect_eq(cudaMalloc(&p, 16), cudaErrorIllegalAddress);
  cr_expect_eq(cudaDeviceReset(), cudaSuccess);
  cr_expect_eq(fake_current, (CUcontext)(uintptr_t)0x1000, "still current after the reset");
  /* The next call re-initialises the primary context instead of using the
   * dead one as it is (which would answer "context is destroyed"). */
  cr_expect_eq(cudaMalloc(&p, 16), cudaSuccess);
  cr_expect_eq(fake_retains, 1);
  cr_expect_eq(cudaFree(p), cudaSuccess);
  cr_expect_eq(cudaGetLastError(), cudaErrorIllegalAddress, "the fault, from before the reset");
}

Test(context, a_device_that_stays_unavailable_answers_every_call) {
  install_dead();
  cr_assert_eq(cudaSetDevice(0), cudaSuccess);
  void *p = NULL;
  faulted = 1;
  cr_expect_eq(cudaMalloc(&p, 16), cudaErrorIllegalAddress);
  cr_expect_eq(cudaDeviceReset(), cudaSuccess);
  unavailable = 1;
  int before = retain_calls;
  /* The driver's own answer to the re-initialisation, on every call. */
  cr_expect_eq(cudaMalloc(&p, 16), cudaErrorDevicesUnavailable);
  cr_expect_eq(cudaMalloc(&p, 16), cudaErrorDevicesUnavailable);
  cr_expect_eq(retain_calls, before + 2);
  cr_expect_eq(cudaGetLastError(), cudaErrorDevicesUnavailable);
  unavailable = 0;
  cr_expect_eq(cudaMalloc(&p, 16), cudaSuccess, "and once it is back, the device works");
  cr_expect_eq(cudaFree(p), cudaSuccess);
}
