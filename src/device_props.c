/* Device Management, properties: cudaChooseDevice and
 * cudaGetDeviceProperties (a cudaDeviceProp filled from the driver's
 * attributes).
 * Calls no other device file. */
#include "device.h"

#include <stddef.h>
#include <string.h>

/* NVIDIA documents "the device which has properties that best match": the
 * runtime compares compute capability. Pick the device whose capability is
 * the closest at or above the one asked for, else the highest below it. */
cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop) {
  CUDAEV_INIT_OR_RETURN();
  if (device == NULL || prop == NULL) return cudaev__ret(cudaErrorInvalidValue);
  int want = prop->major * 100 + prop->minor;
  int best = -1, best_cc = 0;
  for (int i = 0; i < cudaev__rt.device_count; i++) {
    int ma = 0, mi = 0;
    CUdevice d = cudaev__rt.devices[i].dev;
    if (cudaev__drv.cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) ||
        cudaev__drv.cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d))
      continue;
    int cc = ma * 100 + mi;
    bool better;
    if (best < 0)
      better = true;
    else if ((cc >= want) != (best_cc >= want))
      better = cc >= want;
    else if (cc >= want)
      better = cc < best_cc;
    else
      better = cc > best_cc;
    if (better) best = i, best_cc = cc;
  }
  *device = best < 0 ? 0 : best;
  return cudaSuccess;
}

/* ---- cudaGetDeviceProperties -------------------------------------------- */

enum prop_type { P_INT, P_UINT, P_SIZE };

struct prop_field {
  size_t offset;
  enum prop_type type;
  CUdevice_attribute attr;
};

