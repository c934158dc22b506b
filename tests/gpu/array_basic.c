/* Arrays and mipmapped arrays: allocation in several formats and shapes,
 * what cudaArrayGetInfo / cudaGetChannelDesc report, mipmap levels, planes,
 * requirements, and bad input (NULL, bad channel descriptors, bad flags,
 * freed handles). Prints no handles, only results and error names. */
#include "common.h"

static struct cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) {
  struct cudaExtent e = {w, h, d};
  return e;
}

static void info(const char *what, cudaArray_t a) {
  struct cudaChannelFormatDesc d;
  struct cudaExtent e;
  unsigned flags = 0;
  cudaError_t r = cudaArrayGetInfo(&d, &e, &flags, a);
  printf("%s: %s desc {%d,%d,%d,%d,kind %d} extent {%zu,%zu,%zu} flags 0x%x\n", what,
         cudaGetErrorName(r), d.x, d.y, d.z, d.w, (int)d.f, e.width, e.height, e.depth, flags);
}

static void try_desc(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  struct cudaChannelFormatDesc d = cudaCreateChannelDesc(x, y, z, w, f);
  cudaArray_t a = NULL;
  cudaError_t r = cudaMallocArray(&a, &d, 16, 4, 0);
  cudaError_t l = cudaGetLastError();
  printf("cudaMallocArray({%d,%d,%d,%d,kind %d}) -> %s (last %s)", x, y, z, w, (int)f,
         cudaGetErrorName(r), cudaGetErrorName(l));
  if (r == cudaSuccess) {
    struct cudaChannelFormatDesc b;
    CHECK(cudaGetChannelDesc(&b, a));
    printf(" back {%d,%d,%d,%d,kind %d}", b.x, b.y, b.z, b.w, (int)b.f);
    size_t mw = 0;
    cudaError_t t = cudaDeviceGetTexture1DLinearMaxWidth(&mw, &d, 0);
    printf(" linmax %s %s", cudaGetErrorName(t), mw > 0 ? ">0" : "0");
    cudaGetLastError();
    CHECK(cudaFreeArray(a));
  }
  printf("\n");
}

