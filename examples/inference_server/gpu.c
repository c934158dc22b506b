/* The MLP on a GPU through cudart and cuBLAS (gpu.h). */
#include "gpu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* cuBLAS's workspace, given from our cudaMalloc. Its guide asks for 32 MiB
 * on Hopper for large GEMMs; these are small. */
#define WORKSPACE_BYTES (4u << 20)

static cudaError_t blas_err(cublasStatus_t st, const char *what) {
  if (st == CUBLAS_STATUS_SUCCESS) return cudaSuccess;
  fprintf(stderr, "cuBLAS: %s: %s\n", what, cublasGetStatusName(st));
  return st == CUBLAS_STATUS_ALLOC_FAILED ? cudaErrorMemoryAllocation : cudaErrorUnknown;
}

cudaError_t gpu_dev_open(struct gpu_dev *g, const struct model *m, int device) {
  memset(g, 0, sizeof *g);
  g->device = device;
  struct cudaDeviceProp p;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&p, device);
  if (e == cudaSuccess) snprintf(g->name, sizeof g->name, "%.127s", p.name);
  for (int l = 0; e == cudaSuccess && l < m->nlayers; l++) {
    size_t wb = sizeof(float) * (size_t)m->dims[l] * (size_t)m->dims[l + 1];
    size_t bb = sizeof(float) * (size_t)m->dims[l + 1];
    e = cudaMalloc((void **)&g->w[l], wb);
    if (e == cudaSuccess) e = cudaMalloc((void **)&g->b[l], bb);
    if (e == cudaSuccess) e = cudaMemcpy(g->w[l], m->w[l], wb, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(g->b[l], m->b[l], bb, cudaMemcpyHostToDevice);
  }
  if (e != cudaSuccess) gpu_dev_close(g);
  return e;
}

void gpu_dev_close(struct gpu_dev *g) {
  cudaSetDevice(g->device);
  for (int l = 0; l < MODEL_MAX_LAYERS; l++) {
    cudaFree(g->w[l]);
    cudaFree(g->b[l]);
    g->w[l] = g->b[l] = NULL;
  }
  cudaGetLastError(); /* after a fault every call fails: none of it is news */
}

cudaError_t gpu_slot_open(struct gpu_slot *s, const struct gpu_dev *g, const struct model *m,
                          int cap) {
  memset(s, 0, sizeof *s);
  s->device = g->device;
  s->cap = cap;
  size_t in = (size_t)cap * (size_t)m->dims[0], out = (size_t)cap * (size_t)m->dims[m->nlayers];
  size_t act = (size_t)cap * (size_t)model_max_width(m);
  cudaError_t e = cudaSetDevice(g->device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreate(&s->start);
  if (e == cudaSuccess) e = cudaEventCreate(&s->stop);
  if (e == cudaSuccess) e = cudaMallocHost((void **)&s->h_in, in * sizeof(float));
  if (e == cudaSuccess) e = cudaMallocHost((void **)&s->h_out, out * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->d_in, in * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->d_act[0], act * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->d_act[1], act * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc(&s->workspace, WORKSPACE_BYTES);
  if (e == cudaSuccess) e = blas_err(cublasCreate(&s->blas), "cublasCreate");
  /* cublasSetStream resets the workspace to cuBLAS's own pool, so the
   * stream goes first and our workspace after it. */
  if (e == cudaSuccess) e = blas_err(cublasSetStream(s->blas, s->stream), "cublasSetStream");
  if (e == cudaSuccess)
    e = blas_err(cublasSetWorkspace(s->blas, s->workspace, WORKSPACE_BYTES), "cublasSetWorkspace");
  /* fp32 as the reference computes it: no TF32, no reduced-precision
   * reductions, whatever NVIDIA_TF32_OVERRIDE or defaults say. */
  if (e == cudaSuccess)
    e = blas_err(cublasSetMathMode(s->blas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  if (e != cudaSuccess) gpu_slot_close(s);
  return e;
}

void gpu_slot_close(struct gpu_slot *s) {
  cudaSetDevice(s->device);
  if (s->blas) cublasDestroy(s->blas);
  if (s->stream) cudaStreamDestroy(s->stream);
  if (s->start) cudaEventDestroy(s->start);
  if (s->stop) cudaEventDestroy(s->stop);
  cudaFreeHost(s->h_in);
  cudaFreeHost(s->h_out);
  cudaFree(s->d_in);
  cudaFree(s->d_act[0]);
  cudaFree(s->d_act[1]);
  cudaFree(s->workspace);
  cudaGetLastError();
  memset(s, 0, sizeof *s);
}

cudaError_t gpu_enqueue(struct gpu_slot *s, const struct gpu_dev *g, const struct model *m, int n,
                        int fault) {
  static const float one = 1.0f, zero = 0.0f;
  const int nl = m->nlayers;
  cudaError_t e = cudaSetDevice(s->device);
  if (e == cudaSuccess) e = cudaEventRecord(s->start, s->stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(s->d_in, s->h_in, sizeof(float) * (size_t)n * (size_t)m->dims[0],
                        cudaMemcpyHostToDevice, s->stream);
  const float *x = s->d_in;
  float *y = NULL;
  for (int l = 0; e == cudaSuccess && l < nl; l++) {
    int k = m->dims[l], nn = m->dims[l + 1];
    y = s->d_act[l & 1];
    /* Row-major X[n][k] W[k][nn] = Y[n][nn] is, read column-major,
     * Y^T (nn x n) = W^T (nn x k) X^T (k x n): no transposes needed. */
    e = blas_err(cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, nn, n, k, &one, g->w[l], nn, x, k,
                             &zero, y, nn),
                 "cublasSgemm");
    if (e == cudaSuccess) e = infer_bias_act(y, g->b[l], n, nn, l < nl - 1, s->stream);
    x = y;
  }
  if (e == cudaSuccess && fault) e = infer_fault(s->stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(s->h_out, y, sizeof(float) * (size_t)n * (size_t)m->dims[nl],
                        cudaMemcpyDeviceToHost, s->stream);
  if (e == cudaSuccess) e = cudaEventRecord(s->stop, s->stream);
  return e;
}

float gpu_batch_ms(const struct gpu_slot *s) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, s->start, s->stop) != cudaSuccess) ms = 0;
  return ms;
}

double gpu_rel_err(const float *a, const float *b, size_t n) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    diff = d > diff || d != d ? d : diff;
    mag = fabs((double)b[i]) > mag ? fabs((double)b[i]) : mag;
  }
  return diff == 0 ? 0 : mag == 0 ? INFINITY : diff / mag;
}

