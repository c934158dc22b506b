/* The legacy default stream's implicit synchronisation, observed without
 * timing: a stream is held by a host function waiting on a gate the main
 * thread opens, and an event recorded on another stream either completes
 * while the gate is closed (no implicit dependency) or does not (the
 * dependency NVIDIA documents). Also callbacks and host functions in
 * stream order, and the _ptsz record mapping NULL to the per-thread stream. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <stdatomic.h>
#include <time.h>

extern cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);

static atomic_int gate;
static void CUDART_CB wait_gate(void *p) {
  (void)p;
  while (!atomic_load(&gate)) {
  }
}

/* Polls e for up to half a second: 1 = it completed while held. */
static int completes(cudaEvent_t e) {
  struct timespec t = {0, 1000000};
  for (int i = 0; i < 500; i++) {
    cudaError_t r = cudaEventQuery(e);
    if (r == cudaSuccess) return 1;
    if (r != cudaErrorNotReady) return -(int)r;
    nanosleep(&t, NULL);
  }
  (void)cudaGetLastError();
  return 0;
}

static void scenario(const char *name, cudaStream_t held, cudaStream_t other, int ptsz) {
  cudaEvent_t e;
  CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  atomic_store(&gate, 0);
  CHECK(cudaLaunchHostFunc(held, wait_gate, NULL));
  if (ptsz)
    CHECK(cudaEventRecord_ptsz(e, other));
  else
    CHECK(cudaEventRecord(e, other));
  printf("%-48s completes while held: %d\n", name, completes(e));
  atomic_store(&gate, 1);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventDestroy(e));
  (void)cudaGetLastError();
}

static int order[8];
static atomic_int norder;
static cudaError_t cb_status = cudaErrorUnknown;
static int cb_stream_is_s;
static cudaStream_t the_stream;
static void CUDART_CB host_fn(void *p) { order[atomic_fetch_add(&norder, 1)] = (int)(size_t)p; }
static void CUDART_CB callback(cudaStream_t s, cudaError_t status, void *p) {
  cb_status = status;
  cb_stream_is_s = s == the_stream;
  order[atomic_fetch_add(&norder, 1)] = (int)(size_t)p;
}

int main(void) {
  cudaStream_t b1, b2, nb;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreate(&b1));
  CHECK(cudaStreamCreate(&b2));
  CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));

  scenario("blocking held, record on NULL", b1, NULL, 0);
  scenario("blocking held, record on cudaStreamLegacy", b1, cudaStreamLegacy, 0);
  scenario("non-blocking held, record on NULL", nb, NULL, 0);
  scenario("NULL held, record on blocking", NULL, b1, 0);
  scenario("NULL held, record on non-blocking", NULL, nb, 0);
  scenario("blocking held, record on other blocking", b1, b2, 0);
  scenario("blocking held, record on per-thread", b1, cudaStreamPerThread, 0);
  scenario("per-thread held, record on NULL", cudaStreamPerThread, NULL, 0);
  scenario("NULL held, record on per-thread", NULL, cudaStreamPerThread, 0);
  scenario("blocking held, record_ptsz on NULL", b1, NULL, 1);
  scenario("per-thread held, record_ptsz on NULL", cudaStreamPerThread, NULL, 1);

  /* callbacks and host functions run in stream order; callbacks get the
   * stream they were added to and the status. */
  the_stream = b1;
  T(cudaLaunchHostFunc(b1, host_fn, (void *)1));
  T(cudaStreamAddCallback(b1, callback, (void *)2, 0));
  T(cudaLaunchHostFunc(b1, host_fn, (void *)3));
  T(cudaStreamAddCallback(b1, callback, (void *)4, 0));
  T(cudaStreamSynchronize(b1));
  printf("order: %d %d %d %d (n=%d) status %s stream-is-s %d\n", order[0], order[1], order[2],
         order[3], atomic_load(&norder), cudaGetErrorName(cb_status), cb_stream_is_s);
  the_stream = NULL;
  T(cudaStreamAddCallback(NULL, callback, (void *)5, 0));
  T(cudaStreamSynchronize(NULL));
  printf("NULL stream callback: stream-is-NULL %d value %d\n", cb_stream_is_s, order[4]);
  TC(cudaStreamAddCallback(b1, callback, NULL, 1));
  TC(cudaStreamAddCallback(b1, NULL, NULL, 0));
  TC(cudaLaunchHostFunc(b1, NULL, NULL));

  CHECK(cudaStreamDestroy(b1));
  CHECK(cudaStreamDestroy(b2));
  CHECK(cudaStreamDestroy(nb));
  TC(cudaGetLastError());
  return 0;
}
