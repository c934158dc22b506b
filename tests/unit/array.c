/* CPU tests of src/array.c, src/memcpy_*.c and src/texture.c: the channel
 * format conversions, the cudaMemcpy3DParms converter, the splitting of the
 * deprecated 1D array copies and the texture descriptor flags, against a
 * fake driver table. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "array.h"
#include "internal.h"

/* driver_functions.h's helpers, which cannot be included from C here. */
static struct cudaPitchedPtr make_cudaPitchedPtr(void *d, size_t p, size_t xsz, size_t ysz) {
  struct cudaPitchedPtr s = {d, p, xsz, ysz};
  return s;
}
static struct cudaPos make_cudaPos(size_t x, size_t y, size_t z) {
  struct cudaPos p = {x, y, z};
  return p;
}
static struct cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) {
  struct cudaExtent e = {w, h, d};
  return e;
}

/* ---- fake driver ----------------------------------------------------------- */

static CUresult f_init(unsigned flags) {
  (void)flags;
  return CUDA_SUCCESS;
}
static CUresult f_count(int *n) {
  *n = 1;
  return CUDA_SUCCESS;
}
static CUresult f_get(CUdevice *d, int i) {
  *d = i;
  return CUDA_SUCCESS;
}
static CUcontext f_cur;
static CUresult f_getcur(CUcontext *c) {
  *c = f_cur;
  return CUDA_SUCCESS;
}
static CUresult f_setcur(CUcontext c) {
  f_cur = c;
  return CUDA_SUCCESS;
}
static CUresult f_ctxdev(CUdevice *d, CUcontext c) {
  (void)c;
  *d = 0;
  return CUDA_SUCCESS;
}
static CUresult f_retain(CUcontext *c, CUdevice d) {
  (void)d;
  *c = (CUcontext)(uintptr_t)0x1000;
  return CUDA_SUCCESS;
}

