/* Stream Management: creation and destruction, queries, waits, callbacks
 * and host functions, attributes, stream capture.
 *
 * cudaStream_t is the driver's CUstream: every function passes the handle
 * through, so the driver applies its own rules for the NULL stream (the
 * legacy default stream, with its implicit synchronisation with blocking
 * streams), cudaStreamLegacy (CU_STREAM_LEGACY), cudaStreamPerThread
 * (CU_STREAM_PER_THREAD) and priorities (clamped to the device's range).
 * Streams and events destroyed through this runtime are refused before
 * the driver sees them (handle.h: the driver would crash on them). The
 * _ptsz exports are the same functions with a NULL stream meaning the
 * per-thread default stream (cudaev__stream()).
 */
#include "internal.h"

#include "capture.h"

#include <stdlib.h>
#include <string.h>

#include "handle.h"
#include "stream.h"
#include "wait.h"

/* The runtime and driver attribute unions, their ids, and the enums inside
 * them are the same ABI (abi_asserts.c); the translation relies on it. */
bool cudaev__attr_value_to_cu(cudaLaunchAttributeID id, const cudaLaunchAttributeValue *in,
                              CUlaunchAttributeValue *out) {
  (void)id;
  if (in == NULL || out == NULL) return false;
  memcpy(out, in, sizeof *out);
  return true;
}

bool cudaev__attr_value_from_cu(cudaLaunchAttributeID id, const CUlaunchAttributeValue *in,
                                cudaLaunchAttributeValue *out) {
  (void)id;
  if (in == NULL || out == NULL) return false;
  memcpy(out, in, sizeof *out);
  return true;
}

/* ---- creation, destruction ---------------------------------------------- */

/* The new handle may reuse the address of a stream or event destroyed
 * earlier: it is live again. */
static cudaError_t created(CUresult r, cudaStream_t *s) {
  if (r == CUDA_SUCCESS) cudaev__handle_revive(*s);
  return cudaev__ret_cu(r);
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
  CUDAEV_CTX_OR_RETURN();
  return created(cudaev__drv.cuStreamCreate((CUstream *)pStream, CU_STREAM_DEFAULT), pStream);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  return created(cudaev__drv.cuStreamCreate((CUstream *)pStream, flags), pStream);
}

/* The driver clamps the priority into the device's range, as the runtime
 * documents. */
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority) {
  CUDAEV_CTX_OR_RETURN();
  return created(cudaev__drv.cuStreamCreateWithPriority((CUstream *)pStream, flags, priority),
                 pStream);
}

/* A second destroy is refused instead of reaching the driver. */
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  cudaev__handle_bury(stream);
  CUresult r = cudaev__drv.cuStreamDestroy((CUstream)stream);
  if (r != CUDA_SUCCESS) cudaev__handle_revive(stream);
  return cudaev__ret_cu(r);
}

/* ---- per-stream functions with a _ptsz twin ------------------------------ */

/* Each function below is written once, taking `per_thread`; the base
 * export and its _ptsz twin call it. */
static inline cudaError_t query_impl(cudaStream_t s, bool pt) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(s);
  CUresult r = cudaev__drv.cuStreamQuery(cudaev__stream(s, pt));
  CUDAEV_CTX_HOT_RETRY(known, r, cudaev__drv.cuStreamQuery(cudaev__stream(s, pt)));
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaStreamQuery, _ptsz);
cudaError_t cudaStreamQuery(cudaStream_t stream) { return query_impl(stream, false); }
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) { return query_impl(stream, true); }

/* Under blocking-sync scheduling wait.h spins briefly before the driver's
 * blocking wait. */
static CUresult stream_sync(CUstream s) {
  if (CUDAEV_UNLIKELY(cudaev__ctx_blocking())) return cudaev__wait_stream(s);
  return cudaev__drv.cuStreamSynchronize(s);
}

