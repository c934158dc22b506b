/* Internal contracts of the runtime layer (src/).
 *
 * Every source file in src/ includes this header first. It declares the cudart API with
 * default visibility (the build uses -fvisibility=hidden, so anything not
 * declared here stays inside the library), the per-thread state, the
 * last-error rules and the lazy initialisation/context helpers.
 *
* Names: cudaXxx are NVIDIA's exported functions, cudaev__xxx our internal
 * non-static helpers.
 */
#ifndef CUDAEV_INTERNAL_H
#define CUDAEV_INTERNAL_H

/* The driver header first, outside the visibility push: the runtime never
 * defines cu* functions. */
#include "driver/driver.h"

#pragma GCC visibility push(default)
#include <cuda_runtime_api.h>
#include <cuda_profiler_api.h>
#pragma GCC visibility pop

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define CUDAEV_EXPORT      __attribute__((visibility("default")))
#define CUDAEV_LIKELY(x)   __builtin_expect(!!(x), 1)
#define CUDAEV_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Declares NAME##SUFFIX, an export with the same prototype as NAME: the
 * per-thread-default-stream variants (_ptsz, _ptds) that cuda_runtime_api.h
 * only declares when a program is compiled with per-thread default stream. */
#define CUDAEV_DECLARE_VARIANT(name, suffix) CUDAEV_EXPORT __typeof__(name) name##suffix

/* ---- per-thread state ---------------------------------------------------- */

struct cudaev__thread_state {
  cudaError_t last_error; /* what cudaGetLastError returns and clears */
  int device;             /* cudaSetDevice's choice; -1 = never set (acts as 0) */
  unsigned reset_gen;     /* cudaev__rt.reset_gen when this thread last checked its context */
  CUcontext ctx;          /* current at the last cudaev__ctx() that found one at once; else NULL */
};

extern _Thread_local struct cudaev__thread_state cudaev__thread;

/* Records e as the thread's last error and returns e: every cudaXxx
 * function leaves through this. cudaErrorNotReady is an answer, not an
 * error: NVIDIA's runtime leaves the last error alone for it (measured on
 * cudaStreamQuery, cudaEventQuery, cudaEventElapsedTime). */
static inline cudaError_t cudaev__ret(cudaError_t e) {
  if (CUDAEV_UNLIKELY(e != cudaSuccess) && e != cudaErrorNotReady) cudaev__thread.last_error = e;
  return e;
}

/* The one CUresult -> cudaError_t mapping (src/error.c). */
cudaError_t cudaev__error_from_cu(CUresult r);

/* Maps a driver result and records it as the last error. */
static inline cudaError_t cudaev__ret_cu(CUresult r) {
  return CUDAEV_LIKELY(r == CUDA_SUCCESS) ? cudaSuccess : cudaev__ret(cudaev__error_from_cu(r));
}

/* True for errors that leave the context unusable (sticky errors). */
bool cudaev__error_is_sticky(cudaError_t e);

/* ---- initialisation ------------------------------------------------------ */

/* The state of the process-wide runtime: driver loaded, cuInit done, device
 * count known. */
struct cudaev__device {
  CUdevice dev;
  _Atomic(CUcontext) primary; /* retained primary context, NULL until used */
  /* The primary context's handle once it was retained, kept across
   * cudaDeviceReset: threads may still have it current, and a reset (or
   * faulted) context cannot be asked which device it belongs to. */
  _Atomic(CUcontext) handle;
};

struct cudaev__runtime {
  atomic_int ready;       /* 1 once init ran (successfully or not) */
  atomic_uint reset_gen;  /* bumped by cudaDeviceReset: threads re-check their context */
  atomic_uint flags_gen;  /* bumped when this runtime sets or resets a primary context's flags */
  cudaError_t init_error; /* cudaSuccess, or why the runtime cannot run */
  int device_count;
  struct cudaev__device *devices;
};

extern struct cudaev__runtime cudaev__rt;

cudaError_t cudaev__init_slow(void);

/* Loads the driver and runs cuInit once. Returns the initialisation error,
 * which NVIDIA's runtime keeps returning for the life of the process
 * (cudaErrorInsufficientDriver, cudaErrorStubLibrary, cudaErrorNoDevice...).
 * Does not record the last error. */
static inline cudaError_t cudaev__init(void) {
  if (CUDAEV_LIKELY(atomic_load_explicit(&cudaev__rt.ready, memory_order_acquire)))
    return cudaev__rt.init_error;
  return cudaev__init_slow();
}

/* The device cudart considers current on this thread: the device of the
 * current driver context if one is current, else cudaSetDevice's choice,
 * else 0. Requires cudaev__init() == cudaSuccess. */
int cudaev__current_device(void);

/* Makes sure a context is current on the calling thread, as the runtime's
 * "Interactions with the CUDA Driver API" section says: a context already
 * current (primary or not) is used as it is; otherwise the primary context
 * of the thread's device is retained (once per process) and made current.
 * A primary context that cudaDeviceReset destroyed stays current on the
 * threads that had it (as with NVIDIA's runtime) and is re-initialised by
 * the next call that needs it.
 * Returns cudaSuccess or the error to report (not recorded). */
