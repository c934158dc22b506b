/* Stream captures begun through this runtime (capture.h). */
#include "capture.h"

#include <pthread.h>

/* More captures at once than this (an application capturing on many
 * streams) overflow: cudaev__capture_maybe then answers true until every
 * capture ended, which is the safe answer. */
#define SLOTS 32

struct capture {
  CUstream stream;
  CUstreamCaptureMode mode;
  pthread_t thread; /* the thread that began it */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct capture caps[SLOTS];
static int ncaps;
static atomic_int active; /* begun and not ended, overflowed ones included */

void cudaev__capture_began(CUstream s, CUstreamCaptureMode mode) {
  pthread_mutex_lock(&mu);
  atomic_fetch_add_explicit(&active, 1, memory_order_release);
  if (ncaps < SLOTS) caps[ncaps++] = (struct capture){s, mode, pthread_self()};
  pthread_mutex_unlock(&mu);
}

static void forget_at(int i) {
  caps[i] = caps[--ncaps];
  atomic_fetch_sub_explicit(&active, 1, memory_order_release);
}

void cudaev__capture_ended(CUstream s) {
  pthread_mutex_lock(&mu);
  int i = 0;
  while (i < ncaps && caps[i].stream != s) i++;
  if (i < ncaps)
    forget_at(i);
  else if (atomic_load_explicit(&active, memory_order_relaxed) > ncaps)
    atomic_fetch_sub_explicit(&active, 1, memory_order_release); /* an overflowed one */
  pthread_mutex_unlock(&mu);
}

/* Forgets the captures the driver says are over. Under mu. */
static void prune(void) {
  for (int i = 0; i < ncaps;) {
    CUstream s = caps[i].stream;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    /* A capture ended by another copy of the runtime, or a stream
     * destroyed while capturing, leaves a stale entry: the driver says. */
    if (s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD && s != NULL &&
        cudaev__drv.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
        st == CU_STREAM_CAPTURE_STATUS_NONE) {
      forget_at(i);
      continue;
    }
    i++;
  }
}

bool cudaev__capture_maybe(void) {
  if (atomic_load_explicit(&active, memory_order_acquire) == 0) return false;
  pthread_mutex_lock(&mu);
  prune();
  bool maybe = atomic_load_explicit(&active, memory_order_acquire) > 0;
  pthread_mutex_unlock(&mu);
  return maybe;
}

enum cudaev__capture_answer cudaev__capture_unsafe_call(void) {
  if (atomic_load_explicit(&active, memory_order_acquire) == 0) return CUDAEV__CAPTURE_NONE;
  /* The thread's mode: swapped out and back. A driver that cannot say
   * (none loaded) has no capture to forbid anything. */
  CUstreamCaptureMode mine = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool known = cudaev__drv.cuThreadExchangeStreamCaptureMode(&mine) == CUDA_SUCCESS;
  if (known) {
    CUstreamCaptureMode back = mine;
    (void)cudaev__drv.cuThreadExchangeStreamCaptureMode(&back);
  }
  pthread_t self = pthread_self();
  bool forbids = false;
  pthread_mutex_lock(&mu);
  prune();
  for (int i = 0; known && i < ncaps && !forbids; i++) {
    bool own = pthread_equal(caps[i].thread, self) != 0;
    forbids = own ? caps[i].mode != CU_STREAM_CAPTURE_MODE_RELAXED
                  : mine == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                        caps[i].mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
  }
  bool maybe = atomic_load_explicit(&active, memory_order_acquire) > 0;
  pthread_mutex_unlock(&mu);
  return forbids ? CUDAEV__CAPTURE_FORBIDDEN
         : maybe ? CUDAEV__CAPTURE_ALLOWED
                 : CUDAEV__CAPTURE_NONE;
}
