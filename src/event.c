/* Event Management: creation with flags, record (with flags), query,
 * synchronize, destroy, elapsed time.
 *
 * cudaEvent_t is the driver's CUevent and every function passes it
 * through: the driver's answers for events never recorded, not complete,
 * or created with cudaEventDisableTiming are the runtime's
 * (CUDA_ERROR_INVALID_HANDLE = cudaErrorInvalidResourceHandle,
 * CUDA_ERROR_NOT_READY = cudaErrorNotReady). Destroyed events (and
 * streams) crash the driver: those destroyed through this runtime are
 * refused with cudaErrorInvalidResourceHandle before it (handle.h). The
 * IPC event handles live in the device section (cudaIpcGetEventHandle /
 * cudaIpcOpenEventHandle).
 */
#include "internal.h"

#include "handle.h"
#include "wait.h"

/* The flags are the driver's (abi_asserts.c) and are passed on as they are. */
#define EVENT_FLAGS_VALID (cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)

/* The events created with cudaEventBlockingSync, one slot per hash of the
 * handle (handle.h's hash): cudaEventSynchronize spins briefly on them
 * before the driver's blocking wait (wait.h). The driver does not tell an
 * event's flags, so they are remembered here. A later blocking event that
 * hashes to the same slot takes it over; the one it displaced is then
 * waited for by the driver alone, as NVIDIA's runtime does, which is
 * slower but right. */
static _Atomic(uintptr_t) blocking_events[1u << CUDAEV_HANDLE_GRAVE_BITS];

static void blocking_forget(cudaEvent_t e) {
  uintptr_t h = (uintptr_t)e;
  atomic_compare_exchange_strong(&blocking_events[cudaev__handle_slot(h)], &h, 0);
}

static bool blocking_event(cudaEvent_t e) {
  uintptr_t h = (uintptr_t)e;
  return atomic_load_explicit(&blocking_events[cudaev__handle_slot(h)], memory_order_relaxed) == h;
}

/* The new event may have the address of a stream or event destroyed
 * earlier: it is live again, and its flags are the new ones. */
static cudaError_t created(CUresult r, cudaEvent_t *e, unsigned flags) {
  if (r == CUDA_SUCCESS) {
    cudaev__handle_revive(*e);
    if (flags & cudaEventBlockingSync)
      atomic_store(&blocking_events[cudaev__handle_slot((uintptr_t)*e)], (uintptr_t)*e);
    else
      blocking_forget(*e);
  }
  return cudaev__ret_cu(r);
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  CUDAEV_CTX_OR_RETURN();
  return created(cudaev__drv.cuEventCreate((CUevent *)event, CU_EVENT_DEFAULT), event, 0);
}

/* Unknown flags, and cudaEventInterprocess without cudaEventDisableTiming,
 * are cudaErrorInvalidValue (runtime reference, cudaEventCreateWithFlags). */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (event == NULL || (flags & ~(unsigned)EVENT_FLAGS_VALID) != 0 ||
      ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
    return cudaev__ret(cudaErrorInvalidValue);
  return created(cudaev__drv.cuEventCreate((CUevent *)event, flags), event, flags);
}

/* Hot path: no lock, no allocation, one driver call after the hot paths'
 * context check (internal.h) and two atomic loads (destroyed event,
 * destroyed stream). */
static inline cudaError_t record_impl(cudaEvent_t e, cudaStream_t s, bool pt) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(e);
  CUDAEV_LIVE_OR_RETURN(s);
  CUresult r = cudaev__drv.cuEventRecord((CUevent)e, cudaev__stream(s, pt));
  CUDAEV_CTX_HOT_RETRY(known, r, cudaev__drv.cuEventRecord((CUevent)e, cudaev__stream(s, pt)));
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaEventRecord, _ptsz);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return record_impl(event, stream, false);
}
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  return record_impl(event, stream, true);
}

static inline cudaError_t record_flags_impl(cudaEvent_t e, cudaStream_t s, unsigned flags,
                                            bool pt) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(e);
  CUDAEV_LIVE_OR_RETURN(s);
  CUresult r = cudaev__drv.cuEventRecordWithFlags((CUevent)e, cudaev__stream(s, pt), flags);
  CUDAEV_CTX_HOT_RETRY(
      known, r, cudaev__drv.cuEventRecordWithFlags((CUevent)e, cudaev__stream(s, pt), flags));
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaEventRecordWithFlags, _ptsz);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  return record_flags_impl(event, stream, flags, false);
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                          unsigned int flags) {
  return record_flags_impl(event, stream, flags, true);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(event);
  CUresult r = cudaev__drv.cuEventQuery((CUevent)event);
  CUDAEV_CTX_HOT_RETRY(known, r, cudaev__drv.cuEventQuery((CUevent)event));
  return cudaev__ret_cu(r);
}

/* Where the driver would put the thread to sleep (a BlockingSync event, or
 * a context with blocking-sync scheduling), wait.h spins briefly first. */
static CUresult event_sync(cudaEvent_t event) {
  if (event != NULL && (blocking_event(event) || cudaev__ctx_blocking()))
    return cudaev__wait_event((CUevent)event);
  return cudaev__drv.cuEventSynchronize((CUevent)event);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(event);
  CUresult r = event_sync(event);
  CUDAEV_CTX_HOT_RETRY(known, r, event_sync(event));
  return cudaev__ret_cu(r);
}

/* Buried before the driver frees it (handle.h says why); a second destroy
 * is refused instead of reaching the driver. */
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(event);
  cudaev__handle_bury(event);
  CUresult r = cudaev__drv.cuEventDestroy((CUevent)event);
  if (r != CUDA_SUCCESS)
    cudaev__handle_revive(event);
  else
    blocking_forget(event);
  return cudaev__ret_cu(r);
}

/* CUDA 13's cuEventElapsedTime (v2) has the runtime's error rules: never
 * recorded or DisableTiming -> invalid handle, recorded but not complete ->
 * not ready. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  CUDAEV_CTX_OR_RETURN();
  if (ms == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(start);
  CUDAEV_LIVE_OR_RETURN(end);
  return cudaev__ret_cu(cudaev__drv.cuEventElapsedTime(ms, (CUevent)start, (CUevent)end));
}
