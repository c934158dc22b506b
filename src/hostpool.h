/* The pinned host memory pool behind cudaHostAlloc, cudaMallocHost and
 * cudaFreeHost (src/memory.c). Owned by src/hostpool*.c (their private
 * contract, and which file owns what: hostpool_internal.h).
 *
 * NVIDIA's runtime asks the driver for every pinned allocation and gives it
 * back on every free (about 1.2 ms a pair at 4 KiB, 32 ms at 64 MiB). The
 * pool keeps freed pinned memory for reuse instead: a private jemalloc
 * (tools/jemalloc.sh) with one arena per (device, cudaHostAlloc flag set),
 * whose extent hooks take their pages from cuMemHostAlloc with that flag
 * set, in the device's primary context.
 *
 * What stays NVIDIA's:
 *  - Every allocation the pool hands out is page-aligned and is the start of
 *    its own driver allocation (a "chunk": the hooks refuse to split or
 *    merge extents, and a page-aligned request occupies a whole extent), so
 *    cudaHostGetFlags, cudaHostGetDevicePointer, cudaPointerGetAttributes
 *    and cudaHostRegister over it are answered by the driver as for a fresh
 *    cuMemHostAlloc.
 *  - cudaFreeHost synchronizes the current context before the memory can be
 *    reused (cuMemFreeHost waits for the GPU too), and returns what that
 *    synchronization returns.
 *  - An interior pointer, or one already freed, is refused with
 *    cudaErrorInvalidValue (the driver's answer) and never reaches
 *    jemalloc; a pointer the pool did not hand out goes to cuMemFreeHost.
 *  - Errors of cuMemHostAlloc (out of memory and others) come back as the
 *    driver gave them.
 *
 * What differs: a freed pooled allocation stays a driver allocation until
 * it is purged, so the driver still answers for it (cudaPointerGetAttributes
 * says cudaMemoryTypeHost, not Unregistered). Freed pinned memory goes back
 * to the driver within about 1.25 x the decay time (CUDAEV_HOST_POOL_DECAY_MS,
 * default 5000 ms: ~6 s) of its free, also when the program makes no more
 * calls: a reaper thread, started with the first pooled free, lets
 * jemalloc's decay run every quarter of that time and purges everything
 * once the pool has been idle that long, then sleeps until the next free.
 *
 * Not pooled (straight to the driver, as before): requests over
 * CUDAEV_HOSTPOOL_MAX, allocations made while a context other than a
 * primary context is current (the pool cannot see when it is destroyed),
 * and everything when CUDAEV_HOST_POOL=0 is in the environment.
 *
 * cudaDeviceReset frees the device's pinned allocations in the driver; the
 * pool then forgets the device's arenas (cudaev__hostpool_reset) and never
 * hands out a pointer from before the reset. As with NVIDIA's runtime, a
 * reset while another thread still allocates or frees on that device is
 * the caller's error.
 *
 * Thread: every function here may be called from any thread. Our locks are
 * never held across a driver call, except that a purge (reaper) and a reset
 * exclude each other for their whole length.
 */
#ifndef CUDAEV_HOSTPOOL_H
#define CUDAEV_HOSTPOOL_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

/* Largest request the pool serves. Above it a size class can round up by
 * 64 MiB of pinned memory (jemalloc's classes are a quarter of a power of
 * two apart), which would then stay pinned while cached; buffers that large
 * are usually allocated once and kept, so the driver serves them exactly. */
#define CUDAEV_HOSTPOOL_MAX ((size_t)256 << 20)

/* cudaHostAlloc's work once its arguments are checked (size > 0, flags
 * valid) and a context is current. Returns false when the pool does not
 * serve this request (the caller asks the driver), true when it did: *r is
 * then CUDA_SUCCESS with *p set, or the driver's error (*p untouched). */
bool cudaev__hostpool_alloc(void **p, size_t size, unsigned flags, CUresult *r);

/* cudaFreeHost's work for a non-NULL pointer, a context being current.
 * Returns false when p is not the pool's (the caller asks cuMemFreeHost);
 * true when the pool answered: *e is cudaSuccess (freed), the error of the
 * context synchronization (freed all the same), or cudaErrorInvalidValue
 * (p lies in pooled memory but is not a live allocation's start). */
bool cudaev__hostpool_free(void *p, cudaError_t *e);

/* cudaHostGetFlags's answer for pooled memory, from the driver's: the
 * flags the allocation was asked with, plus the driver's Mapped bit (set
 * for every pinned allocation under unified addressing). The driver's own
 * answer for a pooled chunk can name another allocation's flags: on an
 * H100 (driver 580) a Portable request read back without Portable, and a
 * Mapped one with it, while earlier chunks of the same size stayed
 * allocated in the pool; NVIDIA's runtime, freeing each allocation, reads
 * back exactly what was asked. Does nothing for memory that is not the
 * pool's. */
void cudaev__hostpool_flags(const void *p, unsigned *flags);

/* After cudaDeviceReset of `device` succeeded: the driver has freed the
 * device's pinned allocations. Destroys the device's arenas without giving
 * their chunks to the driver again; the next allocation creates new ones. */
void cudaev__hostpool_reset(int device);

/* For tests: the jemalloc arena serving (device, flags), 0 when none yet. */
unsigned cudaev__hostpool_arena(int device, unsigned flags);

#endif
