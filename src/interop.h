/* What the API-specific interop files (src/interop_{gl,egl,vdpau}.c) share
 * with src/interop.c. */
#ifndef CUDAEV_INTEROP_H
#define CUDAEV_INTEROP_H

#include "internal.h"
#include "handle.h"

/* A registration's end: on success the new resource is forgotten by the
 * destroyed-handle table (src/handle.h), which remembers unregistered ones;
 * returns the runtime's code for `r`, recorded. Thread: any. */
cudaError_t cudaev__gfx_registered(CUresult r, cudaGraphicsResource_t *resource);

/* The check before an API's set-device call (cudaGLSetGLDevice,
 * cudaVDPAUSetVDPAUDevice), as NVIDIA documents them: cudaErrorInvalidDevice
 * for a device the runtime does not have, cudaErrorSetOnActiveProcess once
 * the device's primary context is initialised. Not recorded. Thread: any. */
cudaError_t cudaev__interop_device_fresh(int device);

/* The first check of a call on one mapped resource, before its output
 * pointers, as NVIDIA's runtime orders them: NULL, unregistered or a value
 * where no resource can be (handle.h) leaves with
 * cudaErrorInvalidResourceHandle (recorded). */
#define RESOURCE_OR_RETURN(r)                                            \
  do {                                                                   \
    if ((r) == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle); \
    CUDAEV_LIVE_OR_RETURN(r);                                            \
  } while (0)

#endif