/* Two fake arrays: A1 of float4 (16-byte elements) 10 wide, A2 of uchar1. */
#define A1 ((CUarray)(uintptr_t)0x1000a1)
#define A2 ((CUarray)(uintptr_t)0x1000a2)
static CUresult f_a3desc(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray a) {
  memset(d, 0, sizeof *d);
  if (a == A1)
    d->Format = CU_AD_FORMAT_FLOAT, d->NumChannels = 4, d->Width = 10, d->Height = 8;
  else if (a == A2)
    d->Format = CU_AD_FORMAT_UNSIGNED_INT8, d->NumChannels = 1, d->Width = 40, d->Height = 8;
  else
    return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

static CUDA_ARRAY3D_DESCRIPTOR created;
static CUresult f_a3create(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  created = *d;
  *a = A1;
  return CUDA_SUCCESS;
}

static CUDA_MEMCPY2D copies[8];
static int ncopies;
static CUresult f_copy2d(const CUDA_MEMCPY2D *m) {
  if (ncopies < 8) copies[ncopies] = *m;
  ncopies++;
  return CUDA_SUCCESS;
}
static CUDA_MEMCPY3D copy3;
static CUresult f_copy3d(const CUDA_MEMCPY3D *m) {
  copy3 = *m;
  return CUDA_SUCCESS;
}

static CUDA_TEXTURE_DESC texd;
static CUDA_RESOURCE_DESC resd;
static CUresult f_texcreate(CUtexObject *t, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *d,
                            const CUDA_RESOURCE_VIEW_DESC *v) {
  (void)v;
  resd = *r;
  texd = *d;
  *t = 7;
  return CUDA_SUCCESS;
}
static CUresult f_texgetdesc(CUDA_TEXTURE_DESC *d, CUtexObject t) {
  (void)t;
  *d = texd;
  return CUDA_SUCCESS;
}

static size_t free_bytes = (size_t)1 << 30;
static CUresult f_meminfo(size_t *free, size_t *total) {
  *free = free_bytes;
  *total = 2 * free_bytes;
  return CUDA_SUCCESS;
}

static void setup(void) {
  struct cudaev_driver t;
  memset(&t, 0, sizeof t);
  t.cuInit = f_init;
  t.cuDeviceGetCount = f_count;
  t.cuDeviceGet = f_get;
  t.cuCtxGetCurrent = f_getcur;
  t.cuCtxSetCurrent = f_setcur;
  t.cuCtxGetDevice = f_ctxdev;
  t.cuDevicePrimaryCtxRetain = f_retain;
  t.cuArray3DGetDescriptor = f_a3desc;
  t.cuArray3DCreate = f_a3create;
  t.cuMemcpy2DUnaligned = f_copy2d;
  t.cuMemcpy3D = f_copy3d;
  t.cuMemGetInfo = f_meminfo;
  t.cuTexObjectCreate = f_texcreate;
  t.cuTexObjectGetTextureDesc = f_texgetdesc;
  cudaev__driver_install(&t, 13000);
}

TestSuite(array, .init = setup);

/* ---- channel formats ----------------------------------------------------------- */

static cudaError_t conv(int x, int y, int z, int w, enum cudaChannelFormatKind f,
                        CUarray_format *fmt, unsigned *n) {
  struct cudaChannelFormatDesc d = {x, y, z, w, f};
  return cudaev__channel_to_format(&d, fmt, n);
}

Test(array, channel_formats_accepted) {
  static const struct {
    int x, y, z, w;
    enum cudaChannelFormatKind f;
    CUarray_format fmt;
    unsigned n;
  } ok[] = {
      {8, 0, 0, 0, cudaChannelFormatKindUnsigned, CU_AD_FORMAT_UNSIGNED_INT8, 1},
      {8, 8, 0, 0, cudaChannelFormatKindSigned, CU_AD_FORMAT_SIGNED_INT8, 2},
      {16, 16, 16, 16, cudaChannelFormatKindUnsigned, CU_AD_FORMAT_UNSIGNED_INT16, 4},
      {32, 0, 0, 0, cudaChannelFormatKindSigned, CU_AD_FORMAT_SIGNED_INT32, 1},
      {16, 16, 0, 0, cudaChannelFormatKindFloat, CU_AD_FORMAT_HALF, 2},
      {32, 32, 32, 32, cudaChannelFormatKindFloat, CU_AD_FORMAT_FLOAT, 4},
      {8, 8, 8, 0, cudaChannelFormatKindNV12, CU_AD_FORMAT_NV12, 3},
      {16, 16, 0, 0, cudaChannelFormatKindSignedNormalized16X2, CU_AD_FORMAT_SNORM_INT16X2, 2},
      {8, 8, 8, 8, cudaChannelFormatKindUnsignedBlockCompressed7SRGB, CU_AD_FORMAT_BC7_UNORM_SRGB,
       4},
      {16, 16, 16, 0, cudaChannelFormatKindSignedBlockCompressed6H, CU_AD_FORMAT_BC6H_SF16, 3},
      {10, 10, 10, 2, cudaChannelFormatKindUnsignedNormalized1010102,
       CU_AD_FORMAT_UNORM_INT_101010_2, 4},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    CUarray_format fmt = 0;
    unsigned n = 0;
    cr_expect_eq(conv(ok[i].x, ok[i].y, ok[i].z, ok[i].w, ok[i].f, &fmt, &n), cudaSuccess,
                 "case %zu", i);
    cr_expect_eq(fmt, ok[i].fmt, "case %zu", i);
    cr_expect_eq(n, ok[i].n, "case %zu", i);
    /* and back */
    struct cudaChannelFormatDesc b = cudaev__channel_from_format(fmt, n);
    cr_expect(
        b.x == ok[i].x && b.y == ok[i].y && b.z == ok[i].z && b.w == ok[i].w && b.f == ok[i].f,
        "round trip %zu", i);
  }
}

Test(array, channel_formats_rejected) {
  CUarray_format fmt;
  unsigned n;
  cr_expect_eq(cudaev__channel_to_format(NULL, &fmt, &n), cudaErrorInvalidValue);
  cr_expect_eq(conv(8, 8, 8, 0, cudaChannelFormatKindUnsigned, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(8, 0, 8, 0, cudaChannelFormatKindUnsigned, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(8, 16, 0, 0, cudaChannelFormatKindSigned, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(8, 0, 0, 0, cudaChannelFormatKindFloat, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(64, 0, 0, 0, cudaChannelFormatKindSigned, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(0, 0, 0, 0, cudaChannelFormatKindUnsigned, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(0, 0, 0, 0, cudaChannelFormatKindNone, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(8, 8, 0, 0, cudaChannelFormatKindNV12, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(8, 0, 0, 0, (enum cudaChannelFormatKind)99, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(conv(-8, 0, 0, 0, cudaChannelFormatKindSigned, &fmt, &n),
               cudaErrorInvalidChannelDescriptor);
}

Test(array, elem_sizes) {
  cr_expect_eq(cudaev__format_elem_size(CU_AD_FORMAT_FLOAT, 4), 16);
  cr_expect_eq(cudaev__format_elem_size(CU_AD_FORMAT_HALF, 2), 4);
  cr_expect_eq(cudaev__format_elem_size(CU_AD_FORMAT_UNSIGNED_INT8, 1), 1);
  cr_expect_eq(cudaev__format_elem_size(CU_AD_FORMAT_BC1_UNORM, 4), 8);
  cr_expect_eq(cudaev__format_elem_size(CU_AD_FORMAT_BC7_UNORM, 4), 16);
  cr_expect_eq(cudaev__format_elem_size(CU_AD_FORMAT_P010, 1), 0);
}

/* ---- 3D parameter converter ------------------------------------------------------ */

Test(array, memcpy3d_ptr_to_array_counts_elements) {
  char host[4096] = {0};
  struct cudaMemcpy3DParms p = {0};
  p.srcPtr = make_cudaPitchedPtr(host, 256, 64, 8);
  p.srcPos = make_cudaPos(3, 1, 0);
  p.dstArray = (cudaArray_t)A1;
  p.dstPos = make_cudaPos(2, 4, 0);
  p.extent = make_cudaExtent(5, 3, 1);
  p.kind = cudaMemcpyHostToDevice;
  CUDA_MEMCPY3D m;
  cr_assert_eq(cudaev__memcpy3d_params(&p, &m), cudaSuccess);
  cr_expect_eq(m.WidthInBytes, 5 * 16);
  cr_expect_eq(m.srcMemoryType, CU_MEMORYTYPE_HOST);
  cr_expect_eq(m.srcHost, host);
  /* with an array taking part, a pointer's x position counts the array's
   * elements too (NVIDIA's behaviour, checksummed on an H200) */
  cr_expect_eq(m.srcXInBytes, 3 * 16);
  cr_expect_eq(m.srcY, 1);
  cr_expect_eq(m.srcPitch, 256);
  cr_expect_eq(m.srcHeight, 8);
  cr_expect_eq(m.dstMemoryType, CU_MEMORYTYPE_ARRAY);
  cr_expect_eq(m.dstArray, A1);
  cr_expect_eq(m.dstXInBytes, 2 * 16);
  cr_expect_eq(m.dstY, 4);
  cr_expect_eq(m.Height, 3);
  cr_expect_eq(m.Depth, 1);
}

Test(array, memcpy3d_linear_default_kind_is_unified) {
  struct cudaMemcpy3DParms p = {0};
  p.srcPtr = make_cudaPitchedPtr((void *)(uintptr_t)0x10000, 512, 100, 4);
  p.dstPtr = make_cudaPitchedPtr((void *)(uintptr_t)0x20000, 128, 100, 4);
  p.dstPos = make_cudaPos(7, 0, 2);
  p.extent = make_cudaExtent(100, 4, 3);
  p.kind = cudaMemcpyDefault;
  CUDA_MEMCPY3D m;
  cr_assert_eq(cudaev__memcpy3d_params(&p, &m), cudaSuccess);
  cr_expect_eq(m.srcMemoryType, CU_MEMORYTYPE_UNIFIED);
  cr_expect_eq(m.dstMemoryType, CU_MEMORYTYPE_UNIFIED);
  cr_expect_eq(m.srcDevice, 0x10000);
  cr_expect_eq(m.dstDevice, 0x20000);
  cr_expect_eq(m.WidthInBytes, 100);
  cr_expect_eq(m.dstXInBytes, 7);
  cr_expect_eq(m.dstZ, 2);
  cr_expect_eq(m.Depth, 3);
}

Test(array, memcpy3d_errors) {
  char host[64] = {0};
  CUDA_MEMCPY3D m;
  struct cudaMemcpy3DParms p = {0};
  cr_expect_eq(cudaev__memcpy3d_params(NULL, &m), cudaErrorInvalidValue);
  /* neither source */
  p.dstArray = (cudaArray_t)A1;
  p.extent = make_cudaExtent(1, 1, 1);
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaErrorInvalidValue);
  /* both sources */
  p.srcArray = (cudaArray_t)A2;
  p.srcPtr = make_cudaPitchedPtr(host, 64, 64, 1);
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaErrorInvalidValue);
  /* arrays of different element sizes */
  p.srcPtr.ptr = NULL;
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaErrorInvalidValue);
  /* bad kind */
  p.srcArray = NULL;
  p.srcPtr.ptr = host;
  p.kind = (enum cudaMemcpyKind)7;
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaErrorInvalidMemcpyDirection);
  /* 5 float4 = 80 bytes do not fit a 64-byte pitch: refused with a second
   * row or slice, left to the driver for a single row */
  p.kind = cudaMemcpyHostToDevice;
  p.extent = make_cudaExtent(5, 2, 1);
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaErrorInvalidPitchValue);
  p.extent = make_cudaExtent(5, 1, 2);
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaErrorInvalidPitchValue);
  p.extent = make_cudaExtent(5, 1, 1);
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaSuccess);
  cr_expect_eq(m.WidthInBytes, 80);
  /* a handle the driver does not know */
  p.dstArray = (cudaArray_t)(uintptr_t)0x10dead;
  p.extent = make_cudaExtent(1, 1, 1);
  cr_expect_eq(cudaev__memcpy3d_params(&p, &m), cudaErrorInvalidResourceHandle);
}

Test(array, memcpy3d_export_records_last_error) {
  struct cudaMemcpy3DParms p = {0};
  /* an empty extent is a no-op before anything else is looked at, as
   * NVIDIA's runtime answers an all-zero cudaMemcpy3DParms */
  cr_expect_eq(cudaMemcpy3D(&p), cudaSuccess);
  cr_expect_eq(cudaMemcpy3D(NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  p.extent = make_cudaExtent(1, 1, 1);
  cr_expect_eq(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  char host[64] = {0};
  p.srcPtr = make_cudaPitchedPtr(host, 64, 16, 1);
  p.dstArray = (cudaArray_t)A2;
  p.extent = make_cudaExtent(16, 1, 1);
  p.kind = cudaMemcpyHostToDevice;
  cr_expect_eq(cudaMemcpy3D(&p), cudaSuccess);
  cr_expect_eq(copy3.WidthInBytes, 16);
  cr_expect_eq(cudaGetLastError(), cudaSuccess);
}

/* ---- arrays ------------------------------------------------------------------------ */

Test(array, malloc_array_passes_format_and_flags) {
  cudaArray_t a = NULL;
  struct cudaChannelFormatDesc d = cudaCreateChannelDesc(16, 16, 0, 0, cudaChannelFormatKindFloat);
  cr_assert_eq(cudaMallocArray(&a, &d, 33, 7, cudaArraySurfaceLoadStore), cudaSuccess);
  cr_expect_eq(created.Format, CU_AD_FORMAT_HALF);
  cr_expect_eq(created.NumChannels, 2);
  cr_expect_eq(created.Width, 33);
  cr_expect_eq(created.Height, 7);
  cr_expect_eq(created.Depth, 0);
  cr_expect_eq(created.Flags, CUDA_ARRAY3D_SURFACE_LDST);
  cr_expect_eq(cudaMallocArray(&a, &d, 1, 1, cudaArrayLayered), cudaErrorInvalidValue);
  /* Bit 31, undocumented, goes to the driver as NVIDIA's runtime passes it;
   * other unknown bits are refused. */
  cr_assert_eq(cudaMallocArray(&a, &d, 33, 7, 0x80000000u | cudaArraySurfaceLoadStore),
               cudaSuccess);
  cr_expect_eq(created.Flags, 0x80000000u | CUDA_ARRAY3D_SURFACE_LDST);
  cr_expect_eq(cudaMalloc3DArray(&a, &d, make_cudaExtent(4, 4, 4), 0x80000000u), cudaSuccess);
  cr_expect_eq(created.Flags, 0x80000000u);
  cr_expect_eq(cudaMallocArray(&a, &d, 1, 1, 0x40000000u), cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocArray(&a, &d, 1, 1, 0x80000000u | cudaArrayLayered),
               cudaErrorInvalidValue);
  d.y = 8;
  cr_expect_eq(cudaMallocArray(&a, &d, 1, 1, 0), cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(cudaMallocArray(&a, NULL, 1, 1, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocArray(NULL, &d, 1, 1, 0), cudaErrorInvalidValue);
  struct cudaChannelFormatDesc c = {0};
  unsigned flags = 9;
  struct cudaExtent e;
  cr_expect_eq(cudaArrayGetInfo(&c, &e, &flags, (cudaArray_t)A1), cudaSuccess);
  cr_expect(c.x == 32 && c.y == 32 && c.z == 32 && c.w == 32 && c.f == cudaChannelFormatKindFloat);
  cr_expect(e.width == 10 && e.height == 8 && e.depth == 0 && flags == 0);
}

/* A zero width is no array: NVIDIA's runtime answers it with an invalid
 * value before it looks at the channel descriptor, bad or NULL. */
Test(array, zero_width_before_channel_descriptor) {
  cudaArray_t a = NULL;
  cudaMipmappedArray_t m = NULL;
  struct cudaChannelFormatDesc bad = cudaCreateChannelDesc(8, 16, 0, 0, cudaChannelFormatKindFloat);
  memset(&created, 0, sizeof created);
  created.Width = 99;
  cr_expect_eq(cudaMallocArray(&a, &bad, 0, 1, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocArray(&a, &bad, 0, 0, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocArray(&a, NULL, 0, 0, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaMalloc3DArray(&a, &bad, make_cudaExtent(0, 0, 0), 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaMalloc3DArray(&a, &bad, make_cudaExtent(0, 4, 4), cudaArrayLayered),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocMipmappedArray(&m, &bad, make_cudaExtent(0, 0, 0), 1, 0),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaMallocMipmappedArray(&m, NULL, make_cudaExtent(0, 4, 0), 1, 0),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(created.Width, 99, "the driver was asked for an array");
  /* With a width the descriptor is judged as before. */
  cr_expect_eq(cudaMallocArray(&a, &bad, 1, 0, 0), cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(cudaMalloc3DArray(&a, &bad, make_cudaExtent(1, 1, 1), 0),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(cudaMallocMipmappedArray(&m, &bad, make_cudaExtent(4, 4, 0), 1, 0),
               cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(cudaMallocArray(NULL, &bad, 0, 0, 0), cudaErrorInvalidValue);
}

/* With every pointer NULL, NVIDIA's runtime answers the array handle's
 * error before the output's (or, in cudaMemcpy2DArrayToArray, the NULL
 * destination's); one NULL at a time gives what it gave before. */
Test(array, null_handle_before_null_output) {
  cr_expect_eq(cudaArrayGetPlane(NULL, NULL, 0), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaArrayGetPlane(NULL, (cudaArray_t)A1, 0), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetMipmappedArrayLevel(NULL, NULL, 0), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetMipmappedArrayLevel(NULL, (cudaMipmappedArray_t)A1, 0),
               cudaErrorInvalidValue);
  cudaArray_t out = NULL;
  cr_expect_eq(cudaGetMipmappedArrayLevel(&out, NULL, 0), cudaErrorInvalidResourceHandle);
  ncopies = 0;
  cr_expect_eq(cudaMemcpy2DArrayToArray(NULL, 0, 0, NULL, 0, 0, 16, 1, cudaMemcpyDeviceToDevice),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(
      cudaMemcpy2DArrayToArray(NULL, 0, 0, (cudaArray_t)A1, 0, 0, 16, 1, cudaMemcpyDeviceToDevice),
      cudaErrorInvalidValue);
  cr_expect_eq(ncopies, 0);
}

/* cudaMemcpyToArray runs along the rows of the array and wraps: rows of A1
 * are 10 float4 = 160 bytes, so 500 bytes from byte 8 of row 1 are the
 * rest of row 1, rows 2-3 whole (one 2D copy) and the start of row 4. */
Test(array, memcpy_to_array_wraps_rows) {
  char host[1024] = {0};
  ncopies = 0;
  cr_assert_eq(cudaMemcpyToArray((cudaArray_t)A1, 8, 1, host, 500, cudaMemcpyHostToDevice),
               cudaSuccess);
  /* 152 (rest of row 1), 320 (rows 2-3 whole), 28 (start of row 4) */
  cr_assert_eq(ncopies, 3);
  cr_expect(copies[0].dstXInBytes == 8 && copies[0].dstY == 1 && copies[0].WidthInBytes == 152 &&
            copies[0].Height == 1 && copies[0].srcHost == host);
  cr_expect(copies[1].dstXInBytes == 0 && copies[1].dstY == 2 && copies[1].WidthInBytes == 160 &&
            copies[1].Height == 2 && copies[1].srcPitch == 160 && copies[1].srcHost == host + 152);
  cr_expect(copies[2].dstXInBytes == 0 && copies[2].dstY == 4 && copies[2].WidthInBytes == 28 &&
            copies[2].Height == 1 && copies[2].srcHost == host + 472);
  cr_expect_eq(cudaMemcpyToArray(NULL, 0, 0, host, 4, cudaMemcpyHostToDevice),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  /* NVIDIA's deprecated 1D copies succeed, copying nothing, for a kind past
   * cudaMemcpyDefault; a kind that makes the array side host memory is a
   * wrong direction */
  ncopies = 0;
  cr_expect_eq(cudaMemcpyToArray((cudaArray_t)A1, 0, 0, host, 4, (enum cudaMemcpyKind)9),
               cudaSuccess);
  cr_expect_eq(cudaMemcpyToArray(NULL, 0, 0, host, 4, (enum cudaMemcpyKind)11), cudaSuccess);
  cr_expect_eq(cudaMemcpyToArray((cudaArray_t)A1, 0, 0, host, 0, cudaMemcpyHostToHost),
               cudaSuccess);
  cr_expect_eq(ncopies, 0);
  cr_expect_eq(cudaMemcpyToArray((cudaArray_t)A1, 0, 0, host, 4, cudaMemcpyDeviceToHost),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpyToArray((cudaArray_t)A1, 0, 0, host, 4, cudaMemcpyHostToHost),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpyToArray((cudaArray_t)A1, 200, 0, host, 4, cudaMemcpyHostToDevice),
               cudaErrorInvalidValue);
}

Test(array, memcpy2d_checks_pitch_and_kind) {
  char a[256] = {0}, b[256] = {0};
  ncopies = 0;
  cr_expect_eq(cudaMemcpy2D(a, 16, b, 32, 17, 2, cudaMemcpyHostToHost), cudaErrorInvalidPitchValue);
  cr_expect_eq(cudaMemcpy2D(a, 32, b, 16, 17, 2, cudaMemcpyHostToHost), cudaErrorInvalidPitchValue);
  cr_expect_eq(cudaMemcpy2D(a, 32, b, 32, 17, 2, (enum cudaMemcpyKind)5),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpy2D(a, 32, b, 32, 0, 2, cudaMemcpyHostToHost), cudaSuccess);
  cr_expect_eq(ncopies, 0);
  cr_expect_eq(cudaMemcpy2D(a, 32, b, 24, 17, 3, cudaMemcpyHostToHost), cudaSuccess);
  cr_assert_eq(ncopies, 1);
  cr_expect(copies[0].srcMemoryType == CU_MEMORYTYPE_HOST &&
            copies[0].dstMemoryType == CU_MEMORYTYPE_HOST && copies[0].srcPitch == 24 &&
            copies[0].dstPitch == 32 && copies[0].WidthInBytes == 17 && copies[0].Height == 3);
}

/* ---- texture descriptors -------------------------------------------------------------- */

Test(array, texture_desc_flags_round_trip) {
  struct cudaResourceDesc r;
  memset(&r, 0, sizeof r);
  r.resType = cudaResourceTypePitch2D;
  r.res.pitch2D.devPtr = (void *)(uintptr_t)0x4000;
  r.res.pitch2D.desc = cudaCreateChannelDesc(8, 8, 8, 8, cudaChannelFormatKindUnsigned);
  r.res.pitch2D.width = 30;
  r.res.pitch2D.height = 20;
  r.res.pitch2D.pitchInBytes = 128;
  struct cudaTextureDesc t;
  memset(&t, 0, sizeof t);
  t.addressMode[0] = cudaAddressModeBorder;
  t.addressMode[1] = cudaAddressModeMirror;
  t.filterMode = cudaFilterModeLinear;
  t.readMode = cudaReadModeNormalizedFloat;
  t.normalizedCoords = 1;
  t.sRGB = 1;
  t.maxAnisotropy = 4;
  t.borderColor[2] = 0.5f;
  cudaTextureObject_t o = 0;
  cr_assert_eq(cudaCreateTextureObject(&o, &r, &t, NULL), cudaSuccess);
  cr_expect_eq(o, 7);
  cr_expect_eq(resd.resType, CU_RESOURCE_TYPE_PITCH2D);
  cr_expect_eq(resd.res.pitch2D.format, CU_AD_FORMAT_UNSIGNED_INT8);
  cr_expect_eq(resd.res.pitch2D.numChannels, 4);
  cr_expect_eq(resd.res.pitch2D.pitchInBytes, 128);
  cr_expect_eq(texd.flags, CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB);
  cr_expect_eq(texd.addressMode[0], CU_TR_ADDRESS_MODE_BORDER);
  cr_expect_eq(texd.maxAnisotropy, 4);
  struct cudaTextureDesc back;
  cr_assert_eq(cudaGetTextureObjectTextureDesc(&back, o), cudaSuccess);
  cr_expect_eq(memcmp(&back, &t, sizeof t), 0);

  t.readMode = cudaReadModeElementType;
  t.normalizedCoords = 0;
  t.sRGB = 0;
  t.seamlessCubemap = 1;
  t.disableTrilinearOptimization = 1;
  cr_assert_eq(cudaCreateTextureObject(&o, &r, &t, NULL), cudaSuccess);
  cr_expect_eq(texd.flags, CU_TRSF_READ_AS_INTEGER | CU_TRSF_SEAMLESS_CUBEMAP |
                               CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION);
  cr_assert_eq(cudaGetTextureObjectTextureDesc(&back, o), cudaSuccess);
  cr_expect_eq(memcmp(&back, &t, sizeof t), 0);

  r.res.pitch2D.desc.z = 0; /* 3 channels */
  cr_expect_eq(cudaCreateTextureObject(&o, &r, &t, NULL), cudaErrorInvalidChannelDescriptor);
  cr_expect_eq(cudaCreateTextureObject(&o, NULL, &t, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaCreateTextureObject(NULL, &r, &t, NULL), cudaErrorInvalidValue);
}

/* ---- array copies: kinds, handles, pitches (NVIDIA's answers) ---------------------- */

Test(array, array_copies_kinds_and_handles) {
  char host[1024] = {0};
  ncopies = 0;
  cr_expect_eq(cudaMemcpyFromArray(host, (cudaArray_t)A1, 0, 0, 4, cudaMemcpyHostToDevice),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpyFromArray(host, (cudaArray_t)A1, 0, 0, 4, (enum cudaMemcpyKind)11),
               cudaSuccess);
  cr_expect_eq(cudaMemcpyFromArray(host, NULL, 0, 0, 4, cudaMemcpyDeviceToHost),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaMemcpyArrayToArray((cudaArray_t)A1, 0, 0, (cudaArray_t)A1, 0, 0, 4,
                                      cudaMemcpyHostToDevice),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpyArrayToArray((cudaArray_t)A1, 0, 0, (cudaArray_t)A1, 0, 0, 4,
                                      (enum cudaMemcpyKind)11),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(
      cudaMemcpyArrayToArray(NULL, 0, 0, (cudaArray_t)A1, 0, 0, 4, cudaMemcpyDeviceToDevice),
      cudaErrorInvalidResourceHandle);
  /* A copy that does not fit the arrays (x past A1's 160-byte rows) is an
   * invalid value, unless NVIDIA's staging buffer of count bytes cannot be
   * had: more than the device's free memory. */
  cr_expect_eq(cudaMemcpyArrayToArray((cudaArray_t)A1, 200, 0, (cudaArray_t)A1, 0, 0, 4,
                                      cudaMemcpyDeviceToDevice),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaMemcpyArrayToArray((cudaArray_t)A1, 200, 0, (cudaArray_t)A1, 0, 0, free_bytes,
                                      cudaMemcpyDeviceToDevice),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaMemcpyArrayToArray((cudaArray_t)A1, 200, 0, (cudaArray_t)A1, 0, 0,
                                      free_bytes + 1, cudaMemcpyDeviceToDevice),
               cudaErrorMemoryAllocation);
  cr_expect_eq(cudaMemcpyArrayToArray((cudaArray_t)A1, 200, 0, (cudaArray_t)A1, 0, 0, SIZE_MAX,
                                      cudaMemcpyDefault),
               cudaErrorMemoryAllocation);
  cr_expect_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
  cr_expect_eq(cudaMemcpy2DToArray(NULL, 0, 0, host, 16, 16, 2, cudaMemcpyHostToDevice),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaMemcpy2DFromArray(host, 16, NULL, 0, 0, 16, 2, cudaMemcpyDeviceToHost),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(
      cudaMemcpy2DArrayToArray((cudaArray_t)A1, 0, 0, NULL, 0, 0, 16, 1, cudaMemcpyDeviceToDevice),
      cudaErrorInvalidResourceHandle);
  /* kind before handle, and an empty copy before both */
  cr_expect_eq(cudaMemcpy2DToArray(NULL, 0, 0, host, 16, 16, 2, cudaMemcpyDeviceToHost),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpy2DToArray(NULL, 0, 0, host, 16, 0, 2, (enum cudaMemcpyKind)9),
               cudaSuccess);
  cr_expect_eq(
      cudaMemcpy2DFromArray(host, 16, (cudaArray_t)A1, 0, 0, 16, 2, cudaMemcpyHostToDevice),
      cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(cudaMemcpy2DArrayToArray((cudaArray_t)A1, 0, 0, (cudaArray_t)A1, 0, 0, 16, 1,
                                        cudaMemcpyDeviceToHost),
               cudaErrorInvalidMemcpyDirection);
  cr_expect_eq(ncopies, 0);
  /* a pitch is checked only with a second row: one row goes to the driver */
  cr_expect_eq(cudaMemcpy2DToArray((cudaArray_t)A1, 0, 0, host, 10, 11, 2, cudaMemcpyHostToDevice),
               cudaErrorInvalidPitchValue);
  cr_expect_eq(cudaMemcpy2DToArray((cudaArray_t)A1, 0, 0, host, 10, 11, 1, cudaMemcpyHostToDevice),
               cudaSuccess);
  cr_expect_eq(cudaMemcpy2D(host, 10, host + 100, 10, 11, 1, cudaMemcpyHostToHost), cudaSuccess);
  cr_expect_eq(ncopies, 2);
}

static CUresult f_reqs(CUDA_ARRAY_MEMORY_REQUIREMENTS *r, CUarray a, CUdevice d) {
  (void)a, (void)d;
  memset(r, 0, sizeof *r);
  r->size = 4096;
  return CUDA_SUCCESS;
}
static CUresult f_texview(CUDA_RESOURCE_VIEW_DESC *v, CUtexObject t) {
  (void)v, (void)t; /* like the driver for a texture made without a view */
  return CUDA_SUCCESS;
}

Test(array, memory_requirements_bad_device_is_invalid_value) {
  cudaev__drv.cuArrayGetMemoryRequirements = f_reqs;
  struct cudaArrayMemoryRequirements req;
  cr_expect_eq(cudaArrayGetMemoryRequirements(&req, (cudaArray_t)A1, 999), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
  cr_expect_eq(cudaArrayGetMemoryRequirements(&req, (cudaArray_t)A1, -1), cudaErrorInvalidValue);
  cr_expect_eq(cudaMipmappedArrayGetMemoryRequirements(&req, (cudaMipmappedArray_t)A1, 999),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaArrayGetMemoryRequirements(&req, (cudaArray_t)A1, 0), cudaSuccess);
  cr_expect_eq(req.size, 4096);
}

Test(array, texture_and_surface_null_codes) {
  cudaev__drv.cuTexObjectGetResourceViewDesc = f_texview;
  struct cudaResourceDesc r;
  memset(&r, 0, sizeof r);
  r.resType = cudaResourceTypeArray; /* NULL array */
  struct cudaTextureDesc t;
  memset(&t, 0, sizeof t);
  cudaTextureObject_t o = 0;
  cr_expect_eq(cudaCreateTextureObject(&o, &r, &t, NULL), cudaErrorInvalidResourceHandle);
  r.resType = cudaResourceTypeMipmappedArray;
  cr_expect_eq(cudaCreateTextureObject(&o, &r, &t, NULL), cudaErrorInvalidResourceHandle);
  cudaSurfaceObject_t so = 0;
  r.resType = cudaResourceTypeArray;
  cr_expect_eq(cudaCreateSurfaceObject(&so, &r), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaCreateTextureObject(&o, &r, NULL, NULL), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaCreateTextureObject(NULL, NULL, NULL, NULL), cudaErrorInvalidValue);
  cr_expect_eq(cudaGetTextureObjectTextureDesc(NULL, 7), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetSurfaceObjectResourceDesc(NULL, 7), cudaErrorInvalidDevice);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDevice);
  cr_expect_eq(cudaGetTextureObjectResourceViewDesc(NULL, 7), cudaSuccess);
  cr_expect_eq(cudaGetLastError(), cudaSuccess);
  /* a view the driver leaves unwritten comes back as zeros */
  struct cudaResourceViewDesc v;
  memset(&v, 0x5a, sizeof v);
  cr_expect_eq(cudaGetTextureObjectResourceViewDesc(&v, 7), cudaSuccess);
  struct cudaResourceViewDesc zero;
  memset(&zero, 0, sizeof zero);
  cr_expect_eq(memcmp(&v, &zero, sizeof v), 0);
}
