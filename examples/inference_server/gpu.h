/* gpu.h: the MLP on a GPU with plain cudart and cuBLAS calls, shared by the
 * service (which turns a batch's end into a cudaev future) and its blocking
 * twin (which synchronises the stream). No cudaev_* call in here: the twin
 * runs on NVIDIA's runtime too.
 *
 * A gpu_dev is one device's copy of the weights; a gpu_slot is what one
 * batch in flight needs: a stream, a cuBLAS handle bound to that stream
 * (one handle per slot, so the twin's threads never share one), pinned
 * staging buffers, device activations and two timing events.
 *
 * cuBLAS carries its own static copy of NVIDIA's runtime. It shares the
 * driver's objects with the process's libcudart.so.13 (ours or NVIDIA's):
 * the handle runs on a stream our runtime created, its workspace is memory
 * our runtime's cudaMalloc returned (cublasSetWorkspace), and the bias
 * kernel of ours runs between its GEMMs on the same stream. gpu_selfcheck
 * checks each of these at start.
 *
 * Thread: the functions use the calling thread's current device, which
 * they set (cudaSetDevice) themselves. A slot is used by one thread at a
 * time. */
#ifndef INFER_GPU_H
#define INFER_GPU_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>

#include "model.h"

struct gpu_dev {
  int device;
  char name[128];
  float *w[MODEL_MAX_LAYERS], *b[MODEL_MAX_LAYERS];
};

struct gpu_slot {
  int device;
  int cap; /* rows */
  cudaStream_t stream;
  cublasHandle_t blas;
  void *workspace;
  cudaEvent_t start, stop;
  float *h_in, *h_out;    /* pinned: cap x inputs, cap x outputs */
  float *d_in, *d_act[2]; /* device: cap x inputs, cap x widest layer */
};

/* Uploads the weights to `device` (synchronous copies: at start and after
 * a reset only). Returns the first error; on error what was made is freed. */
cudaError_t gpu_dev_open(struct gpu_dev *g, const struct model *m, int device);
/* Frees the weights. Errors are ignored (after a fault they are expected). */
void gpu_dev_close(struct gpu_dev *g);

/* Makes a slot of `cap` rows on g's device: a non-blocking stream, a cuBLAS
 * handle on it (pedantic math: fp32 throughout, never TF32), the buffers.
 * Returns the first error (cuBLAS failures as cudaErrorUnknown, with the
 * status printed to stderr); on error what was made is freed. */
cudaError_t gpu_slot_open(struct gpu_slot *s, const struct gpu_dev *g, const struct model *m,
                          int cap);
void gpu_slot_close(struct gpu_slot *s);

/* Enqueues one batch of n rows already in s->h_in: start event, copy in,
 * per layer a GEMM (cuBLAS) and the bias/activation kernel (ours), copy out
 * into s->h_out, stop event. With `fault`, a kernel writing an illegal
 * address goes in before the copy out (test only). Never waits. */
cudaError_t gpu_enqueue(struct gpu_slot *s, const struct gpu_dev *g, const struct model *m, int n,
                        int fault);

/* Device time of the last batch, in ms (its stop event has passed). */
float gpu_batch_ms(const struct gpu_slot *s);

/* The start-up proof that cuBLAS and this process's runtime share driver
 * objects (see above): the handle reports our stream, the workspace is our
 * runtime's device memory of this device, and a probe batch equals the CPU
 * reference (relative error <= 1e-5). Synchronous. Returns 0 and a one-line
 * summary in `line`, or -1 with the reason there. */
int gpu_selfcheck(struct gpu_slot *s, const struct gpu_dev *g, const struct model *m, char *line,
                  size_t len);

/* max |a - b| / max |b| over n values (0 when b is all zero and a == b). */
double gpu_rel_err(const float *a, const float *b, size_t n);

#endif
