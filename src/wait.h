/* Host waits for the GPU under blocking-sync scheduling (src/wait.c), used
 * by cudaEventSynchronize, cudaStreamSynchronize, cudaDeviceSynchronize and
 * the pageable copy pipeline (src/staging.c).
 *
 * NVIDIA's runtime leaves a blocking-sync wait to the driver, which puts
 * the thread to sleep at once and wakes it 15-40 us after the GPU is done
 * (a spinning wait wakes after 7-9 us). Most waits of a latency-bound
 * program end within a few tens of microseconds, so these helpers first
 * poll the driver's query for a short window (CUDAEV_BLOCKING_SPIN_US,
 * default 50 us; 0 turns the window off) and only then hand the wait to
 * the driver's own blocking call. A wait on a long kernel therefore costs
 * at most the window's CPU time and then sleeps as before; a short one
 * wakes at the spin floor. The result is the one the driver gives: a
 * query's answer other than CUDA_ERROR_NOT_READY (success, a sticky error,
 * a capture error) ends the wait with that answer.
 *
 * Spin, yield and auto scheduling keep the driver's waits unchanged: the
 * callers use these helpers only where the driver would block.
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_WAIT_H
#define CUDAEV_WAIT_H

#include "internal.h"

/* True when the current context's scheduling is blocking sync
 * (cudaDeviceScheduleBlockingSync). Call after cudaev__ctx() succeeded.
 * The answer is cached per thread and context until this runtime sets
 * flags again (cudaSetDeviceFlags, cudaInitDevice, cudaDeviceReset), so
 * the stream and device waits do not ask the driver every time. Flags
 * that the application changes through the driver API on a context in
 * use are not seen; that costs speed, never correctness: a stale "spin"
 * leaves the wait to the driver as NVIDIA's runtime does, a stale
 * "blocking" spins briefly before the driver's own wait. */
bool cudaev__ctx_blocking(void);

/* cuEventSynchronize(e), spinning on cuEventQuery first. */
CUresult cudaev__wait_event(CUevent e);

/* cuEventSynchronize(e), spinning on cuEventQuery for `spin_ns` first
 * (the pageable copy pipeline waits for DMAs it knows to be short). */
CUresult cudaev__wait_event_within(CUevent e, long long spin_ns);

/* cuStreamSynchronize(s), spinning on cuStreamQuery first. */
CUresult cudaev__wait_stream(CUstream s);

/* cuCtxSynchronize(), after spinning on the legacy default stream (where
 * the work a device-wide wait follows usually is). The driver's call
 * always makes the final decision, so work on other streams is still
 * waited for. */
CUresult cudaev__wait_ctx(void);

#endif