static inline cudaError_t sync_impl(cudaStream_t s, bool pt) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(s);
  CUresult r = stream_sync(cudaev__stream(s, pt));
  CUDAEV_CTX_HOT_RETRY(known, r, stream_sync(cudaev__stream(s, pt)));
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaStreamSynchronize, _ptsz);
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return sync_impl(stream, false); }
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) { return sync_impl(stream, true); }

static inline cudaError_t wait_event_impl(cudaStream_t s, cudaEvent_t e, unsigned flags, bool pt) {
  bool known;
  CUDAEV_CTX_HOT_OR_RETURN(known);
  CUDAEV_LIVE_OR_RETURN(s);
  CUDAEV_LIVE_OR_RETURN(e);
  CUresult r = cudaev__drv.cuStreamWaitEvent(cudaev__stream(s, pt), (CUevent)e, flags);
  CUDAEV_CTX_HOT_RETRY(known, r,
                       cudaev__drv.cuStreamWaitEvent(cudaev__stream(s, pt), (CUevent)e, flags));
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaStreamWaitEvent, _ptsz);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return wait_event_impl(stream, event, flags, false);
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return wait_event_impl(stream, event, flags, true);
}

static cudaError_t get_flags_impl(cudaStream_t s, unsigned *flags, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  return cudaev__ret_cu(cudaev__drv.cuStreamGetFlags(cudaev__stream(s, pt), flags));
}
CUDAEV_DECLARE_VARIANT(cudaStreamGetFlags, _ptsz);
cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags) {
  return get_flags_impl(hStream, flags, false);
}
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags) {
  return get_flags_impl(hStream, flags, true);
}

static cudaError_t get_priority_impl(cudaStream_t s, int *priority, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  return cudaev__ret_cu(cudaev__drv.cuStreamGetPriority(cudaev__stream(s, pt), priority));
}
CUDAEV_DECLARE_VARIANT(cudaStreamGetPriority, _ptsz);
cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority) {
  return get_priority_impl(hStream, priority, false);
}
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority) {
  return get_priority_impl(hStream, priority, true);
}

static cudaError_t get_id_impl(cudaStream_t s, unsigned long long *id, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  return cudaev__ret_cu(cudaev__drv.cuStreamGetId(cudaev__stream(s, pt), id));
}
CUDAEV_DECLARE_VARIANT(cudaStreamGetId, _ptsz);
cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId) {
  return get_id_impl(hStream, streamId, false);
}
cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long *streamId) {
  return get_id_impl(hStream, streamId, true);
}

/* The driver answers with a CUdevice; the runtime reports the ordinal. */
static cudaError_t get_device_impl(cudaStream_t s, int *device, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  if (device == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUdevice d;
  CUresult r = cudaev__drv.cuStreamGetDevice(cudaev__stream(s, pt), &d);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  for (int i = 0; i < cudaev__rt.device_count; i++) {
    if (cudaev__rt.devices[i].dev == d) {
      *device = i;
      return cudaSuccess;
    }
  }
  return cudaev__ret(cudaErrorInvalidDevice);
}
CUDAEV_DECLARE_VARIANT(cudaStreamGetDevice, _ptsz);
cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device) {
  return get_device_impl(hStream, device, false);
}
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device) {
  return get_device_impl(hStream, device, true);
}

static cudaError_t copy_attributes_impl(cudaStream_t dst, cudaStream_t src, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(dst);
  CUDAEV_LIVE_OR_RETURN(src);
  return cudaev__ret_cu(
      cudaev__drv.cuStreamCopyAttributes(cudaev__stream(dst, pt), cudaev__stream(src, pt)));
}
CUDAEV_DECLARE_VARIANT(cudaStreamCopyAttributes, _ptsz);
cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src) {
  return copy_attributes_impl(dst, src, false);
}
cudaError_t cudaStreamCopyAttributes_ptsz(cudaStream_t dst, cudaStream_t src) {
  return copy_attributes_impl(dst, src, true);
}

