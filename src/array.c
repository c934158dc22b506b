/* Memory Management, the pitched / array part: cudaMallocPitch, cudaMalloc3D,
 * CUDA arrays and mipmapped arrays, their descriptors and requirements, and
 * the channel-format conversions the texture and copy code share. */
#include "internal.h"

#include "array.h"
#include "handle.h"

#include <string.h>

/* ---- channel formats ------------------------------------------------------ */

/* The kinds past Float/None have one fixed format each, and NVIDIA's
 * channel_descriptor.h templates give the bit counts that go with them. */
struct special_kind {
  enum cudaChannelFormatKind kind;
  unsigned char x, y, z, w;
  CUarray_format fmt;
  unsigned char channels;
  unsigned char elem_size;
};

static const struct special_kind special_kinds[] = {
    {cudaChannelFormatKindNV12, 8, 8, 8, 0, CU_AD_FORMAT_NV12, 3, 1},
    {cudaChannelFormatKindUnsignedNormalized8X1, 8, 0, 0, 0, CU_AD_FORMAT_UNORM_INT8X1, 1, 1},
    {cudaChannelFormatKindUnsignedNormalized8X2, 8, 8, 0, 0, CU_AD_FORMAT_UNORM_INT8X2, 2, 2},
    {cudaChannelFormatKindUnsignedNormalized8X4, 8, 8, 8, 8, CU_AD_FORMAT_UNORM_INT8X4, 4, 4},
    {cudaChannelFormatKindUnsignedNormalized16X1, 16, 0, 0, 0, CU_AD_FORMAT_UNORM_INT16X1, 1, 2},
    {cudaChannelFormatKindUnsignedNormalized16X2, 16, 16, 0, 0, CU_AD_FORMAT_UNORM_INT16X2, 2, 4},
    {cudaChannelFormatKindUnsignedNormalized16X4, 16, 16, 16, 16, CU_AD_FORMAT_UNORM_INT16X4, 4, 8},
    {cudaChannelFormatKindSignedNormalized8X1, 8, 0, 0, 0, CU_AD_FORMAT_SNORM_INT8X1, 1, 1},
    {cudaChannelFormatKindSignedNormalized8X2, 8, 8, 0, 0, CU_AD_FORMAT_SNORM_INT8X2, 2, 2},
    {cudaChannelFormatKindSignedNormalized8X4, 8, 8, 8, 8, CU_AD_FORMAT_SNORM_INT8X4, 4, 4},
    {cudaChannelFormatKindSignedNormalized16X1, 16, 0, 0, 0, CU_AD_FORMAT_SNORM_INT16X1, 1, 2},
    {cudaChannelFormatKindSignedNormalized16X2, 16, 16, 0, 0, CU_AD_FORMAT_SNORM_INT16X2, 2, 4},
    {cudaChannelFormatKindSignedNormalized16X4, 16, 16, 16, 16, CU_AD_FORMAT_SNORM_INT16X4, 4, 8},
    {cudaChannelFormatKindUnsignedBlockCompressed1, 8, 8, 8, 8, CU_AD_FORMAT_BC1_UNORM, 4, 8},
    {cudaChannelFormatKindUnsignedBlockCompressed1SRGB, 8, 8, 8, 8, CU_AD_FORMAT_BC1_UNORM_SRGB, 4,
     8},
    {cudaChannelFormatKindUnsignedBlockCompressed2, 8, 8, 8, 8, CU_AD_FORMAT_BC2_UNORM, 4, 16},
    {cudaChannelFormatKindUnsignedBlockCompressed2SRGB, 8, 8, 8, 8, CU_AD_FORMAT_BC2_UNORM_SRGB, 4,
     16},
    {cudaChannelFormatKindUnsignedBlockCompressed3, 8, 8, 8, 8, CU_AD_FORMAT_BC3_UNORM, 4, 16},
    {cudaChannelFormatKindUnsignedBlockCompressed3SRGB, 8, 8, 8, 8, CU_AD_FORMAT_BC3_UNORM_SRGB, 4,
     16},
    {cudaChannelFormatKindUnsignedBlockCompressed4, 8, 0, 0, 0, CU_AD_FORMAT_BC4_UNORM, 1, 8},
    {cudaChannelFormatKindSignedBlockCompressed4, 8, 0, 0, 0, CU_AD_FORMAT_BC4_SNORM, 1, 8},
    {cudaChannelFormatKindUnsignedBlockCompressed5, 8, 8, 0, 0, CU_AD_FORMAT_BC5_UNORM, 2, 16},
    {cudaChannelFormatKindSignedBlockCompressed5, 8, 8, 0, 0, CU_AD_FORMAT_BC5_SNORM, 2, 16},
    {cudaChannelFormatKindUnsignedBlockCompressed6H, 16, 16, 16, 0, CU_AD_FORMAT_BC6H_UF16, 3, 16},
    {cudaChannelFormatKindSignedBlockCompressed6H, 16, 16, 16, 0, CU_AD_FORMAT_BC6H_SF16, 3, 16},
    {cudaChannelFormatKindUnsignedBlockCompressed7, 8, 8, 8, 8, CU_AD_FORMAT_BC7_UNORM, 4, 16},
    {cudaChannelFormatKindUnsignedBlockCompressed7SRGB, 8, 8, 8, 8, CU_AD_FORMAT_BC7_UNORM_SRGB, 4,
     16},
    {cudaChannelFormatKindUnsignedNormalized1010102, 10, 10, 10, 2, CU_AD_FORMAT_UNORM_INT_101010_2,
     4, 4},
};
#define N_SPECIAL (sizeof special_kinds / sizeof special_kinds[0])

