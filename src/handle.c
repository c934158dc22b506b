/* The table of destroyed handles (handle.h says what it is and why).
 *
 * A bury is one release store; a revive is one compare-and-swap, so that it
 * clears the slot only while it still holds this handle: a revive never
 * forgets another handle buried in the same slot since. */
#include "handle.h"

_Atomic(uintptr_t) cudaev__handle_graves[1u << CUDAEV_HANDLE_GRAVE_BITS];

void cudaev__handle_bury(const void *h) {
  uintptr_t p = (uintptr_t)h;
  if (p > (uintptr_t)CU_STREAM_PER_THREAD)
    atomic_store_explicit(&cudaev__handle_graves[cudaev__handle_slot(p)], p, memory_order_release);
}

void cudaev__handle_revive(const void *h) {
  uintptr_t p = (uintptr_t)h;
  if (p <= (uintptr_t)CU_STREAM_PER_THREAD) return;
  uintptr_t expect = p;
  atomic_compare_exchange_strong_explicit(&cudaev__handle_graves[cudaev__handle_slot(p)], &expect,
                                          0, memory_order_acq_rel, memory_order_relaxed);
}
