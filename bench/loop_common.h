/* Shared by the loop benchmarks (bench/loop_*.c) and the loop GPU tests
 * (tests/gpu/loop_*.c): C programs linked with our libcudart.so.13 only.
 * Driver entry points come through cudaGetDriverEntryPointByVersion (no
 * -lcuda), kernels from a PTX string (no nvcc). */
#ifndef CUDAEV_BENCH_LOOP_COMMON_H
#define CUDAEV_BENCH_LOOP_COMMON_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "cudaev.h"

/* One X() per line: clang-format 14 never settles on a packed list. */
#define LC_DRIVER(X)           \
  X(cuModuleLoadData)          \
  X(cuModuleGetFunction)       \
  X(cuStreamCreate)            \
  X(cuStreamDestroy)           \
  X(cuStreamSynchronize)       \
  X(cuStreamQuery)             \
  X(cuMemAlloc)                \
  X(cuMemFree)                 \
  X(cuMemcpyDtoH)              \
  X(cuMemcpyHtoD)              \
  X(cuMemsetD32)               \
  X(cuMemHostAlloc)            \
  X(cuMemFreeHost)             \
  X(cuMemHostGetDevicePointer) \
  X(cuStreamWaitValue32)       \
  X(cuStreamWriteValue32)      \
  X(cuEventCreate)             \
  X(cuEventRecord)             \
  X(cuEventQuery)              \
  X(cuEventDestroy)            \
  X(cuLaunchKernel)            \
  X(cuLaunchHostFunc)          \
  X(cuCtxGetCurrent)           \
  X(cuCtxSetCurrent)           \
  X(cuMemFreeAsync)

#define LC_DECL(n) static __typeof__(&n) d_##n;
LC_DRIVER(LC_DECL)
#undef LC_DECL

/* Tiny kernels: empty(), spin(ns) (busy for ns on the GPU clock),
 * gate(flag, want, limit_ns, gave_up) (see below), fault(p) (stores to p:
 * pass a bad address for an illegal-address fault). */
static const char lc_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry empty() { ret; }\n"
    ".visible .entry spin(.param .u64 ns) {\n"
    "  .reg .u64 %t0, %t1, %d, %n; .reg .pred %p;\n"
    "  ld.param.u64 %n, [ns];\n"
    "  mov.u64 %t0, %globaltimer;\n"
    "LOOP:\n"
    "  mov.u64 %t1, %globaltimer;\n"
    "  sub.u64 %d, %t1, %t0;\n"
    "  setp.lt.u64 %p, %d, %n;\n"
    "  @%p bra LOOP;\n"
    "  ret;\n}\n"
    /* gate(flag, want, limit_ns, gave_up): a one-thread kernel that holds
     * its stream (not the host, not a hardware queue's semaphore) until the
     * host sets *flag >= want in mapped pinned memory, or limit_ns passed
     * on the GPU clock; then it stores 1 to *gave_up. It always ends on its
     * own, so no host thread blocked in a full driver queue can deadlock
     * with it. */
    ".visible .entry gate(.param .u64 flag, .param .u32 want, .param .u64 limit,\n"
    "                     .param .u64 gave_up) {\n"
    "  .reg .u64 %f, %o, %t0, %t1, %d, %n; .reg .u32 %v, %w; .reg .pred %p;\n"
    "  ld.param.u64 %f, [flag];\n"
    "  cvta.to.global.u64 %f, %f;\n"
    "  ld.param.u32 %w, [want];\n"
    "  ld.param.u64 %n, [limit];\n"
    "  ld.param.u64 %o, [gave_up];\n"
    "  cvta.to.global.u64 %o, %o;\n"
    "  mov.u64 %t0, %globaltimer;\n"
    "WAIT:\n"
    "  ld.volatile.global.u32 %v, [%f];\n"
    "  setp.ge.u32 %p, %v, %w;\n"
    "  @%p bra OPEN;\n"
    "  mov.u64 %t1, %globaltimer;\n"
    "  sub.u64 %d, %t1, %t0;\n"
    "  setp.lt.u64 %p, %d, %n;\n"
    "  @%p bra WAIT;\n"
    "  mov.u32 %v, 1;\n"
    "  st.volatile.global.u32 [%o], %v;\n"
    "OPEN:\n"
    "  ret;\n}\n"
    /* mark(p, v) / mark_rel(p, v): one thread stores v to *p (mapped host
     * memory) after a system-scope fence, or with a system-scope release */
    ".visible .entry mark(.param .u64 p, .param .u32 v) {\n"
    "  .reg .u64 %a; .reg .u32 %v;\n"
    "  ld.param.u64 %a, [p];\n"
    "  cvta.to.global.u64 %a, %a;\n"
    "  ld.param.u32 %v, [v];\n"
    "  fence.sc.sys;\n"
    "  st.relaxed.sys.global.u32 [%a], %v;\n"
    "  ret;\n}\n"
    ".visible .entry mark_rel(.param .u64 p, .param .u32 v) {\n"
    "  .reg .u64 %a; .reg .u32 %v;\n"
    "  ld.param.u64 %a, [p];\n"
    "  cvta.to.global.u64 %a, %a;\n"
    "  ld.param.u32 %v, [v];\n"
    "  st.release.sys.global.u32 [%a], %v;\n"
    "  ret;\n}\n"
    ".visible .entry fault(.param .u64 p) {\n"
    "  .reg .u64 %a; .reg .u32 %v;\n"
    "  ld.param.u64 %a, [p];\n"
    "  mov.u32 %v, 1;\n"
    "  st.global.u32 [%a], %v;\n"
    "  ret;\n}\n";

