/* Shared by the gpu-suite programs (C and CUDA C++).
 *
 * A gpu-suite program prints a transcript on stdout: every call it makes,
 * the cudaError_t it returned (by name), what is left in the last error,
 * and the outputs that must agree. tests/gpu/compare.sh runs the same
 * binary on NVIDIA's libcudart.so.13 and on ours and requires identical
 * transcripts and exit codes. Print nothing that may legitimately differ
 * between runs (pointers, timings, addresses).
 *
 * Including this header also reports, from a constructor, which
 * libcudart.so.13 the process mapped ("[cudart] /path" on stderr), so the
 * runner can prove the run used the library it meant.
 */
#ifndef CUDAEV_TESTS_GPU_COMMON_H
#define CUDAEV_TESTS_GPU_COMMON_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cudaev_test_report_cudart(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  if (f == NULL) return;
  while (fgets(line, sizeof line, f)) {
    char *p = strstr(line, "libcudart.so");
    if (p != NULL) {
      char *path = strchr(line, '/');
      if (path != NULL) {
        fprintf(stderr, "[cudart] %s", path);
        break;
      }
    }
  }
  fclose(f);
}

/* Line-buffered stdout: if a run crashes, its transcript ends where it
 * crashed. */
__attribute__((constructor)) static void cudaev_test_report_cudart_ctor(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  cudaev_test_report_cudart();
}

/* T(expr): run a cudart call, print its line of the transcript. */
#define T(expr)                                                                                  \
  do {                                                                                           \
    cudaError_t t_e_ = (expr);                                                                   \
    cudaError_t t_l_ = cudaPeekAtLastError();                                                    \
    printf("%-60.60s -> %s (last %s)\n", #expr, cudaGetErrorName(t_e_), cudaGetErrorName(t_l_)); \
  } while (0)

/* Same, and clears the last error after printing. */
#define TC(expr)                                                                                 \
  do {                                                                                           \
    cudaError_t t_e_ = (expr);                                                                   \
    cudaError_t t_l_ = cudaGetLastError();                                                       \
    printf("%-60.60s -> %s (last %s)\n", #expr, cudaGetErrorName(t_e_), cudaGetErrorName(t_l_)); \
  } while (0)

/* TV(var, expr) / TCV(var, expr): T and TC that also keep the code in var,
 * for calls whose success decides what the program does next. */
#define TV(var, expr)                                                                           \
  do {                                                                                          \
    (var) = (expr);                                                                             \
    cudaError_t t_l_ = cudaPeekAtLastError();                                                   \
    printf("%-60.60s -> %s (last %s)\n", #expr, cudaGetErrorName(var), cudaGetErrorName(t_l_)); \
  } while (0)
#define TCV(var, expr)                                                                          \
  do {                                                                                          \
    (var) = (expr);                                                                             \
    cudaError_t t_l_ = cudaGetLastError();                                                      \
    printf("%-60.60s -> %s (last %s)\n", #expr, cudaGetErrorName(var), cudaGetErrorName(t_l_)); \
  } while (0)

/* TN(expr): T inside a void function whose remaining steps need the call
 * to have succeeded: on failure it says so and returns. (It prints expr
 * itself: passed on to TV, the text would be printed macro-expanded.) */
#define TN(expr)                                                                                 \
  do {                                                                                           \
    cudaError_t t_n_ = (expr);                                                                   \
    cudaError_t t_l_ = cudaPeekAtLastError();                                                    \
    printf("%-60.60s -> %s (last %s)\n", #expr, cudaGetErrorName(t_n_), cudaGetErrorName(t_l_)); \
    if (t_n_ != cudaSuccess) {                                                                   \
      printf("(rest of group skipped)\n");                                                       \
      return;                                                                                    \
    }                                                                                            \
  } while (0)

/* TREFUSE(expr): for bad input that crashes NVIDIA's runtime (a NULL
 * output pointer, a destroyed handle): runs the call in a forked child and
 * prints "refused" when the child crashed OR the call returned an error,
 * so NVIDIA's crash and our error code compare equal, while a success on
 * either side still shows. Our runtime must never crash: compare.sh also
 * runs ours alone with CUDAEV_TEST_NO_CRASH=1, which makes TREFUSE report a
 * crash as "CRASHED" instead. */
#include <sys/wait.h>
#include <unistd.h>
#define TREFUSE(expr)                                                                   \
  do {                                                                                  \
    fflush(stdout);                                                                     \
    pid_t r_pid_ = fork();                                                              \
    if (r_pid_ == 0) {                                                                  \
      cudaError_t r_e_ = (expr);                                                        \
      if (r_e_ == cudaSuccess)                                                          \
        printf("%-60.60s -> cudaSuccess (child)\n", #expr);                             \
      else                                                                              \
        printf("%-60.60s -> refused\n", #expr);                                         \
      fflush(stdout);                                                                   \
      _exit(0);                                                                         \
    }                                                                                   \
    int r_st_ = 0;                                                                      \
    waitpid(r_pid_, &r_st_, 0);                                                         \
    if (!WIFEXITED(r_st_)) {                                                            \
      const char *r_nc_ = getenv("CUDAEV_TEST_NO_CRASH");                               \
      printf("%-60.60s -> %s\n", #expr, r_nc_ &&*r_nc_ == '1' ? "CRASHED" : "refused"); \
    }                                                                                   \
  } while (0)

/* CHECK(expr): must succeed, or the program stops with exit code 2. */
#define CHECK(expr)                                                                            \
  do {                                                                                         \
    cudaError_t c_e_ = (expr);                                                                 \
    if (c_e_ != cudaSuccess) {                                                                 \
      printf("FAILED %s -> %s at %s:%d\n", #expr, cudaGetErrorName(c_e_), __FILE__, __LINE__); \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

#endif
