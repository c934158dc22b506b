/* Internal helpers shared by the memory sections (memory.c, mempool.c,
 * unified.c, peer.c).
 *
 * The runtime's memory-location, access and pool structures were defined as
 * mirrors of the driver's: same members, same order, same enum values.
 * src/abi_asserts.c pins that, so the runtime can hand the caller's arrays
 * to the driver as they are (no copy, no allocation; void *dptrs[] of the
 * batch calls as CUdeviceptr[]) and any future divergence breaks the build
 * instead of a program.
 */
#ifndef CUDAEV_MEMORY_H
#define CUDAEV_MEMORY_H

#include "internal.h"

/* A location passed by value, as the driver takes it. The device ordinal
 * of a device location is the runtime's; the driver's CUdevice of ordinal i
 * is what cuDeviceGet(i) returned, so translate it when the ordinal is
 * valid and leave anything else for the driver to judge. */
static inline CUmemLocation cudaev__mem_location(struct cudaMemLocation l) {
  CUmemLocation c = {.type = (CUmemLocationType)l.type, .id = l.id};
  if (l.type == cudaMemLocationTypeDevice && cudaev__device_valid(l.id))
    c.id = (int)cudaev__rt.devices[l.id].dev;
  return c;
}

/* The runtime ordinal of a driver device (-2 = cudaInvalidDeviceId when the
 * driver names none we know; -1 = cudaCpuDeviceId is passed through). */
static inline int cudaev__ordinal_of(int cudev) {
  if (cudev < 0) return cudev;
  for (int i = 0; i < cudaev__rt.device_count; i++)
    if ((int)cudaev__rt.devices[i].dev == cudev) return i;
  return cudev;
}

/* The current device's free and total memory (cuMemGetInfo), the driver's
 * answer as a cudart code. A context is current (callers checked). */
cudaError_t cudaev__mem_info(size_t *free, size_t *total);

#endif
