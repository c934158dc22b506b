/* Device Management's private contract, shared by the files of the
 * section:
 *
 *   device.c        device selection, flags, reset, synchronisation,
 *                   limits, cache and shared memory configuration, PCI ids,
 *                   attributes, P2P attributes, a device's memory pools,
 *                   asynchronous notifications, graph memory
 *   device_props.c  cudaChooseDevice, cudaGetDeviceProperties
 *   device_ipc.c    IPC event and memory handles
 *
 * None calls another; only device.c keeps state (cudaSetValidDevices's
 * list).
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_DEVICE_H
#define CUDAEV_DEVICE_H

#include "internal.h"

/* Shorthand for the functions that take a device ordinal: initialise, check
 * the ordinal, and give the driver's CUdevice. */
#define CUDAEV_DEVICE_OR_RETURN(ordinal, out)                                       \
  do {                                                                              \
    CUDAEV_INIT_OR_RETURN();                                                        \
    if (!cudaev__device_valid(ordinal)) return cudaev__ret(cudaErrorInvalidDevice); \
    (out) = cudaev__rt.devices[(ordinal)].dev;                                      \
  } while (0)

/* The same for the calls where NVIDIA's runtime answers a bad ordinal with
 * cudaErrorInvalidValue (cudaDeviceGetMemPool, cudaDeviceSetMemPool;
 * measured on an H100). */
#define CUDAEV_DEVICE_OR_VALUE(ordinal, out)                                       \
  do {                                                                             \
    CUDAEV_INIT_OR_RETURN();                                                       \
    if (!cudaev__device_valid(ordinal)) return cudaev__ret(cudaErrorInvalidValue); \
    (out) = cudaev__rt.devices[(ordinal)].dev;                                     \
  } while (0)

#endif
