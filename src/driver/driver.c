/* The driver loader: the only file that calls dlopen() or a cu* symbol by
 * name. See driver.h. */
#define CUDAEV_DRIVER_DEFINE
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

struct cudaev_driver cudaev__drv;

#ifdef CUDAEV_FAULT_SITES
struct cudaev_driver *(*cudaev__drv_hook)(const char *file, int line);

struct cudaev_driver *cudaev__drv_at(const char *file, int line) {
  struct cudaev_driver *(*hook)(const char *, int) = cudaev__drv_hook;
  struct cudaev_driver *t = hook != NULL ? hook(file, line) : NULL;
  return t != NULL ? t : &cudaev__drv;
}
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static enum cudaev__driver_status load_status;
static int driver_version;
static void *libcuda;
static CUresult load_error;

/* Stands in for an entry point the installed driver does not have. Every
 * driver function returns CUresult, and the x86-64 and aarch64 calling
 * conventions let a callee ignore its arguments, so one function serves
 * every member. */
static CUresult not_supported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

struct entry {
  const char *name;
  size_t offset;
  int version;
  int ptds;
};

static const struct entry entries[] = {
#define CUDAEV__DRV_ENTRY(member, base, ver, suffix, ptds) \
  {#base, offsetof(struct cudaev_driver, member), ver, ptds},
    CUDAEV_DRIVER_TABLE(CUDAEV__DRV_ENTRY)
#undef CUDAEV__DRV_ENTRY
};

static void **slot(struct cudaev_driver *t, const struct entry *e) {
  return (void **)((char *)t + e->offset);
}

static void fill_missing(struct cudaev_driver *t) {
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    void **p = slot(t, &entries[i]);
    if (*p == NULL) *p = (void *)not_supported;
  }
}

static void load(void) {
  /* RTLD_GLOBAL as NVIDIA's runtime does, so libraries that dlsym() the
   * driver themselves find the same copy. */
  libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (libcuda == NULL) {
    load_status = CUDAEV__DRIVER_NOT_FOUND;
    return;
  }
  PFN_cuGetProcAddress_v12000 gpa =
      (PFN_cuGetProcAddress_v12000)dlsym(libcuda, "cuGetProcAddress_v2");
  PFN_cuDriverGetVersion_v2020 get_version =
      (PFN_cuDriverGetVersion_v2020)dlsym(libcuda, "cuDriverGetVersion");
  if (gpa == NULL || get_version == NULL) {
    load_status = CUDAEV__DRIVER_NOT_FOUND;
    return;
  }
  int v = 0;
  CUresult r = get_version(&v);
  if (r == CUDA_SUCCESS && v < CUDA_VERSION) {
    driver_version = v;
    load_status = CUDAEV__DRIVER_TOO_OLD;
    return;
  }
  driver_version = r == CUDA_SUCCESS ? v : 0;
  /* The toolkit's stub libcuda answers every call, cuGetProcAddress
   * included, with CUDA_ERROR_STUB_LIBRARY: report that, as cuInit would. */
  {
    void *fn = NULL;
    CUdriverProcAddressQueryResult found;
    CUresult g = gpa("cuInit", &fn, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (g != CUDA_SUCCESS) {
      load_error = g;
      load_status = CUDAEV__DRIVER_INIT_FAILED;
      return;
    }
  }
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    const struct entry *e = &entries[i];
    void *fn = NULL;
    CUdriverProcAddressQueryResult found;
    cuuint64_t flags =
        e->ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    if (gpa(e->name, &fn, e->version, flags, &found) != CUDA_SUCCESS ||
        found != CU_GET_PROC_ADDRESS_SUCCESS)
      fn = NULL;
    *slot(&cudaev__drv, e) = fn;
  }
  fill_missing(&cudaev__drv);
  load_status = CUDAEV__DRIVER_OK;
}

enum cudaev__driver_status cudaev__driver_load(void) {
  pthread_once(&load_once, load);
  return load_status;
}

CUresult cudaev__driver_error(void) {
  cudaev__driver_load();
  return load_error;
}

int cudaev__driver_version(void) {
  cudaev__driver_load();
  return driver_version;
}

static const struct cudaev_driver *install_src;
static int install_version;

static void install(void) {
  cudaev__drv = *install_src;
  fill_missing(&cudaev__drv);
  driver_version = install_version;
  load_status = CUDAEV__DRIVER_OK;
}

void cudaev__driver_install(const struct cudaev_driver *fake, int version) {
  install_src = fake;
  install_version = version;
  pthread_once(&load_once, install);
}

struct cudaev__capture_mode cudaev__capture_relax(void) {
  struct cudaev__capture_mode m = {.mode = CU_STREAM_CAPTURE_MODE_RELAXED};
  /* Without a driver (a loop on promises and timers only) there is no
   * capture and no table to call through. */
  if (cudaev__driver_load() != CUDAEV__DRIVER_OK) return m;
  m.swapped = cudaev__drv.cuThreadExchangeStreamCaptureMode(&m.mode) == CUDA_SUCCESS;
  return m;
}

void cudaev__capture_restore(struct cudaev__capture_mode saved) {
  if (saved.swapped) (void)cudaev__drv.cuThreadExchangeStreamCaptureMode(&saved.mode);
}
