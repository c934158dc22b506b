/* Stream captures begun through this runtime, so that the runtime can tell
 * whether one may be in progress before it makes a call of its own that a
 * capture forbids whatever the threads' modes: a context synchronisation
 * (cudaFreeHost of pooled memory, src/hostpool.c). NVIDIA's runtime makes
 * no such call: its cudaFreeHost is the driver's, which leaves a capture on
 * another thread alone.
 *
 * What it sees: captures begun by cudaStreamBeginCapture(ToGraph) of this
 * library. One begun through the driver API or another copy of the runtime
 * is not seen.
 *
 * Thread: every function may be called from any thread. The set is a few
 * slots under one mutex; cudaev__capture_maybe costs one atomic load while
 * no capture was begun.
 */
#ifndef CUDAEV_CAPTURE_H
#define CUDAEV_CAPTURE_H

#include "internal.h"

/* Records stream `s` (the driver's handle; cudaev__stream resolved) as
 * capturing in `mode` on the calling thread: call after the driver began
 * its capture. */
void cudaev__capture_began(CUstream s, CUstreamCaptureMode mode);

/* Forgets `s`: call after cudaStreamEndCapture, whatever it answered (the
 * capture is over either way). */
void cudaev__capture_ended(CUstream s);

/* False when no capture begun through this runtime can still be in
 * progress. Asks the driver about each recorded stream (cuStreamIsCapturing)
 * and forgets those that no longer capture; a per-thread or legacy stream,
 * which names another stream on each thread, counts until it is ended. */
bool cudaev__capture_maybe(void);

/* True when the driver would refuse a "potentially unsafe" call (a pinned
 * free, say) on the calling thread now, by its rule: the thread began a
 * capture that is not relaxed, or the thread is in global mode and another
 * thread's capture is global. Such a call fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture. */
bool cudaev__capture_forbids_unsafe(void);

#endif
