// cudaStreamAddCallback after a fault is called with the error status;
// cudaLaunchHostFunc's function is not called at all (runtime reference).
#include "common.h"

#include <atomic>
#include <time.h>

__global__ void fault(int *p) { *p = 1; }

static std::atomic<int> cb_calls{0}, fn_calls{0};
static cudaError_t cb_status = cudaSuccess;
static void CUDART_CB callback(cudaStream_t, cudaError_t status, void *) {
  cb_status = status;
  cb_calls++;
}
static void CUDART_CB host_fn(void *) { fn_calls++; }

int main() {
  cudaStream_t s;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreate(&s));
  T(cudaStreamAddCallback(s, callback, NULL, 0));
  T(cudaLaunchHostFunc(s, host_fn, NULL));
  T(cudaStreamSynchronize(s));
  printf("before fault: callbacks %d (status %s) host funcs %d\n", cb_calls.load(),
         cudaGetErrorName(cb_status), fn_calls.load());

  fault<<<1, 1, 0, s>>>((int *)8);
  T(cudaStreamAddCallback(s, callback, NULL, 0));
  T(cudaLaunchHostFunc(s, host_fn, NULL));
  T(cudaStreamSynchronize(s));
  struct timespec t = {0, 10000000};
  for (int i = 0; i < 200 && cb_calls.load() < 2; i++) nanosleep(&t, NULL);
  nanosleep(&t, NULL);
  printf("after fault: callbacks %d (status %s) host funcs %d\n", cb_calls.load(),
         cudaGetErrorName(cb_status), fn_calls.load());
  T(cudaStreamQuery(s));
  TC(cudaGetLastError());
  return 0;
}
