// The async API beside NVIDIA's runtime. Built twice with nvcc, against
// NVIDIA's runtime linked shared (-cudart shared) and static (-cudart
// static, as cuBLAS, CuPy and cuda-python carry it), and linked with the
// standalone libcudaev.so.1: NVIDIA's runtime serves every cuda* call (its
// streams, events, kernels, contexts) and libcudaev the futures. The
// process proves which library served which (dladdr, /proc/self/maps).
//
// Cases: a stream, an event, the legacy and the per-thread default streams,
// a device-to-host copy into pageable memory, a loop-thread host function,
// a context the application made itself, every device, a launch of
// NVIDIA's cudaGetKernel handle; and the one thing that cannot work beside
// another runtime, a launch by host stub (the stub is registered with
// NVIDIA's runtime, not ours), which must be refused with
// cudaErrorInvalidResourceHandle before anything runs.
//
// Prints "beside (<build>): N passed, N failed"; exit 77 without a GPU.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cudaev.h"

__global__ void spin_add(int *p, long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  atomicAdd(p, 1);
}

static int passed, failed;
static void check(bool ok, const char *what, const std::string &detail = "") {
  printf("%s - %s%s%s\n", ok ? "ok" : "not ok", what, detail.empty() ? "" : ": ", detail.c_str());
  if (ok)
    passed++;
  else
    failed++;
}
static std::string name(cudaError_t e) { return cudaev_error_name(e); }

