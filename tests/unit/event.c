/* Event Management on a fake driver: flag checks before the driver,
 * per-thread stream mapping of the record functions, elapsed time errors. */
#include <criterion/criterion.h>

#include "fake_driver.h"

CUDAEV_DECLARE_VARIANT(cudaEventRecord, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaEventRecordWithFlags, _ptsz);

static int creates;
static unsigned created_flags;
static CUresult fake_event_create(CUevent *e, unsigned flags) {
  creates++;
  created_flags = flags;
  *e = (CUevent)(uintptr_t)0x1000e0;
  return CUDA_SUCCESS;
}

static CUstream recorded_on;
static unsigned recorded_flags;
static CUresult fake_record(CUevent e, CUstream s) {
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  recorded_on = s;
  return CUDA_SUCCESS;
}
static CUresult fake_record_flags(CUevent e, CUstream s, unsigned flags) {
  recorded_flags = flags;
  return fake_record(e, s);
}

static CUresult elapsed_result;
static CUresult fake_elapsed(float *ms, CUevent a, CUevent b) {
  (void)a;
  (void)b;
  if (elapsed_result == CUDA_SUCCESS) *ms = 1.5f;
  return elapsed_result;
}

static void install(void) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuEventCreate = fake_event_create;
  fake.cuEventRecord = fake_record;
  fake.cuEventRecordWithFlags = fake_record_flags;
  fake.cuEventElapsedTime = fake_elapsed;
  cudaev__driver_install(&fake, 13000);
}

Test(event, flags_are_checked_before_the_driver) {
  install();
  cudaEvent_t e;
  cr_expect_eq(cudaEventCreateWithFlags(&e, 0x8), cudaErrorInvalidValue);
  cr_expect_eq(cudaEventCreateWithFlags(&e, cudaEventInterprocess), cudaErrorInvalidValue);
  cr_expect_eq(cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventBlockingSync),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaEventCreateWithFlags(NULL, 0), cudaErrorInvalidValue);
  cr_expect_eq(creates, 0);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);

  cr_expect_eq(cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming),
               cudaSuccess);
  cr_expect_eq(created_flags, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
  cr_expect_eq(cudaEventCreateWithFlags(&e, cudaEventBlockingSync), cudaSuccess);
  cr_expect_eq(created_flags, CU_EVENT_BLOCKING_SYNC);
  cr_expect_eq(cudaEventCreate(&e), cudaSuccess);
  cr_expect_eq(created_flags, CU_EVENT_DEFAULT);
  cr_expect_eq(creates, 3);
}

