/* gpu suite, copies between pageable host memory and device memory of
 * every size class (1 B to 256 MiB, odd sizes, unaligned pointers), both
 * directions, cudaMemcpy and cudaMemcpyAsync on the legacy, per-thread,
 * blocking and non-blocking streams (and the _ptds/_ptsz exports): the
 * data, the source reused right after an async H2D returned, a D2H's data
 * there at return, ordering with memsets before and after in the same
 * stream and with a blocking stream through the legacy one, copies past an
 * allocation or to freed memory, a copy in a capturing stream (and the
 * graph made of it), and two threads copying at once. */
#include "common.h"

#include <pthread.h>
#include <stdint.h>

extern cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
extern cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind,
                                        cudaStream_t);

#define MAXB (((size_t)256 << 20) + 64)

static void fill(unsigned char *p, size_t n, unsigned seed) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(p + i, &x, 8);
  }
  for (; i < n; i++) p[i] = (unsigned char)(seed + i);
}

static const char *same(const void *a, const void *b, size_t n) {
  return memcmp(a, b, n) == 0 ? "data ok" : "DATA DIFFERS";
}

static unsigned char *hsrc, *hdst, *want, *dev, *dev2;

/* Device contents at [off, off + n) equal want? (read back with a plain
 * pinned-free path: a D2H of at most 1 MiB at a time, which both runtimes
 * leave to the driver) */
static const char *dev_is(const unsigned char *d, const unsigned char *w, size_t n) {
  static unsigned char buf[1 << 20];
  for (size_t off = 0; off < n; off += sizeof buf) {
    size_t k = n - off < sizeof buf ? n - off : sizeof buf;
    if (cudaMemcpy(buf, d + off, k, cudaMemcpyDeviceToHost) != cudaSuccess) return "READ FAILED";
    if (memcmp(buf, w + off, k) != 0) return "DATA DIFFERS";
  }
  return "data ok";
}

static const size_t sizes[] = {1,
                               3,
                               4095,
                               (size_t)512 << 10,
                               ((size_t)512 << 10) + 1,
                               ((size_t)768 << 10) + 5,
                               (size_t)1 << 20,
                               ((size_t)1 << 20) + 1,
                               ((size_t)2 << 20) + 3,
                               ((size_t)17 << 20) + 5,
                               ((size_t)64 << 20) + 7,
                               (size_t)256 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct stream_case {
  const char *name;
  cudaStream_t s;
  int ptsz;
};

static void *thread_copy(void *arg) {
  int t = (int)(intptr_t)arg;
  size_t n = (size_t)24 << 20;
  unsigned char *h = malloc(n), *back = malloc(n), *d = NULL;
  cudaStream_t s;
  int ok = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
           cudaMalloc((void **)&d, n) == cudaSuccess;
  for (int i = 0; ok && i < 6; i++) {
    fill(h, n, (unsigned)(t * 100 + i));
    ok = cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s) == cudaSuccess &&
         cudaMemcpyAsync(back, d, n, cudaMemcpyDeviceToHost, s) == cudaSuccess &&
         memcmp(h, back, n) == 0;
  }
  cudaFree(d);
  cudaStreamDestroy(s);
  free(h);
  free(back);
  return (void *)(intptr_t)ok;
}