static cudaError_t get_attribute_impl(cudaStream_t s, cudaStreamAttrID attr,
                                      cudaStreamAttrValue *value_out, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  if (value_out == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUlaunchAttributeValue v;
  memset(&v, 0, sizeof v);
  CUresult r = cudaev__drv.cuStreamGetAttribute(cudaev__stream(s, pt), (CUstreamAttrID)attr, &v);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__attr_value_from_cu(attr, &v, value_out);
  return cudaSuccess;
}
CUDAEV_DECLARE_VARIANT(cudaStreamGetAttribute, _ptsz);
cudaError_t cudaStreamGetAttribute(cudaStream_t hStream, cudaStreamAttrID attr,
                                   cudaStreamAttrValue *value_out) {
  return get_attribute_impl(hStream, attr, value_out, false);
}
cudaError_t cudaStreamGetAttribute_ptsz(cudaStream_t hStream, cudaStreamAttrID attr,
                                        cudaStreamAttrValue *value_out) {
  return get_attribute_impl(hStream, attr, value_out, true);
}

static cudaError_t set_attribute_impl(cudaStream_t s, cudaStreamAttrID attr,
                                      const cudaStreamAttrValue *value, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  CUlaunchAttributeValue v;
  if (!cudaev__attr_value_to_cu(attr, value, &v)) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(
      cudaev__drv.cuStreamSetAttribute(cudaev__stream(s, pt), (CUstreamAttrID)attr, &v));
}
CUDAEV_DECLARE_VARIANT(cudaStreamSetAttribute, _ptsz);
cudaError_t cudaStreamSetAttribute(cudaStream_t hStream, cudaStreamAttrID attr,
                                   const cudaStreamAttrValue *value) {
  return set_attribute_impl(hStream, attr, value, false);
}
cudaError_t cudaStreamSetAttribute_ptsz(cudaStream_t hStream, cudaStreamAttrID attr,
                                        const cudaStreamAttrValue *value) {
  return set_attribute_impl(hStream, attr, value, true);
}

static cudaError_t attach_impl(cudaStream_t s, void *devPtr, size_t length, unsigned flags,
                               bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  return cudaev__ret_cu(cudaev__drv.cuStreamAttachMemAsync(cudaev__stream(s, pt),
                                                           (CUdeviceptr)devPtr, length, flags));
}
CUDAEV_DECLARE_VARIANT(cudaStreamAttachMemAsync, _ptsz);
cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void *devPtr, size_t length,
                                     unsigned int flags) {
  return attach_impl(stream, devPtr, length, flags, false);
}
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void *devPtr, size_t length,
                                          unsigned int flags) {
  return attach_impl(stream, devPtr, length, flags, true);
}

/* ---- callbacks and host functions --------------------------------------- */

/* The driver calls this with the stream's status: cudaStreamAddCallback's
 * callbacks run even after a fault (status then holds the error), unlike
 * cudaLaunchHostFunc's functions. */
void CUDA_CB cudaev__stream_callback_trampoline(CUstream s, CUresult status, void *rec) {
  (void)s;
  struct cudaev__stream_callback r = *(struct cudaev__stream_callback *)rec;
  free(rec);
  r.fn(r.stream, cudaev__error_from_cu(status), r.user);
}

/* The record is malloc'ed: the allocator's per-thread cache serves it
 * without a lock; the trampoline frees it once the callback has run, or
 * this function does when the driver refuses the callback. */
static cudaError_t add_callback_impl(cudaStream_t s, cudaStreamCallback_t cb, void *user,
                                     unsigned flags, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  if (cb == NULL || flags != 0) return cudaev__ret(cudaErrorInvalidValue);
  struct cudaev__stream_callback *rec = malloc(sizeof *rec);
  if (rec == NULL) return cudaev__ret(cudaErrorMemoryAllocation);
  rec->fn = cb;
  rec->user = user;
  rec->stream = s;
  CUresult r = cudaev__drv.cuStreamAddCallback(cudaev__stream(s, pt),
                                               cudaev__stream_callback_trampoline, rec, 0);
  if (r != CUDA_SUCCESS) {
    free(rec);
    return cudaev__ret_cu(r);
  }
  return cudaSuccess;
}
CUDAEV_DECLARE_VARIANT(cudaStreamAddCallback, _ptsz);
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                  void *userData, unsigned int flags) {
  return add_callback_impl(stream, callback, userData, flags, false);
}
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                       void *userData, unsigned int flags) {
  return add_callback_impl(stream, callback, userData, flags, true);
}

