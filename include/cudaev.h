/* cudaev: the CUDA Runtime API on the driver API, with an event loop.
 *
 * This header is our own asynchronous API (prefix cudaev_, symbol version
 * node CUDAEV_0). The cudart API itself comes from the CUDA toolkit's
 * cuda_runtime_api.h; libcudart.so.13 built by this project implements it.
 *
 * Thread rule: functions are not thread-safe unless their comment says
 * "Thread: any".
 */
#ifndef CUDAEV_H
#define CUDAEV_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDAEV_VERSION_MAJOR 0
#define CUDAEV_VERSION_MINOR 1
#define CUDAEV_VERSION_PATCH 0

#ifdef __cplusplus
}
#endif

#endif