int main(void) {
  CHECK(cudaSetDevice(0));
  /* every regular format, and the special kinds */
  int bits[] = {8, 16, 32};
  for (int k = 0; k < 3; k++)
    for (int b = 0; b < 3; b++) {
      try_desc(bits[b], 0, 0, 0, (enum cudaChannelFormatKind)k);
      try_desc(bits[b], bits[b], 0, 0, (enum cudaChannelFormatKind)k);
      try_desc(bits[b], bits[b], bits[b], bits[b], (enum cudaChannelFormatKind)k);
    }
  try_desc(8, 8, 8, 0, cudaChannelFormatKindUnsigned); /* 3 channels */
  try_desc(32, 32, 32, 0, cudaChannelFormatKindFloat);
  try_desc(8, 0, 8, 0, cudaChannelFormatKindUnsigned); /* gap */
  try_desc(8, 16, 0, 0, cudaChannelFormatKindSigned);  /* mixed */
  try_desc(64, 0, 0, 0, cudaChannelFormatKindSigned);
  try_desc(0, 0, 0, 0, cudaChannelFormatKindNone);
  try_desc(8, 0, 0, 0, (enum cudaChannelFormatKind)99);
  try_desc(8, 0, 0, 0, cudaChannelFormatKindUnsignedNormalized8X1);
  try_desc(16, 16, 0, 0, cudaChannelFormatKindSignedNormalized16X2);
  try_desc(8, 8, 8, 8, cudaChannelFormatKindUnsignedNormalized8X4);
  try_desc(8, 8, 0, 0, cudaChannelFormatKindUnsignedNormalized8X4); /* wrong bits for the kind */
  try_desc(8, 8, 8, 8, cudaChannelFormatKindUnsignedBlockCompressed1);
  try_desc(8, 0, 0, 0, cudaChannelFormatKindSignedBlockCompressed4);
  try_desc(16, 16, 16, 0, cudaChannelFormatKindUnsignedBlockCompressed6H);
  try_desc(10, 10, 10, 2, cudaChannelFormatKindUnsignedNormalized1010102);

  /* shapes and flags */
  struct cudaChannelFormatDesc f4 =
      cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);
  struct cudaChannelFormatDesc u1 =
      cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
  cudaArray_t a1 = NULL, a2 = NULL, a3 = NULL, al = NULL, ac = NULL;
  TC(cudaMallocArray(&a1, &f4, 37, 0, 0));
  info("1D", a1);
  TC(cudaMallocArray(&a2, &u1, 101, 33, cudaArraySurfaceLoadStore));
  info("2D surface", a2);
  TC(cudaMalloc3DArray(&a3, &f4, make_cudaExtent(9, 7, 5), 0));
  info("3D", a3);
  TC(cudaMalloc3DArray(&al, &u1, make_cudaExtent(64, 16, 3), cudaArrayLayered));
  info("2D layered", al);
  TC(cudaMalloc3DArray(&ac, &u1, make_cudaExtent(32, 32, 6), cudaArrayCubemap));
  info("cubemap", ac);
  cudaArray_t bad = NULL;
  TC(cudaMalloc3DArray(&bad, &u1, make_cudaExtent(32, 16, 6), cudaArrayCubemap));
  TC(cudaMallocArray(&bad, &u1, 16, 16, cudaArrayLayered));
  TC(cudaMallocArray(&bad, &u1, 16, 16, 0x1000));
  TC(cudaMallocArray(&bad, &u1, 0, 16, 0));
  TC(cudaMallocArray(&bad, NULL, 16, 16, 0));
  TC(cudaMallocArray(NULL, &u1, 16, 16, 0));
  TC(cudaMalloc3DArray(&bad, &u1, make_cudaExtent(16, 0, 4), 0));
  TC(cudaMalloc3DArray(NULL, &u1, make_cudaExtent(16, 16, 4), 0));
  TC(cudaGetChannelDesc(NULL, a2));
  TC(cudaArrayGetInfo(NULL, NULL, NULL, a2));

  /* requirements / sparse properties of an ordinary array */
  struct cudaArrayMemoryRequirements req;
  struct cudaArraySparseProperties sp;
  TC(cudaArrayGetMemoryRequirements(&req, a2, 0));
  TC(cudaArrayGetMemoryRequirements(NULL, a2, 0));
  TC(cudaArrayGetMemoryRequirements(&req, a2, 999));
  TC(cudaArrayGetSparseProperties(&sp, a2));
  TC(cudaArrayGetSparseProperties(NULL, a2));
  cudaArray_t dm = NULL;
  TC(cudaMallocArray(&dm, &u1, 256, 256, cudaArrayDeferredMapping));
  if (dm != NULL) {
    memset(&req, 0, sizeof req);
    TC(cudaArrayGetMemoryRequirements(&req, dm, 0));
    printf("deferred: size>0 %d alignment>0 %d\n", req.size > 0, req.alignment > 0);
    TC(cudaFreeArray(dm));
  }
  cudaArray_t plane = NULL;
  TC(cudaArrayGetPlane(&plane, a2, 0));
  TC(cudaArrayGetPlane(NULL, a2, 0));

  /* mipmapped arrays */
  cudaMipmappedArray_t mm = NULL;
  TC(cudaMallocMipmappedArray(&mm, &f4, make_cudaExtent(64, 32, 0), 4, 0));
  for (unsigned l = 0; l < 5; l++) {
    cudaArray_t lv = NULL;
    cudaError_t r = cudaGetMipmappedArrayLevel(&lv, mm, l);
    printf("level %u -> %s (last %s)\n", l, cudaGetErrorName(r),
           cudaGetErrorName(cudaGetLastError()));
    if (r == cudaSuccess) info("  level", lv);
  }
  cudaArray_t lv = NULL;
  TC(cudaGetMipmappedArrayLevel(NULL, mm, 0));
  TC(cudaGetMipmappedArrayLevel(&lv, NULL, 0));
  TC(cudaMipmappedArrayGetMemoryRequirements(&req, mm, 0));
  TC(cudaMipmappedArrayGetSparseProperties(&sp, mm));
  TC(cudaMallocMipmappedArray(&mm, NULL, make_cudaExtent(64, 32, 0), 4, 0));
  TC(cudaMallocMipmappedArray(NULL, &f4, make_cudaExtent(64, 32, 0), 4, 0));
  TC(cudaFreeMipmappedArray(mm));
  TC(cudaFreeMipmappedArray(NULL));

  /* frees */
  TC(cudaFreeArray(NULL));
  TC(cudaFreeArray(a1));
  TC(cudaFreeArray(a2));
  TC(cudaFreeArray(a3));
  TC(cudaFreeArray(al));
  TC(cudaFreeArray(ac));
  TC(cudaFreeArray(a1));           /* freed */
  TC(cudaGetChannelDesc(&f4, a2)); /* freed */

  size_t mw = 0;
  TC(cudaDeviceGetTexture1DLinearMaxWidth(&mw, &u1, 999));
  TC(cudaDeviceGetTexture1DLinearMaxWidth(NULL, &u1, 0));
  TC(cudaDeviceGetTexture1DLinearMaxWidth(&mw, NULL, 0));
  TC(cudaDeviceSynchronize());
  return 0;
}
