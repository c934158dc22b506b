/* Stream Management on a fake driver: handle mapping (NULL, legacy,
 * per-thread, _ptsz), error mapping and last error, the cudaStreamAddCallback
 * trampoline, attribute translation, device ordinals. */
#include <criterion/criterion.h>

#include "fake_driver.h"
#include "stream.h"

CUDAEV_DECLARE_VARIANT(cudaStreamQuery, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaStreamAddCallback, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaStreamGetAttribute, _ptsz);

static CUstream seen_stream;
static CUresult query_result;
static int driver_calls;

static CUresult fake_query(CUstream s) {
  driver_calls++;
  seen_stream = s;
  return query_result;
}

static CUstreamCallback seen_cb;
static void *seen_cb_data;
static CUresult fake_add_callback(CUstream s, CUstreamCallback cb, void *data, unsigned flags) {
  (void)flags;
  driver_calls++;
  seen_stream = s;
  seen_cb = cb;
  seen_cb_data = data;
  return CUDA_SUCCESS;
}

static CUlaunchAttributeValue stored_value;
static CUstreamAttrID stored_id;
static CUresult fake_set_attr(CUstream s, CUstreamAttrID id, const CUlaunchAttributeValue *v) {
  seen_stream = s;
  stored_id = id;
  stored_value = *v;
  return CUDA_SUCCESS;
}
static CUresult fake_get_attr(CUstream s, CUstreamAttrID id, CUlaunchAttributeValue *v) {
  seen_stream = s;
  if (id != stored_id) return CUDA_ERROR_INVALID_VALUE;
  *v = stored_value;
  return CUDA_SUCCESS;
}

static CUresult fake_get_device(CUstream s, CUdevice *d) {
  (void)s;
  *d = 0;
  return CUDA_SUCCESS;
}

static CUresult fake_create(CUstream *s, unsigned flags) {
  driver_calls++;
  if (s == NULL || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  *s = (CUstream)(uintptr_t)0x105000;
  return CUDA_SUCCESS;
}

static void install(void) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuStreamQuery = fake_query;
  fake.cuStreamAddCallback = fake_add_callback;
  fake.cuStreamSetAttribute = fake_set_attr;
  fake.cuStreamGetAttribute = fake_get_attr;
  fake.cuStreamGetDevice = fake_get_device;
  fake.cuStreamCreate = fake_create;
  cudaev__driver_install(&fake, 13000);
}

Test(stream, handles_reach_the_driver_as_given_and_ptsz_maps_null) {
  install();
  cr_expect_eq(cudaStreamQuery(NULL), cudaSuccess);
  cr_expect_eq(seen_stream, NULL);
  cr_expect_eq(cudaStreamQuery(cudaStreamLegacy), cudaSuccess);
  cr_expect_eq(seen_stream, CU_STREAM_LEGACY);
  cr_expect_eq(cudaStreamQuery(cudaStreamPerThread), cudaSuccess);
  cr_expect_eq(seen_stream, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaStreamQuery_ptsz(NULL), cudaSuccess);
  cr_expect_eq(seen_stream, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaStreamQuery_ptsz(cudaStreamLegacy), cudaSuccess);
  cr_expect_eq(seen_stream, CU_STREAM_LEGACY);
  cr_expect_eq(cudaStreamQuery_ptsz((cudaStream_t)0x101234), cudaSuccess);
  cr_expect_eq(seen_stream, (CUstream)0x101234);
}

Test(stream, first_call_makes_the_primary_context_current) {
  install();
  cudaStream_t s;
  cr_expect_eq(cudaStreamCreate(&s), cudaSuccess);
  cr_expect_eq(fake_current, (CUcontext)(uintptr_t)0x1000);
  cr_expect_eq(s, (cudaStream_t)(uintptr_t)0x105000);
}