cudaError_t cudaev__ctx_slow(void);
static inline cudaError_t cudaev__ctx(void) {
  cudaError_t e = cudaev__init();
  if (CUDAEV_UNLIKELY(e != cudaSuccess)) return e;
  CUcontext c = NULL;
  /* After a cudaDeviceReset anywhere, a thread whose current context was a
   * reset primary context takes the slow path once to re-initialise it. */
  if (CUDAEV_LIKELY(cudaev__drv.cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != NULL &&
                    cudaev__thread.reset_gen ==
                        atomic_load_explicit(&cudaev__rt.reset_gen, memory_order_relaxed))) {
    cudaev__thread.ctx = c;
    return cudaSuccess;
  }
  return cudaev__ctx_slow();
}

/* Retains device d's primary context (once per process) and returns it. */
cudaError_t cudaev__primary_ctx(int d, CUcontext *out);

/* Leave the calling cudaXxx function with the error (recorded) when the
 * runtime cannot initialise / no context can be made current.
 *
 * These come first in a function, before any argument is looked at:
 * NVIDIA's runtime initialises before it validates, so without a usable
 * driver a NULL or bad argument gets the initialisation error
 * (cudaErrorInsufficientDriver, cudaErrorStubLibrary...), whether or not an
 * earlier call already tried to initialise (tests/badinput). The argument
 * checks after them keep the order and codes NVIDIA's runtime shows on a
 * GPU. The exceptions are the functions that never initialise (error
 * names and strings, versions, cudaCreateChannelDesc...) and
 * cudaGetExportTable, which checks its pointers first. */
#define CUDAEV_INIT_OR_RETURN()                                               \
  do {                                                                        \
    cudaError_t init_e_ = cudaev__init();                                     \
    if (CUDAEV_UNLIKELY(init_e_ != cudaSuccess)) return cudaev__ret(init_e_); \
  } while (0)
#define CUDAEV_CTX_OR_RETURN()                                              \
  do {                                                                      \
    cudaError_t ctx_e_ = cudaev__ctx();                                     \
    if (CUDAEV_UNLIKELY(ctx_e_ != cudaSuccess)) return cudaev__ret(ctx_e_); \
  } while (0)

/* The enqueue hot paths skip cuCtxGetCurrent, a public driver entry point
 * that costs as much as our whole share of the call (NVIDIA's runtime
 * reaches the driver through private entry points instead), once this
 * thread has found a context current and no cudaDeviceReset happened
 * since: a context stays current on a thread until the thread changes it.
 * The driver call itself then says when it is gone (the application popped
 * or unset it through the driver API): CUDA_ERROR_INVALID_CONTEXT or
 * CUDA_ERROR_CONTEXT_IS_DESTROYED sends the call through cudaev__ctx()
 * and the driver once more, so the primary context is made current as
 * NVIDIA's runtime makes it. The first calls on a thread always check.
 * One difference remains: a call whose handles carry their own context
 * (an explicit stream or event) may succeed in the driver with no context
 * current, where NVIDIA's runtime would first have made the primary
 * context current again; only a program that unsets the context through
 * the driver API and reads it back through the driver API can tell. The
 * launch path (launch.h) has always relied on the driver's answer alone.
 *
 *   bool known;
 *   CUDAEV_CTX_HOT_OR_RETURN(known);
 *   ...argument checks...
 *   CUresult r = driver call;
 *   CUDAEV_CTX_HOT_RETRY(known, r, driver call);
 */
static inline bool cudaev__ctx_known(void) {
  return CUDAEV_LIKELY(cudaev__thread.ctx != NULL &&
                       cudaev__thread.reset_gen ==
                           atomic_load_explicit(&cudaev__rt.reset_gen, memory_order_relaxed));
}
#define CUDAEV_CTX_HOT_OR_RETURN(known)   \
  do {                                    \
    (known) = cudaev__ctx_known();        \
    if (!(known)) CUDAEV_CTX_OR_RETURN(); \
  } while (0)
#define CUDAEV_CTX_HOT_RETRY(known, r, call)                                    \
  do {                                                                          \
    if (CUDAEV_UNLIKELY((known) && ((r) == CUDA_ERROR_INVALID_CONTEXT ||        \
                                    (r) == CUDA_ERROR_CONTEXT_IS_DESTROYED))) { \
      cudaev__thread.ctx = NULL;                                                \
      CUDAEV_CTX_OR_RETURN();                                                   \
      (r) = (call);                                                             \
    }                                                                           \
  } while (0)

/* Valid ordinal check against the initialised device count. */
static inline bool cudaev__device_valid(int d) { return d >= 0 && d < cudaev__rt.device_count; }

/* Returns a stream handle as the driver expects it: cudaStreamLegacy and
 * cudaStreamPerThread are the driver's CU_STREAM_LEGACY / CU_STREAM_PER_THREAD
 * already; 0 stays 0 (the legacy default stream) unless per_thread. */
static inline CUstream cudaev__stream(cudaStream_t s, bool per_thread) {
  if (s == NULL && per_thread) return CU_STREAM_PER_THREAD;
  return (CUstream)s;
}

#endif