static CUfunction lc_empty, lc_spin, lc_fault, lc_gate, lc_mark, lc_mark_rel;

#define LC_CU(expr)                                                                         \
  do {                                                                                      \
    CUresult lc_r_ = (expr);                                                                \
    if (lc_r_ != CUDA_SUCCESS) {                                                            \
      fprintf(stderr, "%s:%d: %s -> CUresult %d\n", __FILE__, __LINE__, #expr, (int)lc_r_); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

#define LC_RT(expr)                                                                              \
  do {                                                                                           \
    cudaError_t lc_e_ = (expr);                                                                  \
    if (lc_e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, cudaev_error_name(lc_e_)); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

/* Resolves the driver entry points and loads the kernels. Needs a current
 * context: create a cudaev loop on this thread first (it makes the
 * device's primary context current). */
static void lc_init(void) {
  enum cudaDriverEntryPointQueryResult q;
#define LC_LOAD(n)                                                                           \
  if (cudaGetDriverEntryPointByVersion(#n, (void **)&d_##n, CUDA_VERSION, cudaEnableDefault, \
                                       &q) != cudaSuccess ||                                 \
      q != cudaDriverEntryPointSuccess) {                                                    \
    fprintf(stderr, "no driver entry point %s\n", #n);                                       \
    exit(1);                                                                                 \
  }
  LC_DRIVER(LC_LOAD)
#undef LC_LOAD
  CUmodule m;
  LC_CU(d_cuModuleLoadData(&m, lc_ptx));
  LC_CU(d_cuModuleGetFunction(&lc_empty, m, "empty"));
  LC_CU(d_cuModuleGetFunction(&lc_spin, m, "spin"));
  LC_CU(d_cuModuleGetFunction(&lc_fault, m, "fault"));
  LC_CU(d_cuModuleGetFunction(&lc_gate, m, "gate"));
  LC_CU(d_cuModuleGetFunction(&lc_mark, m, "mark"));
  LC_CU(d_cuModuleGetFunction(&lc_mark_rel, m, "mark_rel"));
}

static inline dim3 lc_dim(unsigned x) {
  dim3 d = {x, 1, 1};
  return d;
}

/* Launches spin(ns) on s (1 thread). */
static inline void lc_spin_on(CUstream s, unsigned long long ns) {
  void *args[] = {&ns};
  LC_CU(d_cuLaunchKernel(lc_spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

#endif