Test(stream, driver_errors_map_and_are_recorded) {
  install();
  query_result = CUDA_ERROR_INVALID_HANDLE;
  cr_expect_eq(cudaStreamQuery((cudaStream_t)0x100099), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  query_result = CUDA_ERROR_NOT_READY;
  cr_expect_eq(cudaStreamQuery(NULL), cudaErrorNotReady);
  query_result = CUDA_ERROR_CONTEXT_IS_DESTROYED;
  cr_expect_eq(cudaStreamQuery(NULL), cudaErrorContextIsDestroyed);
  cr_expect_eq(cudaStreamCreateWithFlags(NULL, 0), cudaErrorInvalidValue);
  cudaStream_t s;
  cr_expect_eq(cudaStreamCreateWithFlags(&s, 4), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

static int cb_calls;
static cudaStream_t cb_stream;
static cudaError_t cb_status;
static void *cb_user;
static void user_cb(cudaStream_t s, cudaError_t status, void *user) {
  cb_calls++;
  cb_stream = s;
  cb_status = status;
  cb_user = user;
}

Test(stream, callback_trampoline_passes_the_users_stream_and_the_mapped_status) {
  install();
  int tag;
  cr_assert_eq(cudaStreamAddCallback((cudaStream_t)0x100077, user_cb, &tag, 0), cudaSuccess);
  cr_expect_eq(seen_stream, (CUstream)0x100077);
  cr_assert_eq(seen_cb, cudaev__stream_callback_trampoline);
  /* The driver calls back after a fault with the error: so must we. */
  seen_cb((CUstream)0x100077, CUDA_ERROR_LAUNCH_FAILED, seen_cb_data);
  cr_expect_eq(cb_calls, 1);
  cr_expect_eq(cb_stream, (cudaStream_t)0x100077);
  cr_expect_eq(cb_status, cudaErrorLaunchFailure);
  cr_expect_eq(cb_user, &tag);

  /* _ptsz: the driver sees the per-thread stream, the callback the NULL
   * the user passed. */
  cr_assert_eq(cudaStreamAddCallback_ptsz(NULL, user_cb, NULL, 0), cudaSuccess);
  cr_expect_eq(seen_stream, CU_STREAM_PER_THREAD);
  seen_cb(CU_STREAM_PER_THREAD, CUDA_SUCCESS, seen_cb_data);
  cr_expect_eq(cb_calls, 2);
  cr_expect_eq(cb_stream, NULL);
  cr_expect_eq(cb_status, cudaSuccess);
}

Test(stream, callback_arguments_are_checked_before_the_driver) {
  install();
  driver_calls = 0;
  cr_expect_eq(cudaStreamAddCallback(NULL, user_cb, NULL, 1), cudaErrorInvalidValue);
  cr_expect_eq(cudaStreamAddCallback(NULL, NULL, NULL, 0), cudaErrorInvalidValue);
  cr_expect_eq(driver_calls, 0);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

Test(stream, attributes_translate_both_ways) {
  install();
  cudaStreamAttrValue v;
  memset(&v, 0, sizeof v);
  int buf[4];
  v.accessPolicyWindow.base_ptr = buf;
  v.accessPolicyWindow.num_bytes = sizeof buf;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cr_assert_eq(
      cudaStreamSetAttribute((cudaStream_t)0x100010, cudaStreamAttributeAccessPolicyWindow, &v),
      cudaSuccess);
  cr_expect_eq(stored_id, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
  cr_expect_eq(stored_value.accessPolicyWindow.base_ptr, buf);
  cr_expect_eq(stored_value.accessPolicyWindow.num_bytes, sizeof buf);
  cr_expect_float_eq(stored_value.accessPolicyWindow.hitRatio, 0.5f, 1e-6);
  cr_expect_eq(stored_value.accessPolicyWindow.hitProp, CU_ACCESS_PROPERTY_PERSISTING);
  cr_expect_eq(stored_value.accessPolicyWindow.missProp, CU_ACCESS_PROPERTY_STREAMING);

  cudaStreamAttrValue out;
  memset(&out, 0xff, sizeof out);
  cr_assert_eq(cudaStreamGetAttribute_ptsz(NULL, cudaStreamAttributeAccessPolicyWindow, &out),
               cudaSuccess);
  cr_expect_eq(seen_stream, CU_STREAM_PER_THREAD);
  cr_expect_eq(memcmp(&out, &v, sizeof out), 0);

  v.syncPolicy = cudaSyncPolicyBlockingSync;
  cr_assert_eq(cudaStreamSetAttribute(NULL, cudaStreamAttributeSynchronizationPolicy, &v),
               cudaSuccess);
  cr_expect_eq(stored_value.syncPolicy, CU_SYNC_POLICY_BLOCKING_SYNC);
  cr_expect_eq(cudaStreamGetAttribute(NULL, cudaStreamAttributeSynchronizationPolicy, &out),
               cudaSuccess);
  cr_expect_eq(out.syncPolicy, cudaSyncPolicyBlockingSync);

  cr_expect_eq(cudaStreamSetAttribute(NULL, cudaStreamAttributePriority, NULL),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaStreamGetAttribute(NULL, cudaStreamAttributePriority, NULL),
               cudaErrorInvalidValue);
}

Test(stream, get_device_reports_the_ordinal) {
  install();
  int d = -1;
  cr_expect_eq(cudaStreamGetDevice(NULL, &d), cudaSuccess);
  cr_expect_eq(d, 0);
  cr_expect_eq(cudaStreamGetDevice(NULL, NULL), cudaErrorInvalidValue);
}

static int destroys;
static CUresult fake_destroy(CUstream s) {
  (void)s;
  destroys++;
  return CUDA_SUCCESS;
}
static CUresult fake_event_wait(CUstream s, CUevent e, unsigned flags) {
  (void)s;
  (void)e;
  (void)flags;
  driver_calls++;
  return CUDA_SUCCESS;
}
static CUresult fake_exchange_mode(CUstreamCaptureMode *m) {
  *m = CU_STREAM_CAPTURE_MODE_GLOBAL; /* dereferences, as the driver does */
  return CUDA_SUCCESS;
}

/* The driver crashes on a destroyed stream; ours refuses the streams it
 * destroyed, until the driver hands the address out again. */
Test(stream, destroyed_streams_are_refused_before_the_driver) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuStreamQuery = fake_query;
  fake.cuStreamCreate = fake_create;
  fake.cuStreamDestroy = fake_destroy;
  fake.cuStreamWaitEvent = fake_event_wait;
  cudaev__driver_install(&fake, 13000);

  cudaStream_t s = NULL;
  cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
  cr_assert_eq(cudaStreamDestroy(s), cudaSuccess);
  cr_expect_eq(destroys, 1);
  driver_calls = 0;
  cr_expect_eq(cudaStreamQuery(s), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaStreamWaitEvent(s, (cudaEvent_t)(uintptr_t)0x1000e0, 0),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  cr_expect_eq(destroys, 1);
  cr_expect_eq(driver_calls, 0);
  /* NULL, legacy and per-thread are never taken for destroyed. */
  cr_expect_eq(cudaStreamQuery(NULL), cudaSuccess);
  cr_expect_eq(cudaStreamQuery(cudaStreamLegacy), cudaSuccess);
  cr_expect_eq(cudaStreamQuery(cudaStreamPerThread), cudaSuccess);
  /* The fake hands out the same address again: live. */
  cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
  driver_calls = 0;
  cr_expect_eq(cudaStreamQuery(s), cudaSuccess);
  cr_expect_eq(driver_calls, 1);
}

Test(stream, exchange_capture_mode_refuses_null_before_the_driver) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuThreadExchangeStreamCaptureMode = fake_exchange_mode;
  cudaev__driver_install(&fake, 13000);
  cr_expect_eq(cudaThreadExchangeStreamCaptureMode(NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  cr_expect_eq(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
  cr_expect_eq(m, cudaStreamCaptureModeGlobal);
}
