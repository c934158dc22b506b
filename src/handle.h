/* The table of destroyed handles: streams, events and arrays destroyed
 * through this runtime, remembered so that a later use is refused with
 * cudaErrorInvalidResourceHandle.
 *
 * Why: the driver does not validate these handles. A destroyed one crashes
 * it, and NVIDIA's runtime, which passes the handle on, crashes with it.
 * Ours refuses them instead, as far as it can tell: the handles destroyed
 * through this runtime are kept in a fixed table of slots indexed by a hash
 * of the handle (a later destroy that hashes to the same slot forgets the
 * earlier one), and a handle is forgotten as soon as the driver hands the
 * same address out again to one of this runtime's create functions.
 *
 * Known limit: a stream or event the driver creates at a remembered address
 * for someone else (driver API, another copy of the runtime) reads as
 * destroyed until its slot is reused. The runtime's other creators of
 * events (cudaIpcOpenEventHandle, cudaEventCreateFromEGLSync) call
 * cudaev__handle_revive as the create functions do.
 *
 * Order: cudaev__handle_bury is called BEFORE the driver destroys the
 * handle (and cudaev__handle_revive after a create returned it), so a
 * create on another thread that receives the freed address always revives
 * it after it was buried. A destroy the driver refuses revives the handle.
 *
 * Cost: a lookup is one atomic load (no lock, no allocation): it sits on
 * hot enqueue paths.
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_HANDLE_H
#define CUDAEV_HANDLE_H

#include "internal.h"

#include <stdint.h>

#define CUDAEV_HANDLE_GRAVE_BITS 10

/* One slot per hash of a handle: the handle last buried there, or 0. */
extern _Atomic(uintptr_t) cudaev__handle_graves[1u << CUDAEV_HANDLE_GRAVE_BITS];

/* The slot of handle value `h` (Fibonacci hashing: the top bits of the
 * product, so handles that differ only in their low, aligned bits still
 * spread over the table). */
static inline size_t cudaev__handle_slot(uintptr_t h) {
  return (size_t)((h * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - CUDAEV_HANDLE_GRAVE_BITS));
}

/* True when `h` (a CUstream, CUevent or CUarray) was destroyed through this
 * runtime and not handed out again since. False for NULL and the special
 * streams cudaStreamLegacy / cudaStreamPerThread. */
static inline bool cudaev__handle_dead(const void *h) {
  uintptr_t p = (uintptr_t)h;
  return p > (uintptr_t)CU_STREAM_PER_THREAD &&
         atomic_load_explicit(&cudaev__handle_graves[cudaev__handle_slot(p)],
                              memory_order_acquire) == p;
}

/* Leaves the calling cudaXxx function with cudaErrorInvalidResourceHandle
 * (recorded) when `h` was destroyed through this runtime: the driver would
 * crash on it (NVIDIA's runtime crashes there). One atomic load. */
#define CUDAEV_LIVE_OR_RETURN(h)                                 \
  do {                                                           \
    if (CUDAEV_UNLIKELY(cudaev__handle_dead((const void *)(h)))) \
      return cudaev__ret(cudaErrorInvalidResourceHandle);        \
  } while (0)

/* Remembers `h` as destroyed (call before the driver destroys it). NULL,
 * cudaStreamLegacy and cudaStreamPerThread are never remembered. */
void cudaev__handle_bury(const void *h);

/* Forgets `h` (after a create returned it, or a destroy the driver
 * refused). Leaves the slot alone when it holds another handle. */
void cudaev__handle_revive(const void *h);

#endif
