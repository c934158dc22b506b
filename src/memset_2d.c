/* Memory Management, 2D and 3D sets: cudaMemset2D*, cudaMemset3D* (a 3D
 * set is one 2D set, or one per slice).
 * Calls no other copy file. */
#include "memcpy.h"

static cudaError_t memset2d(void *p, size_t pitch, int value, size_t width, size_t height,
                            enum how h, CUstream s) {
  if (width == 0 || height == 0) return cudaSuccess;
  /* Rows that reach past the end of the address space cannot all be
   * memory: the driver, asked for 2^62 of them, does not return within
   * 30 s instead of refusing (nor does NVIDIA's runtime). The driver takes
   * the pitch as signed (NVIDIA's runtime refuses a pitch of 2^62 and
   * accepts SIZE_MAX, rows one byte apart going down), so its rows span
   * |pitch| bytes each. */
  size_t step = (intptr_t)pitch < 0 ? (size_t)0 - pitch : pitch;
  if (step != 0 && height > CUDAEV_HANDLE_END / step) return cudaErrorInvalidValue;
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
  unsigned char v = (unsigned char)value;
  CUresult r = h == SYNC_LEGACY ? cudaev__drv.cuMemsetD2D8(d, pitch, v, width, height)
               : h == SYNC_PTDS ? cudaev__drv.cuMemsetD2D8_ptds(d, pitch, v, width, height)
                                : cudaev__drv.cuMemsetD2D8Async(d, pitch, v, width, height, s);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaev__error_from_cu(r);
}

static cudaError_t memset3d(struct cudaPitchedPtr p, int value, struct cudaExtent ext, enum how h,
                            CUstream s) {
  if (ext.width == 0 || ext.height == 0 || ext.depth == 0) return cudaSuccess;
  if (ext.depth > 1 && ext.height > p.ysize) return cudaErrorInvalidValue;
  /* Slices that follow each other without a gap are one 2D set. */
  if (ext.depth == 1 || ext.height == p.ysize)
    return memset2d(p.ptr, p.pitch, value, ext.width, ext.height * ext.depth, h, s);
  size_t slice = p.pitch * p.ysize;
  for (size_t z = 0; z < ext.depth; z++) {
    cudaError_t e =
        memset2d((char *)p.ptr + z * slice, p.pitch, value, ext.width, ext.height, h, s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

CUDAEV_DECLARE_VARIANT(cudaMemset2D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemset2DAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemset3D, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemset3DAsync, _ptsz);

static cudaError_t memset2d_export(void *devPtr, size_t pitch, int value, size_t width,
                                   size_t height, cudaStream_t stream, bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memset2d(devPtr, pitch, value, width, height, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height) {
  return memset2d_export(devPtr, pitch, value, width, height, NULL, false, false);
}
cudaError_t cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width, size_t height) {
  return memset2d_export(devPtr, pitch, value, width, height, NULL, false, true);
}
cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  return memset2d_export(devPtr, pitch, value, width, height, stream, true, false);
}
cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width,
                                   size_t height, cudaStream_t stream) {
  return memset2d_export(devPtr, pitch, value, width, height, stream, true, true);
}

static cudaError_t memset3d_export(struct cudaPitchedPtr p, int value, struct cudaExtent extent,
                                   cudaStream_t stream, bool async, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  enum how h = async ? ASYNC : SYNC_HOW(pt);
  return cudaev__ret(memset3d(p, value, extent, h, stream_of(h, stream, pt)));
}

cudaError_t cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent) {
  return memset3d_export(pitchedDevPtr, value, extent, NULL, false, false);
}
cudaError_t cudaMemset3D_ptds(struct cudaPitchedPtr pitchedDevPtr, int value,
                              struct cudaExtent extent) {
  return memset3d_export(pitchedDevPtr, value, extent, NULL, false, true);
}
cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value,
                              struct cudaExtent extent, cudaStream_t stream) {
  return memset3d_export(pitchedDevPtr, value, extent, stream, true, false);
}
cudaError_t cudaMemset3DAsync_ptsz(struct cudaPitchedPtr pitchedDevPtr, int value,
                                   struct cudaExtent extent, cudaStream_t stream) {
  return memset3d_export(pitchedDevPtr, value, extent, stream, true, true);
}
