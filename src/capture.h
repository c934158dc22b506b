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

/* What a "potentially unsafe" driver call (a pinned free, a context
 * synchronisation) meets on the calling thread now, in one look:
 *  - NONE: no capture begun through this runtime can be in progress;
 *  - ALLOWED: one may be, and the driver's rule lets this thread make
 *    such a call (it still must not synchronise a capturing context);
 *  - FORBIDDEN: the driver would refuse it here with
 *    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture: the
 *    thread began a capture that is not relaxed, or it is in global mode
 *    and another thread's capture is global. */
enum cudaev__capture_answer {
  CUDAEV__CAPTURE_NONE,
  CUDAEV__CAPTURE_ALLOWED,
  CUDAEV__CAPTURE_FORBIDDEN,
};
enum cudaev__capture_answer cudaev__capture_unsafe_call(void);

#endif
