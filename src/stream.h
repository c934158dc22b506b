/* Internal helpers of the stream section (src/stream.c), shared with the
 * graph section (kernel node attributes use the same value union).
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_STREAM_H
#define CUDAEV_STREAM_H

#include "internal.h"

/* Translates a runtime launch/stream attribute value (cudaLaunchAttributeValue,
 * alias cudaStreamAttrValue / cudaKernelNodeAttrValue) for attribute `id`
 * into the driver's CUlaunchAttributeValue, and back. The two unions and
 * their attribute ids are laid out alike (checked at compile time in
 * src/abi_asserts.c), so both directions copy the whole 64-byte value:
 * fields of attributes this toolkit does not know travel unchanged.
 * Returns false (nothing written) when `in` or `out` is NULL. */
bool cudaev__attr_value_to_cu(cudaLaunchAttributeID id, const cudaLaunchAttributeValue *in,
                              CUlaunchAttributeValue *out);
bool cudaev__attr_value_from_cu(cudaLaunchAttributeID id, const CUlaunchAttributeValue *in,
                                cudaLaunchAttributeValue *out);

/* The record cudaStreamAddCallback hands to the driver: the user's callback,
 * its argument and the stream as the user named it. Owned by the driver
 * callback once enqueued; cudaev__stream_callback_trampoline frees it after
 * calling the user's function. */
struct cudaev__stream_callback {
  cudaStreamCallback_t fn;
  void *user;
  cudaStream_t stream;
};

/* The CUstreamCallback given to cuStreamAddCallback: maps the driver's
 * status to a cudaError_t, calls the user's callback with the stream the
 * user passed, then frees `rec`. Exposed for unit tests. */
void CUDA_CB cudaev__stream_callback_trampoline(CUstream s, CUresult status, void *rec);

#endif
