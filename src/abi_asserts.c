/* The runtime's types and constants that are the driver's, checked at
 * compile time, each once.
 *
 * NVIDIA defined much of the runtime API as mirrors of the driver's: same
 * members in the same order, same enum and flag values. The runtime relies
 * on it to hand the caller's values, structures and arrays to the driver as
 * they are: no translation, no copy, no allocation on enqueue paths. Every
 * such assumption is pinned here, so a toolkit that breaks one breaks the
 * build instead of a program; the comment over each group names the code
 * that relies on it. Where an enum is long, a few values along it are
 * spot-checked.
 *
 * Every check is one CUDAEV_ABI_ASSERT (one spelling to grep for and count):
 *   CUDAEV_SAME_VALUE(rt, drv)      an enumerator or flag has the driver's value
 *   CUDAEV_SAME_SIZE(rt, drv)       a type has the driver's size
 *   CUDAEV_SAME_OFFSET(rt, drv, m)  member m has the driver's offset (the
 *                                   structures agree up to m)
 *   CUDAEV_SAME_MEMBER(rt, drv, m)  member m has the driver's offset and size
 *
 * This file compiles to no code.
 */
#include "internal.h"

#include <stddef.h>

#if defined(CUDAEV_HAVE_GL)
#pragma GCC visibility push(default)
#include <cuda_gl_interop.h>
#pragma GCC visibility pop
#endif
#if defined(CUDAEV_HAVE_EGL)
#pragma GCC visibility push(default)
#include <cuda_egl_interop.h>
#pragma GCC visibility pop
#endif

#define CUDAEV_ABI_ASSERT(cond, what) _Static_assert(cond, "runtime/driver ABI: " what)
#define CUDAEV_SAME_VALUE(rt, drv)    CUDAEV_ABI_ASSERT((int)(rt) == (int)(drv), #rt " == " #drv)
#define CUDAEV_SAME_SIZE(rt, drv) \
  CUDAEV_ABI_ASSERT(sizeof(rt) == sizeof(drv), "sizeof(" #rt ") == sizeof(" #drv ")")
#define CUDAEV_SAME_OFFSET(rt, drv, m) \
  CUDAEV_ABI_ASSERT(offsetof(rt, m) == offsetof(drv, m), #rt "." #m " is at " #drv "." #m)
#define CUDAEV_SAME_MEMBER(rt, drv, m)                                                      \
  CUDAEV_ABI_ASSERT(                                                                        \
      offsetof(rt, m) == offsetof(drv, m) && sizeof(((rt *)0)->m) == sizeof(((drv *)0)->m), \
      #rt "." #m " is laid out as " #drv "." #m)

/* ---- Execution Control ------------------------------------------------------ */

/* cudaLaunchAttribute is CUlaunchAttribute bit for bit: cudaLaunchKernelExC
 * and the occupancy calculators pass the caller's attribute array on as it
 * is (launch.h), and stream and kernel-node attribute values are copied
 * whole, 64 bytes, both ways (stream.c), so fields of attributes this
 * toolkit does not know travel unchanged. */
CUDAEV_SAME_SIZE(cudaLaunchAttribute, CUlaunchAttribute);
CUDAEV_ABI_ASSERT(offsetof(cudaLaunchAttribute, val) == offsetof(CUlaunchAttribute, value),
                  "cudaLaunchAttribute.val is at CUlaunchAttribute.value");
CUDAEV_SAME_SIZE(cudaLaunchAttributeID, CUlaunchAttributeID);
CUDAEV_SAME_VALUE(cudaLaunchAttributeIgnore, CU_LAUNCH_ATTRIBUTE_IGNORE);
CUDAEV_SAME_VALUE(cudaLaunchAttributeAccessPolicyWindow, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
CUDAEV_SAME_VALUE(cudaLaunchAttributeCooperative, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
CUDAEV_SAME_VALUE(cudaLaunchAttributeSynchronizationPolicy,
                  CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY);
CUDAEV_SAME_VALUE(cudaLaunchAttributeClusterDimension, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
CUDAEV_SAME_VALUE(cudaLaunchAttributeClusterSchedulingPolicyPreference,
                  CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
CUDAEV_SAME_VALUE(cudaLaunchAttributeProgrammaticStreamSerialization,
                  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
CUDAEV_SAME_VALUE(cudaLaunchAttributeProgrammaticEvent, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT);
CUDAEV_SAME_VALUE(cudaLaunchAttributePriority, CU_LAUNCH_ATTRIBUTE_PRIORITY);
CUDAEV_SAME_VALUE(cudaLaunchAttributeMemSyncDomainMap, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP);
CUDAEV_SAME_VALUE(cudaLaunchAttributeMemSyncDomain, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN);
CUDAEV_SAME_VALUE(cudaLaunchAttributePreferredClusterDimension,
                  CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION);
CUDAEV_SAME_VALUE(cudaLaunchAttributeLaunchCompletionEvent,
                  CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT);
CUDAEV_SAME_VALUE(cudaLaunchAttributeDeviceUpdatableKernelNode,
                  CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE);
CUDAEV_SAME_VALUE(cudaLaunchAttributePreferredSharedMemoryCarveout,
                  CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
CUDAEV_SAME_VALUE(cudaLaunchAttributeNvlinkUtilCentricScheduling,
                  CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, accessPolicyWindow);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, accessPolicyWindow.base_ptr);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, accessPolicyWindow.num_bytes);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, accessPolicyWindow.hitRatio);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, accessPolicyWindow.hitProp);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, accessPolicyWindow.missProp);
CUDAEV_SAME_VALUE(cudaAccessPropertyNormal, CU_ACCESS_PROPERTY_NORMAL);
CUDAEV_SAME_VALUE(cudaAccessPropertyStreaming, CU_ACCESS_PROPERTY_STREAMING);
CUDAEV_SAME_VALUE(cudaAccessPropertyPersisting, CU_ACCESS_PROPERTY_PERSISTING);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, cooperative);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, syncPolicy);
CUDAEV_SAME_VALUE(cudaSyncPolicyAuto, CU_SYNC_POLICY_AUTO);
CUDAEV_SAME_VALUE(cudaSyncPolicySpin, CU_SYNC_POLICY_SPIN);
CUDAEV_SAME_VALUE(cudaSyncPolicyYield, CU_SYNC_POLICY_YIELD);
CUDAEV_SAME_VALUE(cudaSyncPolicyBlockingSync, CU_SYNC_POLICY_BLOCKING_SYNC);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, clusterDim);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue,
                   clusterSchedulingPolicyPreference);
