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
 * earlier one), each with its kind (below), and a handle is forgotten as
 * soon as the driver hands the same address out again through one of this
 * runtime's functions that return such a handle.
 *
 * Known limit: an object of the same kind that the driver creates at a
 * remembered address for someone else (driver API, another copy of the
 * runtime) reads as destroyed until its slot is reused. The runtime's other creators of
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

/* What a handle is. A grave keeps the kind of the handle buried there, and
 * a check asks for one kind: the driver takes every kind of object from the
 * same heap, so a stream or event destroyed at an address says nothing of
 * a graph the driver made there since (a capture's graph at the address of
 * a destroyed event read as destroyed, and cudaGraphInstantiate refused
 * it). The kind comes from the handle's C type (CUDAEV__HKIND), so call
 * sites name nothing; a handle passed as void * is of any kind: it matches
 * a grave of every kind, and its grave every check, as before kinds. */
enum cudaev__hkind {
  CUDAEV__HK_ANY = 0,
  CUDAEV__HK_STREAM,
  CUDAEV__HK_EVENT,
  CUDAEV__HK_ARRAY,
  CUDAEV__HK_MIPMAP,
  CUDAEV__HK_LIBRARY,
  CUDAEV__HK_KERNEL, /* CUkernel and CUfunction: a library's kernel is both */
  CUDAEV__HK_GRAPH,
  CUDAEV__HK_NODE,
  CUDAEV__HK_EXEC,
  CUDAEV__HK_RESOURCE,
  CUDAEV__HK_POOL,
  CUDAEV__HK_USER_OBJECT,
  CUDAEV__HK_ASYNC_CALLBACK,
  CUDAEV__HK_LOGS_CALLBACK,
  CUDAEV__HK_EXT_MEMORY,
  CUDAEV__HK_EXT_SEMAPHORE,
};

/* The kind of handle expression `h`, from its type (the runtime's and the
 * driver's names of one object map to one kind). */
#define CUDAEV__HKIND(h) \
  _Generic((h),                                                            \
      struct CUstream_st *: CUDAEV__HK_STREAM,                             \
      struct CUevent_st *: CUDAEV__HK_EVENT,                               \
      struct cudaArray *: CUDAEV__HK_ARRAY,                                \
      const struct cudaArray *: CUDAEV__HK_ARRAY,                          \
      struct CUarray_st *: CUDAEV__HK_ARRAY,                               \
      struct cudaMipmappedArray *: CUDAEV__HK_MIPMAP,                      \
      const struct cudaMipmappedArray *: CUDAEV__HK_MIPMAP,                \
      struct CUmipmappedArray_st *: CUDAEV__HK_MIPMAP,                     \
      struct CUlib_st *: CUDAEV__HK_LIBRARY,                               \
      struct CUkern_st *: CUDAEV__HK_KERNEL,                               \
      struct CUfunc_st *: CUDAEV__HK_KERNEL,                               \
      struct CUgraph_st *: CUDAEV__HK_GRAPH,                               \
      struct CUgraphNode_st *: CUDAEV__HK_NODE,                            \
      struct CUgraphExec_st *: CUDAEV__HK_EXEC,                            \
      struct cudaGraphicsResource *: CUDAEV__HK_RESOURCE,                  \
      struct CUgraphicsResource_st *: CUDAEV__HK_RESOURCE,                 \
      struct CUmemPoolHandle_st *: CUDAEV__HK_POOL,                        \
      struct CUuserObject_st *: CUDAEV__HK_USER_OBJECT,                    \
      struct cudaAsyncCallbackEntry *: CUDAEV__HK_ASYNC_CALLBACK,          \
      struct CUasyncCallbackEntry_st *: CUDAEV__HK_ASYNC_CALLBACK,         \
      struct CUlogsCallbackEntry_st *: CUDAEV__HK_LOGS_CALLBACK,           \
      struct CUexternalMemory_st *: CUDAEV__HK_EXT_MEMORY,                 \
      struct CUexternalSemaphore_st *: CUDAEV__HK_EXT_SEMAPHORE,           \
      default: CUDAEV__HK_ANY)

/* A grave is the handle's address with its kind in the top byte (user
 * space ends below 2^56 on every supported machine). */
#define CUDAEV__HKIND_SHIFT 56
#define CUDAEV__HADDR_MASK  ((UINT64_C(1) << CUDAEV__HKIND_SHIFT) - 1)

static inline uintptr_t cudaev__handle_grave(uintptr_t p, unsigned kind) {
  return p | (uintptr_t)kind << CUDAEV__HKIND_SHIFT;
}

/* Grave `g` condemns address `p` asked for as `kind`. */
static inline bool cudaev__grave_holds(uintptr_t g, uintptr_t p, unsigned kind) {
  if ((g & CUDAEV__HADDR_MASK) != p) return false;
  unsigned gk = (unsigned)(g >> CUDAEV__HKIND_SHIFT);
  return gk == kind || gk == CUDAEV__HK_ANY || kind == CUDAEV__HK_ANY;
}

/* True when `h` can never be a live driver object, or was destroyed as a
 * handle of `kind` through this runtime and not handed out again since.
 * False for NULL and the special streams cudaStreamLegacy /
 * cudaStreamPerThread. Use cudaev__handle_dead(h), which takes the kind
 * from h's type. */
static inline bool cudaev__handle_dead_as(const void *h, unsigned kind) {
  uintptr_t p = (uintptr_t)h;
  if (p <= (uintptr_t)CU_STREAM_PER_THREAD) return false;
  if (cudaev__addr_impossible(p)) return true;
  return cudaev__grave_holds(
      atomic_load_explicit(&cudaev__handle_graves[cudaev__handle_slot(p)], memory_order_acquire), p,
      kind);
}
#define cudaev__handle_dead(h) cudaev__handle_dead_as((const void *)(h), CUDAEV__HKIND(h))

/* Leaves the calling cudaXxx function with `err` (recorded) when `h` is
 * dead (cudaev__handle_dead): the driver would crash on it, as NVIDIA's
 * runtime does. `err` is NVIDIA's answer for that type of handle where it
 * has one (its answer to NULL). */
#define CUDAEV_LIVE_OR_RETURN_ERR(h, err)                                 \
  do {                                                                    \
    if (CUDAEV_UNLIKELY(cudaev__handle_dead(h))) return cudaev__ret(err); \
  } while (0)

/* The same for streams, events, arrays and the other handles NVIDIA's
 * runtime answers with cudaErrorInvalidResourceHandle. */
#define CUDAEV_LIVE_OR_RETURN(h) CUDAEV_LIVE_OR_RETURN_ERR(h, cudaErrorInvalidResourceHandle)

/* Remembers `h` as a destroyed handle of `kind` (call before the driver
 * destroys it). NULL, cudaStreamLegacy and cudaStreamPerThread are never
 * remembered. Use cudaev__handle_bury(h). */
void cudaev__handle_bury_as(const void *h, unsigned kind);
#define cudaev__handle_bury(h) cudaev__handle_bury_as((const void *)(h), CUDAEV__HKIND(h))

/* Forgets `h` (after a create returned it as a handle of `kind`, or a
 * destroy the driver refused): clears its slot while the slot holds `h`
 * as that kind (or either side is of any kind), never another handle. Use
 * cudaev__handle_revive(h). */
void cudaev__handle_revive_as(const void *h, unsigned kind);
#define cudaev__handle_revive(h) cudaev__handle_revive_as((const void *)(h), CUDAEV__HKIND(h))

#endif
