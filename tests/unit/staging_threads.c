/* The pageable-copy staging ring (src/staging.c) under concurrency, as a
 * plain program so it also runs under ThreadSanitizer (suite tsan;
 * Criterion cannot start there): threads make staged copies of several
 * sizes in both directions at once, so they contend for the ring (the
 * loser goes to the driver) and for the copy threads (the loser copies
 * alone), and every byte is checked. The stand-in driver's DMAs run at
 * once; tests/unit/staging.c covers their ordering. Exits 0 when every
 * copy arrived intact. */
#include "fake_driver.h"

#include <pthread.h>
#include <stdio.h>

enum { THREADS = 4, ROUNDS = 30 };
#define PER_THREAD ((size_t)12 << 20)

static unsigned char *devmem;
static atomic_int bad, staged, plain;

static CUresult attrs(unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p) {
  bool dev = p >= (uintptr_t)devmem && p < (uintptr_t)devmem + THREADS * PER_THREAD;
  for (unsigned i = 0; i < n; i++) {
    switch (a[i]) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned *)data[i] = dev ? CU_MEMORYTYPE_DEVICE : 0;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data[i] = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(CUdeviceptr *)data[i] = dev ? (CUdeviceptr)devmem : 0;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *(size_t *)data[i] = dev ? THREADS * PER_THREAD : 0;
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}
static CUresult htod_async(CUdeviceptr d, const void *s, size_t n, CUstream st) {
  (void)st;
  atomic_fetch_add(&staged, 1);
  memcpy((void *)d, s, n);
  return CUDA_SUCCESS;
}
static CUresult dtoh_async(void *d, CUdeviceptr s, size_t n, CUstream st) {
  (void)st;
  atomic_fetch_add(&staged, 1);
  memcpy(d, (const void *)s, n);
  return CUDA_SUCCESS;
}
static CUresult htod(CUdeviceptr d, const void *s, size_t n) {
  atomic_fetch_add(&plain, 1);
  memcpy((void *)d, s, n);
  return CUDA_SUCCESS;
}
static CUresult dtoh(void *d, CUdeviceptr s, size_t n) {
  atomic_fetch_add(&plain, 1);
  memcpy(d, (const void *)s, n);
  return CUDA_SUCCESS;
}
static CUresult copy_async(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  (void)st;
  atomic_fetch_add(&plain, 1);
  memcpy((void *)d, (const void *)s, n);
  return CUDA_SUCCESS;
}
static atomic_uintptr_t next_event = 0x1000;
static CUresult event_create(CUevent *e, unsigned flags) {
  (void)flags;
  *e = (CUevent)atomic_fetch_add(&next_event, 16);
  return CUDA_SUCCESS;
}
static CUresult record(CUevent e, CUstream s) {
  (void)e, (void)s;
  return CUDA_SUCCESS;
}
static CUresult event_done(CUevent e) {
  (void)e;
  return CUDA_SUCCESS;
}
static CUresult not_capturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
static CUresult exchange_mode(CUstreamCaptureMode *m) {
  (void)m;
  return CUDA_SUCCESS;
}

static void *worker(void *arg) {
  int t = (int)(uintptr_t)arg;
  static const size_t sizes[] = {((size_t)1 << 20) + 1, ((size_t)3 << 20) + 5,
                                 ((size_t)11 << 20) + 3};
  unsigned char *src = malloc(PER_THREAD), *back = malloc(PER_THREAD);
  unsigned char *dev = devmem + (size_t)t * PER_THREAD;
  for (int i = 0; i < ROUNDS; i++) {
    size_t n = sizes[(size_t)(i + t) % 3];
    for (size_t j = 0; j < n; j++) src[j] = (unsigned char)(t * 31 + i * 7 + j);
    memset(back, 0, n);
    cudaError_t e1 = i % 2 ? cudaMemcpy(dev, src, n, cudaMemcpyHostToDevice)
                           : cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, NULL);
    cudaError_t e2 = i % 3 ? cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost)
                           : cudaMemcpyAsync(back, dev, n, cudaMemcpyDefault, NULL);
    if (e1 != cudaSuccess || e2 != cudaSuccess || memcmp(src, back, n) != 0) {
      size_t at = 0;
      while (at < n && src[at] == back[at]) at++;
      fprintf(stderr,
              "staging_threads: thread %d round %d: %s %s, size %zu, first difference at %zu\n", t,
              i, cudaGetErrorName(e1), cudaGetErrorName(e2), n, at);
      atomic_fetch_add(&bad, 1);
    }
  }
  free(src);
  free(back);
  return NULL;
}

int main(void) {
  static struct cudaev_driver fake;
  fake_driver_loop(&fake);
  fake.cuPointerGetAttributes = attrs;
  fake.cuMemcpyHtoDAsync = htod_async;
  fake.cuMemcpyDtoHAsync = dtoh_async;
  fake.cuMemcpyHtoD = htod;
  fake.cuMemcpyDtoH = dtoh;
  fake.cuMemcpyAsync = copy_async;
  fake.cuEventCreate = event_create;
  fake.cuEventRecord = record;
  fake.cuEventQuery = event_done;
  fake.cuEventSynchronize = event_done;
  fake.cuStreamIsCapturing = not_capturing;
  fake.cuThreadExchangeStreamCaptureMode = exchange_mode;
  cudaev__driver_install(&fake, 13000);
  devmem = calloc(THREADS, PER_THREAD);
  if (devmem == NULL) return 1;
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  printf("staging_threads: %d staged DMAs, %d plain copies, %d bad\n", atomic_load(&staged),
         atomic_load(&plain), atomic_load(&bad));
  if (atomic_load(&staged) == 0) return 1;
  free(devmem);
  return atomic_load(&bad) == 0 ? 0 : 1;
}
