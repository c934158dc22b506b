/* Error Handling: cudaGetErrorName, cudaGetErrorString, cudaGetLastError,
 * cudaPeekAtLastError, and the one CUresult -> cudaError_t mapping. */
#include "internal.h"

#include "cudaev.h"
#include "error_table.h"

static const char unrecognized[] = "unrecognized error code";

/* Codes are sparse (0..1000, and 10000; our outcomes from 15001): a switch compiles to a
 * jump table or a binary search, with no table to keep sorted by hand. */
static const char *error_name(int e) {
  switch (e) {
#define CUDAEV__ERR_NAME(code, name, text) \
  case code: return #name;
    CUDAEV_ERROR_TABLE(CUDAEV__ERR_NAME)
#undef CUDAEV__ERR_NAME
  default: return NULL;
  }
}

static const char *error_text(int e) {
  switch (e) {
#define CUDAEV__ERR_TEXT(code, name, text) \
  case code: return text;
    CUDAEV_ERROR_TABLE(CUDAEV__ERR_TEXT)
#undef CUDAEV__ERR_TEXT
  default: return NULL;
  }
}

/* Our outcomes reach applications as cudaError_t, so cudaGetErrorName /
 * cudaGetErrorString name them too, where NVIDIA's runtime cannot. Kept out
 * of error_name: cudaev__error_from_cu must not take a driver code for one. */
static const char *outcome_name(int e) {
  switch (e) {
#define CUDAEV__OUT_NAME(code, name, text) \
  case code: return #name;
    CUDAEV_OUTCOME_TABLE(CUDAEV__OUT_NAME)
#undef CUDAEV__OUT_NAME
  default: return unrecognized;
  }
}

static const char *outcome_text(int e) {
  switch (e) {
#define CUDAEV__OUT_TEXT(code, name, text) \
  case code: return text;
    CUDAEV_OUTCOME_TABLE(CUDAEV__OUT_TEXT)
#undef CUDAEV__OUT_TEXT
  default: return unrecognized;
  }
}

const char *cudaGetErrorName(cudaError_t error) {
  const char *s = error_name((int)error);
  return s ? s : outcome_name((int)error);
}

const char *cudaGetErrorString(cudaError_t error) {
  const char *s = error_text((int)error);
  return s ? s : outcome_text((int)error);
}

/* The driver's codes were aligned with the runtime's: where a CUresult's
 * number is a cudaError_t, it is the same condition under the runtime's
 * name (CUDA_ERROR_INVALID_HANDLE = cudaErrorInvalidResourceHandle = 400,
 * CUDA_ERROR_INVALID_CONTEXT = cudaErrorDeviceUninitialized = 201, ...).
 * The few driver codes with no runtime counterpart become
 * cudaErrorUnknown. */
cudaError_t cudaev__error_from_cu(CUresult r) {
  if (r == CUDA_SUCCESS) return cudaSuccess;
  if (error_name((int)r) != NULL) return (cudaError_t)r;
  return cudaErrorUnknown;
}

bool cudaev__error_is_sticky(cudaError_t e) {
  switch (e) {
  case cudaErrorECCUncorrectable:
  case cudaErrorNvlinkUncorrectable:
  case cudaErrorContained:
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchTimeout:
  case cudaErrorAssert:
  case cudaErrorHardwareStackError:
  case cudaErrorIllegalInstruction:
  case cudaErrorMisalignedAddress:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorLaunchFailure:
  case cudaErrorTensorMemoryLeak:
  case cudaErrorExternalDevice: return true;
  default: return false;
  }
}

/* NVIDIA's runtime initialises on cudaGetLastError/cudaPeekAtLastError and,
 * when initialisation failed, reports that failure from both for the life
 * of the process, however often the last error is cleared. */
cudaError_t cudaGetLastError(void) {
  cudaError_t e = cudaev__init();
  if (CUDAEV_UNLIKELY(e != cudaSuccess)) return e;
  e = cudaev__thread.last_error;
  cudaev__thread.last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  cudaError_t e = cudaev__init();
  if (CUDAEV_UNLIKELY(e != cudaSuccess)) return e;
  return cudaev__thread.last_error;
}
