/* A fake libcuda for CPU tests: a driver table whose entries are ordinary
 * C functions, installed with cudaev__driver_install() before the runtime
 * is first used (Criterion runs each test in its own process, so each test
 * installs its own). */
#ifndef CUDAEV_TESTS_FAKE_DRIVER_H
#define CUDAEV_TESTS_FAKE_DRIVER_H

#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* One device, initialised, with a primary context that can be made
 * current: the smallest driver the runtime starts on. */
static CUresult fake_init(unsigned int flags) {
  (void)flags;
  return CUDA_SUCCESS;
}
static CUresult fake_count_one(int *n) {
  *n = 1;
  return CUDA_SUCCESS;
}
static CUresult fake_device_get(CUdevice *d, int ordinal) {
  *d = ordinal;
  return CUDA_SUCCESS;
}
static _Thread_local CUcontext fake_current;
static CUresult fake_ctx_get_current(CUcontext *c) {
  *c = fake_current;
  return CUDA_SUCCESS;
}
static CUresult fake_ctx_set_current(CUcontext c) {
  fake_current = c;
  return CUDA_SUCCESS;
}
static CUresult fake_ctx_get_device(CUdevice *d, CUcontext c) {
  (void)c;
  *d = 0;
  return CUDA_SUCCESS;
}
static int fake_retains;
static CUresult fake_primary_retain(CUcontext *c, CUdevice d) {
  (void)d;
  fake_retains++;
  *c = (CUcontext)(uintptr_t)0x1000;
  return CUDA_SUCCESS;
}
static CUresult fake_primary_release(CUdevice d) {
  (void)d;
  fake_retains--;
  return CUDA_SUCCESS;
}
static CUresult fake_primary_state(CUdevice d, unsigned *flags, int *active) {
  (void)d;
  *flags = 0;
  *active = fake_retains > 0;
  return CUDA_SUCCESS;
}

static inline void fake_driver_base(struct cudaev_driver *t) {
  memset(t, 0, sizeof *t);
  t->cuInit = fake_init;
  t->cuDeviceGetCount = fake_count_one;
  t->cuDeviceGet = fake_device_get;
  t->cuCtxGetCurrent = fake_ctx_get_current;
  t->cuCtxSetCurrent = fake_ctx_set_current;
  t->cuCtxGetDevice = fake_ctx_get_device;
  t->cuDevicePrimaryCtxRetain = fake_primary_retain;
  t->cuDevicePrimaryCtxRelease = fake_primary_release;
  t->cuDevicePrimaryCtxGetState = fake_primary_state;
}

/* For the loop layer's fakes (a loop pushes its context on the threads
 * that drive it, and keeps its completion words in mapped pinned memory,
 * here plain memory whose "device pointer" is its address). */
static _Thread_local CUcontext fake_ctx_stack[8];
static _Thread_local int fake_ctx_depth;
static inline CUresult fake_ctx_push(CUcontext c) {
  if (fake_ctx_depth == 8) return CUDA_ERROR_INVALID_VALUE;
  fake_ctx_stack[fake_ctx_depth++] = fake_current;
  fake_current = c;
  return CUDA_SUCCESS;
}
static inline CUresult fake_ctx_pop(CUcontext *c) {
  if (fake_ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (c != NULL) *c = fake_current;
  fake_current = fake_ctx_stack[--fake_ctx_depth];
  return CUDA_SUCCESS;
}
static inline CUresult fake_host_alloc(void **p, size_t n, unsigned flags) {
  (void)flags;
  *p = calloc(1, n);
  return *p != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static inline CUresult fake_host_device_pointer(CUdeviceptr *d, void *p, unsigned flags) {
  (void)flags;
  *d = (CUdeviceptr)p;
  return CUDA_SUCCESS;
}
static inline CUresult fake_host_free(void *p) {
  free(p);
  return CUDA_SUCCESS;
}

/* fake_driver_base plus context push/pop and pinned host memory. */
static inline void fake_driver_loop(struct cudaev_driver *t) {
  fake_driver_base(t);
  t->cuCtxPushCurrent = fake_ctx_push;
  t->cuCtxPopCurrent = fake_ctx_pop;
  t->cuMemHostAlloc = fake_host_alloc;
  t->cuMemHostGetDevicePointer = fake_host_device_pointer;
  t->cuMemFreeHost = fake_host_free;
}

#endif
