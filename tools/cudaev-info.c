/* cudaev-info: what cudaev sees on this machine, for bug reports and for
 * "why does my program say cudaErrorInsufficientDriver".
 *
 * Prints which libcudart.so.13 the process loaded, whether the driver was
 * found (and the loader's reason when not), the runtime and driver versions,
 * the devices, whether stream memory operations work (the loop's completion
 * words need them), which loop modes can be created, and the environment
 * variables that change cudaev. The last line starts with "result:".
 *
 *   cudaev-info [-q | -h | --help]   -q: print the result line only
 *
 * Exit status: 0 with a usable GPU, and after --help; 2 without one (no
 * driver, the toolkit's stub driver, no device), the result line says why,
 * and on a usage error (the usage on stderr); 1 when something that must
 * work without a GPU failed (a thread or foreign loop could not be made) or
 * a GPU is there but a stream future did not complete.
 *
 * Only public interfaces: the CUDA runtime API, cudaev.h, and the driver's
 * stream memory operations through cudaGetDriverEntryPointByVersion. The
 * loader is asked (dlopen with RTLD_NOLOAD, dlinfo) which files are loaded;
 * the driver's load error is reproduced by asking for libcuda.so.1 as the
 * runtime does, since the runtime only reports cudaErrorInsufficientDriver.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudaev.h"

/* A usage error exits 2 as well, the usual code for one (getopt's tools). */
enum { EXIT_GPU = 0, EXIT_BROKEN = 1, EXIT_NO_GPU = 2, EXIT_USAGE = 2 };

static int quiet;
#define say(...)                     \
  do {                               \
    if (!quiet) printf(__VA_ARGS__); \
  } while (0)

/* The file a loaded library came from (found by soname, symlinks
 * resolved), in static storage; NULL if it is not loaded. */
static const char *loaded_path(const char *soname) {
  static char path[PATH_MAX];
  void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  struct link_map *lm = NULL;
  if (h == NULL) return NULL;
  int found = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL;
  if (found && realpath(lm->l_name, path) == NULL) snprintf(path, sizeof path, "%s", lm->l_name);
  dlclose(h); /* drops our reference only: it was loaded before */
  return found ? path : NULL;
}

/* Why the driver is not usable, in the loader's words where it has some. */
static void driver_reason(char *buf, size_t size) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(buf, size, "%s", dlerror());
    return;
  }
  struct link_map *lm = NULL;
  snprintf(buf, size, "libcuda.so.1 loads (%s) but the runtime could not start on it",
           dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm ? lm->l_name : "?");
  dlclose(h);
}

typedef CUresult (*write_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*wait_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

/* Enqueues a write, a wait on it and a second write on a stream of device
 * `dev` into mapped pinned memory, and checks what arrived: what the loop's
 * completion words rely on. */
static const char *stream_mem_ops(int dev, char *buf, size_t size) {
  void *wv = NULL, *wt = NULL;
  enum cudaDriverEntryPointQueryResult q1, q2;
  cudaStream_t s = NULL;
  volatile cuuint32_t *word = NULL;
  void *dword = NULL;
  const char *verdict = buf;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess)
    e = cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &wv, 13000, cudaEnableDefault,
                                         &q1);
  if (e == cudaSuccess)
    e = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wt, 13000, cudaEnableDefault, &q2);
  if (e != cudaSuccess || q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess) {
    snprintf(buf, size, "no (the driver has no cuStreamWriteValue32/cuStreamWaitValue32: %s)",
             cudaGetErrorName(e));
    return verdict;
  }
  write_value_fn write_value;
  wait_value_fn wait_value;
  memcpy(&write_value, &wv, sizeof wv);
  memcpy(&wait_value, &wt, sizeof wt);
  e = cudaHostAlloc((void **)&word, 2 * sizeof *word, cudaHostAllocMapped);
  if (e == cudaSuccess) e = cudaHostGetDevicePointer(&dword, (void *)word, 0);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    snprintf(buf, size, "not probed (%s)", cudaGetErrorName(e));
    goto done;
  }
  word[0] = word[1] = 0;
  CUdeviceptr w0 = (CUdeviceptr)(uintptr_t)dword, w1 = w0 + sizeof(cuuint32_t);
  CUresult r = write_value((CUstream)s, w0, 1, 0);
  if (r == CUDA_SUCCESS) r = wait_value((CUstream)s, w0, 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (r == CUDA_SUCCESS) r = write_value((CUstream)s, w1, 2, 0);
  e = cudaStreamSynchronize(s);
  if (r != CUDA_SUCCESS)
    snprintf(buf, size, "no (CUresult %d: the loop falls back to pooled events)", (int)r);
  else if (e != cudaSuccess || word[0] != 1 || word[1] != 2)
    snprintf(buf, size, "no (the words read %u, %u after %s)", word[0], word[1],
             cudaGetErrorName(e));
  else
    snprintf(buf, size, "yes (write, wait, write on a stream)");
done:
  if (s) cudaStreamDestroy(s);
  if (word) cudaFreeHost((void *)word);
  return verdict;
}

