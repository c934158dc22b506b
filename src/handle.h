/* Handles the driver would crash on: values that can never be a live
 * object, and the table of destroyed handles (streams, events, arrays,
 * mipmapped arrays, libraries, graph nodes, callback handles destroyed
 * through this runtime), remembered so that a later use is refused.
 *
 * Why: the driver does not validate these handles. A bogus or destroyed
 * one crashes it, and NVIDIA's runtime, which passes the handle on, crashes
 * with it. Ours refuses them instead, as far as it can tell.
 *
 * Impossible values: every handle is a pointer to a driver object in the
 * process's address space, which the driver allocates with malloc or mmap
 * without an address hint. Those never return memory below Linux's
 * vm.mmap_min_addr (64 KiB by default), and user space ends at 2^47 on
 * x86-64 (2^48 on arm64 with 48-bit addresses; larger spaces are handed out
 * only on request), so a value in [3, 64 KiB) or at and above that end is
 * refused without looking anything up. 0, 1 and 2 keep their meanings
 * (NULL, cudaStreamLegacy, cudaStreamPerThread) and go to the driver, which
 * answers them without a crash.
 *
 * Destroyed handles are kept in a fixed table of slots indexed by a hash
 * of the handle (a later destroy that hashes to the same slot forgets the
 * earlier one), and a handle is forgotten as soon as the driver hands the
 * same address out again through one of this runtime's functions that
 * return such a handle.
 *
 * Known limit: an object the driver creates at a remembered address for
 * someone else (driver API, another copy of the runtime) reads as
 * destroyed until its slot is reused. The runtime's other creators of
 * events (cudaIpcOpenEventHandle, cudaEventCreateFromEGLSync) call
 * cudaev__handle_revive as the create functions do.
 *
 * Order: cudaev__handle_bury is called BEFORE the driver destroys the
 * handle (and cudaev__handle_revive after a create returned it), so a
 * create on another thread that receives the freed address always revives
 * it after it was buried. A destroy the driver refuses revives the handle.
 *
 * Cost: a check is two compares and one atomic load (no lock, no
 * allocation): it sits on hot enqueue paths.
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

/* The lowest address a process can map (vm.mmap_min_addr's default) and
 * the end of user space. */
#define CUDAEV_HANDLE_MIN UINT64_C(0x10000)
#if defined(__x86_64__)
#define CUDAEV_HANDLE_END UINT64_C(0x0000800000000000)
#else
#define CUDAEV_HANDLE_END UINT64_C(0x0001000000000000)
#endif

/* True when `p` lies where no object of this process can (above). */
static inline bool cudaev__addr_impossible(uintptr_t p) {
  /* One unsigned compare for both ends: below CUDAEV_HANDLE_MIN wraps. */
  return p - CUDAEV_HANDLE_MIN >= CUDAEV_HANDLE_END - CUDAEV_HANDLE_MIN;
}

/* True when `p`, a pointer argument, is not NULL and lies where no memory
 * of this process can (host or device: unified addressing puts both in
 * the same user address space). The driver's copies fault on one. */
static inline bool cudaev__ptr_impossible(const void *p) {
  return p != NULL && cudaev__addr_impossible((uintptr_t)p);
}

/* True when `h` can never be a live driver object, or was destroyed
 * through this runtime and not handed out again since. False for NULL and
 * the special streams cudaStreamLegacy / cudaStreamPerThread. */
static inline bool cudaev__handle_dead(const void *h) {
  uintptr_t p = (uintptr_t)h;
  if (p <= (uintptr_t)CU_STREAM_PER_THREAD) return false;
  if (cudaev__addr_impossible(p)) return true;
  return atomic_load_explicit(&cudaev__handle_graves[cudaev__handle_slot(p)],
                              memory_order_acquire) == p;
}

/* Leaves the calling cudaXxx function with `err` (recorded) when `h` is
 * dead (cudaev__handle_dead): the driver would crash on it, as NVIDIA's
 * runtime does. `err` is NVIDIA's answer for that type of handle where it
 * has one (its answer to NULL). */
#define CUDAEV_LIVE_OR_RETURN_ERR(h, err)                                                 \
  do {                                                                                    \
    if (CUDAEV_UNLIKELY(cudaev__handle_dead((const void *)(h)))) return cudaev__ret(err); \
  } while (0)

/* The same for streams, events, arrays and the other handles NVIDIA's
 * runtime answers with cudaErrorInvalidResourceHandle. */
#define CUDAEV_LIVE_OR_RETURN(h) CUDAEV_LIVE_OR_RETURN_ERR(h, cudaErrorInvalidResourceHandle)

/* Remembers `h` as destroyed (call before the driver destroys it). NULL,
 * cudaStreamLegacy and cudaStreamPerThread are never remembered. */
void cudaev__handle_bury(const void *h);

/* Forgets `h` (after a create returned it, or a destroy the driver
 * refused). Leaves the slot alone when it holds another handle. */
void cudaev__handle_revive(const void *h);

#endif
