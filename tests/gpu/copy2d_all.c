/* 2D, 3D and array copies in every direction with odd widths, pitches and
 * offsets, memset2D/3D, the deprecated 1D array copies, the CUDA 13 batch
 * copies, cudaMemcpy3DPeer on one device, and bad input for each. Results
 * are printed as checksums of the bytes that came back. */
#include "common.h"

/* The deprecated 1D array copies are tested on purpose. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdint.h>

static struct cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) {
  struct cudaExtent e = {w, h, d};
  return e;
}
static struct cudaPitchedPtr make_cudaPitchedPtr(void *p, size_t pitch, size_t xsize,
                                                 size_t ysize) {
  struct cudaPitchedPtr r = {p, pitch, xsize, ysize};
  return r;
}
static struct cudaPos make_cudaPos(size_t x, size_t y, size_t z) {
  struct cudaPos r = {x, y, z};
  return r;
}

static unsigned long long sum(const void *p, size_t n) {
  const unsigned char *b = p;
  unsigned long long h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
static void fill(void *p, size_t n, unsigned seed) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 31u + seed * 7u + (i >> 8));
}
#define SUM(label, p, n) printf("%-40s sum %016llx\n", label, sum(p, n))

enum { BIG = 1 << 16 };

int main(void) {
  CHECK(cudaSetDevice(0));
  unsigned char *h1 = malloc(BIG), *h2 = malloc(BIG), *pin = NULL;
  CHECK(cudaMallocHost((void **)&pin, BIG));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  /* pitched allocations */
  void *d1 = NULL, *d2 = NULL;
  size_t p1 = 0, p2 = 0;
  TC(cudaMallocPitch(&d1, &p1, 77, 13));
  TC(cudaMallocPitch(&d2, &p2, 301, 29));
  printf("pitches %zu %zu\n", p1, p2);
  void *z = (void *)1;
  size_t pz = 1;
  TC(cudaMallocPitch(&z, &pz, 0, 5));
  printf("zero width: ptr null %d pitch %zu\n", z == NULL, pz);
  TC(cudaMallocPitch(NULL, &pz, 8, 8));
  TC(cudaMallocPitch(&z, NULL, 8, 8));

  /* H2D, D2D with offsets, D2H, H2H, Default */
  fill(h1, BIG, 1);
  memset(h2, 0, BIG);
  TC(cudaMemcpy2D(d1, p1, h1 + 3, 83, 77, 13, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2D(d2, p2, h1, 333, 301, 29, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2D((char *)d2 + p2 * 2 + 5, p2, (char *)d1 + 1, p1, 61, 11,
                  cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy2D(h2, 303, d2, p2, 301, 29, cudaMemcpyDeviceToHost));
  SUM("h2d+d2d+d2h", h2, 303 * 29);
  memset(h2, 0, BIG);
  TC(cudaMemcpy2D(h2 + 1, 19, h1 + 7, 23, 17, 9, cudaMemcpyHostToHost));
  SUM("h2h", h2, 19 * 10);
  memset(h2, 0, BIG);
  TC(cudaMemcpy2D((char *)d1 + 2, p1, h1 + 100, 50, 40, 13, cudaMemcpyDefault));
  TC(cudaMemcpy2D(h2, 77, d1, p1, 77, 13, cudaMemcpyDefault));
  SUM("default", h2, 77 * 13);

  /* async, pinned */
  memset(pin, 0, BIG);
  TC(cudaMemcpy2DAsync(d1, p1, h1 + 9, 81, 75, 12, cudaMemcpyHostToDevice, s));
  TC(cudaMemcpy2DAsync(pin, 79, d1, p1, 77, 13, cudaMemcpyDeviceToHost, s));
  TC(cudaStreamSynchronize(s));
  SUM("async", pin, 79 * 13);
  memset(pin, 0, BIG);
  TC(cudaMemcpy2DAsync(pin, 77, d1, p1, 77, 13, cudaMemcpyDeviceToHost, cudaStreamPerThread));
  TC(cudaStreamSynchronize(cudaStreamPerThread));
  SUM("async per-thread", pin, 77 * 13);

  /* bad input */
  TC(cudaMemcpy2D(d1, p1, h1, 20, 21, 2, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2D(h2, 20, d1, p1, 21, 2, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy2D(d1, p1, h1, 83, 77, 13, (enum cudaMemcpyKind)7));
  TC(cudaMemcpy2D(d1, p1, h1, 83, 0, 13, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2D(d1, p1, h1, 83, 77, 0, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2D(NULL, p1, h1, 83, 77, 13, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DAsync(d1, p1, h1, 20, 21, 2, cudaMemcpyHostToDevice, s));
  TC(cudaMemcpy2DAsync(d1, p1, h1, 83, 77, 13, (enum cudaMemcpyKind) - 1, s));

  /* arrays: u8 101x33 and float4 19x7 */
  struct cudaChannelFormatDesc u1 =
      cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  struct cudaChannelFormatDesc f4 =
      cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);
  cudaArray_t au = NULL, au2 = NULL, af = NULL, af2 = NULL;
  CHECK(cudaMallocArray(&au, &u1, 101, 33, 0));
  CHECK(cudaMallocArray(&au2, &u1, 101, 33, 0));
  CHECK(cudaMallocArray(&af, &f4, 19, 7, 0));
  CHECK(cudaMallocArray(&af2, &f4, 19, 7, 0));
  TC(cudaMemcpy2DToArray(au, 0, 0, h1, 101, 101, 33, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DToArray(au, 7, 3, h1 + 500, 61, 50, 20, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DToArray(au, 1, 30, d1, p1, 77, 3, cudaMemcpyDeviceToDevice));
  memset(h2, 0, BIG);
  TC(cudaMemcpy2DFromArray(h2, 103, au, 0, 0, 101, 33, cudaMemcpyDeviceToHost));
  SUM("to/from u8 array", h2, 103 * 33);
  TC(cudaMemcpy2DArrayToArray(au2, 3, 2, au, 5, 4, 90, 25, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy2DFromArray(d2, p2, au2, 0, 0, 101, 33, cudaMemcpyDeviceToDevice));
  memset(h2, 0, BIG);
  TC(cudaMemcpy2D(h2, 101, d2, p2, 101, 33, cudaMemcpyDeviceToHost));
  SUM("array to array + from array d2d", h2, 101 * 33);
  TC(cudaMemcpy2DToArray(af, 0, 0, h1, 19 * 16 + 5, 19 * 16, 7, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DToArray(af, 32, 2, h1 + 1000, 48, 48, 3, cudaMemcpyDefault));
  TC(cudaMemcpy2DArrayToArray(af2, 0, 0, af, 0, 0, 19 * 16, 7, cudaMemcpyDeviceToDevice));
  memset(pin, 0, BIG);
  TC(cudaMemcpy2DFromArrayAsync(pin, 19 * 16, af2, 16, 1, 18 * 16, 6, cudaMemcpyDeviceToHost, s));
  TC(cudaMemcpy2DToArrayAsync(af, 0, 0, pin, 19 * 16, 16, 1, cudaMemcpyHostToDevice, s));
  TC(cudaStreamSynchronize(s));
  SUM("float4 arrays", pin, 19 * 16 * 6);
  /* bad input with arrays */
  TC(cudaMemcpy2DToArray(au, 0, 0, h1, 10, 11, 2, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DFromArray(h2, 10, au, 0, 0, 11, 2, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy2DToArray(au, 0, 0, h1, 101, 101, 33, (enum cudaMemcpyKind)9));
  TC(cudaMemcpy2DToArray(au, 50, 0, h1, 101, 101, 1, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DToArray(au, 0, 30, h1, 101, 101, 4, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DToArray(NULL, 0, 0, h1, 101, 101, 1, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DFromArray(h2, 101, NULL, 0, 0, 101, 1, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy2DArrayToArray(au, 0, 0, af, 0, 0, 16, 1, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy2DArrayToArray(au, 0, 0, au2, 0, 0, 16, 1, (enum cudaMemcpyKind)8));

  /* deprecated 1D copies into/out of arrays: wrap over rows */
  TC(cudaMemcpyToArray(au, 17, 2, h1 + 3, 700, cudaMemcpyHostToDevice));
  memset(h2, 0, BIG);
  TC(cudaMemcpyFromArray(h2, au, 0, 0, 101 * 33, cudaMemcpyDeviceToHost));
  SUM("memcpyToArray/FromArray", h2, 101 * 33);
  TC(cudaMemcpyArrayToArray(au2, 50, 1, au, 3, 4, 555, cudaMemcpyDeviceToDevice));
  memset(pin, 0, BIG);
  TC(cudaMemcpyFromArrayAsync(pin, au2, 0, 0, 101 * 33, cudaMemcpyDeviceToHost, s));
  TC(cudaMemcpyToArrayAsync(au, 0, 0, pin, 10, cudaMemcpyHostToDevice, s));
  TC(cudaStreamSynchronize(s));
  SUM("memcpyArrayToArray", pin, 101 * 33);
  TC(cudaMemcpyToArray(au, 0, 0, h1, 101 * 34, cudaMemcpyHostToDevice));
  TC(cudaMemcpyToArray(au, 0, 0, h1, 16, (enum cudaMemcpyKind)11));
  TC(cudaMemcpyFromArray(h2, NULL, 0, 0, 16, cudaMemcpyDeviceToHost));
  /* the kinds each array copy accepts, NULL handles in the other copies, a
   * single row wider than its pitch */
  TC(cudaMemcpyToArray(au, 0, 0, h1, 16, cudaMemcpyDeviceToHost));
  TC(cudaMemcpyFromArray(h2, au, 0, 0, 16, cudaMemcpyHostToDevice));
  TC(cudaMemcpyFromArray(h2, au, 0, 0, 16, (enum cudaMemcpyKind)11));
  TC(cudaMemcpyArrayToArray(au2, 0, 0, au, 0, 0, 16, cudaMemcpyHostToDevice));
  TC(cudaMemcpyArrayToArray(NULL, 0, 0, au, 0, 0, 16, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy2DArrayToArray(au, 0, 0, NULL, 0, 0, 16, 1, cudaMemcpyDeviceToDevice));
  TC(cudaMemcpy2DToArray(au, 0, 0, h1, 101, 101, 1, cudaMemcpyDeviceToHost));
  TC(cudaMemcpy2DFromArray(h2, 101, au, 0, 0, 101, 1, cudaMemcpyHostToDevice));
  TC(cudaMemcpy2DToArray(au, 0, 0, h1, 10, 11, 1, cudaMemcpyHostToDevice));

  /* 3D: linear <-> linear, linear <-> 3D array, subregions */
  struct cudaPitchedPtr v = {0}, w = {0};
  TC(cudaMalloc3D(&v, make_cudaExtent(45, 7, 5)));
  TC(cudaMalloc3D(&w, make_cudaExtent(45, 9, 6)));
  printf("3D pitch %zu xsize %zu ysize %zu\n", v.pitch, v.xsize, v.ysize);
  struct cudaMemcpy3DParms p = {0};
  p.srcPtr = make_cudaPitchedPtr(h1, 50, 45, 9);
  p.dstPtr = v;
  p.extent = make_cudaExtent(45, 7, 5);
  p.kind = cudaMemcpyHostToDevice;
  TC(cudaMemcpy3D(&p));
  memset(&p, 0, sizeof p);
  p.srcPtr = v;
  p.srcPos = make_cudaPos(3, 1, 1);
  p.dstPtr = w;
  p.dstPos = make_cudaPos(5, 2, 0);
  p.extent = make_cudaExtent(30, 5, 4);
  p.kind = cudaMemcpyDeviceToDevice;
  TC(cudaMemcpy3D(&p));
  memset(&p, 0, sizeof p);
  memset(h2, 0, BIG);
  p.srcPtr = w;
  p.dstPtr = make_cudaPitchedPtr(h2, 47, 45, 10);
  p.extent = make_cudaExtent(45, 9, 6);
  p.kind = cudaMemcpyDefault;
  TC(cudaMemcpy3D(&p));
  SUM("3D linear", h2, 47 * 10 * 6);

  cudaArray_t a3 = NULL;
  CHECK(cudaMalloc3DArray(&a3, &f4, make_cudaExtent(11, 6, 4), 0));
  memset(&p, 0, sizeof p);
  p.srcPtr = make_cudaPitchedPtr(h1, 11 * 16 + 8, 11, 7);
  p.dstArray = a3;
  p.extent = make_cudaExtent(11, 6, 4);
  p.kind = cudaMemcpyHostToDevice;
  TC(cudaMemcpy3D(&p));
  memset(&p, 0, sizeof p);
  p.srcPtr = v;
  p.srcPos = make_cudaPos(2, 0, 1);
  p.dstArray = a3;
  p.dstPos = make_cudaPos(1, 1, 1);
  p.extent = make_cudaExtent(2, 4, 2); /* 2 float4 = 32 bytes per row */
  p.kind = cudaMemcpyDeviceToDevice;
  TC(cudaMemcpy3D(&p));
  memset(&p, 0, sizeof p);
  memset(pin, 0, BIG);
  p.srcArray = a3;
  p.dstPtr = make_cudaPitchedPtr(pin, 11 * 16, 11, 6);
  p.extent = make_cudaExtent(11, 6, 4);
  p.kind = cudaMemcpyDeviceToHost;
  TC(cudaMemcpy3DAsync(&p, s));
  TC(cudaStreamSynchronize(s));
  SUM("3D array", pin, 11 * 16 * 6 * 4);
  /* array to array in 3D */
  cudaArray_t a3b = NULL;
  CHECK(cudaMalloc3DArray(&a3b, &f4, make_cudaExtent(11, 6, 4), 0));
  memset(&p, 0, sizeof p);
  p.srcArray = a3;
  p.srcPos = make_cudaPos(1, 1, 1);
  p.dstArray = a3b;
  p.extent = make_cudaExtent(10, 5, 3);
  p.kind = cudaMemcpyDeviceToDevice;
  TC(cudaMemcpy3D(&p));
  memset(&p, 0, sizeof p);
  memset(h2, 0, BIG);
  p.srcArray = a3b;
  p.dstPtr = make_cudaPitchedPtr(h2, 10 * 16, 10, 5);
  p.extent = make_cudaExtent(10, 5, 3);
  p.kind = cudaMemcpyDeviceToHost;
  TC(cudaMemcpy3D(&p));
  SUM("3D array to array", h2, 10 * 16 * 5 * 3);

  /* 3D bad input */
  TC(cudaMemcpy3D(NULL));
  memset(&p, 0, sizeof p);
  p.extent = make_cudaExtent(1, 1, 1);
  p.kind = cudaMemcpyDeviceToDevice;
  TC(cudaMemcpy3D(&p)); /* no source, no destination */
  p.srcPtr = v;
  p.srcArray = a3;
  p.dstPtr = w;
  TC(cudaMemcpy3D(&p)); /* two sources */
  p.srcArray = NULL;
  p.kind = (enum cudaMemcpyKind)6;
  TC(cudaMemcpy3D(&p));
  p.kind = cudaMemcpyDeviceToDevice;
  p.extent = make_cudaExtent(w.pitch + 1, 1, 1);
  TC(cudaMemcpy3D(&p)); /* wider than the pitch */
  p.srcPtr.ptr = NULL;
  p.srcArray = au;
  p.dstPtr.ptr = NULL;
  p.dstArray = a3;
  p.extent = make_cudaExtent(1, 1, 1);
  TC(cudaMemcpy3D(&p)); /* element sizes differ */
  TC(cudaMemcpy3DAsync(NULL, s));

  /* 3D peer on one device */
  struct cudaMemcpy3DPeerParms pp = {0};
  pp.srcPtr = v;
  pp.dstPtr = w;
  pp.extent = make_cudaExtent(45, 7, 5);
  TC(cudaMemcpy3DPeer(&pp));
  TC(cudaMemcpy3DPeerAsync(&pp, s));
  TC(cudaStreamSynchronize(s));
  pp.dstDevice = 99;
  TC(cudaMemcpy3DPeer(&pp));
  TC(cudaMemcpy3DPeer(NULL));

  /* memset 2D / 3D */
  TC(cudaMemset2D(d2, p2, 0x11, 301, 29));
  TC(cudaMemset2D((char *)d2 + p2 + 3, p2, 0x5a, 97, 17));
  TC(cudaMemset2DAsync((char *)d2 + 4 * p2 + 200, p2, 0x7f, 101, 3, s));
  TC(cudaStreamSynchronize(s));
  memset(h2, 0, BIG);
  TC(cudaMemcpy2D(h2, 301, d2, p2, 301, 29, cudaMemcpyDeviceToHost));
  SUM("memset2D", h2, 301 * 29);
  TC(cudaMemset2D(d2, 16, 0, 17, 2));
  TC(cudaMemset2D(d2, p2, 0, 0, 2));
  TC(cudaMemset3D(w, 0x22, make_cudaExtent(45, 9, 6)));
  struct cudaPitchedPtr wsub = w;
  wsub.ptr = (char *)w.ptr + w.pitch + 4;
  TC(cudaMemset3D(wsub, 0x33, make_cudaExtent(20, 5, 4)));
  TC(cudaMemset3DAsync(w, 0x44, make_cudaExtent(3, 9, 2), s));
  TC(cudaStreamSynchronize(s));
  memset(&p, 0, sizeof p);
  memset(h2, 0, BIG);
  p.srcPtr = w;
  p.dstPtr = make_cudaPitchedPtr(h2, 45, 45, 9);
  p.extent = make_cudaExtent(45, 9, 6);
  p.kind = cudaMemcpyDeviceToHost;
  TC(cudaMemcpy3D(&p));
  SUM("memset3D", h2, 45 * 9 * 6);
  TC(cudaMemset3D(w, 0, make_cudaExtent(0, 9, 6)));

  /* batches (not on the legacy stream) */
  {
    void *dsts[3] = {d1, (char *)d1 + 100, h2};
    const void *srcs[3] = {h1, h1 + 50, d2};
    size_t sizes[3] = {64, 33, 77};
    struct cudaMemcpyAttributes at[2];
    memset(at, 0, sizeof at);
    at[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    at[1].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t idx[2] = {0, 2};
    memset(h2, 0, BIG);
    TC(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, at, idx, 2, s));
    TC(cudaStreamSynchronize(s));
    SUM("batch", h2, 77);
    TC(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, at, idx, 2, 0));
    at[1].srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
    TC(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, at, idx, 2, s));
    TC(cudaMemcpyBatchAsync(dsts, srcs, sizes, 3, at, idx, 0, s));
    TC(cudaStreamSynchronize(s));

    struct cudaMemcpy3DBatchOp op;
    memset(&op, 0, sizeof op);
    op.src.type = cudaMemcpyOperandTypePointer;
    op.src.op.ptr.ptr = h1 + 11;
    op.src.op.ptr.rowLength = 12;
    op.dst.type = cudaMemcpyOperandTypeArray;
    op.dst.op.array.array = a3b;
    op.dst.op.array.offset.x = 1;
    op.extent = make_cudaExtent(3, 2, 2);
    op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    TC(cudaMemcpy3DBatchAsync(1, &op, 0, s));
    TC(cudaStreamSynchronize(s));
    memset(&p, 0, sizeof p);
    memset(h2, 0, BIG);
    p.srcArray = a3b;
    p.dstPtr = make_cudaPitchedPtr(h2, 11 * 16, 11, 6);
    p.extent = make_cudaExtent(11, 6, 4);
    p.kind = cudaMemcpyDeviceToHost;
    TC(cudaMemcpy3D(&p));
    SUM("3D batch", h2, 11 * 16 * 6 * 4);
    TC(cudaMemcpy3DBatchAsync(1, &op, 1, s));
    op.extent = make_cudaExtent(0, 2, 2);
    TC(cudaMemcpy3DBatchAsync(1, &op, 0, s));
    TC(cudaStreamSynchronize(s));
  }

  /* freed array */
  CHECK(cudaFreeArray(au2));
  /* NVIDIA's runtime crashes here (SIGSEGV in the driver, H200). */
  TREFUSE(cudaMemcpy2DToArray(au2, 0, 0, h1, 101, 101, 1, cudaMemcpyHostToDevice));
  TREFUSE(cudaMemcpyFromArray(h2, au2, 0, 0, 16, cudaMemcpyDeviceToHost));

  CHECK(cudaFreeArray(au));
  CHECK(cudaFreeArray(af));
  CHECK(cudaFreeArray(af2));
  CHECK(cudaFreeArray(a3));
  CHECK(cudaFreeArray(a3b));
  CHECK(cudaFree(d1));
  CHECK(cudaFree(d2));
  CHECK(cudaFree(v.ptr));
  CHECK(cudaFree(w.ptr));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(pin));
  free(h1);
  free(h2);
  TC(cudaDeviceSynchronize());
  return 0;
}