/* Makes and destroys a loop of each mode; 0 if thread and foreign work. */
static int loop_modes(void) {
  cudaev_loop_t *l;
  cudaError_t e;
  int broken = 0;
  e = cudaev_loop_new_thread(&l);
  say("  thread:  %s\n", e == cudaSuccess ? "ok" : cudaev_error_string(e));
  if (e == cudaSuccess) cudaev_loop_destroy(l);
  broken |= e != cudaSuccess;
  e = cudaev_loop_new_foreign(&l);
  say("  foreign: %s\n", e == cudaSuccess ? "ok" : cudaev_error_string(e));
  if (e == cudaSuccess) cudaev_loop_destroy(l);
  broken |= e != cudaSuccess;

  /* ev mode needs a libev loop; this program links no libev, so it loads
   * the one cudaev_loop_new_ev would (it then binds to that copy). */
  const char *lib = getenv("CUDAEV_LIBEV") ? getenv("CUDAEV_LIBEV") : "libev.so.4";
  void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
  struct ev_loop *(*ev_new)(unsigned) = NULL;
  void (*ev_free)(struct ev_loop *) = NULL;
  if (h != NULL) {
    void *a = dlsym(h, "ev_loop_new"), *b = dlsym(h, "ev_loop_destroy");
    memcpy(&ev_new, &a, sizeof a);
    memcpy(&ev_free, &b, sizeof b);
  }
  struct ev_loop *evl = ev_new ? ev_new(0) : NULL;
  if (evl == NULL) {
    say("  ev:      unavailable: %s (a program that links libev brings its own)\n",
        h ? "no ev_loop_new in it" : dlerror());
  } else {
    e = cudaev_loop_new_ev(evl, &l);
    if (e == cudaSuccess) {
      const char *path = loaded_path(lib);
      say("  ev:      ok (%s)\n", path ? path : lib);
      cudaev_loop_destroy(l);
    } else {
      say("  ev:      %s\n", cudaev_error_string(e));
    }
    ev_free(evl);
  }
  /* h stays open: cudaev may have bound to it for the life of the process. */
  return broken;
}

/* A future of an empty stream on a thread loop, waited for: the GPU path
 * end to end. Returns its outcome. */
static cudaError_t gpu_future(double *us) {
  cudaev_loop_t *l;
  cudaStream_t s;
  cudaev_future_t *f = NULL;
  struct timespec t0, t1;
  cudaError_t e = cudaSetDevice(0); /* the loop serves the current device's context */
  if (e != cudaSuccess) return e;
  if ((e = cudaev_loop_new_thread(&l)) != cudaSuccess) return e;
  e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e == cudaSuccess) {
    clock_gettime(CLOCK_MONOTONIC, &t0);
    e = cudaev_future_new_stream(l, s, &f);
    if (e == cudaSuccess) e = cudaev_future_wait(f, 5000000000LL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
    cudaev_future_release(f);
    cudaStreamDestroy(s);
  }
  cudaev_loop_destroy(l);
  return e;
}

/* One variable: its value when set (with what the value means), else what
 * applies when it is unset. */
static void env_line(const char *name, const char *unset, const char *meaning) {
  const char *v = getenv(name);
  if (v == NULL)
    say("  %-26s %s\n", name, unset);
  else
    say("  %-26s =%s%s%s%s\n", name, v, meaning ? " (" : "", meaning ? meaning : "",
        meaning ? ")" : "");
}

static const char usage[] = "usage: cudaev-info [-q | -h | --help]\n";

static void help(void) {
  fputs(usage, stdout);
  fputs(
      "\n"
      "Says what cudaev sees on this machine: the libcudart.so.13 this process\n"
      "loaded, whether the driver was found (and the loader's reason when not),\n"
      "the runtime and driver versions, the devices and whether their stream\n"
      "memory operations work, which loop modes can be made, and the environment\n"
      "variables that change cudaev. The last line starts with \"result:\".\n"
      "\n"
      "  -q          print the result line only\n"
      "  -h, --help  print this help and exit\n"
      "\n"
      "Exit status:\n"
      "  0  a usable GPU (a stream future on a thread loop completed)\n"
      "  1  something that must work without a GPU failed, or a GPU is there\n"
      "     but a stream future did not complete\n"
      "  2  no usable GPU (no driver, the toolkit's stub driver, no device; the\n"
      "     result line says why), or a usage error (the usage on stderr)\n",
      stdout);
}

