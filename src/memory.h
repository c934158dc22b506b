/* Internal helpers shared by the memory sections (memory.c, mempool.c,
 * unified.c, peer.c).
 *
 * The runtime's memory-location, access and pool structures were defined as
 * mirrors of the driver's: same members, same order, same enum values. The
 * assertions below pin that, so the runtime can hand the caller's arrays to
 * the driver as they are (no copy, no allocation) and any future divergence
 * breaks the build instead of a program.
 */
#ifndef CUDAEV_MEMORY_H
#define CUDAEV_MEMORY_H

#include "internal.h"

#include <stddef.h>

#define CUDAEV__SAME_LAYOUT(rt, drv, m)                                                     \
  _Static_assert(                                                                           \
      offsetof(rt, m) == offsetof(drv, m) && sizeof(((rt *)0)->m) == sizeof(((drv *)0)->m), \
      #rt "." #m " is laid out as " #drv "." #m)

_Static_assert(sizeof(struct cudaMemLocation) == sizeof(CUmemLocation), "cudaMemLocation");
CUDAEV__SAME_LAYOUT(struct cudaMemLocation, CUmemLocation, type);
CUDAEV__SAME_LAYOUT(struct cudaMemLocation, CUmemLocation, id);
_Static_assert(sizeof(struct cudaMemAccessDesc) == sizeof(CUmemAccessDesc), "cudaMemAccessDesc");
CUDAEV__SAME_LAYOUT(struct cudaMemAccessDesc, CUmemAccessDesc, location);
CUDAEV__SAME_LAYOUT(struct cudaMemAccessDesc, CUmemAccessDesc, flags);
_Static_assert(sizeof(struct cudaMemPoolProps) == sizeof(CUmemPoolProps), "cudaMemPoolProps");
CUDAEV__SAME_LAYOUT(struct cudaMemPoolProps, CUmemPoolProps, allocType);
CUDAEV__SAME_LAYOUT(struct cudaMemPoolProps, CUmemPoolProps, handleTypes);
CUDAEV__SAME_LAYOUT(struct cudaMemPoolProps, CUmemPoolProps, location);
CUDAEV__SAME_LAYOUT(struct cudaMemPoolProps, CUmemPoolProps, win32SecurityAttributes);
CUDAEV__SAME_LAYOUT(struct cudaMemPoolProps, CUmemPoolProps, maxSize);
CUDAEV__SAME_LAYOUT(struct cudaMemPoolProps, CUmemPoolProps, usage);
CUDAEV__SAME_LAYOUT(struct cudaMemPoolProps, CUmemPoolProps, reserved);
_Static_assert(sizeof(struct cudaMemPoolPtrExportData) == sizeof(CUmemPoolPtrExportData),
               "cudaMemPoolPtrExportData");
/* void *dptrs[] of the batch calls are passed as CUdeviceptr[]. */
_Static_assert(sizeof(void *) == sizeof(CUdeviceptr), "CUdeviceptr is pointer sized");

_Static_assert((int)cudaMemLocationTypeInvalid == CU_MEM_LOCATION_TYPE_INVALID &&
                   (int)cudaMemLocationTypeDevice == CU_MEM_LOCATION_TYPE_DEVICE &&
                   (int)cudaMemLocationTypeHost == CU_MEM_LOCATION_TYPE_HOST &&
                   (int)cudaMemLocationTypeHostNuma == CU_MEM_LOCATION_TYPE_HOST_NUMA &&
                   (int)cudaMemLocationTypeHostNumaCurrent ==
                       CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT,
               "cudaMemLocationType = CUmemLocationType");
_Static_assert((int)cudaMemAccessFlagsProtNone == CU_MEM_ACCESS_FLAGS_PROT_NONE &&
                   (int)cudaMemAccessFlagsProtRead == CU_MEM_ACCESS_FLAGS_PROT_READ &&
                   (int)cudaMemAccessFlagsProtReadWrite == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
               "cudaMemAccessFlags = CUmemAccess_flags");
_Static_assert((int)cudaMemAllocationTypeInvalid == CU_MEM_ALLOCATION_TYPE_INVALID &&
                   (int)cudaMemAllocationTypePinned == CU_MEM_ALLOCATION_TYPE_PINNED &&
                   (int)cudaMemAllocationTypeManaged == CU_MEM_ALLOCATION_TYPE_MANAGED,
               "cudaMemAllocationType = CUmemAllocationType");
_Static_assert((int)cudaMemHandleTypeNone == CU_MEM_HANDLE_TYPE_NONE &&
                   (int)cudaMemHandleTypePosixFileDescriptor ==
                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
                   (int)cudaMemHandleTypeWin32 == CU_MEM_HANDLE_TYPE_WIN32 &&
                   (int)cudaMemHandleTypeWin32Kmt == CU_MEM_HANDLE_TYPE_WIN32_KMT &&
                   (int)cudaMemHandleTypeFabric == CU_MEM_HANDLE_TYPE_FABRIC,
               "cudaMemAllocationHandleType = CUmemAllocationHandleType");
_Static_assert((int)cudaMemPoolReuseFollowEventDependencies ==
                       CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
                   (int)cudaMemPoolReuseAllowOpportunistic ==
                       CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC &&
                   (int)cudaMemPoolReuseAllowInternalDependencies ==
                       CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES &&
                   (int)cudaMemPoolAttrReleaseThreshold == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD &&
                   (int)cudaMemPoolAttrReservedMemCurrent == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT &&
                   (int)cudaMemPoolAttrReservedMemHigh == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH &&
                   (int)cudaMemPoolAttrUsedMemCurrent == CU_MEMPOOL_ATTR_USED_MEM_CURRENT &&
                   (int)cudaMemPoolAttrUsedMemHigh == CU_MEMPOOL_ATTR_USED_MEM_HIGH,
               "cudaMemPoolAttr = CUmemPool_attribute");
_Static_assert((int)cudaMemAdviseSetReadMostly == CU_MEM_ADVISE_SET_READ_MOSTLY &&
                   (int)cudaMemAdviseUnsetReadMostly == CU_MEM_ADVISE_UNSET_READ_MOSTLY &&
                   (int)cudaMemAdviseSetPreferredLocation == CU_MEM_ADVISE_SET_PREFERRED_LOCATION &&
                   (int)cudaMemAdviseUnsetPreferredLocation ==
                       CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION &&
                   (int)cudaMemAdviseSetAccessedBy == CU_MEM_ADVISE_SET_ACCESSED_BY &&
                   (int)cudaMemAdviseUnsetAccessedBy == CU_MEM_ADVISE_UNSET_ACCESSED_BY,
               "cudaMemoryAdvise = CUmem_advise");
_Static_assert((int)cudaMemRangeAttributeReadMostly == CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY &&
                   (int)cudaMemRangeAttributePreferredLocation ==
                       CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION &&
                   (int)cudaMemRangeAttributeAccessedBy == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY &&
                   (int)cudaMemRangeAttributeLastPrefetchLocation ==
                       CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION &&
                   (int)cudaMemRangeAttributePreferredLocationType ==
                       CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE &&
                   (int)cudaMemRangeAttributePreferredLocationId ==
                       CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID &&
                   (int)cudaMemRangeAttributeLastPrefetchLocationType ==
                       CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE &&
                   (int)cudaMemRangeAttributeLastPrefetchLocationId ==
                       CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID,
               "cudaMemRangeAttribute = CUmem_range_attribute");
_Static_assert(cudaHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE &&
                   cudaHostAllocMapped == CU_MEMHOSTALLOC_DEVICEMAP &&
                   cudaHostAllocWriteCombined == CU_MEMHOSTALLOC_WRITECOMBINED,
               "cudaHostAlloc flags = CU_MEMHOSTALLOC_*");
_Static_assert(cudaHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE &&
                   cudaHostRegisterMapped == CU_MEMHOSTREGISTER_DEVICEMAP &&
                   cudaHostRegisterIoMemory == CU_MEMHOSTREGISTER_IOMEMORY &&
                   cudaHostRegisterReadOnly == CU_MEMHOSTREGISTER_READ_ONLY,
               "cudaHostRegister flags = CU_MEMHOSTREGISTER_*");
_Static_assert(cudaMemAttachGlobal == CU_MEM_ATTACH_GLOBAL &&
                   cudaMemAttachHost == CU_MEM_ATTACH_HOST,
               "cudaMemAttach* = CU_MEM_ATTACH_*");

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

#endif
