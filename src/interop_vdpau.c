/* VDPAU Interoperability: the driver's cudaVDPAU.h functions, with CUdevice
 * handles translated to runtime ordinals. Without the VDPAU headers at build
 * time this file is empty and the exports are stubbed (see
 * src/driver/driver.h).
 */
#include "internal.h"
#include "interop.h"

#if defined(CUDAEV_HAVE_VDPAU)

#pragma GCC visibility push(default)
#include <cuda_vdpau_interop.h>
#pragma GCC visibility pop

cudaError_t cudaVDPAUGetDevice(int *device, VdpDevice vdpDevice,
                               VdpGetProcAddress *vdpGetProcAddress) {
  CUDAEV_INIT_OR_RETURN();
  if (device == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUdevice d = 0;
  CUresult r = cudaev__drv.cuVDPAUGetDevice(&d, vdpDevice, vdpGetProcAddress);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  for (int i = 0; i < cudaev__rt.device_count; i++) {
    if (cudaev__rt.devices[i].dev == d) {
      *device = i;
      return cudaSuccess;
    }
  }
  /* A device the runtime does not enumerate (hidden by
   * CUDA_VISIBLE_DEVICES): no ordinal to give. */
  return cudaev__ret(cudaErrorNoDevice);
}

/* NVIDIA documents this as: fail with cudaErrorSetOnActiveProcess when the
 * device's primary context is already initialised, else make the device
 * current on this thread and initialise its primary context. The driver's
 * VDPAU registration calls take no VdpDevice, so there is nothing else to
 * record. */
cudaError_t cudaVDPAUSetVDPAUDevice(int device, VdpDevice vdpDevice,
                                    VdpGetProcAddress *vdpGetProcAddress) {
  CUDAEV_INIT_OR_RETURN();
  cudaError_t e = cudaev__interop_device_fresh(device);
  if (e != cudaSuccess) return cudaev__ret(e);
  return cudaSetDevice(device);
}

cudaError_t cudaGraphicsVDPAURegisterVideoSurface(struct cudaGraphicsResource **resource,
                                                  VdpVideoSurface vdpSurface, unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (resource == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__gfx_registered(cudaev__drv.cuGraphicsVDPAURegisterVideoSurface(
                                    (CUgraphicsResource *)resource, vdpSurface, flags),
                                resource);
}

cudaError_t cudaGraphicsVDPAURegisterOutputSurface(struct cudaGraphicsResource **resource,
                                                   VdpOutputSurface vdpSurface,
                                                   unsigned int flags) {
  CUDAEV_CTX_OR_RETURN();
  if (resource == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__gfx_registered(cudaev__drv.cuGraphicsVDPAURegisterOutputSurface(
                                    (CUgraphicsResource *)resource, vdpSurface, flags),
                                resource);
}

#endif
