/* The kernel launch path, shared by the runtime's launch functions
 * (cudaLaunchKernel, cudaLaunchCooperativeKernel and their _ptsz forms, in
 * src/execution.c) and nvcc's <<<>>> entry points (__cudaLaunchKernel and
 * its _ptsz form, in src/nvcc_abi.c), so that every launch export is one
 * straight function around the same fast path.
 *
 * The launch path is the hottest code in the library. A launch finds the
 * kernel's record (no lookup at all from nvcc's <<<>>>, whose handle is
 * the record; one lock-free hash probe from cudaLaunchKernel), reads its
 * CUkernel and hands that straight to cuLaunchKernel, which accepts a
 * context-less CUkernel cast to CUfunction and runs it in the stream's
 * context (or the current one). No lock, no allocation, one driver call.
 * Only when the driver refuses does the slow path make a context current
 * and retry, or work out which error NVIDIA's runtime would report.
 *
 * Launch configuration errors. NVIDIA's runtime (CUDA 13) does not check
 * the grid and block dimensions itself: a zero dimension, a block over
 * 1024 threads or over a device's per-axis limit, a grid over its limits
 * all come back from the driver as CUDA_ERROR_INVALID_VALUE and are
 * reported as cudaErrorInvalidValue (not cudaErrorInvalidConfiguration),
 * after the function was found (an unknown function's error wins). So we
 * check nothing either and pass the driver's verdict on. The one thing the
 * driver cannot see is a dynamic shared memory size over its 32 bits,
 * which we refuse as cudaErrorInvalidValue (the driver's answer for any
 * size too large).
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_LAUNCH_H
#define CUDAEV_LAUNCH_H

#include "handle.h"
#include "register.h"

enum cudaev__launch_kind { CUDAEV__LAUNCH_PLAIN, CUDAEV__LAUNCH_COOPERATIVE };

/* The one driver call of a launch. */
static inline __attribute__((always_inline)) CUresult cudaev__launch_drv(
    enum cudaev__launch_kind kind, CUkernel k, dim3 g, dim3 b, void **args, size_t smem,
    CUstream s) {
  if (kind == CUDAEV__LAUNCH_COOPERATIVE)
    return cudaev__drv.cuLaunchCooperativeKernel((CUfunction)k, g.x, g.y, g.z, b.x, b.y, b.z,
                                                 (unsigned)smem, s, args);
  return cudaev__drv.cuLaunchKernel((CUfunction)k, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)smem, s,
                                    args, NULL);
}

/* Everything but the first successful try: a NULL or unknown function, a
 * kernel not loaded yet, a context to make current, an error to record.
 * `f` is func's record (NULL when the registry does not know it); `k` its
 * CUkernel if the fast path had one (then `r` is what the driver said).
 * Returns the launch's result, recorded. Defined in src/execution.c. */
__attribute__((noinline, cold)) cudaError_t cudaev__launch_slow(
    enum cudaev__launch_kind kind, const void *func, struct cudaev__kfunc *f, CUkernel k,
    CUresult r, dim3 g, dim3 b, void **args, size_t smem, CUstream s);

/* The launch fast path. Per launch, in the common case (a kernel launched
 * before, from a thread with a current context):
 *   - finding the record: none for <<<>>> (the handle is the record: one
 *     load to compare its magic), one lock-free hash probe for
 *     cudaLaunchKernel (hash of the pointer, usually one slot read);
 *   - one load of the record's CUkernel (a plain load on x86-64/aarch64);
 *   - one compare of the shared memory size against 32 bits;
 *   - the stream handed over as it is (a NULL test for the _ptsz variants),
 *     after cudaev__handle_dead (two compares and one load: a destroyed or
 *     impossible stream would crash the driver);
 *   - one indirect call: cuLaunchKernel with the context-independent
 *     CUkernel, which the driver runs in the stream's (or the current)
 *     context and validates (dimensions, shared memory, arguments).
 * No driver call besides the launch (no cuCtxGetCurrent: the driver knows
 * the context), no TLS access (the last error is written only on failure),
 * no atomic read-modify-write, no lock, no allocation. Everything else is in
 * cudaev__launch_slow, reached only when something is missing or failed.
 * Forced inline so each export is one straight function. */
static inline __attribute__((always_inline)) cudaError_t cudaev__launch(
    enum cudaev__launch_kind kind, const void *func, struct cudaev__kfunc *f, dim3 g, dim3 b,
    void **args, size_t smem, cudaStream_t stream, bool per_thread) {
  CUstream s = cudaev__stream(stream, per_thread);
  CUkernel k = NULL;
  if (CUDAEV_LIKELY(f != NULL)) k = atomic_load_explicit(&f->kernel, memory_order_acquire);
  if (CUDAEV_UNLIKELY(k == NULL || smem > 0xffffffffu || cudaev__handle_dead(s)))
    return cudaev__launch_slow(kind, func, f, NULL, CUDA_SUCCESS, g, b, args, smem, s);
  CUresult r = cudaev__launch_drv(kind, k, g, b, args, smem, s);
  if (CUDAEV_LIKELY(r == CUDA_SUCCESS)) return cudaSuccess;
  return cudaev__launch_slow(kind, func, f, k, r, g, b, args, smem, s);
}

/* cudaLaunchAttribute is CUlaunchAttribute bit for bit (checked at compile
 * time in src/abi_asserts.c), so the attribute array is passed on as it is.
 * Fills *out from *in; false when the shared memory size does not fit the
 * driver's 32 bits. */
static inline bool cudaev__launch_config(const cudaLaunchConfig_t *in, CUlaunchConfig *out,
                                         bool per_thread) {
  out->gridDimX = in->gridDim.x;
  out->gridDimY = in->gridDim.y;
  out->gridDimZ = in->gridDim.z;
  out->blockDimX = in->blockDim.x;
  out->blockDimY = in->blockDim.y;
  out->blockDimZ = in->blockDim.z;
  out->sharedMemBytes = (unsigned)in->dynamicSmemBytes;
  out->hStream = cudaev__stream(in->stream, per_thread);
  out->attrs = (CUlaunchAttribute *)in->attrs;
  out->numAttrs = in->numAttrs;
  return in->dynamicSmemBytes <= 0xffffffffu;
}

#endif
