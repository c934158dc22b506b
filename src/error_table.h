/* Every cudaError_t of CUDA 13.0 with the name and text NVIDIA's runtime
 * returns for it (cudaGetErrorName / cudaGetErrorString). The differential
 * test tests/unit/diff.c compares each entry, and the codes around them,
 * with NVIDIA's libcudart.so.13. */
#define CUDAEV_ERROR_TABLE(X)                                                                      \
  X(0, cudaSuccess, "no error")                                                                    \
  X(1, cudaErrorInvalidValue, "invalid argument")                                                  \
  X(2, cudaErrorMemoryAllocation, "out of memory")                                                 \
  X(3, cudaErrorInitializationError, "initialization error")                                       \
  X(4, cudaErrorCudartUnloading, "driver shutting down")                                           \
  X(5, cudaErrorProfilerDisabled, "profiler disabled while using external profiling tool")         \
  X(6, cudaErrorProfilerNotInitialized, "profiler not initialized: call cudaProfilerInitialize()") \
  X(7, cudaErrorProfilerAlreadyStarted, "profiler already started")                                \
  X(8, cudaErrorProfilerAlreadyStopped, "profiler already stopped")                                \
  X(9, cudaErrorInvalidConfiguration, "invalid configuration argument")                            \
  X(12, cudaErrorInvalidPitchValue, "invalid pitch argument")                                      \
  X(13, cudaErrorInvalidSymbol, "invalid device symbol")                                           \
  X(16, cudaErrorInvalidHostPointer, "invalid host pointer")                                       \
  X(17, cudaErrorInvalidDevicePointer, "invalid device pointer")                                   \
  X(18, cudaErrorInvalidTexture, "invalid texture reference")                                      \
  X(19, cudaErrorInvalidTextureBinding, "texture is not bound to a pointer")                       \
  X(20, cudaErrorInvalidChannelDescriptor, "invalid channel descriptor")                           \
  X(21, cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                      \
  X(22, cudaErrorAddressOfConstant, "invalid address of constant")                                 \
  X(23, cudaErrorTextureFetchFailed, "fetch from texture failed")                                  \
  X(24, cudaErrorTextureNotBound, "cannot fetch from a texture that is not bound")                 \
  X(25, cudaErrorSynchronizationError, "incorrect use of __syncthreads()")                         \
  X(26, cudaErrorInvalidFilterSetting, "linear filtering not supported for non-float type")        \
  X(27, cudaErrorInvalidNormSetting, "read as normalized float not supported for data type")       \
  X(28, cudaErrorMixedDeviceExecution,                                                             \
    "device emulation mode and device execution mode cannot be mixed")                             \
  X(31, cudaErrorNotYetImplemented, "feature not yet implemented")                                 \
  X(32, cudaErrorMemoryValueTooLarge, "memory size or pointer value too large to fit in 32 bit")   \
  X(34, cudaErrorStubLibrary, "CUDA driver is a stub library")                                     \
  X(35, cudaErrorInsufficientDriver,                                                               \
    "CUDA driver version is insufficient for CUDA runtime version")                                \
  X(36, cudaErrorCallRequiresNewerDriver,                                                          \
    "API call is not supported in the installed CUDA driver")                                      \
  X(37, cudaErrorInvalidSurface, "invalid surface reference")                                      \
  X(43, cudaErrorDuplicateVariableName, "duplicate global variable looked up by string name")      \
  X(44, cudaErrorDuplicateTextureName, "duplicate texture looked up by string name")               \
  X(45, cudaErrorDuplicateSurfaceName, "duplicate surface looked up by string name")               \
  X(46, cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable")          \
  X(49, cudaErrorIncompatibleDriverContext, "incompatible driver context")                         \
  X(52, cudaErrorMissingConfiguration, "__global__ function call is not configured")               \
  X(53, cudaErrorPriorLaunchFailure, "unspecified launch failure in prior launch")                 \
  X(65, cudaErrorLaunchMaxDepthExceeded, "launch would exceed maximum depth of nested launches")   \
  X(66, cudaErrorLaunchFileScopedTex,                                                              \
    "launch failed because kernel uses unsupported, file-scoped textures (texture objects are "    \
    "supported)")                                                                                  \
  X(67, cudaErrorLaunchFileScopedSurf,                                                             \
    "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are "    \
    "supported)")                                                                                  \
  X(68, cudaErrorSyncDepthExceeded,                                                                \
    "cudaDeviceSynchronize failed because caller's grid depth exceeds "                            \
    "cudaLimitDevRuntimeSyncDepth")                                                                \
  X(69, cudaErrorLaunchPendingCountExceeded,                                                       \
    "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount")             \
  X(98, cudaErrorInvalidDeviceFunction, "invalid device function")                                 \
  X(100, cudaErrorNoDevice, "no CUDA-capable device is detected")                                  \
  X(101, cudaErrorInvalidDevice, "invalid device ordinal")                                         \
  X(102, cudaErrorDeviceNotLicensed, "device doesn't have valid Grid license")                     \
  X(103, cudaErrorSoftwareValidityNotEstablished, "integrity checks failed")                       \
  X(127, cudaErrorStartupFailure, "startup failure in cuda runtime")                               \
  X(200, cudaErrorInvalidKernelImage, "device kernel image is invalid")                            \
  X(201, cudaErrorDeviceUninitialized, "invalid device context")                                   \
  X(205, cudaErrorMapBufferObjectFailed, "mapping of buffer object failed")                        \
  X(206, cudaErrorUnmapBufferObjectFailed, "unmapping of buffer object failed")                    \
  X(207, cudaErrorArrayIsMapped, "array is mapped")                                                \
  X(208, cudaErrorAlreadyMapped, "resource already mapped")                                        \
  X(209, cudaErrorNoKernelImageForDevice,                                                          \
    "no kernel image is available for execution on the device")                                    \
  X(210, cudaErrorAlreadyAcquired, "resource already acquired")                                    \
  X(211, cudaErrorNotMapped, "resource not mapped")                                                \
  X(212, cudaErrorNotMappedAsArray, "resource not mapped as array")                                \
  X(213, cudaErrorNotMappedAsPointer, "resource not mapped as pointer")                            \
  X(214, cudaErrorECCUncorrectable, "uncorrectable ECC error encountered")                         \
  X(215, cudaErrorUnsupportedLimit, "limit is not supported on this architecture")                 \
  X(216, cudaErrorDeviceAlreadyInUse,                                                              \
    "exclusive-thread device already in use by a different thread")                                \
  X(217, cudaErrorPeerAccessUnsupported, "peer access is not supported between these two devices") \
  X(218, cudaErrorInvalidPtx, "a PTX JIT compilation failed")                                      \
  X(219, cudaErrorInvalidGraphicsContext, "invalid OpenGL or DirectX context")                     \
  X(220, cudaErrorNvlinkUncorrectable, "uncorrectable NVLink error detected during the execution") \
  X(221, cudaErrorJitCompilerNotFound, "PTX JIT compiler library not found")                       \
  X(222, cudaErrorUnsupportedPtxVersion,                                                           \
    "the provided PTX was compiled with an unsupported toolchain.")                                \
  X(223, cudaErrorJitCompilationDisabled, "PTX JIT compilation was disabled")                      \
  X(224, cudaErrorUnsupportedExecAffinity, "the provided execution affinity is not supported")     \
  X(225, cudaErrorUnsupportedDevSideSync,                                                          \
    "the provided PTX contains unsupported call to cudaDeviceSynchronize")                         \
  X(226, cudaErrorContained, "Invalid access of peer GPU memory over nvlink or a hardware error")  \
  X(300, cudaErrorInvalidSource, "device kernel image is invalid")                                 \
  X(301, cudaErrorFileNotFound, "file not found")                                                  \
  X(302, cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found")                    \
  X(303, cudaErrorSharedObjectInitFailed, "shared object initialization failed")                   \
  X(304, cudaErrorOperatingSystem, "OS call failed or operation not supported on this OS")         \
  X(400, cudaErrorInvalidResourceHandle, "invalid resource handle")                                \
  X(401, cudaErrorIllegalState, "the operation cannot be performed in the present state")          \
  X(402, cudaErrorLossyQuery, "attempted introspection would be semantically lossy")               \
  X(500, cudaErrorSymbolNotFound, "named symbol not found")                                        \
  X(600, cudaErrorNotReady, "device not ready")                                                    \
  X(700, cudaErrorIllegalAddress, "an illegal memory access was encountered")                      \
  X(701, cudaErrorLaunchOutOfResources, "too many resources requested for launch")                 \
  X(702, cudaErrorLaunchTimeout, "the launch timed out and was terminated")                        \
  X(703, cudaErrorLaunchIncompatibleTexturing, "launch uses incompatible texturing mode")          \
  X(704, cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled")                      \
  X(705, cudaErrorPeerAccessNotEnabled, "peer access has not been enabled")                        \
  X(708, cudaErrorSetOnActiveProcess, "cannot set while device is active in this process")         \
  X(709, cudaErrorContextIsDestroyed, "context is destroyed")                                      \
  X(710, cudaErrorAssert, "device-side assert triggered")                                          \
  X(711, cudaErrorTooManyPeers, "peer mapping resources exhausted")                                \
  X(712, cudaErrorHostMemoryAlreadyRegistered,                                                     \
    "part or all of the requested memory range is already mapped")                                 \
  X(713, cudaErrorHostMemoryNotRegistered,                                                         \
    "pointer does not correspond to a registered memory region")                                   \
  X(714, cudaErrorHardwareStackError, "hardware stack error")                                      \
  X(715, cudaErrorIllegalInstruction, "an illegal instruction was encountered")                    \
  X(716, cudaErrorMisalignedAddress, "misaligned address")                                         \
  X(717, cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space")   \
  X(718, cudaErrorInvalidPc, "invalid program counter")                                            \
  X(719, cudaErrorLaunchFailure, "unspecified launch failure")                                     \
  X(720, cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch")              \
  X(721, cudaErrorTensorMemoryLeak, "tensor memory not completely freed")                          \
  X(800, cudaErrorNotPermitted, "operation not permitted")                                         \
  X(801, cudaErrorNotSupported, "operation not supported")                                         \
  X(802, cudaErrorSystemNotReady, "system not yet initialized")                                    \
  X(803, cudaErrorSystemDriverMismatch,                                                            \
    "system has unsupported display driver / cuda driver combination")                             \
  X(804, cudaErrorCompatNotSupportedOnDevice,                                                      \
    "forward compatibility was attempted on non supported HW")                                     \
  X(805, cudaErrorMpsConnectionFailed,                                                             \
    "MPS client failed to connect to the MPS control daemon or the MPS server")                    \
  X(806, cudaErrorMpsRpcFailure,                                                                   \
    "the remote procedural call between the MPS server and the MPS client failed")                 \
  X(807, cudaErrorMpsServerNotReady, "MPS server is not ready to accept new MPS client requests")  \
  X(808, cudaErrorMpsMaxClientsReached,                                                            \
    "the hardware resources required to create MPS client have been exhausted")                    \
  X(809, cudaErrorMpsMaxConnectionsReached,                                                        \
    "the hardware resources required to support device connections have been exhausted")           \
  X(810, cudaErrorMpsClientTerminated, "the MPS client has been terminated by the server")         \
  X(811, cudaErrorCdpNotSupported,                                                                 \
    "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not "        \
    "support it")                                                                                  \
  X(812, cudaErrorCdpVersionMismatch,                                                              \
    "unsupported interaction between different versions of CUDA Dynamic Parallelism")              \
  X(900, cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")    \
  X(901, cudaErrorStreamCaptureInvalidated,                                                        \
    "operation failed due to a previous error during capture")                                     \
  X(902, cudaErrorStreamCaptureMerge,                                                              \
    "operation would result in a merge of separate capture sequences")                             \
  X(903, cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began")  \
  X(904, cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work")                     \
  X(905, cudaErrorStreamCaptureIsolation,                                                          \
    "dependency created on uncaptured work in another stream")                                     \
  X(906, cudaErrorStreamCaptureImplicit,                                                           \
    "operation would make the legacy stream depend on a capturing blocking stream")                \
  X(907, cudaErrorCapturedEvent,                                                                   \
    "operation not permitted on an event last recorded in a capturing stream")                     \
  X(908, cudaErrorStreamCaptureWrongThread,                                                        \
    "attempt to terminate a thread-local capture sequence from another thread")                    \
  X(909, cudaErrorTimeout, "wait operation timed out")                                             \
  X(910, cudaErrorGraphExecUpdateFailure,                                                          \
    "the graph update was not performed because it included changes which violated constraints "   \
    "specific to instantiated graph update")                                                       \
  X(911, cudaErrorExternalDevice, "an async error has occured in external entity outside of CUDA") \
  X(912, cudaErrorInvalidClusterSize,                                                              \
    "a kernel launch error has occurred due to cluster misconfiguration")                          \
  X(913, cudaErrorFunctionNotLoaded,                                                               \
    "the function handle is not loaded when calling an API that requires a loaded function")       \
  X(914, cudaErrorInvalidResourceType,                                                             \
    "one or more resources passed in are not valid resource types for the operation")              \
  X(915, cudaErrorInvalidResourceConfiguration,                                                    \
    "one or more resources are insufficient or non-applicable for the operation")                  \
  X(999, cudaErrorUnknown, "unknown error")                                                        \
  X(10000, cudaErrorApiFailureBase, "api failure base")

/* Our outcomes (CUDAEV_ERROR_* of include/cudaev.h), kept apart from
 * NVIDIA's table above, which diff.c compares with NVIDIA's library: ours
 * names them where NVIDIA's says "unrecognized error code". Our
 * cudaGetErrorName / cudaGetErrorString answer them from here, and so do
 * cudaev_error_name / cudaev_error_string (except NO_LIBEV's text, which
 * cudaev_error_string gives as the loader's reason). */
#define CUDAEV_OUTCOME_TABLE(X)                                                                    \
  X(CUDAEV_ERROR_BASE + 1, CUDAEV_ERROR_CANCELLED, "the future was cancelled before it completed") \
  X(CUDAEV_ERROR_BASE + 2, CUDAEV_ERROR_LOOP_DESTROYED,                                            \
    "the loop was destroyed while the future was pending")                                         \
  X(CUDAEV_ERROR_BASE + 3, CUDAEV_ERROR_NO_LIBEV, "libev could not be bound for an ev-mode loop")  \
  X(CUDAEV_ERROR_BASE + 4, CUDAEV_ERROR_TIMEOUT, "the deadline passed before the future completed")
