/* The table of destroyed handles (handle.h says what it is and why).
 *
 * A bury is one release store; a revive is one compare-and-swap, so that it
 * clears the slot only while it still holds this handle: a revive never
 * forgets another handle buried in the same slot since. */
#include "handle.h"

_Atomic(uintptr_t) cudaev__handle_graves[1u << CUDAEV_HANDLE_GRAVE_BITS];

void cudaev__handle_bury_as(const void *h, unsigned kind) {
  uintptr_t p = (uintptr_t)h;
  if (p > (uintptr_t)CU_STREAM_PER_THREAD)
    atomic_store_explicit(&cudaev__handle_graves[cudaev__handle_slot(p)],
                          cudaev__handle_grave(p, kind), memory_order_release);
}

void cudaev__handle_revive_as(const void *h, unsigned kind) {
  uintptr_t p = (uintptr_t)h;
  if (p <= (uintptr_t)CU_STREAM_PER_THREAD) return;
  _Atomic(uintptr_t) *slot = &cudaev__handle_graves[cudaev__handle_slot(p)];
  uintptr_t g = atomic_load_explicit(slot, memory_order_acquire);
  /* A failed exchange means another bury or revive changed the slot since
   * the load: it then holds another grave (or none), which stays. */
  if (cudaev__grave_holds(g, p, kind))
    atomic_compare_exchange_strong_explicit(slot, &g, 0, memory_order_acq_rel,
                                            memory_order_relaxed);
}
