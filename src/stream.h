/* Internal helpers of the stream section (src/stream.c), shared with the
 * graph section (kernel node attributes use the same value union).
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_STREAM_H
#define CUDAEV_STREAM_H

#include "internal.h"

#include <stdint.h>

/* Translates a runtime launch/stream attribute value (cudaLaunchAttributeValue,
 * alias cudaStreamAttrValue / cudaKernelNodeAttrValue) for attribute `id`
 * into the driver's CUlaunchAttributeValue, and back. The two unions and
 * their attribute ids are laid out alike (checked at compile time in
 * stream.c), so both directions copy the whole 64-byte value: fields of
 * attributes this toolkit does not know travel unchanged.
 * Returns false (nothing written) when `in` or `out` is NULL. */
bool cudaev__attr_value_to_cu(cudaLaunchAttributeID id, const cudaLaunchAttributeValue *in,
                              CUlaunchAttributeValue *out);
bool cudaev__attr_value_from_cu(cudaLaunchAttributeID id, const CUlaunchAttributeValue *in,
                                cudaLaunchAttributeValue *out);

/* The record cudaStreamAddCallback hands to the driver: the user's callback,
 * its argument and the stream as the user named it. Owned by the driver
 * callback once enqueued; cudaev__stream_callback_trampoline frees it after
 * calling the user's function. */
struct cudaev_stream_callback {
  cudaStreamCallback_t fn;
  void *user;
  cudaStream_t stream;
};

/* The CUstreamCallback given to cuStreamAddCallback: maps the driver's
 * status to a cudaError_t, calls the user's callback with the stream the
 * user passed, then frees `rec`. Exposed for unit tests. */
void CUDA_CB cudaev__stream_callback_trampoline(CUstream s, CUresult status, void *rec);

/* ---- destroyed handles ----------------------------------------------------
 * The driver does not validate stream and event handles: a destroyed one
 * crashes it (NVIDIA's runtime crashes with it). Our runtime refuses them
 * instead with cudaErrorInvalidResourceHandle, as far as it can tell: the
 * streams and events destroyed through this runtime are remembered in a
 * fixed table of slots indexed by a hash of the handle (a later destroy
 * that hashes to the same slot forgets the earlier one), and a handle is
 * forgotten as soon as the driver hands the same address out again to one
 * of this runtime's create functions.
 * Known limit: a stream or event the driver creates at a remembered address
 * for someone else (driver API, another copy of the runtime,
 * cudaIpcOpenEventHandle, cudaEventCreateFromEGLSync) reads as destroyed
 * until its slot is reused; those creators should call
 * cudaev__handle_revive.
 *
 * cudaev__handle_bury is called BEFORE the driver destroys the handle (and
 * cudaev__handle_revive after a create), so a create on another thread that
 * receives the freed address always revives it after it was buried.
 * Lookups are one atomic load: no lock, no allocation (hot paths).
 *
 * Thread: any thread. */
#define CUDAEV_GRAVE_BITS 10
extern _Atomic(uintptr_t) cudaev__graves[1u << CUDAEV_GRAVE_BITS];

static inline size_t cudaev__grave_slot(uintptr_t h) {
  return (size_t)((h * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - CUDAEV_GRAVE_BITS));
}

/* True when `h` (a CUstream or CUevent) was destroyed through this runtime
 * and not handed out again since. False for NULL and the special streams
 * cudaStreamLegacy / cudaStreamPerThread. */
static inline bool cudaev__handle_dead(const void *h) {
  uintptr_t p = (uintptr_t)h;
  return p > (uintptr_t)CU_STREAM_PER_THREAD &&
         atomic_load_explicit(&cudaev__graves[cudaev__grave_slot(p)], memory_order_acquire) == p;
}

/* Leaves the calling cudaXxx function with cudaErrorInvalidResourceHandle
 * (recorded) when `h` was destroyed through this runtime: the driver would
 * crash on it (NVIDIA's runtime crashes there). One atomic load. */
#define CUDAEV_LIVE_OR_RETURN(h)                                 \
  do {                                                           \
    if (CUDAEV_UNLIKELY(cudaev__handle_dead((const void *)(h)))) \
      return cudaev__ret(cudaErrorInvalidResourceHandle);        \
  } while (0)

/* Remembers `h` as destroyed (call before the driver destroys it). */
void cudaev__handle_bury(const void *h);

/* Forgets `h` (after a create returned it, or a destroy the driver
 * refused). */
void cudaev__handle_revive(const void *h);

#endif