#define F(field, type, attr) \
  { offsetof(struct cudaDeviceProp, field), type, CU_DEVICE_ATTRIBUTE_##attr }
static const struct prop_field prop_fields[] = {
    F(sharedMemPerBlock, P_SIZE, MAX_SHARED_MEMORY_PER_BLOCK),
    F(regsPerBlock, P_INT, MAX_REGISTERS_PER_BLOCK),
    F(warpSize, P_INT, WARP_SIZE),
    F(memPitch, P_SIZE, MAX_PITCH),
    F(maxThreadsPerBlock, P_INT, MAX_THREADS_PER_BLOCK),
    F(maxThreadsDim[0], P_INT, MAX_BLOCK_DIM_X),
    F(maxThreadsDim[1], P_INT, MAX_BLOCK_DIM_Y),
    F(maxThreadsDim[2], P_INT, MAX_BLOCK_DIM_Z),
    F(maxGridSize[0], P_INT, MAX_GRID_DIM_X),
    F(maxGridSize[1], P_INT, MAX_GRID_DIM_Y),
    F(maxGridSize[2], P_INT, MAX_GRID_DIM_Z),
    F(totalConstMem, P_SIZE, TOTAL_CONSTANT_MEMORY),
    F(major, P_INT, COMPUTE_CAPABILITY_MAJOR),
    F(minor, P_INT, COMPUTE_CAPABILITY_MINOR),
    F(textureAlignment, P_SIZE, TEXTURE_ALIGNMENT),
    F(texturePitchAlignment, P_SIZE, TEXTURE_PITCH_ALIGNMENT),
    F(multiProcessorCount, P_INT, MULTIPROCESSOR_COUNT),
    F(integrated, P_INT, INTEGRATED),
    F(canMapHostMemory, P_INT, CAN_MAP_HOST_MEMORY),
    F(maxTexture1D, P_INT, MAXIMUM_TEXTURE1D_WIDTH),
    F(maxTexture1DMipmap, P_INT, MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH),
    F(maxTexture2D[0], P_INT, MAXIMUM_TEXTURE2D_WIDTH),
    F(maxTexture2D[1], P_INT, MAXIMUM_TEXTURE2D_HEIGHT),
    F(maxTexture2DMipmap[0], P_INT, MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH),
    F(maxTexture2DMipmap[1], P_INT, MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT),
    F(maxTexture2DLinear[0], P_INT, MAXIMUM_TEXTURE2D_LINEAR_WIDTH),
    F(maxTexture2DLinear[1], P_INT, MAXIMUM_TEXTURE2D_LINEAR_HEIGHT),
    F(maxTexture2DLinear[2], P_INT, MAXIMUM_TEXTURE2D_LINEAR_PITCH),
    F(maxTexture2DGather[0], P_INT, MAXIMUM_TEXTURE2D_GATHER_WIDTH),
    F(maxTexture2DGather[1], P_INT, MAXIMUM_TEXTURE2D_GATHER_HEIGHT),
    F(maxTexture3D[0], P_INT, MAXIMUM_TEXTURE3D_WIDTH),
    F(maxTexture3D[1], P_INT, MAXIMUM_TEXTURE3D_HEIGHT),
    F(maxTexture3D[2], P_INT, MAXIMUM_TEXTURE3D_DEPTH),
    F(maxTexture3DAlt[0], P_INT, MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE),
    F(maxTexture3DAlt[1], P_INT, MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE),
    F(maxTexture3DAlt[2], P_INT, MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE),
    F(maxTextureCubemap, P_INT, MAXIMUM_TEXTURECUBEMAP_WIDTH),
    F(maxTexture1DLayered[0], P_INT, MAXIMUM_TEXTURE1D_LAYERED_WIDTH),
    F(maxTexture1DLayered[1], P_INT, MAXIMUM_TEXTURE1D_LAYERED_LAYERS),
    F(maxTexture2DLayered[0], P_INT, MAXIMUM_TEXTURE2D_LAYERED_WIDTH),
    F(maxTexture2DLayered[1], P_INT, MAXIMUM_TEXTURE2D_LAYERED_HEIGHT),
    F(maxTexture2DLayered[2], P_INT, MAXIMUM_TEXTURE2D_LAYERED_LAYERS),
    F(maxTextureCubemapLayered[0], P_INT, MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH),
    F(maxTextureCubemapLayered[1], P_INT, MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS),
    F(maxSurface1D, P_INT, MAXIMUM_SURFACE1D_WIDTH),
    F(maxSurface2D[0], P_INT, MAXIMUM_SURFACE2D_WIDTH),
    F(maxSurface2D[1], P_INT, MAXIMUM_SURFACE2D_HEIGHT),
    F(maxSurface3D[0], P_INT, MAXIMUM_SURFACE3D_WIDTH),
    F(maxSurface3D[1], P_INT, MAXIMUM_SURFACE3D_HEIGHT),
    F(maxSurface3D[2], P_INT, MAXIMUM_SURFACE3D_DEPTH),
    F(maxSurface1DLayered[0], P_INT, MAXIMUM_SURFACE1D_LAYERED_WIDTH),
    F(maxSurface1DLayered[1], P_INT, MAXIMUM_SURFACE1D_LAYERED_LAYERS),
    F(maxSurface2DLayered[0], P_INT, MAXIMUM_SURFACE2D_LAYERED_WIDTH),
    F(maxSurface2DLayered[1], P_INT, MAXIMUM_SURFACE2D_LAYERED_HEIGHT),
    F(maxSurface2DLayered[2], P_INT, MAXIMUM_SURFACE2D_LAYERED_LAYERS),
    F(maxSurfaceCubemap, P_INT, MAXIMUM_SURFACECUBEMAP_WIDTH),
    F(maxSurfaceCubemapLayered[0], P_INT, MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH),
    F(maxSurfaceCubemapLayered[1], P_INT, MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS),
    F(surfaceAlignment, P_SIZE, SURFACE_ALIGNMENT),
    F(concurrentKernels, P_INT, CONCURRENT_KERNELS),
    F(ECCEnabled, P_INT, ECC_ENABLED),
    F(pciBusID, P_INT, PCI_BUS_ID),
    F(pciDeviceID, P_INT, PCI_DEVICE_ID),
    F(pciDomainID, P_INT, PCI_DOMAIN_ID),
    F(tccDriver, P_INT, TCC_DRIVER),
    F(asyncEngineCount, P_INT, ASYNC_ENGINE_COUNT),
    F(unifiedAddressing, P_INT, UNIFIED_ADDRESSING),
    F(memoryBusWidth, P_INT, GLOBAL_MEMORY_BUS_WIDTH),
    F(l2CacheSize, P_INT, L2_CACHE_SIZE),
    F(persistingL2CacheMaxSize, P_INT, MAX_PERSISTING_L2_CACHE_SIZE),
    F(maxThreadsPerMultiProcessor, P_INT, MAX_THREADS_PER_MULTIPROCESSOR),
    F(streamPrioritiesSupported, P_INT, STREAM_PRIORITIES_SUPPORTED),
    F(globalL1CacheSupported, P_INT, GLOBAL_L1_CACHE_SUPPORTED),
    F(localL1CacheSupported, P_INT, LOCAL_L1_CACHE_SUPPORTED),
    F(sharedMemPerMultiprocessor, P_SIZE, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
    F(regsPerMultiprocessor, P_INT, MAX_REGISTERS_PER_MULTIPROCESSOR),
    F(managedMemory, P_INT, MANAGED_MEMORY),
    F(isMultiGpuBoard, P_INT, MULTI_GPU_BOARD),
    F(multiGpuBoardGroupID, P_INT, MULTI_GPU_BOARD_GROUP_ID),
    F(hostNativeAtomicSupported, P_INT, HOST_NATIVE_ATOMIC_SUPPORTED),
    F(pageableMemoryAccess, P_INT, PAGEABLE_MEMORY_ACCESS),
    F(concurrentManagedAccess, P_INT, CONCURRENT_MANAGED_ACCESS),
    F(computePreemptionSupported, P_INT, COMPUTE_PREEMPTION_SUPPORTED),
    F(canUseHostPointerForRegisteredMem, P_INT, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM),
    F(cooperativeLaunch, P_INT, COOPERATIVE_LAUNCH),
    F(sharedMemPerBlockOptin, P_SIZE, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
    F(pageableMemoryAccessUsesHostPageTables, P_INT, PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES),
    F(directManagedMemAccessFromHost, P_INT, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST),
    F(maxBlocksPerMultiProcessor, P_INT, MAX_BLOCKS_PER_MULTIPROCESSOR),
    F(accessPolicyMaxWindowSize, P_INT, MAX_ACCESS_POLICY_WINDOW_SIZE),
    F(reservedSharedMemPerBlock, P_SIZE, RESERVED_SHARED_MEMORY_PER_BLOCK),
    F(hostRegisterSupported, P_INT, HOST_REGISTER_SUPPORTED),
    F(sparseCudaArraySupported, P_INT, SPARSE_CUDA_ARRAY_SUPPORTED),
    F(hostRegisterReadOnlySupported, P_INT, READ_ONLY_HOST_REGISTER_SUPPORTED),
    F(timelineSemaphoreInteropSupported, P_INT, TIMELINE_SEMAPHORE_INTEROP_SUPPORTED),
    F(memoryPoolsSupported, P_INT, MEMORY_POOLS_SUPPORTED),
    F(gpuDirectRDMASupported, P_INT, GPU_DIRECT_RDMA_SUPPORTED),
    F(gpuDirectRDMAFlushWritesOptions, P_UINT, GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS),
    F(gpuDirectRDMAWritesOrdering, P_INT, GPU_DIRECT_RDMA_WRITES_ORDERING),
    F(memoryPoolSupportedHandleTypes, P_UINT, MEMPOOL_SUPPORTED_HANDLE_TYPES),
    F(deferredMappingCudaArraySupported, P_INT, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED),
    F(ipcEventSupported, P_INT, IPC_EVENT_SUPPORTED),
    F(clusterLaunch, P_INT, CLUSTER_LAUNCH),
    F(unifiedFunctionPointers, P_INT, UNIFIED_FUNCTION_POINTERS),
    F(deviceNumaConfig, P_INT, NUMA_CONFIG),
    F(deviceNumaId, P_INT, NUMA_ID),
    F(mpsEnabled, P_INT, MPS_ENABLED),
    F(hostNumaId, P_INT, HOST_NUMA_ID),
    F(gpuPciDeviceID, P_UINT, GPU_PCI_DEVICE_ID),
    F(gpuPciSubsystemID, P_UINT, GPU_PCI_SUBSYSTEM_ID),
    F(hostNumaMultinodeIpcSupported, P_INT, HOST_NUMA_MULTINODE_IPC_SUPPORTED),
};
#undef F

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  CUdevice d;
  CUDAEV_DEVICE_OR_RETURN(device, d);
  if (prop == NULL) return cudaev__ret(cudaErrorInvalidValue);
  struct cudaDeviceProp p;
  memset(&p, 0, sizeof p);
  CUresult r = cudaev__drv.cuDeviceGetName(p.name, (int)sizeof p.name, d);
  if (r == CUDA_SUCCESS) r = cudaev__drv.cuDeviceGetUuid((CUuuid *)&p.uuid, d);
  if (r == CUDA_SUCCESS) r = cudaev__drv.cuDeviceTotalMem(&p.totalGlobalMem, d);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  /* LUIDs exist on Windows only; the driver says so, and the fields stay 0. */
  (void)cudaev__drv.cuDeviceGetLuid(p.luid, &p.luidDeviceNodeMask, d);
  for (size_t i = 0; i < sizeof prop_fields / sizeof prop_fields[0]; i++) {
    const struct prop_field *f = &prop_fields[i];
    int v = 0;
    /* An attribute an older driver does not know reads as 0. */
    if (cudaev__drv.cuDeviceGetAttribute(&v, f->attr, d) != CUDA_SUCCESS) v = 0;
    char *dst = (char *)&p + f->offset;
    switch (f->type) {
    case P_INT: memcpy(dst, &v, sizeof v); break;
    case P_UINT: {
      unsigned u = (unsigned)v;
      memcpy(dst, &u, sizeof u);
      break;
    }
    case P_SIZE: {
      size_t z = (size_t)(unsigned)v;
      memcpy(dst, &z, sizeof z);
      break;
    }
    }
  }
  /* NVIDIA's runtime leaves reserved[] as the caller had it (measured). */
  memcpy(prop, &p, offsetof(struct cudaDeviceProp, reserved));
  return cudaSuccess;
}
