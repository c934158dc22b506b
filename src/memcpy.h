/* Memory Management, the 2D / 3D / array copies and sets, the private
 * contract of their files:
 *
 *   memcpy_2d.c     cudaMemcpy2D*, the 2D array copies, the kind -> memory
 *                   types mapping and the 2D copy every array copy ends in
 *   memcpy_array.c  the deprecated 1D copies into and out of arrays
 *                   (cudaMemcpyToArray & co.), split into 2D copies
 *   memcpy_3d.c     cudaMemcpy3D*, cudaMemcpy3DPeer*
 *   memcpy_batch.c  the CUDA 13 batch copies
 *   memset_2d.c     cudaMemset2D/3D
 *
 * (1D copies and sets live in memory.c.) Calls go one way: memcpy_array.c
 * and memcpy_3d.c -> memcpy_2d.c; the others call none of them. No file
 * keeps state.
 *
 * Synchronous variants call the driver's synchronous copies, which follow
 * the same "API synchronization behavior" rules as the runtime's (pageable
 * staging, D2D without host sync...), on the legacy default stream, or the
 * driver's _ptds entry points for the per-thread-default-stream exports.
 * Async variants enqueue on cudaev__stream(stream, per_thread).
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_MEMCPY_H
#define CUDAEV_MEMCPY_H

#include "internal.h"

#include "array.h"
#include "handle.h"

#include <stddef.h>
#include <stdint.h>

/* How a copy is issued: which default stream a synchronous call uses, or
 * asynchronously on a given stream. */
enum how { SYNC_LEGACY, SYNC_PTDS, ASYNC };

static inline CUstream stream_of(enum how h, cudaStream_t s, bool per_thread) {
  return h == ASYNC ? cudaev__stream(s, per_thread) : NULL;
}

/* Points one side of a driver copy at a pointer of memory type t. */
#define SET_PTR(m, side, t, p)                         \
  do {                                                 \
    (m)->side##MemoryType = (t);                       \
    if ((t) == CU_MEMORYTYPE_HOST)                     \
      (m)->side##Host = (void *)(uintptr_t)(p);        \
    else                                               \
      (m)->side##Device = (CUdeviceptr)(uintptr_t)(p); \
  } while (0)

/* Base export + per-thread variant sharing one body: SYNC picks the legacy
 * or per-thread default stream, ASYNC maps a NULL stream per variant. An
 * async call refuses a dead stream (handle.h) first: NVIDIA's runtime
 * reaches the stream before any other argument, even for an empty copy,
 * and crashes on one. */
#define SYNC_HOW(pt) ((pt) ? SYNC_PTDS : SYNC_LEGACY)

/* ---- the 2D copy (memcpy_2d.c) ---- */

/* One 2D copy where either side may be an array (array != NULL) or a
 * pitched pointer; x offsets in bytes. */
struct side2d {
  CUarray array;
  const void *ptr;
  size_t pitch, x, y;
};

/* Copies width x height bytes between two sides, with NVIDIA's pitch,
 * kind and pointer checks; an empty copy succeeds. */
cudaError_t cudaev__memcpy_copy2d(struct side2d dst, struct side2d src, size_t width, size_t height,
                                  enum cudaMemcpyKind kind, enum how h, CUstream s);

/* ---- the array copies' checks (memcpy_2d.c, memcpy_array.c) ---- */

/* Array handles as the deprecated and 2D array copies receive them: NULL
 * is an invalid handle, not "no array" (as NVIDIA's runtime answers); so is
 * an array freed through this runtime (the driver would crash on it). */
static inline cudaError_t need_array(cudaArray_const_t a) {
  return a == NULL || cudaev__handle_dead(a) ? cudaErrorInvalidResourceHandle : cudaSuccess;
}

/* The kinds each array copy accepts, as NVIDIA's runtime checks them
 * (after the empty-copy and pitch checks, before the array handles): the
 * array side is device memory, so a kind that says that side is host memory
 * is a wrong direction. */
#define KIND_BIT(k) (1u << (k))
#define KINDS_TO_ARRAY                                                     \
  (KIND_BIT(cudaMemcpyHostToDevice) | KIND_BIT(cudaMemcpyDeviceToDevice) | \
   KIND_BIT(cudaMemcpyDefault))
#define KINDS_FROM_ARRAY                                                   \
  (KIND_BIT(cudaMemcpyDeviceToHost) | KIND_BIT(cudaMemcpyDeviceToDevice) | \
   KIND_BIT(cudaMemcpyDefault))
#define KINDS_ARRAY_TO_ARRAY (KIND_BIT(cudaMemcpyDeviceToDevice) | KIND_BIT(cudaMemcpyDefault))

static inline bool kind_in(enum cudaMemcpyKind kind, unsigned kinds) {
  return (unsigned)kind <= cudaMemcpyDefault && (kinds & KIND_BIT((unsigned)kind)) != 0;
}

#endif
