/* Spin-then-sleep waits for blocking-sync scheduling (src/wait.h). */
#include "internal.h"

#include <stdlib.h>
#include <time.h>

#include "env.h"
#include "spin.h"
#include "wait.h"

static long long spin_window = -1;

/* The window is read once; a racing first read computes the same value. */
static long long window_ns(void) {
  long long w = __atomic_load_n(&spin_window, __ATOMIC_RELAXED);
  if (CUDAEV_LIKELY(w >= 0)) return w;
  w = cudaev__env_num("CUDAEV_BLOCKING_SPIN_US", 0, 1000 * 1000, 50) * 1000;
  __atomic_store_n(&spin_window, w, __ATOMIC_RELAXED);
  return w;
}

/* The answer for the context last asked about on this thread. The
 * generation is read before the driver is asked, so flags set while it
 * answers are asked for again next time. */
static _Thread_local struct {
  CUcontext ctx;
  unsigned gen;
  bool blocking;
} sched;

bool cudaev__ctx_blocking(void) {
  CUcontext c = cudaev__thread.ctx;
  unsigned g = atomic_load_explicit(&cudaev__rt.flags_gen, memory_order_acquire);
  if (CUDAEV_LIKELY(c != NULL && c == sched.ctx && g == sched.gen)) return sched.blocking;
  unsigned f = 0;
  bool b = cudaev__drv.cuCtxGetFlags(&f) == CUDA_SUCCESS &&
           (f & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC;
  sched.ctx = c;
  sched.gen = g;
  sched.blocking = b;
  return b;
}

typedef CUresult (*query_fn)(void *);

/* Polls query(h) until it answers something other than NOT_READY or `w`
 * nanoseconds have passed. Returns NOT_READY when the window passed. */
static CUresult spin(query_fn query, void *h, long long w) {
  CUresult r = query(h);
  if (r != CUDA_ERROR_NOT_READY || w <= 0) return r;
  long long end = cudaev__mono_ns() + w;
  for (;;) {
    for (int i = 0; i < 16; i++) cudaev__cpu_relax();
    r = query(h);
    if (r != CUDA_ERROR_NOT_READY || cudaev__mono_ns() >= end) return r;
  }
}

static CUresult event_query(void *e) { return cudaev__drv.cuEventQuery((CUevent)e); }
static CUresult stream_query(void *s) { return cudaev__drv.cuStreamQuery((CUstream)s); }

CUresult cudaev__wait_event_within(CUevent e, long long spin_ns) {
  CUresult r = spin(event_query, e, spin_ns);
  return r != CUDA_ERROR_NOT_READY ? r : cudaev__drv.cuEventSynchronize(e);
}

CUresult cudaev__wait_event(CUevent e) { return cudaev__wait_event_within(e, window_ns()); }

/* A query of a stream that takes part in a capture (or of the legacy
 * stream while a blocking stream captures) may invalidate the capture, and
 * its error need not be the one the synchronize call gives: such a stream
 * goes straight to the driver. cuStreamIsCapturing only reads the state. */
static bool not_capturing(CUstream s) {
  CUstreamCaptureStatus st;
  return cudaev__drv.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
         st == CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult cudaev__wait_stream(CUstream s) {
  if (not_capturing(s)) {
    CUresult r = spin(stream_query, s, window_ns());
    if (r != CUDA_ERROR_NOT_READY) return r;
  }
  return cudaev__drv.cuStreamSynchronize(s);
}

/* The legacy stream's answer is only a hint: whatever it says (done, an
 * error, still busy), cuCtxSynchronize decides and reports. */
CUresult cudaev__wait_ctx(void) {
  if (not_capturing(CU_STREAM_LEGACY)) (void)spin(stream_query, CU_STREAM_LEGACY, window_ns());
  return cudaev__drv.cuCtxSynchronize(NULL);
}
