/* Built by a project that has cudaev as a subproject (see meson.build here):
 * a promise on a foreign loop, completed and processed. Prints the outcome
 * and exits 0 on cudaSuccess. */
#include <cudaev.h>
#include <stdio.h>

int main(void) {
  cudaev_loop_t *loop;
  cudaev_future_t *f;
  if (cudaev_loop_new_foreign(&loop) != cudaSuccess) return 1;
  if (cudaev_promise_new(loop, &f) != cudaSuccess) return 1;
  cudaev_promise_set(f, cudaSuccess);
  cudaev_loop_process(loop);
  cudaError_t outcome = cudaev_future_result(f);
  printf("consumer: promise %s\n", cudaev_error_name(outcome));
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);
  return outcome != cudaSuccess;
}