int gpu_selfcheck(struct gpu_slot *s, const struct gpu_dev *g, const struct model *m, char *line,
                  size_t len) {
  cudaStream_t bound = NULL;
  struct cudaPointerAttributes pa;
  int ver = 0, n = s->cap < 8 ? s->cap : 8;
  cudaSetDevice(s->device);
  if (cublasGetStream(s->blas, &bound) != CUBLAS_STATUS_SUCCESS || bound != s->stream) {
    snprintf(line, len, "device %d: cuBLAS reports stream %p, not ours %p", g->device,
             (void *)bound, (void *)s->stream);
    return -1;
  }
  cudaError_t e = cudaPointerGetAttributes(&pa, s->workspace);
  if (e != cudaSuccess || pa.type != cudaMemoryTypeDevice || pa.device != g->device) {
    snprintf(line, len, "device %d: the workspace given to cuBLAS is not this device's memory (%s)",
             g->device, cudaGetErrorName(e));
    return -1;
  }
  cublasGetVersion(s->blas, &ver);
  /* A probe batch: deterministic inputs in [-1, 1]. */
  size_t nin = (size_t)n * (size_t)m->dims[0], nout = (size_t)n * (size_t)m->dims[m->nlayers];
  for (size_t i = 0; i < nin; i++) s->h_in[i] = (float)((int)(i * 37 % 201) - 100) / 100.0f;
  float *ref = malloc(nout * sizeof(float));
  double *scratch = malloc(2 * sizeof(double) * (size_t)model_max_width(m));
  if (!ref || !scratch) {
    free(ref);
    free(scratch);
    snprintf(line, len, "device %d: out of memory", g->device);
    return -1;
  }
  model_forward(m, s->h_in, ref, n, scratch);
  e = gpu_enqueue(s, g, m, n, 0);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
  double err = e == cudaSuccess ? gpu_rel_err(s->h_out, ref, nout) : INFINITY;
  free(ref);
  free(scratch);
  if (e != cudaSuccess || !(err <= 1e-5)) {
    snprintf(line, len, "device %d: probe batch: %s, relative error %.3g", g->device,
             cudaGetErrorName(e), err);
    return -1;
  }
  snprintf(line, len,
           "device %d (%s): cuBLAS %d bound to our stream %p, workspace from our cudaMalloc, "
           "probe batch of %d in %.3f ms, relative error %.2g",
           g->device, g->name, ver, (void *)s->stream, n, (double)gpu_batch_ms(s), err);
  return 0;
}
