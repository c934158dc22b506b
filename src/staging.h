/* Copies between pageable host memory and device memory through pinned
 * staging buffers (src/staging.c), behind cudaMemcpy and cudaMemcpyAsync.
 *
 * NVIDIA's runtime leaves a pageable copy to the driver, which moves it at
 * about a fifth of the pinned bandwidth. A copy larger than the ring's
 * threshold (512 KiB by default) goes through a ring of pinned buffers per device
 * instead: the host copies chunk k+1 into a buffer (several threads for
 * large chunks) while the DMA of chunk k runs in the copy's own stream;
 * an event per buffer says when it may be filled again.
 *
 * What stays NVIDIA's:
 *  - Host to device returns once the source has been copied into staging
 *    memory (the source may be reused at return); the DMAs run in the
 *    stream, after the work enqueued before and before the work enqueued
 *    after. cudaMemcpy also waits for the DMAs to finish.
 *  - Device to host returns once the data is in the destination.
 *  - The stream's semantics (legacy default stream, per-thread default
 *    stream, blocking and non-blocking streams) are the driver's: every DMA
 *    and event goes to the stream the plain call would have used.
 *  - Everything the ring is not sure to do exactly as the driver goes to
 *    the driver unchanged: copies up to the threshold, pinned,
 *    registered or managed host memory, device ranges that are not wholly
 *    inside one device allocation, unknown pointers, a stream that is
 *    capturing (or cannot say), a stream of another context, a context
 *    that is not a primary context, a ring in use by another thread, and
 *    staging memory the driver refuses. Errors of the plain call (bad
 *    pointers, wrong kinds) are therefore the driver's.
 *  - An error of the stream (a sticky error, a failed copy) ends the copy
 *    with the driver's error.
 *
 * CUDAEV_STAGING=0 in the environment turns the ring off;
 * CUDAEV_STAGING_MIN (bytes) sets the largest copy it leaves to the
 * driver (default 512 KiB), CUDAEV_STAGING_THREADS the copy threads beside
 * the caller (0 to 15, default 3) and CUDAEV_STAGING_NT=0 turns off the
 * non-temporal stores of its host copies (ntcopy.h).
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_STAGING_H
#define CUDAEV_STAGING_H

#include "internal.h"

/* Copies of at most this many bytes go to the driver as they are, whatever
 * the settings: the ring's set-up per copy (pointer queries, a stream
 * check, an event) would cost more than it saves. The callers test this
 * before calling; the ring's own threshold (CUDAEV_STAGING_MIN in the
 * environment, in bytes, default STAGING_MIN_DEFAULT in staging.c) is at
 * least this. */
#define CUDAEV_STAGING_MIN ((size_t)64 << 10)

/* cudaMemcpy's (sync) or cudaMemcpyAsync's work for `count` >
 * CUDAEV_STAGING_MIN bytes of `kind` (HostToDevice, DeviceToHost or
 * Default) on driver stream `st`, a context being current. Returns false
 * when the copy is not one for the ring (the caller makes the plain driver
 * call); true when the ring ran it: *r is its result. */
bool cudaev__staged_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                         CUstream st, bool sync, CUresult *r);

/* After cudaDeviceReset of `device` succeeded: the reset freed the ring's
 * buffers and events; they are forgotten, and made again when needed. */
void cudaev__staging_reset(int device);

#endif