// The file that holds the code at `fn`, resolved.
static std::string where(const void *fn) {
  Dl_info info;
  if (dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "?";
  char *real = realpath(info.dli_fname, nullptr);
  std::string s = real != nullptr ? real : info.dli_fname;
  free(real);
  return s;
}
static std::string base(const std::string &p) {
  size_t i = p.rfind('/');
  return i == std::string::npos ? p : p.substr(i + 1);
}

static std::string mapped(const char *needle) {
  FILE *f = fopen("/proc/self/maps", "r");
  std::string out;
  char line[4096];
  while (f != nullptr && fgets(line, sizeof line, f) != nullptr) {
    char *path = strchr(line, '/');
    if (path == nullptr || strstr(path, needle) == nullptr) continue;
    path[strcspn(path, "\n")] = 0;
    if (out.find(path) == std::string::npos) out += std::string(out.empty() ? "" : ",") + path;
  }
  if (f != nullptr) fclose(f);
  return out.empty() ? "none" : out;
}

static const long long SPIN = 20 * 1000 * 1000;  // ~10 ms at 2 GHz
static const int64_t WAIT = 5LL * 1000 * 1000 * 1000;

// A kernel on `s`, then a future for the stream: not ready while the
// kernel spins, complete with success after, and the kernel's write seen.
static void stream_case(cudaev_loop_t *loop, cudaStream_t s, int *counter, const char *what) {
  cudaMemset(counter, 0, sizeof(int));
  cudaDeviceSynchronize();
  spin_add<<<1, 1, 0, s>>>(counter, SPIN);
  cudaev_future_t *f = nullptr;
  cudaError_t e = cudaev_future_new_stream(loop, s, &f);
  if (e != cudaSuccess) {
    check(false, what, "cudaev_future_new_stream " + name(e));
    return;
  }
  int early = cudaev_future_ready(f);
  cudaError_t w = cudaev_future_wait(f, WAIT);
  int value = -1;
  cudaMemcpy(&value, counter, sizeof value, cudaMemcpyDeviceToHost);
  check(early == 0 && w == cudaSuccess && cudaev_future_result(f) == cudaSuccess && value == 1,
        what,
        "ready at once " + std::to_string(early) + ", wait " + name(w) + ", result " +
            name(cudaev_future_result(f)) + ", counter " + std::to_string(value));
  cudaev_future_release(f);
}

static pthread_t host_fn_thread;
static int host_fn_calls;
static cudaError_t host_fn(void *user) {
  host_fn_thread = pthread_self();
  host_fn_calls++;
  (void)user;
  return cudaSuccess;
}

int main(int argc, char **argv) {
  const char *build = argc > 1 ? argv[1] : "shared";
  setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash keeps the lines before it
  if (access("/dev/nvidia0", F_OK) != 0 && access("/dev/nvidiactl", F_OK) != 0) {
    printf("SKIP: no NVIDIA GPU on this machine (no /dev/nvidia0)\n");
    return 77;
  }
  // Who serves what, from the process itself.
  std::string rt = where((const void *)&cudaStreamCreate);
  std::string ev = where((const void *)&cudaev_loop_new_thread);
  char exe[4096] = {0};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = 0;
  printf("# cudaStreamCreate from %s\n# cudaev_loop_new_thread from %s\n", rt.c_str(), ev.c_str());
  printf("# mapped libcudart: %s\n# mapped libcudaev: %s\n", mapped("libcudart").c_str(),
         mapped("libcudaev").c_str());
  if (strcmp(build, "static") == 0) {
    check(rt == exe && mapped("libcudart") == "none", "NVIDIA's static runtime in the program", rt);
  } else {
    void *h = dlopen(rt.c_str(), RTLD_NOW | RTLD_NOLOAD);
    bool nvidia = h != nullptr && base(rt).rfind("libcudart.so.13", 0) == 0 &&
                  dlsym(h, "cudaev_loop_new_thread") == nullptr;
    check(nvidia, "NVIDIA's libcudart.so.13 serves cuda* (it has no cudaev_*)", rt);
  }
  check(base(ev).rfind("libcudaev.so.1", 0) == 0, "libcudaev.so.1 serves cudaev_*", ev);

  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("SKIP: NVIDIA's runtime sees no device\n");
    return 77;
  }
  cudaev_loop_t *loop = nullptr;
  cudaError_t e = cudaev_loop_new_thread(&loop);
  check(e == cudaSuccess, "a thread loop", name(e));
  if (e != cudaSuccess) return 1;

  int *counter = nullptr;
  cudaSetDevice(0);
  cudaMalloc(&counter, sizeof(int));
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  stream_case(loop, s, counter, "a stream of NVIDIA's runtime");
  stream_case(loop, cudaStreamLegacy, counter, "the legacy default stream");
  stream_case(loop, cudaStreamPerThread, counter, "the per-thread default stream");

  // An event of NVIDIA's runtime.
  {
    cudaEvent_t ev0;
    cudaEventCreateWithFlags(&ev0, cudaEventDisableTiming);
    cudaMemset(counter, 0, sizeof(int));
    spin_add<<<1, 1, 0, s>>>(counter, SPIN);
    cudaEventRecord(ev0, s);
    cudaev_future_t *f = nullptr;
    cudaError_t r = cudaev_future_new_event(loop, ev0, &f);
    cudaError_t w = r == cudaSuccess ? cudaev_future_wait(f, WAIT) : r;
    check(w == cudaSuccess && cudaEventQuery(ev0) == cudaSuccess, "an event of NVIDIA's runtime",
          name(w));
    if (f != nullptr) cudaev_future_release(f);
    cudaEventDestroy(ev0);
  }
  // A device-to-host copy into pageable memory through the loop.
  {
    std::vector<int> src(1 << 20), dst(1 << 20, 0);
    for (size_t i = 0; i < src.size(); i++) src[i] = (int)(i * 2654435761u);
    int *d = nullptr;
    cudaMalloc(&d, src.size() * sizeof(int));
    cudaMemcpy(d, src.data(), src.size() * sizeof(int), cudaMemcpyHostToDevice);
    cudaev_future_t *f = nullptr;
    cudaError_t r = cudaev_memcpy_async(loop, dst.data(), d, dst.size() * sizeof(int),
                                        cudaMemcpyDeviceToHost, s, &f);
    cudaError_t w = r == cudaSuccess ? cudaev_future_wait(f, WAIT) : r;
    check(w == cudaSuccess && dst == src, "cudaev_memcpy_async to pageable memory", name(w));
    if (f != nullptr) cudaev_future_release(f);
    cudaFree(d);
  }
  // A host function: it runs on the loop's thread, not the driver's.
  {
    cudaev_future_t *f = nullptr;
    spin_add<<<1, 1, 0, s>>>(counter, SPIN);
    cudaError_t r = cudaev_launch_host_func_async(loop, s, host_fn, nullptr, &f);
    cudaError_t w = r == cudaSuccess ? cudaev_future_wait(f, WAIT) : r;
    check(w == cudaSuccess && host_fn_calls == 1 && !pthread_equal(host_fn_thread, pthread_self()),
          "a loop-thread host function on NVIDIA's stream", name(w));
    if (f != nullptr) cudaev_future_release(f);
  }
  // A context the application made itself (driver API), current on this
  // thread while NVIDIA's runtime makes a stream and launches in it. A
  // loop keeps a stream and pinned words in every context it served until
  // it is destroyed (cudaev.h): this one gets a loop of its own, destroyed
  // before the context.
  {
    CUdevice dev;
    CUcontext ctx = nullptr, popped;
    cuInit(0);
    cuDeviceGet(&dev, 0);
    CUresult c = cuCtxCreate(&ctx, nullptr, 0, dev);
    if (c == CUDA_SUCCESS && cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {
      int *cnt = nullptr;
      cudaStream_t cs;
      cudaMalloc(&cnt, sizeof(int));
      cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
      cudaev_loop_t *ctx_loop = nullptr;
      cudaev_loop_new_thread(&ctx_loop);
      stream_case(ctx_loop, cs, cnt, "a stream in a context the application made");
      cudaev_loop_destroy(ctx_loop);
      cudaStreamDestroy(cs);
      cudaFree(cnt);
      cuCtxPopCurrent(&popped);
      cuCtxDestroy(ctx);
    } else {
      check(false, "a context the application made", "cuCtxCreate failed");
    }
  }
  // Every device.
  for (int d = 0; d < ndev; d++) {
    cudaSetDevice(d);
    int *cnt = nullptr;
    cudaStream_t ds;
    cudaMalloc(&cnt, sizeof(int));
    cudaStreamCreateWithFlags(&ds, cudaStreamNonBlocking);
    std::string what = "a stream of device " + std::to_string(d);
    stream_case(loop, ds, cnt, what.c_str());
    cudaStreamDestroy(ds);
    cudaFree(cnt);
  }
  cudaSetDevice(0);
  // A launch by host stub cannot work beside another runtime (the stub is
  // registered with NVIDIA's): refused as an unknown kernel handle, the
  // driver's answer, before anything runs. The kernel's cudaKernel_t from
  // NVIDIA's runtime (cudaGetKernel) launches.
  {
    cudaev_future_t *f = nullptr;
    long long spin = SPIN;
    void *args[] = {&counter, &spin};
    cudaError_t r =
        cudaev_launch_kernel_async(loop, (const void *)spin_add, dim3(1), dim3(1), args, 0, s, &f);
    check(r == cudaErrorInvalidResourceHandle && f == nullptr,
          "a launch by host stub is refused beside another runtime", name(r));
    if (f != nullptr) cudaev_future_release(f);
    cudaKernel_t k = nullptr;
    cudaError_t g = cudaGetKernel(&k, spin_add);
    cudaMemset(counter, 0, sizeof(int));
    cudaDeviceSynchronize();
    f = nullptr;
    r = g == cudaSuccess
            ? cudaev_launch_kernel_async(loop, (const void *)k, dim3(1), dim3(1), args, 0, s, &f)
            : g;
    cudaError_t w = r == cudaSuccess ? cudaev_future_wait(f, WAIT) : r;
    int value = -1;
    cudaMemcpy(&value, counter, sizeof value, cudaMemcpyDeviceToHost);
    check(w == cudaSuccess && value == 1, "a launch of NVIDIA's cudaGetKernel handle",
          name(w) + ", counter " + std::to_string(value));
    if (f != nullptr) cudaev_future_release(f);
  }
  cudaStreamDestroy(s);
  cudaFree(counter);
  cudaev_loop_destroy(loop);
  printf("beside (%s): %d passed, %d failed\n", build, passed, failed);
  return failed == 0 ? 0 : 1;
}
