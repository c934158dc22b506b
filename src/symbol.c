/* Device symbols: __device__, __constant__ and __managed__ variables named
 * by their host shadows (register.h finds their device address in the
 * current context). The copies go straight to the driver's typed copy
 * calls, which have cudaMemcpy's synchronisation rules: a synchronous copy
 * uses the legacy default stream (the per-thread one for the _ptds
 * exports), an asynchronous one the given stream. */
#include "register.h"
#include "handle.h"

CUDAEV_DECLARE_VARIANT(cudaMemcpyToSymbol, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyFromSymbol, _ptds);
CUDAEV_DECLARE_VARIANT(cudaMemcpyToSymbolAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpyFromSymbolAsync, _ptsz);

cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol) {
  CUDAEV_CTX_OR_RETURN();
  /* The symbol before the output, as NVIDIA's runtime checks them. */
  CUdeviceptr p;
  size_t n;
  cudaError_t e = cudaev__symbol_lookup(symbol, &p, &n);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (devPtr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  *devPtr = (void *)(uintptr_t)p;
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol) {
  CUDAEV_CTX_OR_RETURN();
  CUdeviceptr p;
  size_t n;
  cudaError_t e = cudaev__symbol_lookup(symbol, &p, &n);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (size == NULL) return cudaev__ret(cudaErrorInvalidValue);
  *size = n;
  return cudaSuccess;
}

/* The symbol's address plus offset, once the range is checked. */
static cudaError_t symbol_range(const void *symbol, size_t count, size_t offset, CUdeviceptr *out) {
  CUdeviceptr p;
  size_t n;
  cudaError_t e = cudaev__symbol_lookup(symbol, &p, &n);
  if (e != cudaSuccess) return e;
  if (offset > n || count > n - offset) return cudaErrorInvalidValue;
  *out = p + offset;
  return cudaSuccess;
}

/* stream == NULL && !async: synchronous; per_thread picks the _ptds/_ptsz
 * behaviour of the default stream. */
static cudaError_t to_symbol(const void *symbol, const void *src, size_t count, size_t offset,
                             enum cudaMemcpyKind kind, bool async, cudaStream_t stream,
                             bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  /* An empty copy succeeds before the symbol is looked up, as in NVIDIA's
   * runtime (cudaSuccess for an unregistered symbol and count 0). */
  if (count == 0) return cudaSuccess;
  CUdeviceptr dst;
  cudaError_t e = symbol_range(symbol, count, offset, &dst);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return cudaev__ret(cudaErrorInvalidMemcpyDirection);
  /* The symbol comes first, as in NVIDIA's runtime; then a stream the
   * driver would crash on (handle.h). */
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  CUdeviceptr s = (CUdeviceptr)(uintptr_t)src;
  CUresult r;
  if (async) {
    CUstream st = cudaev__stream(stream, per_thread);
    if (kind == cudaMemcpyHostToDevice)
      r = cudaev__drv.cuMemcpyHtoDAsync(dst, src, count, st);
    else if (kind == cudaMemcpyDeviceToDevice)
      r = cudaev__drv.cuMemcpyDtoDAsync(dst, s, count, st);
    else
      r = cudaev__drv.cuMemcpyAsync(dst, s, count, st);
  } else if (per_thread) {
    if (kind == cudaMemcpyHostToDevice)
      r = cudaev__drv.cuMemcpyHtoD_ptds(dst, src, count);
    else if (kind == cudaMemcpyDeviceToDevice)
      r = cudaev__drv.cuMemcpyDtoD_ptds(dst, s, count);
    else
      r = cudaev__drv.cuMemcpy_ptds(dst, s, count);
  } else {
    if (kind == cudaMemcpyHostToDevice)
      r = cudaev__drv.cuMemcpyHtoD(dst, src, count);
    else if (kind == cudaMemcpyDeviceToDevice)
      r = cudaev__drv.cuMemcpyDtoD(dst, s, count);
    else
      r = cudaev__drv.cuMemcpy(dst, s, count);
  }
  return cudaev__ret_cu(r);
}

static cudaError_t from_symbol(void *dst, const void *symbol, size_t count, size_t offset,
                               enum cudaMemcpyKind kind, bool async, cudaStream_t stream,
                               bool per_thread) {
  CUDAEV_CTX_OR_RETURN();
  /* An empty copy succeeds before the symbol is looked up, as in NVIDIA's
   * runtime (cudaSuccess for an unregistered symbol and count 0). */
  if (count == 0) return cudaSuccess;
  CUdeviceptr src;
  cudaError_t e = symbol_range(symbol, count, offset, &src);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyDefault)
    return cudaev__ret(cudaErrorInvalidMemcpyDirection);
  /* The symbol comes first, as in NVIDIA's runtime; then a stream the
   * driver would crash on (handle.h). */
  if (async) CUDAEV_LIVE_OR_RETURN(stream);
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst;
  CUresult r;
  if (async) {
    CUstream st = cudaev__stream(stream, per_thread);
    if (kind == cudaMemcpyDeviceToHost)
      r = cudaev__drv.cuMemcpyDtoHAsync(dst, src, count, st);
    else if (kind == cudaMemcpyDeviceToDevice)
      r = cudaev__drv.cuMemcpyDtoDAsync(d, src, count, st);
    else
      r = cudaev__drv.cuMemcpyAsync(d, src, count, st);
  } else if (per_thread) {
    if (kind == cudaMemcpyDeviceToHost)
      r = cudaev__drv.cuMemcpyDtoH_ptds(dst, src, count);
    else if (kind == cudaMemcpyDeviceToDevice)
      r = cudaev__drv.cuMemcpyDtoD_ptds(d, src, count);
    else
      r = cudaev__drv.cuMemcpy_ptds(d, src, count);
  } else {
    if (kind == cudaMemcpyDeviceToHost)
      r = cudaev__drv.cuMemcpyDtoH(dst, src, count);
    else if (kind == cudaMemcpyDeviceToDevice)
      r = cudaev__drv.cuMemcpyDtoD(d, src, count);
    else
      r = cudaev__drv.cuMemcpy(d, src, count);
  }
  return cudaev__ret_cu(r);
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
  return to_symbol(symbol, src, count, offset, kind, false, NULL, false);
}

cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind) {
  return to_symbol(symbol, src, count, offset, kind, false, NULL, true);
}

cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind) {
  return from_symbol(dst, symbol, count, offset, kind, false, NULL, false);
}

cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind) {
  return from_symbol(dst, symbol, count, offset, kind, false, NULL, true);
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return to_symbol(symbol, src, count, offset, kind, true, stream, false);
}

cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count,
                                         size_t offset, enum cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  return to_symbol(symbol, src, count, offset, kind, true, stream, true);
}

cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  return from_symbol(dst, symbol, count, offset, kind, true, stream, false);
}

cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  return from_symbol(dst, symbol, count, offset, kind, true, stream, true);
}
