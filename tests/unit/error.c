/* Error handling: the CUresult mapping, last-error and sticky-init rules.
 * (NVIDIA's exact names and strings are compared in diff.c.) */
#include <criterion/criterion.h>

#include "fake_driver.h"
#include "error_table.h"

static struct cudaev_driver fake;

Test(error, every_runtime_code_has_a_name_and_text) {
#define CHECK_ONE(code, name, text)                             \
  cr_expect_str_eq(cudaGetErrorName((cudaError_t)code), #name); \
  cr_expect_str_eq(cudaGetErrorString((cudaError_t)code), text);
  CUDAEV_ERROR_TABLE(CHECK_ONE)
#undef CHECK_ONE
}

static bool in_table(int c) {
  switch (c) {
#define CASE(code, name, text) case code:
    CUDAEV_ERROR_TABLE(CASE)
#undef CASE
    return true;
  default: return false;
  }
}

Test(error, unknown_codes_are_unrecognized) {
  int unknown = 0;
  for (int c = -3; c <= 1100; c++) {
    if (in_table(c)) continue;
    unknown++;
    cr_expect_str_eq(cudaGetErrorName((cudaError_t)c), "unrecognized error code", "%d", c);
    cr_expect_str_eq(cudaGetErrorString((cudaError_t)c), "unrecognized error code", "%d", c);
  }
  cr_expect_gt(unknown, 900);
}

Test(error, driver_codes_map_to_runtime_codes) {
  cr_expect_eq(cudaev__error_from_cu(CUDA_SUCCESS), cudaSuccess);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_INVALID_VALUE), cudaErrorInvalidValue);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_OUT_OF_MEMORY), cudaErrorMemoryAllocation);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_NOT_INITIALIZED), cudaErrorInitializationError);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_INVALID_HANDLE), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_INVALID_CONTEXT), cudaErrorDeviceUninitialized);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_NO_BINARY_FOR_GPU),
               cudaErrorNoKernelImageForDevice);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_ILLEGAL_ADDRESS), cudaErrorIllegalAddress);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_LAUNCH_FAILED), cudaErrorLaunchFailure);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_STUB_LIBRARY), cudaErrorStubLibrary);
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_NOT_FOUND), cudaErrorSymbolNotFound);
  /* No runtime counterpart. */
  cr_expect_eq(cudaev__error_from_cu(CUDA_ERROR_CONTEXT_ALREADY_CURRENT), cudaErrorUnknown);
  cr_expect_eq(cudaev__error_from_cu((CUresult)12345), cudaErrorUnknown);
}

Test(error, sticky_classification) {
  cr_expect(cudaev__error_is_sticky(cudaErrorIllegalAddress));
  cr_expect(cudaev__error_is_sticky(cudaErrorAssert));
  cr_expect(cudaev__error_is_sticky(cudaErrorLaunchFailure));
  cr_expect(!cudaev__error_is_sticky(cudaErrorInvalidValue));
  cr_expect(!cudaev__error_is_sticky(cudaErrorNotReady));
}

Test(error, last_error_is_per_thread_and_cleared_by_get) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  cr_assert_eq(cudaGetLastError(), cudaSuccess);
  cr_expect_eq(cudaGetDeviceCount(NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaPeekAtLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaSuccess);
  /* A successful call does not clear it. */
  cr_expect_eq(cudaSetDevice(7), cudaErrorInvalidDevice);
  int n = 0;
  cr_expect_eq(cudaGetDeviceCount(&n), cudaSuccess);
  cr_expect_eq(n, 1);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDevice);
}

static CUresult failing_init(unsigned int flags) {
  (void)flags;
  return CUDA_ERROR_NO_DEVICE;
}

Test(error, init_failure_is_reported_forever) {
  fake_driver_base(&fake);
  fake.cuInit = failing_init;
  cudaev__driver_install(&fake, 13000);
  int n = -1;
  cr_expect_eq(cudaGetDeviceCount(&n), cudaErrorNoDevice);
  cr_expect_eq(n, -1);
  cr_expect_eq(cudaGetLastError(), cudaErrorNoDevice);
  cr_expect_eq(cudaGetLastError(), cudaErrorNoDevice);
  cr_expect_eq(cudaPeekAtLastError(), cudaErrorNoDevice);
  /* Calls that need no driver still work, and the init error stays. */
  int v = 0;
  cr_expect_eq(cudaRuntimeGetVersion(&v), cudaSuccess);
  cr_expect_eq(v, 13000);
  cr_expect_eq(cudaRuntimeGetVersion(NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorNoDevice);
}

static CUresult zero_devices(int *n) {
  *n = 0;
  return CUDA_SUCCESS;
}

Test(error, zero_devices_is_no_device) {
  fake_driver_base(&fake);
  fake.cuDeviceGetCount = zero_devices;
  cudaev__driver_install(&fake, 13000);
  int n = -1;
  cr_expect_eq(cudaGetDeviceCount(&n), cudaErrorNoDevice);
}

Test(error, not_implemented_records_last_error) {
  fake_driver_base(&fake);
  cudaev__driver_install(&fake, 13000);
  int cudaev__not_implemented(void);
  cr_expect_eq(cudaev__not_implemented(), cudaErrorNotSupported);
  cr_expect_eq(cudaGetLastError(), cudaErrorNotSupported);
}