cudaError_t cudaev__channel_to_format(const struct cudaChannelFormatDesc *d, CUarray_format *fmt,
                                      unsigned *num_channels) {
  if (d == NULL) return cudaErrorInvalidValue;
  if (d->f == cudaChannelFormatKindSigned || d->f == cudaChannelFormatKindUnsigned ||
      d->f == cudaChannelFormatKindFloat) {
    /* Channels fill x, y, z, w in order, all of x's width, and a texel has
     * 1, 2 or 4 of them (there is no 3-channel hardware format). */
    int bits[4] = {d->x, d->y, d->z, d->w};
    unsigned n = 0;
    while (n < 4 && bits[n] != 0) n++;
    for (unsigned i = 0; i < 4; i++) {
      if (i < n && bits[i] != d->x) return cudaErrorInvalidChannelDescriptor;
      if (i >= n && bits[i] != 0) return cudaErrorInvalidChannelDescriptor;
    }
    if (n != 1 && n != 2 && n != 4) return cudaErrorInvalidChannelDescriptor;
    CUarray_format f;
    switch (d->f == cudaChannelFormatKindFloat ? d->x + 1000 : d->x) {
    case 8:
      f = d->f == cudaChannelFormatKindSigned ? CU_AD_FORMAT_SIGNED_INT8
                                              : CU_AD_FORMAT_UNSIGNED_INT8;
      break;
    case 16:
      f = d->f == cudaChannelFormatKindSigned ? CU_AD_FORMAT_SIGNED_INT16
                                              : CU_AD_FORMAT_UNSIGNED_INT16;
      break;
    case 32:
      f = d->f == cudaChannelFormatKindSigned ? CU_AD_FORMAT_SIGNED_INT32
                                              : CU_AD_FORMAT_UNSIGNED_INT32;
      break;
    case 1016: f = CU_AD_FORMAT_HALF; break;
    case 1032: f = CU_AD_FORMAT_FLOAT; break;
    default: return cudaErrorInvalidChannelDescriptor;
    }
    *fmt = f;
    *num_channels = n;
    return cudaSuccess;
  }
  for (size_t i = 0; i < N_SPECIAL; i++) {
    const struct special_kind *s = &special_kinds[i];
    if (s->kind != d->f) continue;
    if (d->x != s->x || d->y != s->y || d->z != s->z || d->w != s->w)
      return cudaErrorInvalidChannelDescriptor;
    *fmt = s->fmt;
    *num_channels = s->channels;
    return cudaSuccess;
  }
  return cudaErrorInvalidChannelDescriptor; /* cudaChannelFormatKindNone or unknown */
}

