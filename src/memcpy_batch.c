/* Memory Management, the CUDA 13 batch copies: cudaMemcpyBatchAsync,
 * cudaMemcpy3DBatchAsync.
 * Calls no other copy file. */
#include "memcpy.h"

CUDAEV_DECLARE_VARIANT(cudaMemcpyBatchAsync, _ptsz);
CUDAEV_DECLARE_VARIANT(cudaMemcpy3DBatchAsync, _ptsz);

/* The runtime's batch structures are the driver's, field for field
 * (abi_asserts.c; cudaMemLocation ids are device ordinals in both, and
 * cudart's ordinal i is the driver's CUdevice i), so the lists pass through
 * without a copy: the batch is an enqueue path and must not allocate. */
static cudaError_t batch_export(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                size_t numAttrs, cudaStream_t stream, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  return cudaev__ret_cu(cudaev__drv.cuMemcpyBatchAsync(
      (CUdeviceptr *)(uintptr_t)dsts, (CUdeviceptr *)(uintptr_t)srcs, (size_t *)(uintptr_t)sizes,
      count, (CUmemcpyAttributes *)attrs, attrsIdxs, numAttrs, cudaev__stream(stream, pt)));
}

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                 size_t count, struct cudaMemcpyAttributes *attrs,
                                 size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream) {
  return batch_export(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, false);
}
cudaError_t cudaMemcpyBatchAsync_ptsz(void *const *dsts, const void *const *srcs,
                                      const size_t *sizes, size_t count,
                                      struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                      size_t numAttrs, cudaStream_t stream) {
  return batch_export(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, stream, true);
}

static cudaError_t batch3d_export(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                  unsigned long long flags, cudaStream_t stream, bool pt) {
  CUDAEV_CTX_OR_RETURN();
  CUDAEV_LIVE_OR_RETURN(stream);
  return cudaev__ret_cu(cudaev__drv.cuMemcpy3DBatchAsync(numOps, (CUDA_MEMCPY3D_BATCH_OP *)opList,
                                                         flags, cudaev__stream(stream, pt)));
}

cudaError_t cudaMemcpy3DBatchAsync(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                   unsigned long long flags, cudaStream_t stream) {
  return batch3d_export(numOps, opList, flags, stream, false);
}
cudaError_t cudaMemcpy3DBatchAsync_ptsz(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                        unsigned long long flags, cudaStream_t stream) {
  return batch3d_export(numOps, opList, flags, stream, true);
}