/* cudaHostFn_t and CUhostFn are the same type: no record needed. */
static cudaError_t host_func_impl(cudaStream_t s, cudaHostFn_t fn, void *user, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  return cudaev__ret_cu(cudaev__drv.cuLaunchHostFunc(cudaev__stream(s, pt), fn, user));
}
CUDAEV_DECLARE_VARIANT(cudaLaunchHostFunc, _ptsz);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
  return host_func_impl(stream, fn, userData, false);
}
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
  return host_func_impl(stream, fn, userData, true);
}

/* ---- stream capture ------------------------------------------------------ */

static cudaError_t begin_capture_impl(cudaStream_t s, enum cudaStreamCaptureMode mode, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  CUstream cs = cudaev__stream(s, pt);
  CUresult r = cudaev__drv.cuStreamBeginCapture(cs, (CUstreamCaptureMode)mode);
  if (r == CUDA_SUCCESS) cudaev__capture_began(cs, (CUstreamCaptureMode)mode);
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaStreamBeginCapture, _ptsz);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  return begin_capture_impl(stream, mode, false);
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  return begin_capture_impl(stream, mode, true);
}

static cudaError_t begin_capture_to_graph_impl(cudaStream_t s, cudaGraph_t g,
                                               const cudaGraphNode_t *deps,
                                               const cudaGraphEdgeData *data, size_t n,
                                               enum cudaStreamCaptureMode mode, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  /* A graph the driver would crash on (handle.h): cudaErrorInvalidValue,
   * NVIDIA's answer to a NULL graph (its runtime crashes on this one). */
  CUDAEV_LIVE_OR_RETURN_ERR(g, cudaErrorInvalidValue);
  CUstream cs = cudaev__stream(s, pt);
  CUresult r = cudaev__drv.cuStreamBeginCaptureToGraph(cs, (CUgraph)g, (const CUgraphNode *)deps,
                                                       (const CUgraphEdgeData *)data, n,
                                                       (CUstreamCaptureMode)mode);
  if (r == CUDA_SUCCESS) cudaev__capture_began(cs, (CUstreamCaptureMode)mode);
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaStreamBeginCaptureToGraph, _ptsz);
cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                          const cudaGraphNode_t *dependencies,
                                          const cudaGraphEdgeData *dependencyData,
                                          size_t numDependencies, enum cudaStreamCaptureMode mode) {
  return begin_capture_to_graph_impl(stream, graph, dependencies, dependencyData, numDependencies,
                                     mode, false);
}
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t *dependencies,
                                               const cudaGraphEdgeData *dependencyData,
                                               size_t numDependencies,
                                               enum cudaStreamCaptureMode mode) {
  return begin_capture_to_graph_impl(stream, graph, dependencies, dependencyData, numDependencies,
                                     mode, true);
}

static cudaError_t end_capture_impl(cudaStream_t s, cudaGraph_t *g, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  CUstream cs = cudaev__stream(s, pt);
  CUresult r = cudaev__drv.cuStreamEndCapture(cs, (CUgraph *)g);
  /* Refused from the wrong thread, the capture goes on; otherwise it is
   * over, invalidated or not. */
  if (r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) cudaev__capture_ended(cs);
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaStreamEndCapture, _ptsz);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  return end_capture_impl(stream, pGraph, false);
}
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph) {
  return end_capture_impl(stream, pGraph, true);
}

