/* Second translation unit of gpu-exec_rdc: a __device__ function and a
 * __device__ variable the first one links against, and a kernel it
 * launches. */
__device__ int rdc_total;

__device__ int rdc_mix(int a, int b) { return a * 3 + b * b; }

__global__ void rdc_tu2_kernel(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = rdc_mix(i, 2) - out[i];
}
