/* What the API-specific interop files (src/interop_{gl,egl,vdpau}.c) share
 * with src/interop.c. */
#ifndef CUDAEV_INTEROP_H
#define CUDAEV_INTEROP_H

#include "internal.h"

/* A registration's end: on success the new resource is forgotten by the
 * destroyed-handle table (src/handle.h), which remembers unregistered ones;
 * returns the runtime's code for `r`, recorded. Thread: any. */
cudaError_t cudaev__gfx_registered(CUresult r, cudaGraphicsResource_t *resource);

#endif
