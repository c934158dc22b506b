/* Event Management against NVIDIA's runtime: flags, record (with flags),
 * query/synchronize on complete and blocked work, elapsed time error cases,
 * bad input. Work is held back deterministically by a host function that
 * waits for the main thread. */
#include "common.h"

#include <stdatomic.h>

static atomic_int gate;
static void CUDART_CB wait_gate(void *p) {
  (void)p;
  while (!atomic_load(&gate)) {
  }
}

int main(void) {
  cudaEvent_t a = NULL, b = NULL, nt = NULL, bs = NULL, ip = NULL, never = NULL, dead = NULL;
  cudaStream_t s = NULL;
  float ms = -1.0f;

  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreate(&s));
  T(cudaEventCreate(&a));
  T(cudaEventCreateWithFlags(&b, cudaEventDefault));
  T(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
  T(cudaEventCreateWithFlags(&bs, cudaEventBlockingSync));
  T(cudaEventCreateWithFlags(&ip, cudaEventInterprocess | cudaEventDisableTiming));
  T(cudaEventCreate(&never));
  TC(cudaEventCreateWithFlags(&dead, cudaEventInterprocess));
  TC(cudaEventCreateWithFlags(&dead, 0x8));
  TC(cudaEventCreateWithFlags(&dead, 0x100));
  TC(cudaEventCreateWithFlags(NULL, 0));
  TC(cudaEventCreate(NULL));

  /* never recorded */
  T(cudaEventQuery(never));
  T(cudaEventSynchronize(never));
  TC(cudaEventElapsedTime(&ms, never, never));
  TC(cudaEventElapsedTime(&ms, a, never));

  /* recorded on idle streams */
  T(cudaEventRecord(a, s));
  T(cudaEventRecord(b, NULL));
  T(cudaEventSynchronize(b));
  T(cudaEventSynchronize(a));
  T(cudaEventQuery(a));
  T(cudaEventElapsedTime(&ms, a, b));
  printf("elapsed is non-negative: %d\n", ms >= 0.0f);
  TC(cudaEventElapsedTime(NULL, a, b));
  T(cudaEventRecord(nt, cudaStreamPerThread));
  T(cudaEventSynchronize(nt));
  TC(cudaEventElapsedTime(&ms, a, nt));
  TC(cudaEventElapsedTime(&ms, nt, a));
  T(cudaEventRecordWithFlags(a, cudaStreamLegacy, cudaEventRecordDefault));
  T(cudaEventRecordWithFlags(a, s, cudaEventRecordExternal));
  TC(cudaEventRecordWithFlags(a, s, 0x10));
  T(cudaEventRecord(ip, s));
  T(cudaStreamWaitEvent(s, ip, 0));
  T(cudaStreamWaitEvent(s, ip, cudaEventWaitExternal));
  TC(cudaStreamWaitEvent(s, ip, 0x10));
  T(cudaStreamWaitEvent(NULL, never, 0));
  TC(cudaStreamWaitEvent(s, NULL, 0));
  T(cudaStreamSynchronize(s));

  /* blocked work: not ready until the gate opens */
  atomic_store(&gate, 0);
  T(cudaEventRecord(a, s));
  T(cudaLaunchHostFunc(s, wait_gate, NULL));
  T(cudaEventRecord(b, s));
  T(cudaEventRecord(bs, s));
  TC(cudaEventQuery(b));
  TC(cudaStreamQuery(s));
  TC(cudaEventElapsedTime(&ms, a, b));
  atomic_store(&gate, 1);
  T(cudaEventSynchronize(bs));
  T(cudaEventQuery(b));
  T(cudaEventElapsedTime(&ms, a, b));
  printf("elapsed is non-negative: %d\n", ms >= 0.0f);

  /* destroyed and NULL events */
  T(cudaEventCreate(&dead));
  T(cudaEventDestroy(dead));
  TC(cudaEventDestroy(NULL));
  TC(cudaEventQuery(NULL));
  TC(cudaEventSynchronize(NULL));
  TC(cudaEventRecord(NULL, s));
  TC(cudaEventRecordWithFlags(NULL, s, 0));

  T(cudaEventDestroy(a));
  T(cudaEventDestroy(b));
  T(cudaEventDestroy(nt));
  T(cudaEventDestroy(bs));
  T(cudaEventDestroy(ip));
  T(cudaEventDestroy(never));
  T(cudaStreamDestroy(s));
  TC(cudaGetLastError());
  /* A destroyed event: the driver does not survive it (NVIDIA's runtime
   * crashes), ours refuses it. */
  TREFUSE(cudaEventQuery(dead));
  TREFUSE(cudaEventSynchronize(dead));
  TREFUSE(cudaEventRecord(dead, NULL));
  TREFUSE(cudaStreamWaitEvent(NULL, dead, 0));
  TREFUSE(cudaEventElapsedTime(&ms, dead, dead));
  TREFUSE(cudaEventDestroy(dead));
  TC(cudaGetLastError());
  return 0;
}