static cudaError_t is_capturing_impl(cudaStream_t s, enum cudaStreamCaptureStatus *st, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  return cudaev__ret_cu(
      cudaev__drv.cuStreamIsCapturing(cudaev__stream(s, pt), (CUstreamCaptureStatus *)st));
}
CUDAEV_DECLARE_VARIANT(cudaStreamIsCapturing, _ptsz);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus *pCaptureStatus) {
  return is_capturing_impl(stream, pCaptureStatus, false);
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                       enum cudaStreamCaptureStatus *pCaptureStatus) {
  return is_capturing_impl(stream, pCaptureStatus, true);
}

static cudaError_t capture_info_impl(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                     unsigned long long *id, cudaGraph_t *g,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **data,
                                     size_t *n, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  CUresult r = cudaev__drv.cuStreamGetCaptureInfo(
      cudaev__stream(s, pt), (CUstreamCaptureStatus *)st, (cuuint64_t *)id, (CUgraph *)g,
      (const CUgraphNode **)deps, (const CUgraphEdgeData **)data, n);
  /* Capture makes nodes this runtime did not hand out yet: the ones it
   * hands out here are live, whatever a destroyed node left at their
   * address (handle.h). */
  if (r == CUDA_SUCCESS && deps != NULL && *deps != NULL && n != NULL)
    for (size_t i = 0; i < *n; i++) cudaev__handle_revive((*deps)[i]);
  return cudaev__ret_cu(r);
}
CUDAEV_DECLARE_VARIANT(cudaStreamGetCaptureInfo, _ptsz);
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus *captureStatus_out,
                                     unsigned long long *id_out, cudaGraph_t *graph_out,
                                     const cudaGraphNode_t **dependencies_out,
                                     const cudaGraphEdgeData **edgeData_out,
                                     size_t *numDependencies_out) {
  return capture_info_impl(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                           edgeData_out, numDependencies_out, false);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                          enum cudaStreamCaptureStatus *captureStatus_out,
                                          unsigned long long *id_out, cudaGraph_t *graph_out,
                                          const cudaGraphNode_t **dependencies_out,
                                          const cudaGraphEdgeData **edgeData_out,
                                          size_t *numDependencies_out) {
  return capture_info_impl(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                           edgeData_out, numDependencies_out, true);
}

static cudaError_t update_deps_impl(cudaStream_t s, cudaGraphNode_t *deps,
                                    const cudaGraphEdgeData *data, size_t n, unsigned flags,
                                    bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(s);
  return cudaev__ret_cu(cudaev__drv.cuStreamUpdateCaptureDependencies(
      cudaev__stream(s, pt), (CUgraphNode *)deps, (const CUgraphEdgeData *)data, n, flags));
}
CUDAEV_DECLARE_VARIANT(cudaStreamUpdateCaptureDependencies, _ptsz);
cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t stream, cudaGraphNode_t *dependencies,
                                                const cudaGraphEdgeData *dependencyData,
                                                size_t numDependencies, unsigned int flags) {
  return update_deps_impl(stream, dependencies, dependencyData, numDependencies, flags, false);
}
cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream,
                                                     cudaGraphNode_t *dependencies,
                                                     const cudaGraphEdgeData *dependencyData,
                                                     size_t numDependencies, unsigned int flags) {
  return update_deps_impl(stream, dependencies, dependencyData, numDependencies, flags, true);
}

/* Thread-local capture mode of the driver; needs no context. */
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  CUDAEV_INIT_OR_RETURN();
  /* The driver dereferences a NULL mode (crashes); refused before it. */
  if (mode == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuThreadExchangeStreamCaptureMode((CUstreamCaptureMode *)mode));
}

/* The calling thread's current context, none made current: NVIDIA's
 * answers cudaErrorDeviceUninitialized on a thread with none yet (measured
 * on an H200, also in a process where another thread has one). */
cudaError_t cudaCtxResetPersistingL2Cache(void) {
  CUDAEV_INIT_OR_RETURN();
  return cudaev__ret_cu(cudaev__drv.cuCtxResetPersistingL2Cache());
}