Test(event, record_maps_streams_like_every_stream_argument) {
  install();
  cudaEvent_t e = (cudaEvent_t)(uintptr_t)0x1000e0;
  cr_expect_eq(cudaEventRecord(e, NULL), cudaSuccess);
  cr_expect_eq(recorded_on, NULL);
  cr_expect_eq(cudaEventRecord_ptsz(e, NULL), cudaSuccess);
  cr_expect_eq(recorded_on, CU_STREAM_PER_THREAD);
  cr_expect_eq(cudaEventRecordWithFlags_ptsz(e, NULL, cudaEventRecordExternal), cudaSuccess);
  cr_expect_eq(recorded_on, CU_STREAM_PER_THREAD);
  cr_expect_eq(recorded_flags, CU_EVENT_RECORD_EXTERNAL);
  cr_expect_eq(cudaEventRecordWithFlags(e, cudaStreamLegacy, 0), cudaSuccess);
  cr_expect_eq(recorded_on, CU_STREAM_LEGACY);
  cr_expect_eq(cudaEventRecord(NULL, NULL), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

Test(event, elapsed_time_errors) {
  install();
  cudaEvent_t a = (cudaEvent_t)(uintptr_t)0x10000a, b = (cudaEvent_t)(uintptr_t)0x10000b;
  float ms = 0;
  cr_expect_eq(cudaEventElapsedTime(NULL, a, b), cudaErrorInvalidValue);
  elapsed_result = CUDA_ERROR_NOT_READY;
  cr_expect_eq(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
  elapsed_result = CUDA_ERROR_INVALID_HANDLE;
  cr_expect_eq(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);
  elapsed_result = CUDA_SUCCESS;
  cr_expect_eq(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  cr_expect_float_eq(ms, 1.5f, 1e-6);
}

static int event_driver_calls;
static CUresult event_destroy_result;
static CUresult fake_event_destroy(CUevent e) {
  (void)e;
  event_driver_calls++;
  return event_destroy_result;
}
static CUresult fake_event_query(CUevent e) {
  (void)e;
  event_driver_calls++;
  return CUDA_SUCCESS;
}
static CUresult fake_stream_create(CUstream *s, unsigned flags) {
  (void)flags;
  *s = (CUstream)(uintptr_t)0x1000e0; /* the address of the fake's event */
  return CUDA_SUCCESS;
}

/* The driver crashes on a destroyed event (NVIDIA's runtime with it); ours
 * refuses the events it destroyed, everywhere an event is taken, until the
 * driver hands the address out again (as an event or a stream). */
Test(event, destroyed_events_are_refused_before_the_driver) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuEventCreate = fake_event_create;
  fake.cuEventRecord = fake_record;
  fake.cuEventRecordWithFlags = fake_record_flags;
  fake.cuEventElapsedTime = fake_elapsed;
  fake.cuEventDestroy = fake_event_destroy;
  fake.cuEventQuery = fake_event_query;
  fake.cuEventSynchronize = fake_event_query;
  fake.cuStreamCreate = fake_stream_create;
  cudaev__driver_install(&fake, 13000);

  cudaEvent_t e = NULL;
  float ms = 0;
  cr_assert_eq(cudaEventCreate(&e), cudaSuccess);
  cr_assert_eq(cudaEventDestroy(e), cudaSuccess);
  event_driver_calls = 0;
  recorded_on = (CUstream)(uintptr_t)0x100077;
  cr_expect_eq(cudaEventQuery(e), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaEventSynchronize(e), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaEventRecord(e, NULL), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaEventRecordWithFlags(e, NULL, 0), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaEventElapsedTime(&ms, e, e), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaEventElapsedTime(NULL, e, e), cudaErrorInvalidValue);
  cr_expect_eq(cudaStreamWaitEvent(NULL, e, 0), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaEventDestroy(e), cudaErrorInvalidResourceHandle);
  cr_expect_eq(event_driver_calls, 0);
  cr_expect_eq(recorded_on, (CUstream)(uintptr_t)0x100077);

  /* Created again at the same address: live. */
  cr_assert_eq(cudaEventCreate(&e), cudaSuccess);
  cr_expect_eq(cudaEventQuery(e), cudaSuccess);
  cr_expect_eq(cudaEventRecord(e, NULL), cudaSuccess);
  cr_expect_eq(event_driver_calls, 1);

  /* A destroy the driver refuses leaves the event live. */
  event_destroy_result = CUDA_ERROR_INVALID_VALUE;
  cr_expect_eq(cudaEventDestroy(e), cudaErrorInvalidValue);
  cr_expect_eq(cudaEventQuery(e), cudaSuccess);

  /* The address of a destroyed event handed out as a stream: live. */
  event_destroy_result = CUDA_SUCCESS;
  cr_assert_eq(cudaEventDestroy(e), cudaSuccess);
  cudaStream_t s = NULL;
  cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
  cr_expect_eq((void *)s, (void *)e);
  cr_expect_eq(cudaEventRecord((cudaEvent_t)(uintptr_t)0x1000e1, s), cudaSuccess);
  cr_expect_eq(recorded_on, (CUstream)s);
}

/* The hot paths skip cuCtxGetCurrent once the thread has a context
 * (internal.h); when the application unsets it through the driver API, the
 * driver's INVALID_CONTEXT sends the call through the context check, which
 * makes the primary context current again, and the driver once more. */
static int ctx_gets, records_refused;
static CUresult counting_ctx_get_current(CUcontext *c) {
  ctx_gets++;
  return fake_ctx_get_current(c);
}
static CUresult record_needs_ctx(CUevent e, CUstream s) {
  CUcontext c = NULL;
  fake_ctx_get_current(&c);
  if (c == NULL) {
    records_refused++;
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return fake_record(e, s);
}

Test(event, hot_path_checks_the_context_once_and_again_when_it_is_gone) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuCtxGetCurrent = counting_ctx_get_current;
  fake.cuEventRecord = record_needs_ctx;
  cudaev__driver_install(&fake, 13000);
  cudaEvent_t e = (cudaEvent_t)(uintptr_t)0x1000e0;
  /* The first call makes the primary context current, the second finds
   * it current and remembers it. */
  cr_assert_eq(cudaEventRecord(e, NULL), cudaSuccess);
  cr_assert_eq(cudaEventRecord(e, NULL), cudaSuccess);
  int first = ctx_gets;
  cr_expect_gt(first, 0, "the first calls on a thread check");
  for (int i = 0; i < 10; i++) cr_assert_eq(cudaEventRecord(e, NULL), cudaSuccess);
  cr_expect_eq(ctx_gets, first, "later calls do not ask the driver");
  fake_ctx_set_current(NULL); /* cuCtxSetCurrent(NULL) by the application */
  cr_expect_eq(cudaEventRecord(e, NULL), cudaSuccess);
  cr_expect_eq(records_refused, 1);
  CUcontext c = NULL;
  fake_ctx_get_current(&c);
  cr_expect_neq(c, NULL, "the primary context is current again");
  cr_expect_eq(cudaGetLastError(), cudaSuccess);
}