int main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    help();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "-q") == 0) {
    quiet = 1;
  } else if (argc != 1) {
    /* One option at most: with two, the second is the one too many. */
    fprintf(stderr, "cudaev-info: unexpected argument '%s'\n%s", argv[argc == 2 ? 1 : 2], usage);
    return EXIT_USAGE;
  }
  char why[512] = "";
  int ndev = 0, rt = 0, drv = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);

  say("cudaev-info %d.%d.%d\n", CUDAEV_VERSION_MAJOR, CUDAEV_VERSION_MINOR, CUDAEV_VERSION_PATCH);
  const char *cudart = loaded_path("libcudart.so.13");
  say("libcudart.so.13: %s\n", cudart ? cudart : "(not found by soname)");
  const char *cuda = loaded_path("libcuda.so.1");
  if (cuda) {
    say("driver: loaded: %s\n", cuda);
  } else {
    driver_reason(why, sizeof why);
    say("driver: not loaded: %s\n", why);
  }
  if (drv == 0)
    say("versions: runtime %d.%d, no driver\n", rt / 1000, rt % 1000 / 10);
  else
    say("versions: runtime %d.%d, driver %d.%d\n", rt / 1000, rt % 1000 / 10, drv / 1000,
        drv % 1000 / 10);
  if (e == cudaSuccess && ndev == 0) e = cudaErrorNoDevice;
  if (e != cudaSuccess) {
    say("devices: none: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
  } else {
    say("devices: %d\n", ndev);
    for (int d = 0; d < ndev; d++) {
      struct cudaDeviceProp p;
      char ops[160];
      cudaError_t pe = cudaGetDeviceProperties(&p, d);
      if (pe != cudaSuccess) {
        say("  %d: cudaGetDeviceProperties: %s\n", d, cudaGetErrorName(pe));
        continue;
      }
      const unsigned char *u = (const unsigned char *)p.uuid.bytes;
      say("  %d: %s, compute capability %d.%d, %.1f GiB, GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
          "%02x%02x-%02x%02x%02x%02x%02x%02x\n",
          d, p.name, p.major, p.minor, (double)p.totalGlobalMem / (1 << 30), u[0], u[1], u[2], u[3],
          u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
      say("     stream memory operations: %s\n", stream_mem_ops(d, ops, sizeof ops));
    }
  }

  say("loop modes:\n");
  int broken = loop_modes();
  double us = 0;
  cudaError_t g = e == cudaSuccess ? gpu_future(&us) : e;
  if (e == cudaSuccess)
    say("GPU completions: %s%s\n", cudaev_error_name(g),
        g == cudaSuccess ? " (a stream future on a thread loop completed)" : "");
  else
    say("GPU completions: unavailable (%s); loops serve promises and combinators only\n",
        cudaGetErrorName(e));

  say("environment:\n");
  env_line("CUDAEV_HOST_POOL", "unset: the pinned host pool (where the library has one) is on",
           "0 turns the pinned host pool off; any other value leaves it on");
  env_line("CUDAEV_HOST_POOL_DECAY_MS", "unset: freed pinned memory returns after ~5 s", NULL);
  env_line("CUDAEV_LOOP_EVENTS", "unset: completion words where the device has them",
           "1: pooled events only");
  env_line("CUDAEV_LOOP_WORD_EVERY", "unset: a completion word every 16th marker", NULL);
  env_line("CUDAEV_LIBEV", "unset: ev mode binds the application's libev or libev.so.4", NULL);

  int status;
  if (broken) {
    printf("result: broken: a loop without a GPU could not be made\n");
    status = EXIT_BROKEN;
  } else if (e != cudaSuccess) {
    printf("result: no GPU: %s (%s)\n", cudaGetErrorName(e), why[0] ? why : cudaGetErrorString(e));
    status = EXIT_NO_GPU;
  } else if (g != cudaSuccess) {
    printf("result: broken: %d device(s), but a stream future gave %s\n", ndev,
           cudaev_error_name(g));
    status = EXIT_BROKEN;
  } else {
    printf("result: GPU: %d device(s), stream future in %.0f us\n", ndev, us);
    status = EXIT_GPU;
  }
  return status;
}