struct cudaChannelFormatDesc cudaev__channel_from_format(CUarray_format fmt,
                                                         unsigned num_channels) {
  struct cudaChannelFormatDesc d = {0, 0, 0, 0, cudaChannelFormatKindNone};
  int bits = 0;
  switch (fmt) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
    bits = 8;
    d.f = cudaChannelFormatKindUnsigned;
    break;
  case CU_AD_FORMAT_UNSIGNED_INT16:
    bits = 16;
    d.f = cudaChannelFormatKindUnsigned;
    break;
  case CU_AD_FORMAT_UNSIGNED_INT32:
    bits = 32;
    d.f = cudaChannelFormatKindUnsigned;
    break;
  case CU_AD_FORMAT_SIGNED_INT8:
    bits = 8;
    d.f = cudaChannelFormatKindSigned;
    break;
  case CU_AD_FORMAT_SIGNED_INT16:
    bits = 16;
    d.f = cudaChannelFormatKindSigned;
    break;
  case CU_AD_FORMAT_SIGNED_INT32:
    bits = 32;
    d.f = cudaChannelFormatKindSigned;
    break;
  case CU_AD_FORMAT_HALF:
    bits = 16;
    d.f = cudaChannelFormatKindFloat;
    break;
  case CU_AD_FORMAT_FLOAT:
    bits = 32;
    d.f = cudaChannelFormatKindFloat;
    break;
  default:
    for (size_t i = 0; i < N_SPECIAL; i++) {
      const struct special_kind *s = &special_kinds[i];
      if (s->fmt != fmt) continue;
      d.x = s->x, d.y = s->y, d.z = s->z, d.w = s->w, d.f = s->kind;
      return d;
    }
    return d;
  }
  d.x = bits;
  d.y = num_channels >= 2 ? bits : 0;
  d.z = num_channels >= 3 ? bits : 0;
  d.w = num_channels >= 4 ? bits : 0;
  return d;
}

size_t cudaev__format_elem_size(CUarray_format fmt, unsigned num_channels) {
  switch (fmt) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8: return num_channels;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF: return 2 * (size_t)num_channels;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT: return 4 * (size_t)num_channels;
  default:
    for (size_t i = 0; i < N_SPECIAL; i++)
      if (special_kinds[i].fmt == fmt) return special_kinds[i].elem_size;
    return 0;
  }
}

cudaError_t cudaev__array_elem_size(CUarray a, size_t *out) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  CUresult r = cudaev__drv.cuArray3DGetDescriptor(&d, a);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  *out = cudaev__format_elem_size(d.Format, d.NumChannels);
  return cudaSuccess;
}

/* ---- pitched linear memory ------------------------------------------------ */

/* cuMemAllocPitch's element size only bounds the pitch the driver may pick;
 * 4 is the smallest it accepts and gives the same pitch for every width. */
#define PITCH_ELEMENT_SIZE 4

static cudaError_t malloc_pitch(void **ptr, size_t *pitch, size_t width, size_t height) {
  if (width == 0 || height == 0) {
    *ptr = NULL;
    *pitch = 0;
    return cudaSuccess;
  }
  CUdeviceptr p = 0;
  size_t pi = 0;
  CUresult r = cudaev__drv.cuMemAllocPitch(&p, &pi, width, height, PITCH_ELEMENT_SIZE);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  *ptr = (void *)(uintptr_t)p;
  *pitch = pi;
  return cudaSuccess;
}

cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height) {
  CUDAEV_CTX_OR_RETURN();
  if (devPtr == NULL || pitch == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret(malloc_pitch(devPtr, pitch, width, height));
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent) {
  CUDAEV_CTX_OR_RETURN();
  if (pitchedDevPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  /* Rows past SIZE_MAX are asked for as SIZE_MAX rows: the driver refuses
   * those (out of memory), after it refused an impossible width (invalid
   * value), the order in which NVIDIA's runtime answers an all-ones
   * extent. */
  size_t rows = extent.height * extent.depth;
  if (extent.depth != 0 && rows / extent.depth != extent.height) rows = SIZE_MAX;
  void *p = NULL;
  size_t pitch = 0;
  cudaError_t e = malloc_pitch(&p, &pitch, extent.width, rows);
  if (e != cudaSuccess) return cudaev__ret(e);
  pitchedDevPtr->ptr = p;
  pitchedDevPtr->pitch = pitch;
  pitchedDevPtr->xsize = extent.width;
  pitchedDevPtr->ysize = extent.height;
  return cudaSuccess;
}

/* ---- arrays --------------------------------------------------------------- */

/* CUDA_ARRAY3D_VIDEO_ENCODE_DECODE has no cudaArray* name, but NVIDIA's
 * runtime passes it to the driver in all three allocations (cudaSuccess,
 * measured on an H100). Nor has bit 31, which NVIDIA's runtime also takes
 * in all three and the driver keeps: cudaArrayGetInfo reports it back
 * (measured on an H200; 0x80000002 succeeds too, 0x80000001 fails as 0x1
 * does, and 0x40000000 fails). */
#define ARRAY_FLAG_BIT31 0x80000000u
#define ARRAY_2D_FLAGS                                                    \
  (cudaArraySurfaceLoadStore | cudaArrayTextureGather | cudaArraySparse | \
   cudaArrayDeferredMapping | CUDA_ARRAY3D_VIDEO_ENCODE_DECODE | ARRAY_FLAG_BIT31)
#define ARRAY_3D_FLAGS (ARRAY_2D_FLAGS | cudaArrayLayered | cudaArrayCubemap)

/* The runtime's cudaArray* flags have the driver's CUDA_ARRAY3D_* values
 * (abi_asserts.c), so they are passed on as they are.
 *
 * A zero width is no array in any of the three allocations, and NVIDIA's
 * runtime answers it with cudaErrorInvalidValue before it looks at the
 * channel descriptor (a bad one included). The other shapes the driver
 * refuses (a depth without rows, a cubemap that is not square) still go
 * to it after the descriptor: NVIDIA's order for those is not measured. */
static cudaError_t array_desc(CUDA_ARRAY3D_DESCRIPTOR *ad, const struct cudaChannelFormatDesc *desc,
                              struct cudaExtent extent, unsigned flags, unsigned allowed) {
  if (desc == NULL || (flags & ~allowed) != 0 || extent.width == 0) return cudaErrorInvalidValue;
  cudaError_t e = cudaev__channel_to_format(desc, &ad->Format, &ad->NumChannels);
  if (e != cudaSuccess) return e;
  ad->Width = extent.width;
  ad->Height = extent.height;
  ad->Depth = extent.depth;
  ad->Flags = flags;
  return cudaSuccess;
}

cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                            size_t width, size_t height, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (array == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDA_ARRAY3D_DESCRIPTOR ad;
  struct cudaExtent ext = {width, height, 0};
  cudaError_t e = array_desc(&ad, desc, ext, flags, ARRAY_2D_FLAGS);
  if (e != cudaSuccess) return cudaev__ret(e);
  CUarray a = NULL;
  CUresult r = cudaev__drv.cuArray3DCreate(&a, &ad);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__handle_revive(a);
  *array = (cudaArray_t)a;
  return cudaSuccess;
}

cudaError_t cudaMalloc3DArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                              struct cudaExtent extent, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (array == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDA_ARRAY3D_DESCRIPTOR ad;
  cudaError_t e = array_desc(&ad, desc, extent, flags, ARRAY_3D_FLAGS);
  if (e != cudaSuccess) return cudaev__ret(e);
  CUarray a = NULL;
  CUresult r = cudaev__drv.cuArray3DCreate(&a, &ad);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__handle_revive(a);
  *array = (cudaArray_t)a;
  return cudaSuccess;
}

cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
                                     const struct cudaChannelFormatDesc *desc,
                                     struct cudaExtent extent, unsigned int numLevels,
                                     unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (mipmappedArray == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDA_ARRAY3D_DESCRIPTOR ad;
  cudaError_t e = array_desc(&ad, desc, extent, flags, ARRAY_3D_FLAGS);
  if (e != cudaSuccess) return cudaev__ret(e);
  CUmipmappedArray m = NULL;
  CUresult r = cudaev__drv.cuMipmappedArrayCreate(&m, &ad, numLevels);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__handle_revive(m);
  *mipmappedArray = (cudaMipmappedArray_t)m;
  return cudaSuccess;
}

/* A freed array handle that still reaches the driver is answered with
 * cudaErrorContextIsDestroyed when the driver can tell (NVIDIA's runtime
 * passes it on; measured on an H100 for a second free and a query), and
 * crashes it when it cannot: ours answers that code every time. */
#define ARRAY_LIVE_OR_RETURN(a) CUDAEV_LIVE_OR_RETURN_ERR(a, cudaErrorContextIsDestroyed)

/* A freed array or mipmapped array is remembered (src/handle.h, the table
 * of destroyed handles): the driver's copies, queries and a second free
 * crash on one (NVIDIA's runtime with them), ours refuse it as
 * above. Every use of an array handle below is checked the same way before
 * the driver sees it. */
cudaError_t cudaFreeArray(cudaArray_t array) {
  CUDAEV_CTX_OR_RETURN();
  if (array == NULL) return cudaSuccess;
  ARRAY_LIVE_OR_RETURN(array);
  cudaev__handle_bury(array);
  CUresult r = cudaev__drv.cuArrayDestroy((CUarray)array);
  if (r != CUDA_SUCCESS) cudaev__handle_revive(array);
  return cudaev__ret_cu(r);
}

cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray) {
  CUDAEV_CTX_OR_RETURN();
  if (mipmappedArray == NULL) return cudaSuccess;
  ARRAY_LIVE_OR_RETURN(mipmappedArray);
  cudaev__handle_bury(mipmappedArray);
  CUresult r = cudaev__drv.cuMipmappedArrayDestroy((CUmipmappedArray)mipmappedArray);
  if (r != CUDA_SUCCESS) cudaev__handle_revive(mipmappedArray);
  return cudaev__ret_cu(r);
}

cudaError_t cudaGetMipmappedArrayLevel(cudaArray_t *levelArray,
                                       cudaMipmappedArray_const_t mipmappedArray,
                                       unsigned int level) {
  CUDAEV_CTX_OR_RETURN();
  /* The handle before the output: with both NULL, NVIDIA's runtime answers
   * the handle's error. */
  if (mipmappedArray == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  if (levelArray == NULL) return cudaev__ret(cudaErrorInvalidValue);
  ARRAY_LIVE_OR_RETURN(mipmappedArray);
  CUarray a = NULL;
  CUresult r = cudaev__drv.cuMipmappedArrayGetLevel(&a, (CUmipmappedArray)mipmappedArray, level);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__handle_revive(a);
  *levelArray = (cudaArray_t)a;
  return cudaSuccess;
}

cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc *desc, struct cudaExtent *extent,
                             unsigned int *flags, cudaArray_t array) {
  CUDAEV_CTX_OR_RETURN();
  ARRAY_LIVE_OR_RETURN(array);
  CUDA_ARRAY3D_DESCRIPTOR ad;
  CUresult r = cudaev__drv.cuArray3DGetDescriptor(&ad, (CUarray)array);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  if (desc != NULL) *desc = cudaev__channel_from_format(ad.Format, ad.NumChannels);
  if (extent != NULL) {
    extent->width = ad.Width;
    extent->height = ad.Height;
    extent->depth = ad.Depth;
  }
  if (flags != NULL) *flags = ad.Flags;
  return cudaSuccess;
}

cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc *desc, cudaArray_const_t array) {
  CUDAEV_CTX_OR_RETURN();
  if (desc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  ARRAY_LIVE_OR_RETURN(array);
  CUDA_ARRAY3D_DESCRIPTOR ad;
  CUresult r = cudaev__drv.cuArray3DGetDescriptor(&ad, (CUarray)array);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *desc = cudaev__channel_from_format(ad.Format, ad.NumChannels);
  return cudaSuccess;
}

cudaError_t cudaArrayGetPlane(cudaArray_t *pPlaneArray, cudaArray_t hArray, unsigned int planeIdx) {
  CUDAEV_CTX_OR_RETURN();
  /* A NULL array is the driver's invalid handle, and NVIDIA's runtime
   * answers it before a NULL output. */
  if (hArray == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  if (pPlaneArray == NULL) return cudaev__ret(cudaErrorInvalidValue);
  ARRAY_LIVE_OR_RETURN(hArray);
  CUarray p = NULL;
  CUresult r = cudaev__drv.cuArrayGetPlane(&p, (CUarray)hArray, planeIdx);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  cudaev__handle_revive(p);
  *pPlaneArray = (cudaArray_t)p;
  return cudaSuccess;
}

cudaError_t cudaArrayGetMemoryRequirements(struct cudaArrayMemoryRequirements *memoryRequirements,
                                           cudaArray_t array, int device) {
  CUDAEV_CTX_OR_RETURN();
  /* A bad ordinal is an invalid value here, not an invalid device (as
   * NVIDIA's runtime answers). */
  if (memoryRequirements == NULL || !cudaev__device_valid(device))
    return cudaev__ret(cudaErrorInvalidValue);
  ARRAY_LIVE_OR_RETURN(array);
  return cudaev__ret_cu(
      cudaev__drv.cuArrayGetMemoryRequirements((CUDA_ARRAY_MEMORY_REQUIREMENTS *)memoryRequirements,
                                               (CUarray)array, cudaev__rt.devices[device].dev));
}

cudaError_t cudaMipmappedArrayGetMemoryRequirements(
    struct cudaArrayMemoryRequirements *memoryRequirements, cudaMipmappedArray_t mipmap,
    int device) {
  CUDAEV_CTX_OR_RETURN();
  /* A bad ordinal is an invalid value here, not an invalid device (as
   * NVIDIA's runtime answers). */
  if (memoryRequirements == NULL || !cudaev__device_valid(device))
    return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(mipmap);
  return cudaev__ret_cu(cudaev__drv.cuMipmappedArrayGetMemoryRequirements(
      (CUDA_ARRAY_MEMORY_REQUIREMENTS *)memoryRequirements, (CUmipmappedArray)mipmap,
      cudaev__rt.devices[device].dev));
}

cudaError_t cudaArrayGetSparseProperties(struct cudaArraySparseProperties *sparseProperties,
                                         cudaArray_t array) {
  CUDAEV_CTX_OR_RETURN();
  if (sparseProperties == NULL) return cudaev__ret(cudaErrorInvalidValue);
  ARRAY_LIVE_OR_RETURN(array);
  return cudaev__ret_cu(cudaev__drv.cuArrayGetSparseProperties(
      (CUDA_ARRAY_SPARSE_PROPERTIES *)sparseProperties, (CUarray)array));
}

cudaError_t cudaMipmappedArrayGetSparseProperties(
    struct cudaArraySparseProperties *sparseProperties, cudaMipmappedArray_t mipmap) {
  CUDAEV_CTX_OR_RETURN();
  if (sparseProperties == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(mipmap);
  return cudaev__ret_cu(cudaev__drv.cuMipmappedArrayGetSparseProperties(
      (CUDA_ARRAY_SPARSE_PROPERTIES *)sparseProperties, (CUmipmappedArray)mipmap));
}

/* Device Management, but it needs the channel-format conversion above. */
cudaError_t cudaDeviceGetTexture1DLinearMaxWidth(size_t *maxWidthInElements,
                                                 const struct cudaChannelFormatDesc *fmtDesc,
                                                 int device) {
  CUDAEV_INIT_OR_RETURN();
  if (maxWidthInElements == NULL || fmtDesc == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (!cudaev__device_valid(device)) return cudaev__ret(cudaErrorInvalidDevice);
  CUarray_format fmt;
  unsigned n;
  cudaError_t e = cudaev__channel_to_format(fmtDesc, &fmt, &n);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuDeviceGetTexture1DLinearMaxWidth(
      maxWidthInElements, fmt, n, cudaev__rt.devices[device].dev));
}

/* ---- resource descriptors (texture and surface objects) ------------------- */

cudaError_t cudaev__resdesc_to_cu(const struct cudaResourceDesc *in, CUDA_RESOURCE_DESC *out) {
  memset(out, 0, sizeof *out);
  out->flags = in->flags;
  cudaError_t e;
  switch (in->resType) {
  case cudaResourceTypeArray:
    out->resType = CU_RESOURCE_TYPE_ARRAY;
    out->res.array.hArray = (CUarray)in->res.array.array;
    /* NVIDIA's runtime: a NULL array is an invalid handle. */
    return in->res.array.array == NULL ? cudaErrorInvalidResourceHandle : cudaSuccess;
  case cudaResourceTypeMipmappedArray:
    out->resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    out->res.mipmap.hMipmappedArray = (CUmipmappedArray)in->res.mipmap.mipmap;
    return in->res.mipmap.mipmap == NULL ? cudaErrorInvalidResourceHandle : cudaSuccess;
  case cudaResourceTypeLinear:
    out->resType = CU_RESOURCE_TYPE_LINEAR;
    out->res.linear.devPtr = (CUdeviceptr)(uintptr_t)in->res.linear.devPtr;
    out->res.linear.sizeInBytes = in->res.linear.sizeInBytes;
    e = cudaev__channel_to_format(&in->res.linear.desc, &out->res.linear.format,
                                  &out->res.linear.numChannels);
    return e;
  case cudaResourceTypePitch2D:
    out->resType = CU_RESOURCE_TYPE_PITCH2D;
    out->res.pitch2D.devPtr = (CUdeviceptr)(uintptr_t)in->res.pitch2D.devPtr;
    out->res.pitch2D.width = in->res.pitch2D.width;
    out->res.pitch2D.height = in->res.pitch2D.height;
    out->res.pitch2D.pitchInBytes = in->res.pitch2D.pitchInBytes;
    e = cudaev__channel_to_format(&in->res.pitch2D.desc, &out->res.pitch2D.format,
                                  &out->res.pitch2D.numChannels);
    return e;
  default: return cudaErrorInvalidValue;
  }
}

void cudaev__resdesc_from_cu(const CUDA_RESOURCE_DESC *in, struct cudaResourceDesc *out) {
  memset(out, 0, sizeof *out);
  out->flags = in->flags;
  switch (in->resType) {
  case CU_RESOURCE_TYPE_ARRAY:
    out->resType = cudaResourceTypeArray;
    out->res.array.array = (cudaArray_t)in->res.array.hArray;
    break;
  case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
    out->resType = cudaResourceTypeMipmappedArray;
    out->res.mipmap.mipmap = (cudaMipmappedArray_t)in->res.mipmap.hMipmappedArray;
    break;
  case CU_RESOURCE_TYPE_LINEAR:
    out->resType = cudaResourceTypeLinear;
    out->res.linear.devPtr = (void *)(uintptr_t)in->res.linear.devPtr;
    out->res.linear.sizeInBytes = in->res.linear.sizeInBytes;
    out->res.linear.desc =
        cudaev__channel_from_format(in->res.linear.format, in->res.linear.numChannels);
    break;
  case CU_RESOURCE_TYPE_PITCH2D:
    out->resType = cudaResourceTypePitch2D;
    out->res.pitch2D.devPtr = (void *)(uintptr_t)in->res.pitch2D.devPtr;
    out->res.pitch2D.width = in->res.pitch2D.width;
    out->res.pitch2D.height = in->res.pitch2D.height;
    out->res.pitch2D.pitchInBytes = in->res.pitch2D.pitchInBytes;
    out->res.pitch2D.desc =
        cudaev__channel_from_format(in->res.pitch2D.format, in->res.pitch2D.numChannels);
    break;
  }
}