CUDAEV_SAME_VALUE(cudaClusterSchedulingPolicyDefault, CU_CLUSTER_SCHEDULING_POLICY_DEFAULT);
CUDAEV_SAME_VALUE(cudaClusterSchedulingPolicySpread, CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
CUDAEV_SAME_VALUE(cudaClusterSchedulingPolicyLoadBalancing,
                  CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue,
                   programmaticStreamSerializationAllowed);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, programmaticEvent);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, programmaticEvent.event);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, programmaticEvent.flags);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue,
                   programmaticEvent.triggerAtBlockStart);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, priority);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, memSyncDomainMap);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, memSyncDomainMap.default_);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, memSyncDomainMap.remote);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, memSyncDomain);
CUDAEV_SAME_VALUE(cudaLaunchMemSyncDomainDefault, CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT);
CUDAEV_SAME_VALUE(cudaLaunchMemSyncDomainRemote, CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, preferredClusterDim);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, launchCompletionEvent);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, launchCompletionEvent.event);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, launchCompletionEvent.flags);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, deviceUpdatableKernelNode);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue,
                   deviceUpdatableKernelNode.deviceUpdatable);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue,
                   deviceUpdatableKernelNode.devNode);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, sharedMemCarveout);
CUDAEV_SAME_MEMBER(cudaLaunchAttributeValue, CUlaunchAttributeValue, nvlinkUtilCentricScheduling);
CUDAEV_SAME_SIZE(cudaLaunchAttributeValue, CUlaunchAttributeValue);
CUDAEV_SAME_SIZE(struct cudaAccessPolicyWindow, CUaccessPolicyWindow);
CUDAEV_SAME_OFFSET(struct cudaAccessPolicyWindow, CUaccessPolicyWindow, hitRatio);
CUDAEV_SAME_OFFSET(struct cudaAccessPolicyWindow, CUaccessPolicyWindow, missProp);

/* cudaFuncAttribute and cudaFuncCache are the driver's enums
 * (cudaFuncSetAttribute, cudaKernelSetAttributeForDevice,
 * cudaFuncSetCacheConfig pass them cast). */