int main(void) {
  hsrc = malloc(MAXB);
  hdst = malloc(MAXB);
  want = malloc(MAXB);
  if (hsrc == NULL || hdst == NULL || want == NULL) return 1;
  CHECK(cudaMalloc((void **)&dev, MAXB));
  CHECK(cudaMalloc((void **)&dev2, (size_t)4 << 20));
  cudaStream_t blocking, nonblocking;
  CHECK(cudaStreamCreate(&blocking));
  CHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  struct stream_case streams[] = {
      {"0", 0, 0},
      {"cudaStreamLegacy", cudaStreamLegacy, 0},
      {"cudaStreamPerThread", cudaStreamPerThread, 0},
      {"0 (ptsz)", 0, 1},
      {"blocking", blocking, 0},
      {"nonblocking", nonblocking, 0},
  };

  /* First of all (the staging ring is still empty, so the runtime makes
   * it now): synchronous and async copies while another (non-blocking)
   * stream captures in global mode on this thread. */
  fill(hsrc, (size_t)3 << 20, 1);
  TC(cudaStreamBeginCapture(nonblocking, cudaStreamCaptureModeGlobal));
  TC(cudaMemcpy(dev2, hsrc, (size_t)3 << 20, cudaMemcpyHostToDevice));
  TC(cudaMemcpy(hdst, dev2, (size_t)3 << 20, cudaMemcpyDeviceToHost));
  TC(cudaMemcpyAsync(dev2, hsrc, (size_t)3 << 20, cudaMemcpyHostToDevice, blocking));
  TC(cudaMemcpyAsync(hdst, dev2, (size_t)3 << 20, cudaMemcpyDeviceToHost, blocking));
  cudaGraph_t g0 = NULL;
  TC(cudaStreamEndCapture(nonblocking, &g0));
  if (g0 != NULL) TC(cudaGraphDestroy(g0));
  TC(cudaStreamSynchronize(blocking));

  /* cudaMemcpy, both directions, every size, unaligned both sides */
  for (size_t si = 0; si < NSIZES; si++) {
    for (int ptds = 0; ptds < 2; ptds++) {
      size_t n = sizes[si], ho = (si * 3 + 1) % 16, dof = (si * 5) % 32;
      if (n + 32 > MAXB) ho = dof = 0;
      fill(hsrc, n + ho, (unsigned)si);
      cudaError_t e1 = ptds ? cudaMemcpy_ptds(dev + dof, hsrc + ho, n, cudaMemcpyHostToDevice)
                            : cudaMemcpy(dev + dof, hsrc + ho, n, cudaMemcpyHostToDevice);
      memset(hdst, 0, n + 32);
      cudaError_t e2 = ptds ? cudaMemcpy_ptds(hdst + 3, dev + dof, n, cudaMemcpyDeviceToHost)
                            : cudaMemcpy(hdst + 3, dev + dof, n, cudaMemcpyDeviceToHost);
      printf("memcpy%s size %zu: h2d %s d2h %s, %s, guard %d %d (last %s)\n", ptds ? "_ptds" : "",
             n, cudaGetErrorName(e1), cudaGetErrorName(e2), same(hsrc + ho, hdst + 3, n), hdst[2],
             hdst[n + 3], cudaGetErrorName(cudaGetLastError()));
    }
  }

  /* cudaMemcpyDefault finds the direction */
  {
    size_t n = ((size_t)5 << 20) + 9;
    fill(hsrc, n, 77);
    cudaError_t e1 = cudaMemcpy(dev + 1, hsrc, n, cudaMemcpyDefault);
    memset(hdst, 0, n);
    cudaError_t e2 = cudaMemcpy(hdst, dev + 1, n, cudaMemcpyDefault);
    printf("memcpy default 5 MiB+9: %s %s, %s\n", cudaGetErrorName(e1), cudaGetErrorName(e2),
           same(hsrc, hdst, n));
  }

  /* cudaMemcpyAsync on every kind of stream; the source reused at return */
  for (size_t ci = 0; ci < sizeof streams / sizeof streams[0]; ci++) {
    struct stream_case *c = &streams[ci];
    for (size_t si = 0; si < NSIZES; si++) {
      size_t n = sizes[si];
      if (n > ((size_t)64 << 20) + 7 && ci > 1) continue; /* 256 MiB: two streams are enough */
      size_t ho = ci % 8;
      fill(hsrc, n + ho, (unsigned)(si + 10 * ci));
      memcpy(want, hsrc + ho, n);
      cudaError_t e1 = c->ptsz
                           ? cudaMemcpyAsync_ptsz(dev, hsrc + ho, n, cudaMemcpyHostToDevice, c->s)
                           : cudaMemcpyAsync(dev, hsrc + ho, n, cudaMemcpyHostToDevice, c->s);
      memset(hsrc + ho, 0xcd, n); /* reusable at return */
      memset(hdst, 0, n + 8);
      cudaError_t e2 = c->ptsz
                           ? cudaMemcpyAsync_ptsz(hdst + 1, dev, n, cudaMemcpyDeviceToHost, c->s)
                           : cudaMemcpyAsync(hdst + 1, dev, n, cudaMemcpyDeviceToHost, c->s);
      /* no synchronization: a pageable D2H is complete at return */
      printf("async %s size %zu: h2d %s d2h %s, %s (last %s)\n", c->name, n, cudaGetErrorName(e1),
             cudaGetErrorName(e2), same(want, hdst + 1, n), cudaGetErrorName(cudaGetLastError()));
    }
    T(cudaStreamSynchronize(c->s));
  }

  /* stream order: a memset before and one after the staged copy */
  {
    size_t n = (size_t)8 << 20;
    fill(hsrc, n, 5);
    memcpy(want, hsrc, n);
    memset(want + 100, 0x11, 1000);
    TC(cudaMemsetAsync(dev, 0x77, n, nonblocking));
    TC(cudaMemcpyAsync(dev, hsrc, n, cudaMemcpyHostToDevice, nonblocking));
    TC(cudaMemsetAsync(dev + 100, 0x11, 1000, nonblocking));
    TC(cudaStreamSynchronize(nonblocking));
    printf("memset, h2d, memset in one stream: %s\n", dev_is(dev, want, n));
    /* a D2H sees the memset enqueued before it in its stream */
    memset(want, 0x3c, n);
    TC(cudaMemsetAsync(dev, 0x3c, n, nonblocking));
    memset(hdst, 0, n);
    TC(cudaMemcpyAsync(hdst, dev, n, cudaMemcpyDeviceToHost, nonblocking));
    printf("memset then d2h: %s\n", same(want, hdst, n));
    /* the legacy stream waits for a blocking stream */
    memset(want, 0x5e, n);
    TC(cudaMemsetAsync(dev, 0x5e, n, blocking));
    memset(hdst, 0, n);
    TC(cudaMemcpy(hdst, dev, n, cudaMemcpyDeviceToHost));
    printf("blocking-stream memset then legacy d2h: %s\n", same(want, hdst, n));
    /* and a blocking stream waits for the legacy stream's copy */
    fill(hsrc, n, 6);
    memcpy(want, hsrc, n);
    TC(cudaMemcpyAsync(dev2, hsrc, (size_t)4 << 20, cudaMemcpyHostToDevice, 0));
    TC(cudaMemcpyAsync(dev, dev2, (size_t)4 << 20, cudaMemcpyDeviceToDevice, blocking));
    TC(cudaStreamSynchronize(blocking));
    printf("legacy h2d then blocking-stream d2d: %s\n", dev_is(dev, want, (size_t)4 << 20));
  }

  /* errors: past the allocation, freed memory, a bad kind */
  {
    size_t n = (size_t)5 << 20;
    unsigned char *freed;
    CHECK(cudaMalloc((void **)&freed, n));
    CHECK(cudaFree(freed));
    TC(cudaMemcpy(dev2, hsrc, n, cudaMemcpyHostToDevice));
    TC(cudaMemcpy(hdst, dev2, n, cudaMemcpyDeviceToHost));
    TC(cudaMemcpyAsync(dev2 + 1, hsrc, (size_t)4 << 20, cudaMemcpyHostToDevice, nonblocking));
    TC(cudaMemcpyAsync(hdst, dev2 + 1, (size_t)4 << 20, cudaMemcpyDeviceToHost, nonblocking));
    TC(cudaMemcpy(freed, hsrc, n, cudaMemcpyHostToDevice));
    TC(cudaMemcpy(hdst, freed, n, cudaMemcpyDeviceToHost));
    TC(cudaMemcpy(dev, hsrc, n, (enum cudaMemcpyKind)7));
    TC(cudaMemcpyAsync(dev, hsrc, n, (enum cudaMemcpyKind)7, nonblocking));
    TC(cudaStreamSynchronize(nonblocking));
  }

  /* a pageable copy in a capturing stream, and the graph made of it */
  {
    size_t n = (size_t)6 << 20;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    fill(hsrc, n, 9);
    memcpy(want, hsrc, n);
    TC(cudaStreamBeginCapture(nonblocking, cudaStreamCaptureModeGlobal));
    TC(cudaMemcpyAsync(dev, hsrc, n, cudaMemcpyHostToDevice, nonblocking));
    TC(cudaMemcpyAsync(hdst, dev, n, cudaMemcpyDeviceToHost, nonblocking));
    TC(cudaStreamEndCapture(nonblocking, &g));
    if (g != NULL) {
      size_t nodes = 0;
      TC(cudaGraphGetNodes(g, NULL, &nodes));
      printf("captured nodes: %zu\n", nodes);
      TC(cudaGraphInstantiate(&x, g, 0));
      if (x != NULL) {
        memset(hdst, 0, n);
        TC(cudaGraphLaunch(x, nonblocking));
        TC(cudaStreamSynchronize(nonblocking));
        printf("graph of the captured copies: %s\n", same(want, hdst, n));
        TC(cudaGraphExecDestroy(x));
      }
      TC(cudaGraphDestroy(g));
    }
    /* a synchronous copy while another stream captures (relaxed: allowed) */
    TC(cudaStreamBeginCapture(nonblocking, cudaStreamCaptureModeRelaxed));
    TC(cudaMemcpy(dev2, hsrc, (size_t)3 << 20, cudaMemcpyHostToDevice));
    g = NULL;
    TC(cudaStreamEndCapture(nonblocking, &g));
    if (g != NULL) TC(cudaGraphDestroy(g));
  }

  /* two threads copying at once, each on its own stream */
  {
    pthread_t a, b;
    void *ra, *rb;
    pthread_create(&a, NULL, thread_copy, (void *)1);
    pthread_create(&b, NULL, thread_copy, (void *)2);
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    printf("two threads: %s %s\n", ra ? "ok" : "FAILED", rb ? "ok" : "FAILED");
  }

  TC(cudaStreamDestroy(blocking));
  TC(cudaStreamDestroy(nonblocking));
  TC(cudaFree(dev));
  TC(cudaFree(dev2));
  free(hsrc);
  free(hdst);
  free(want);
  return 0;
}
