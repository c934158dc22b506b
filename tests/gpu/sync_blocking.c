/* gpu suite, waits under cudaDeviceScheduleBlockingSync and on
 * cudaEventBlockingSync events: cudaStreamSynchronize,
 * cudaEventSynchronize and cudaDeviceSynchronize on idle and busy work
 * (memsets of 256 MiB), on events never recorded, recorded and re-recorded,
 * with the data checked after each wait; during a stream capture (global
 * and relaxed); the scheduling flags read back; and a waiting thread beside
 * a thread that enqueues. */
#include "common.h"

#include <pthread.h>
#include <stdint.h>

#define BIG ((size_t)256 << 20)

static unsigned char *dev, *host;

static const char *dev_first_last(unsigned char v) {
  unsigned char a = 0, b = 0;
  if (cudaMemcpy(&a, dev, 1, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(&b, dev + BIG - 1, 1, cudaMemcpyDeviceToHost) != cudaSuccess)
    return "READ FAILED";
  return a == v && b == v ? "data ok" : "DATA DIFFERS";
}

static void *waiter(void *arg) {
  cudaStream_t s = arg;
  int ok = 1;
  for (int i = 0; i < 50 && ok; i++) {
    ok = cudaMemsetAsync(dev, i, (size_t)16 << 20, s) == cudaSuccess &&
         cudaStreamSynchronize(s) == cudaSuccess;
  }
  return (void *)(intptr_t)ok;
}

int main(void) {
  TC(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  unsigned flags = 0;
  TC(cudaGetDeviceFlags(&flags));
  printf("flags & schedule mask: %#x\n", flags & cudaDeviceScheduleMask);
  CHECK(cudaMalloc((void **)&dev, BIG));
  CHECK(cudaMallocHost((void **)&host, 4096));
  cudaStream_t s, nb;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  cudaEvent_t plain, blocking, never;
  CHECK(cudaEventCreate(&plain));
  CHECK(cudaEventCreateWithFlags(&blocking, cudaEventBlockingSync));
  CHECK(cudaEventCreateWithFlags(&never, cudaEventBlockingSync | cudaEventDisableTiming));

  /* idle */
  TC(cudaStreamSynchronize(s));
  TC(cudaStreamSynchronize(0));
  TC(cudaStreamSynchronize(cudaStreamPerThread));
  TC(cudaDeviceSynchronize());
  TC(cudaEventSynchronize(never));
  TC(cudaEventQuery(never));

  /* busy: each wait must see the work done */
  for (int i = 1; i <= 3; i++) {
    TC(cudaMemsetAsync(dev, i, BIG, s));
    TC(cudaStreamSynchronize(s));
    printf("stream sync after memset %d: %s\n", i, dev_first_last((unsigned char)i));
    TC(cudaMemsetAsync(dev, i + 10, BIG, nb));
    TC(cudaEventRecord(blocking, nb));
    TC(cudaEventSynchronize(blocking));
    TC(cudaEventQuery(blocking));
    printf("blocking event after memset %d: %s\n", i, dev_first_last((unsigned char)(i + 10)));
    TC(cudaMemsetAsync(dev, i + 20, BIG, nb));
    TC(cudaEventRecord(plain, nb));
    TC(cudaEventSynchronize(plain));
    printf("default event after memset %d: %s\n", i, dev_first_last((unsigned char)(i + 20)));
    TC(cudaMemsetAsync(dev, i + 30, BIG, 0));
    TC(cudaDeviceSynchronize());
    printf("device sync after legacy memset %d: %s\n", i, dev_first_last((unsigned char)(i + 30)));
    TC(cudaMemsetAsync(dev, i + 40, BIG, nb));
    TC(cudaDeviceSynchronize());
    printf("device sync after non-blocking memset %d: %s\n", i,
           dev_first_last((unsigned char)(i + 40)));
    TC(cudaMemsetAsync(dev, i + 50, BIG, cudaStreamPerThread));
    TC(cudaStreamSynchronize(cudaStreamPerThread));
    printf("per-thread stream sync %d: %s\n", i, dev_first_last((unsigned char)(i + 50)));
  }

  /* an event recorded twice: the wait is for the second record */
  TC(cudaEventRecord(blocking, nb));
  TC(cudaMemsetAsync(dev, 99, BIG, nb));
  TC(cudaEventRecord(blocking, nb));
  TC(cudaEventSynchronize(blocking));
  printf("re-recorded event: %s\n", dev_first_last(99));

  /* during a capture */
  cudaGraph_t g = NULL;
  TC(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  TC(cudaMemsetAsync(dev, 1, 4096, s));
  TC(cudaStreamSynchronize(s));
  TC(cudaStreamEndCapture(s, &g));
  if (g != NULL) TC(cudaGraphDestroy(g));
  g = NULL;
  TC(cudaStreamBeginCapture(nb, cudaStreamCaptureModeGlobal));
  TC(cudaMemsetAsync(dev, 1, 4096, nb));
  TC(cudaEventRecord(blocking, nb));
  TC(cudaEventSynchronize(blocking));
  TC(cudaDeviceSynchronize());
  TC(cudaStreamEndCapture(nb, &g));
  if (g != NULL) TC(cudaGraphDestroy(g));
  g = NULL;
  TC(cudaStreamBeginCapture(nb, cudaStreamCaptureModeRelaxed));
  TC(cudaMemsetAsync(dev, 1, 4096, nb));
  TC(cudaStreamSynchronize(0));
  TC(cudaStreamSynchronize(s));
  TC(cudaStreamEndCapture(nb, &g));
  if (g != NULL) TC(cudaGraphDestroy(g));
  TC(cudaDeviceSynchronize());

  /* one thread waits while this one enqueues and waits too */
  pthread_t t;
  void *ok;
  pthread_create(&t, NULL, waiter, nb);
  for (int i = 0; i < 50; i++) {
    CHECK(cudaMemsetAsync(dev + ((size_t)64 << 20), i, (size_t)16 << 20, s));
    CHECK(cudaEventRecord(plain, s));
    CHECK(cudaEventSynchronize(plain));
  }
  pthread_join(t, &ok);
  printf("two waiting threads: %s\n", ok ? "ok" : "FAILED");

  TC(cudaEventDestroy(plain));
  TC(cudaEventDestroy(blocking));
  TC(cudaEventDestroy(never));
  TC(cudaStreamDestroy(s));
  TC(cudaStreamDestroy(nb));
  TC(cudaFree(dev));
  TC(cudaFreeHost(host));
  return 0;
}