CUDAEV_SAME_VALUE(cudaFuncAttributeMaxDynamicSharedMemorySize,
                  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
CUDAEV_SAME_VALUE(cudaFuncAttributePreferredSharedMemoryCarveout,
                  CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
CUDAEV_SAME_VALUE(cudaFuncAttributeClusterDimMustBeSet, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET);
CUDAEV_SAME_VALUE(cudaFuncAttributeRequiredClusterWidth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH);
CUDAEV_SAME_VALUE(cudaFuncAttributeRequiredClusterHeight,
                  CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT);
CUDAEV_SAME_VALUE(cudaFuncAttributeRequiredClusterDepth, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH);
CUDAEV_SAME_VALUE(cudaFuncAttributeNonPortableClusterSizeAllowed,
                  CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
CUDAEV_SAME_VALUE(cudaFuncAttributeClusterSchedulingPolicyPreference,
                  CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
CUDAEV_SAME_VALUE(cudaFuncAttributeMax, CU_FUNC_ATTRIBUTE_MAX);
CUDAEV_SAME_VALUE(cudaFuncCachePreferNone, CU_FUNC_CACHE_PREFER_NONE);
CUDAEV_SAME_VALUE(cudaFuncCachePreferShared, CU_FUNC_CACHE_PREFER_SHARED);
CUDAEV_SAME_VALUE(cudaFuncCachePreferL1, CU_FUNC_CACHE_PREFER_L1);
CUDAEV_SAME_VALUE(cudaFuncCachePreferEqual, CU_FUNC_CACHE_PREFER_EQUAL);

/* Occupancy flags go to the driver's calculators as they are. */
CUDAEV_SAME_VALUE(cudaOccupancyDefault, CU_OCCUPANCY_DEFAULT);
CUDAEV_SAME_VALUE(cudaOccupancyDisableCachingOverride, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE);

/* ---- Library Management ---------------------------------------------------- */

/* JIT and library option arrays are passed to cuLibraryLoadData as they
 * are. */
CUDAEV_SAME_SIZE(enum cudaJitOption, CUjit_option);
CUDAEV_SAME_SIZE(enum cudaLibraryOption, CUlibraryOption);
CUDAEV_SAME_VALUE(cudaJitMaxRegisters, CU_JIT_MAX_REGISTERS);
CUDAEV_SAME_VALUE(cudaJitThreadsPerBlock, CU_JIT_THREADS_PER_BLOCK);
CUDAEV_SAME_VALUE(cudaJitWallTime, CU_JIT_WALL_TIME);
CUDAEV_SAME_VALUE(cudaJitInfoLogBuffer, CU_JIT_INFO_LOG_BUFFER);
CUDAEV_SAME_VALUE(cudaJitInfoLogBufferSizeBytes, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
CUDAEV_SAME_VALUE(cudaJitErrorLogBuffer, CU_JIT_ERROR_LOG_BUFFER);
CUDAEV_SAME_VALUE(cudaJitErrorLogBufferSizeBytes, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
CUDAEV_SAME_VALUE(cudaJitOptimizationLevel, CU_JIT_OPTIMIZATION_LEVEL);
CUDAEV_SAME_VALUE(cudaJitFallbackStrategy, CU_JIT_FALLBACK_STRATEGY);
CUDAEV_SAME_VALUE(cudaJitGenerateDebugInfo, CU_JIT_GENERATE_DEBUG_INFO);
CUDAEV_SAME_VALUE(cudaJitLogVerbose, CU_JIT_LOG_VERBOSE);
CUDAEV_SAME_VALUE(cudaJitGenerateLineInfo, CU_JIT_GENERATE_LINE_INFO);
CUDAEV_SAME_VALUE(cudaJitCacheMode, CU_JIT_CACHE_MODE);
CUDAEV_SAME_VALUE(cudaJitPositionIndependentCode, CU_JIT_POSITION_INDEPENDENT_CODE);
CUDAEV_SAME_VALUE(cudaJitMinCtaPerSm, CU_JIT_MIN_CTA_PER_SM);
CUDAEV_SAME_VALUE(cudaJitMaxThreadsPerBlock, CU_JIT_MAX_THREADS_PER_BLOCK);
CUDAEV_SAME_VALUE(cudaJitOverrideDirectiveValues, CU_JIT_OVERRIDE_DIRECTIVE_VALUES);
CUDAEV_SAME_VALUE(cudaLibraryHostUniversalFunctionAndDataTable,
                  CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE);
CUDAEV_SAME_VALUE(cudaLibraryBinaryIsPreserved, CU_LIBRARY_BINARY_IS_PRESERVED);

/* ---- Stream and Event Management --------------------------------------------- */

/* Stream flags, capture modes and statuses, capture dependency updates
 * and graph edge data are passed as they are. */
CUDAEV_SAME_SIZE(cudaGraphEdgeData, CUgraphEdgeData);
CUDAEV_SAME_VALUE(cudaStreamCaptureStatusInvalidated, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
CUDAEV_SAME_VALUE(cudaStreamCaptureModeRelaxed, CU_STREAM_CAPTURE_MODE_RELAXED);
CUDAEV_SAME_VALUE(cudaStreamSetCaptureDependencies, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
CUDAEV_SAME_VALUE(cudaStreamNonBlocking, CU_STREAM_NON_BLOCKING);
CUDAEV_SAME_VALUE(cudaMemAttachSingle, CU_MEM_ATTACH_SINGLE);

/* Event creation and record flags are passed as they are. */
CUDAEV_SAME_VALUE(cudaEventBlockingSync, CU_EVENT_BLOCKING_SYNC);
CUDAEV_SAME_VALUE(cudaEventDisableTiming, CU_EVENT_DISABLE_TIMING);
CUDAEV_SAME_VALUE(cudaEventInterprocess, CU_EVENT_INTERPROCESS);
CUDAEV_SAME_VALUE(cudaEventRecordExternal, CU_EVENT_RECORD_EXTERNAL);

/* ---- Graph Management -------------------------------------------------------- */

/* Node types, node parameter structures and instantiation flags are the
 * driver's: graph_node.c hands them over cast, and reads the driver's back. */
CUDAEV_SAME_VALUE(cudaGraphNodeTypeKernel, CU_GRAPH_NODE_TYPE_KERNEL);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeMemcpy, CU_GRAPH_NODE_TYPE_MEMCPY);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeMemset, CU_GRAPH_NODE_TYPE_MEMSET);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeHost, CU_GRAPH_NODE_TYPE_HOST);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeGraph, CU_GRAPH_NODE_TYPE_GRAPH);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeEmpty, CU_GRAPH_NODE_TYPE_EMPTY);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeWaitEvent, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeEventRecord, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeExtSemaphoreSignal, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeExtSemaphoreWait, CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeMemAlloc, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeMemFree, CU_GRAPH_NODE_TYPE_MEM_FREE);
CUDAEV_SAME_VALUE(cudaGraphNodeTypeConditional, CU_GRAPH_NODE_TYPE_CONDITIONAL);
CUDAEV_SAME_SIZE(struct cudaGraphNodeParams, CUgraphNodeParams);
CUDAEV_SAME_OFFSET(struct cudaGraphNodeParams, CUgraphNodeParams, kernel);
CUDAEV_SAME_SIZE(struct cudaHostNodeParams, CUDA_HOST_NODE_PARAMS);
CUDAEV_SAME_SIZE(struct cudaMemsetParams, CUDA_MEMSET_NODE_PARAMS);
CUDAEV_SAME_OFFSET(struct cudaMemsetParams, CUDA_MEMSET_NODE_PARAMS, height);
CUDAEV_SAME_SIZE(struct cudaMemAllocNodeParams, CUDA_MEM_ALLOC_NODE_PARAMS);
CUDAEV_SAME_OFFSET(struct cudaMemAllocNodeParams, CUDA_MEM_ALLOC_NODE_PARAMS, dptr);
CUDAEV_SAME_SIZE(struct cudaMemPoolProps, CUmemPoolProps);
CUDAEV_SAME_SIZE(struct cudaMemAccessDesc, CUmemAccessDesc);
CUDAEV_SAME_SIZE(struct cudaExternalSemaphoreSignalNodeParams, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS);
CUDAEV_SAME_SIZE(struct cudaExternalSemaphoreWaitNodeParams, CUDA_EXT_SEM_WAIT_NODE_PARAMS);
CUDAEV_SAME_SIZE(struct cudaExternalSemaphoreSignalParams, CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS);
CUDAEV_SAME_SIZE(struct cudaExternalSemaphoreWaitParams, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS);
CUDAEV_SAME_SIZE(cudaGraphInstantiateParams, CUDA_GRAPH_INSTANTIATE_PARAMS);
CUDAEV_SAME_OFFSET(cudaGraphInstantiateParams, CUDA_GRAPH_INSTANTIATE_PARAMS, result_out);
CUDAEV_SAME_SIZE(cudaGraphExecUpdateResultInfo, CUgraphExecUpdateResultInfo);
CUDAEV_SAME_VALUE(cudaGraphExecUpdateErrorAttributesChanged,
                  CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
CUDAEV_SAME_VALUE(cudaGraphInstantiateConditionalHandleUnused,
                  CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED);
CUDAEV_SAME_VALUE(cudaGraphInstantiateFlagUseNodePriority,
                  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
CUDAEV_SAME_VALUE(cudaGraphDebugDotFlagsConditionalNodeParams,
                  CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS);
CUDAEV_SAME_OFFSET(struct cudaConditionalNodeParams, CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out);
CUDAEV_SAME_OFFSET(struct cudaKernelNodeParamsV2, CUDA_KERNEL_NODE_PARAMS_v3, extra);
CUDAEV_SAME_OFFSET(struct cudaMemsetParamsV2, CUDA_MEMSET_NODE_PARAMS_v2, height);

/* ---- Memory Management --------------------------------------------------------- */

/* The memory-location, access and pool structures mirror the driver's
 * (memory.h): the caller's arrays go to the driver as they are, no copy,
 * no allocation. void *dptrs[] of the batch calls are passed as
 * CUdeviceptr[]. Flags of cudaHostAlloc, cudaHostRegister and
 * cudaMemAttach* are the driver's. */
CUDAEV_SAME_SIZE(struct cudaMemLocation, CUmemLocation);
CUDAEV_SAME_MEMBER(struct cudaMemLocation, CUmemLocation, type);
CUDAEV_SAME_MEMBER(struct cudaMemLocation, CUmemLocation, id);
CUDAEV_SAME_MEMBER(struct cudaMemAccessDesc, CUmemAccessDesc, location);
CUDAEV_SAME_MEMBER(struct cudaMemAccessDesc, CUmemAccessDesc, flags);
CUDAEV_SAME_MEMBER(struct cudaMemPoolProps, CUmemPoolProps, allocType);
CUDAEV_SAME_MEMBER(struct cudaMemPoolProps, CUmemPoolProps, handleTypes);
CUDAEV_SAME_MEMBER(struct cudaMemPoolProps, CUmemPoolProps, location);
CUDAEV_SAME_MEMBER(struct cudaMemPoolProps, CUmemPoolProps, win32SecurityAttributes);
CUDAEV_SAME_MEMBER(struct cudaMemPoolProps, CUmemPoolProps, maxSize);
CUDAEV_SAME_MEMBER(struct cudaMemPoolProps, CUmemPoolProps, usage);
CUDAEV_SAME_MEMBER(struct cudaMemPoolProps, CUmemPoolProps, reserved);
CUDAEV_SAME_SIZE(struct cudaMemPoolPtrExportData, CUmemPoolPtrExportData);
CUDAEV_SAME_SIZE(void *, CUdeviceptr);
CUDAEV_SAME_VALUE(cudaMemLocationTypeInvalid, CU_MEM_LOCATION_TYPE_INVALID);
CUDAEV_SAME_VALUE(cudaMemLocationTypeDevice, CU_MEM_LOCATION_TYPE_DEVICE);
CUDAEV_SAME_VALUE(cudaMemLocationTypeHost, CU_MEM_LOCATION_TYPE_HOST);
CUDAEV_SAME_VALUE(cudaMemLocationTypeHostNuma, CU_MEM_LOCATION_TYPE_HOST_NUMA);
CUDAEV_SAME_VALUE(cudaMemLocationTypeHostNumaCurrent, CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
CUDAEV_SAME_VALUE(cudaMemAccessFlagsProtNone, CU_MEM_ACCESS_FLAGS_PROT_NONE);
CUDAEV_SAME_VALUE(cudaMemAccessFlagsProtRead, CU_MEM_ACCESS_FLAGS_PROT_READ);
CUDAEV_SAME_VALUE(cudaMemAccessFlagsProtReadWrite, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
CUDAEV_SAME_VALUE(cudaMemAllocationTypeInvalid, CU_MEM_ALLOCATION_TYPE_INVALID);
CUDAEV_SAME_VALUE(cudaMemAllocationTypePinned, CU_MEM_ALLOCATION_TYPE_PINNED);
CUDAEV_SAME_VALUE(cudaMemAllocationTypeManaged, CU_MEM_ALLOCATION_TYPE_MANAGED);
CUDAEV_SAME_VALUE(cudaMemHandleTypeNone, CU_MEM_HANDLE_TYPE_NONE);
CUDAEV_SAME_VALUE(cudaMemHandleTypePosixFileDescriptor, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
CUDAEV_SAME_VALUE(cudaMemHandleTypeWin32, CU_MEM_HANDLE_TYPE_WIN32);
CUDAEV_SAME_VALUE(cudaMemHandleTypeWin32Kmt, CU_MEM_HANDLE_TYPE_WIN32_KMT);
CUDAEV_SAME_VALUE(cudaMemHandleTypeFabric, CU_MEM_HANDLE_TYPE_FABRIC);
CUDAEV_SAME_VALUE(cudaMemPoolReuseFollowEventDependencies,
                  CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES);
CUDAEV_SAME_VALUE(cudaMemPoolReuseAllowOpportunistic, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC);
CUDAEV_SAME_VALUE(cudaMemPoolReuseAllowInternalDependencies,
                  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES);
CUDAEV_SAME_VALUE(cudaMemPoolAttrReleaseThreshold, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
CUDAEV_SAME_VALUE(cudaMemPoolAttrReservedMemCurrent, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
CUDAEV_SAME_VALUE(cudaMemPoolAttrReservedMemHigh, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
CUDAEV_SAME_VALUE(cudaMemPoolAttrUsedMemCurrent, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
CUDAEV_SAME_VALUE(cudaMemPoolAttrUsedMemHigh, CU_MEMPOOL_ATTR_USED_MEM_HIGH);
CUDAEV_SAME_VALUE(cudaMemAdviseSetReadMostly, CU_MEM_ADVISE_SET_READ_MOSTLY);
CUDAEV_SAME_VALUE(cudaMemAdviseUnsetReadMostly, CU_MEM_ADVISE_UNSET_READ_MOSTLY);
CUDAEV_SAME_VALUE(cudaMemAdviseSetPreferredLocation, CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
CUDAEV_SAME_VALUE(cudaMemAdviseUnsetPreferredLocation, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION);
CUDAEV_SAME_VALUE(cudaMemAdviseSetAccessedBy, CU_MEM_ADVISE_SET_ACCESSED_BY);
CUDAEV_SAME_VALUE(cudaMemAdviseUnsetAccessedBy, CU_MEM_ADVISE_UNSET_ACCESSED_BY);
CUDAEV_SAME_VALUE(cudaMemRangeAttributeReadMostly, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY);
CUDAEV_SAME_VALUE(cudaMemRangeAttributePreferredLocation,
                  CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION);
CUDAEV_SAME_VALUE(cudaMemRangeAttributeAccessedBy, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY);
CUDAEV_SAME_VALUE(cudaMemRangeAttributeLastPrefetchLocation,
                  CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION);
CUDAEV_SAME_VALUE(cudaMemRangeAttributePreferredLocationType,
                  CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE);
CUDAEV_SAME_VALUE(cudaMemRangeAttributePreferredLocationId,
                  CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID);
CUDAEV_SAME_VALUE(cudaMemRangeAttributeLastPrefetchLocationType,
                  CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE);
CUDAEV_SAME_VALUE(cudaMemRangeAttributeLastPrefetchLocationId,
                  CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID);
CUDAEV_SAME_VALUE(cudaHostAllocPortable, CU_MEMHOSTALLOC_PORTABLE);
CUDAEV_SAME_VALUE(cudaHostAllocMapped, CU_MEMHOSTALLOC_DEVICEMAP);
CUDAEV_SAME_VALUE(cudaHostAllocWriteCombined, CU_MEMHOSTALLOC_WRITECOMBINED);
CUDAEV_SAME_VALUE(cudaHostRegisterPortable, CU_MEMHOSTREGISTER_PORTABLE);
CUDAEV_SAME_VALUE(cudaHostRegisterMapped, CU_MEMHOSTREGISTER_DEVICEMAP);
CUDAEV_SAME_VALUE(cudaHostRegisterIoMemory, CU_MEMHOSTREGISTER_IOMEMORY);
CUDAEV_SAME_VALUE(cudaHostRegisterReadOnly, CU_MEMHOSTREGISTER_READ_ONLY);
CUDAEV_SAME_VALUE(cudaMemAttachGlobal, CU_MEM_ATTACH_GLOBAL);
CUDAEV_SAME_VALUE(cudaMemAttachHost, CU_MEM_ATTACH_HOST);

/* Range attribute and access-flag arrays are passed as they are
 * (cudaMemRangeGetAttributes, cudaMemPoolGetAccess). */
CUDAEV_SAME_SIZE(enum cudaMemRangeAttribute, CUmem_range_attribute);
CUDAEV_SAME_SIZE(enum cudaMemAccessFlags, CUmemAccess_flags);

/* The copy-batch structures are the driver's, field for field
 * (cudaMemLocation ids are device ordinals in both, and cudart's ordinal i
 * is the driver's CUdevice i), so memcpy_batch.c passes the lists through without
 * a copy: the batch is an enqueue path and must not allocate. */
CUDAEV_SAME_SIZE(struct cudaMemcpyAttributes, CUmemcpyAttributes);
CUDAEV_SAME_OFFSET(struct cudaMemcpyAttributes, CUmemcpyAttributes, dstLocHint);
CUDAEV_SAME_OFFSET(struct cudaMemcpyAttributes, CUmemcpyAttributes, flags);
CUDAEV_SAME_SIZE(struct cudaMemcpy3DBatchOp, CUDA_MEMCPY3D_BATCH_OP);
CUDAEV_SAME_OFFSET(struct cudaMemcpy3DBatchOp, CUDA_MEMCPY3D_BATCH_OP, dst);
CUDAEV_SAME_OFFSET(struct cudaMemcpy3DBatchOp, CUDA_MEMCPY3D_BATCH_OP, extent);
CUDAEV_SAME_OFFSET(struct cudaMemcpy3DBatchOp, CUDA_MEMCPY3D_BATCH_OP, srcAccessOrder);
CUDAEV_SAME_OFFSET(struct cudaMemcpy3DBatchOp, CUDA_MEMCPY3D_BATCH_OP, flags);
CUDAEV_SAME_OFFSET(struct cudaMemcpy3DOperand, CUmemcpy3DOperand, op.ptr.locHint);
CUDAEV_SAME_OFFSET(struct cudaMemcpy3DOperand, CUmemcpy3DOperand, op.array.offset);
CUDAEV_SAME_SIZE(struct cudaMemcpy3DOperand, CUmemcpy3DOperand);
CUDAEV_SAME_VALUE(cudaMemcpySrcAccessOrderAny, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
CUDAEV_SAME_VALUE(cudaMemcpyOperandTypeArray, CU_MEMCPY_OPERAND_TYPE_ARRAY);

/* ---- Arrays, Textures ---------------------------------------------------------- */

/* The runtime's cudaArray* flags have the driver's CUDA_ARRAY3D_* values;
 * sparse properties and memory requirements are read straight into the
 * caller's structure. */
CUDAEV_SAME_VALUE(cudaArrayLayered, CUDA_ARRAY3D_LAYERED);
CUDAEV_SAME_VALUE(cudaArraySurfaceLoadStore, CUDA_ARRAY3D_SURFACE_LDST);
CUDAEV_SAME_VALUE(cudaArrayCubemap, CUDA_ARRAY3D_CUBEMAP);
CUDAEV_SAME_VALUE(cudaArrayTextureGather, CUDA_ARRAY3D_TEXTURE_GATHER);
CUDAEV_SAME_VALUE(cudaArraySparse, CUDA_ARRAY3D_SPARSE);
CUDAEV_SAME_VALUE(cudaArrayDeferredMapping, CUDA_ARRAY3D_DEFERRED_MAPPING);
CUDAEV_SAME_SIZE(struct cudaArraySparseProperties, CUDA_ARRAY_SPARSE_PROPERTIES);
CUDAEV_SAME_SIZE(struct cudaArrayMemoryRequirements, CUDA_ARRAY_MEMORY_REQUIREMENTS);

/* The runtime's texture enums have the driver's values. */
CUDAEV_SAME_VALUE(cudaAddressModeBorder, CU_TR_ADDRESS_MODE_BORDER);
CUDAEV_SAME_VALUE(cudaAddressModeMirror, CU_TR_ADDRESS_MODE_MIRROR);
CUDAEV_SAME_VALUE(cudaFilterModeLinear, CU_TR_FILTER_MODE_LINEAR);
CUDAEV_SAME_VALUE(cudaResViewFormatUnsignedBlockCompressed7, CU_RES_VIEW_FORMAT_UNSIGNED_BC7);
CUDAEV_SAME_VALUE(cudaResViewFormatFloat4, CU_RES_VIEW_FORMAT_FLOAT_4X32);
CUDAEV_SAME_SIZE(struct cudaResourceViewDesc, CUDA_RESOURCE_VIEW_DESC);

/* ---- External Resource Interoperability ---------------------------------------- */

/* The runtime's descriptors are the driver's, field for field. */
CUDAEV_SAME_SIZE(struct cudaExternalMemoryHandleDesc, CUDA_EXTERNAL_MEMORY_HANDLE_DESC);
CUDAEV_SAME_SIZE(struct cudaExternalMemoryBufferDesc, CUDA_EXTERNAL_MEMORY_BUFFER_DESC);
CUDAEV_SAME_SIZE(struct cudaExternalSemaphoreHandleDesc, CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC);
CUDAEV_SAME_OFFSET(struct cudaExternalMemoryHandleDesc, CUDA_EXTERNAL_MEMORY_HANDLE_DESC, size);
CUDAEV_SAME_OFFSET(struct cudaExternalMemoryHandleDesc, CUDA_EXTERNAL_MEMORY_HANDLE_DESC, flags);
CUDAEV_SAME_OFFSET(struct cudaExternalSemaphoreSignalParams, CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS,
                   flags);
CUDAEV_SAME_OFFSET(struct cudaExternalSemaphoreWaitParams, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS,
                   flags);
CUDAEV_SAME_VALUE(cudaExternalMemoryHandleTypeOpaqueFd, CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD);
CUDAEV_SAME_VALUE(cudaExternalMemoryHandleTypeNvSciBuf, CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF);
CUDAEV_SAME_VALUE(cudaExternalSemaphoreHandleTypeOpaqueFd,
                  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD);
CUDAEV_SAME_VALUE(cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd,
                  CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD);

/* ---- Error Log Management ----------------------------------------------------- */
CUDAEV_SAME_SIZE(cudaLogIterator, CUlogIterator);

/* ---- Graphics Interoperability ------------------------------------------------ */

#if defined(CUDAEV_HAVE_GL)
/* cudaGLGetDevices translates the driver's CUdevice list in place. */
CUDAEV_SAME_VALUE(cudaGLDeviceListAll, CU_GL_DEVICE_LIST_ALL);
CUDAEV_SAME_VALUE(cudaGLDeviceListCurrentFrame, CU_GL_DEVICE_LIST_CURRENT_FRAME);
CUDAEV_SAME_VALUE(cudaGLDeviceListNextFrame, CU_GL_DEVICE_LIST_NEXT_FRAME);
CUDAEV_SAME_VALUE(cudaGLMapFlagsNone, CU_GL_MAP_RESOURCE_FLAGS_NONE);
CUDAEV_SAME_VALUE(cudaGLMapFlagsReadOnly, CU_GL_MAP_RESOURCE_FLAGS_READ_ONLY);
CUDAEV_SAME_VALUE(cudaGLMapFlagsWriteDiscard, CU_GL_MAP_RESOURCE_FLAGS_WRITE_DISCARD);
CUDAEV_SAME_VALUE(cudaGraphicsRegisterFlagsNone, CU_GRAPHICS_REGISTER_FLAGS_NONE);
CUDAEV_SAME_VALUE(cudaGraphicsRegisterFlagsReadOnly, CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY);
CUDAEV_SAME_VALUE(cudaGraphicsRegisterFlagsWriteDiscard, CU_GRAPHICS_REGISTER_FLAGS_WRITE_DISCARD);
CUDAEV_SAME_VALUE(cudaGraphicsRegisterFlagsSurfaceLoadStore,
                  CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST);
CUDAEV_SAME_VALUE(cudaGraphicsRegisterFlagsTextureGather,
                  CU_GRAPHICS_REGISTER_FLAGS_TEXTURE_GATHER);
CUDAEV_SAME_SIZE(int, CUdevice);
#endif

#if defined(CUDAEV_HAVE_EGL)
/* Frame types and resource locations are the driver's; spot checks along
 * the colour-format enum: the runtime's is the driver's with a few values
 * (RGB, BGR, YUV_ER, YUV) left out. */
CUDAEV_SAME_VALUE(CUDA_EGL_MAX_PLANES, MAX_PLANES);
CUDAEV_SAME_VALUE(cudaEglFrameTypeArray, CU_EGL_FRAME_TYPE_ARRAY);
CUDAEV_SAME_VALUE(cudaEglFrameTypePitch, CU_EGL_FRAME_TYPE_PITCH);
CUDAEV_SAME_VALUE(cudaEglResourceLocationSysmem, CU_EGL_RESOURCE_LOCATION_SYSMEM);
CUDAEV_SAME_VALUE(cudaEglResourceLocationVidmem, CU_EGL_RESOURCE_LOCATION_VIDMEM);
CUDAEV_SAME_VALUE(cudaEglColorFormatYUV420Planar, CU_EGL_COLOR_FORMAT_YUV420_PLANAR);
CUDAEV_SAME_VALUE(cudaEglColorFormatARGB, CU_EGL_COLOR_FORMAT_ARGB);
CUDAEV_SAME_VALUE(cudaEglColorFormatYUVA_ER, CU_EGL_COLOR_FORMAT_YUVA_ER);
CUDAEV_SAME_VALUE(cudaEglColorFormatBayer20GBRG, CU_EGL_COLOR_FORMAT_BAYER20_GBRG);
CUDAEV_SAME_VALUE(cudaEglColorFormatY, CU_EGL_COLOR_FORMAT_Y);
CUDAEV_SAME_VALUE(cudaEglColorFormatYUVA, CU_EGL_COLOR_FORMAT_YUVA);
CUDAEV_SAME_VALUE(cudaEglColorFormatYVYU, CU_EGL_COLOR_FORMAT_YVYU);
CUDAEV_SAME_VALUE(cudaEglColorFormatUYVY2020, CU_EGL_COLOR_FORMAT_UYVY_2020);
#endif
