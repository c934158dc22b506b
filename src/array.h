/* Internal contracts shared by the array, 2D/3D copy, texture and surface
 * parts of the runtime (src/array.c, src/memcpy_*.c, src/texture.c,
 * src/surface.c) and by graph memcpy nodes.
 *
 * cudaArray_t / cudaMipmappedArray_t are the driver's CUarray /
 * CUmipmappedArray, and cudaTextureObject_t / cudaSurfaceObject_t the
 * driver's CUtexObject / CUsurfObject: NVIDIA documents them as
 * interchangeable, so the runtime keeps no table of its own.
 *
 * Thread: every function here may be called from any thread; none takes a
 * lock or allocates.
 */
#ifndef CUDAEV_ARRAY_H
#define CUDAEV_ARRAY_H

#include "internal.h"

/* Converts a runtime channel descriptor to the driver's element format and
 * channel count, accepting exactly the descriptors NVIDIA's runtime accepts:
 * Signed/Unsigned with 1, 2 or 4 equal channels of 8, 16 or 32 bits, Float
 * with 1, 2 or 4 channels of 16 or 32 bits, and the special kinds (NV12,
 * normalized, block compressed, 1010102) with the bit counts of their
 * cudaCreateChannelDesc<kind>() templates.
 * Returns cudaSuccess, cudaErrorInvalidValue (d == NULL) or
 * cudaErrorInvalidChannelDescriptor. Does not record the last error. */
cudaError_t cudaev__channel_to_format(const struct cudaChannelFormatDesc *d, CUarray_format *fmt,
                                      unsigned *num_channels);

/* The inverse: the descriptor cudaGetChannelDesc reports for an array of
 * this driver format. Formats the runtime has no kind for (P010, YUY2...)
 * come back as {0,0,0,0,cudaChannelFormatKindNone}. */
struct cudaChannelFormatDesc cudaev__channel_from_format(CUarray_format fmt, unsigned num_channels);

/* Bytes per element of an array of this format (a 4x4 block for the block
 * compressed formats), 0 for a format without a fixed element size. */
size_t cudaev__format_elem_size(CUarray_format fmt, unsigned num_channels);

/* Element size of array a, from the driver's descriptor. Returns
 * cudaSuccess or the mapped driver error (not recorded). */
cudaError_t cudaev__array_elem_size(CUarray a, size_t *out);

/* Memory types of the two pointer sides of a copy of this kind: HOST/DEVICE
 * as the kind says, UNIFIED for both with cudaMemcpyDefault (the driver then
 * finds the memory type from the address). cudaErrorInvalidMemcpyDirection
 * for a kind outside cudaMemcpyKind. */
cudaError_t cudaev__memcpy_kind_types(enum cudaMemcpyKind kind, CUmemorytype *src,
                                      CUmemorytype *dst);

/* Fills a CUDA_MEMCPY3D from cudaMemcpy3DParms as cudaMemcpy3D documents:
 * exactly one of srcArray/srcPtr and of dstArray/dstPtr; positions and
 * extent in elements of the array when one takes part (bytes otherwise);
 * a pointer side's x position also counts the array's elements when an
 * array takes part (NVIDIA's behaviour, not its documentation); an array
 * side is always an array whatever the kind says; both arrays must have the
 * same element size; a pitched pointer's pitch must hold the row when the
 * copy has more than one row or slice (a single row is left to the
 * driver).
 * Returns cudaSuccess, cudaErrorInvalidValue, cudaErrorInvalidMemcpyDirection,
 * cudaErrorInvalidPitchValue or a mapped driver error (bad array handle).
 * Does not record the last error. Needs a current context (it asks the
 * driver for array descriptors). */
cudaError_t cudaev__memcpy3d_params(const struct cudaMemcpy3DParms *p, CUDA_MEMCPY3D *out);

/* Same for cudaMemcpy3DPeer: pointers are device memory of srcDevice /
 * dstDevice and the contexts are those devices' primary contexts (retained
 * once per process, as cudaev__primary_ctx does). Adds cudaErrorInvalidDevice. */
cudaError_t cudaev__memcpy3d_peer_params(const struct cudaMemcpy3DPeerParms *p,
                                         CUDA_MEMCPY3D_PEER *out);

/* cudaResourceDesc <-> CUDA_RESOURCE_DESC, with the channel descriptor of
 * linear and pitch2D resources converted to format + channel count.
 * to_cu returns cudaSuccess, cudaErrorInvalidValue (unknown type),
 * cudaErrorInvalidResourceHandle (NULL array or mipmapped array) or
 * cudaErrorInvalidChannelDescriptor (not recorded). */
cudaError_t cudaev__resdesc_to_cu(const struct cudaResourceDesc *in, CUDA_RESOURCE_DESC *out);
void cudaev__resdesc_from_cu(const CUDA_RESOURCE_DESC *in, struct cudaResourceDesc *out);

#endif
