/* kernels.h: the two kernels of ours that the servers launch (kernels.cu,
 * built by nvcc; registered and launched through whichever libcudart.so.13
 * the process loaded). */
#ifndef INFER_KERNELS_H
#define INFER_KERNELS_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[r][c] = act(y[r][c] + bias[c]) for rows x cols row-major, act = ReLU
 * when relu, else identity. Enqueued on `stream`; returns the launch's
 * error. */
cudaError_t infer_bias_act(float *y, const float *bias, int rows, int cols, int relu,
                           cudaStream_t stream);

/* Test only: a kernel that writes to an address no allocation covers. The
 * context then fails with cudaErrorIllegalAddress, a sticky error. */
cudaError_t infer_fault(cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
