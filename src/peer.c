/* Peer Device Memory Access: cudaDeviceCanAccessPeer,
 * cudaDeviceEnablePeerAccess, cudaDeviceDisablePeerAccess.
 *
 * Peer access is a property of contexts: the current context (the current
 * device's primary one, made current if needed) is given access to the
 * peer device's primary context, which is retained for that, initialising
 * the peer device as NVIDIA's runtime does. Peer copies are in memory.c. */
#include "internal.h"

cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice) {
  CUDAEV_INIT_OR_RETURN();
  if (canAccessPeer == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (!cudaev__device_valid(device) || !cudaev__device_valid(peerDevice))
    return cudaev__ret(cudaErrorInvalidDevice);
  return cudaev__ret_cu(cudaev__drv.cuDeviceCanAccessPeer(
      canAccessPeer, cudaev__rt.devices[device].dev, cudaev__rt.devices[peerDevice].dev));
}

static cudaError_t peer_context(int peerDevice, CUcontext *out) {
  if (!cudaev__device_valid(peerDevice)) return cudaErrorInvalidDevice;
  return cudaev__primary_ctx(peerDevice, out);
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  CUcontext peer;
  cudaError_t e = peer_context(peerDevice, &peer);
  if (e != cudaSuccess) return cudaev__ret(e);
  if (flags != 0) return cudaev__ret(cudaErrorInvalidValue);
  /* When cudaDeviceCanAccessPeer says no (the device itself included):
   * cudaErrorPeerAccessUnsupported, the driver's documented
   * CUDA_ERROR_PEER_ACCESS_UNSUPPORTED for that case, which NVIDIA's
   * runtime passes on (measured: cudaDeviceEnablePeerAccess(0, 0) on
   * device 0), although the runtime's page names cudaErrorInvalidDevice.
   * Answered before the driver is asked, so the self case does not depend
   * on what cuCtxEnablePeerAccess says of a context and itself. */
  int can = 0;
  CUresult r = cudaev__drv.cuDeviceCanAccessPeer(
      &can, cudaev__rt.devices[cudaev__current_device()].dev, cudaev__rt.devices[peerDevice].dev);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  if (!can) return cudaev__ret(cudaErrorPeerAccessUnsupported);
  return cudaev__ret_cu(cudaev__drv.cuCtxEnablePeerAccess(peer, flags));
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
  CUDAEV_CTX_OR_RETURN();
  CUcontext peer;
  cudaError_t e = peer_context(peerDevice, &peer);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaev__ret_cu(cudaev__drv.cuCtxDisablePeerAccess(peer));
}
