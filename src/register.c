/* nvcc's registration ABI: the __cuda* functions that the host code nvcc
 * generates calls from static constructors (fat binaries, kernels,
 * variables), at each <<<>>> (the call configuration stack, kernel handles)
 * and at exit (unregistration). See register.h for the registry's rules.
 *
 * The prototypes are those of crt/host_runtime.h and crt/device_functions.h
 * of CUDA 13.0; the three without a public prototype (__cudaRegisterHostVar,
 * __cudaRegisterUnifiedTable, __cudaGetProcAddress) were read from the
 * argument registers NVIDIA's libcudart.so.13 forwards. */
#include "register.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FATBINC_MAGIC       0x466243B1
#define CUDAEV_FATBIN_MAGIC 0x6661746263756576ull /* "vecubtaf" */

/* nvcc's fat binary wrapper (fatbinary_section.h). */
struct fatbin_wrapper {
  int magic;
  int version; /* 1, or 2 for a device-linked (-rdc) program */
  const unsigned long long *data;
  void *extra; /* version 2: NULL-terminated array of the prelinked fatbins */
};

enum var_kind { VAR_DEVICE, VAR_MANAGED, VAR_HOST };

struct cudaev_var {
  const void *host; /* host shadow (key) */
  const char *name;
  size_t size;
  enum var_kind kind;
  void **shadow; /* managed: the host pointer that receives the address */
  struct cudaev_fatbin *fb;
  struct cudaev_var *next; /* next variable of the same fat binary */
};

struct cudaev_fatbin {
  uint64_t magic;
  int version;
  const void *image;
  void *prelinked;
  _Atomic(CUlibrary) lib;
  atomic_bool dead;
  bool has_table;
  CUlibraryHostUniversalFunctionAndDataTable table;
  struct cudaev_kfunc *funcs;
  struct cudaev_var *vars;
  struct cudaev_fatbin *retired; /* next unregistered fat binary */
};

/* Unregistered fat binaries, kept (with their kernels and variables) so a
 * lookup racing the unregistration never reads freed memory. */
static struct cudaev_fatbin *retired_fatbins;

/* ---- lock-free pointer map ------------------------------------------------
 *
 * Open addressing, linear probing, keys never removed (a removed entry keeps
 * its key with a NULL value). Writers hold `reg_lock`; readers take no lock:
 * a writer stores the value before the key, and a grown table is published
 * whole. Replaced tables are retired, not freed (their total size is below
 * the live table's), because a reader may still be probing one. */

struct slot {
  _Atomic(const void *) key;
  _Atomic(void *) val;
};

struct table {
  size_t mask;
  size_t used;
  struct table *retired;
  struct slot slots[];
};

struct ptrmap {
  _Atomic(struct table *) t;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ptrmap funcs_map; /* stub / CUkernel / record -> struct cudaev_kfunc */
static struct ptrmap vars_map;  /* host shadow / managed address -> struct cudaev_var */

static inline size_t ptr_hash(const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p;
  h ^= h >> 33;
  h *= UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  return (size_t)h;
}

static void *map_get(struct ptrmap *m, const void *key) {
  struct table *t = atomic_load_explicit(&m->t, memory_order_acquire);
  if (CUDAEV_UNLIKELY(t == NULL)) return NULL;
  for (size_t i = ptr_hash(key) & t->mask;; i = (i + 1) & t->mask) {
    const void *k = atomic_load_explicit(&t->slots[i].key, memory_order_acquire);
    if (k == key) return atomic_load_explicit(&t->slots[i].val, memory_order_acquire);
    if (k == NULL) return NULL;
  }
}

static struct table *table_new(size_t cap) {
  struct table *t = calloc(1, sizeof *t + cap * sizeof(struct slot));
  if (t != NULL) t->mask = cap - 1;
  return t;
}

/* Inserts into a table not yet visible to readers, or under reg_lock. */
static void table_put(struct table *t, const void *key, void *val) {
  for (size_t i = ptr_hash(key) & t->mask;; i = (i + 1) & t->mask) {
    const void *k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
    if (k == key) {
      atomic_store_explicit(&t->slots[i].val, val, memory_order_release);
      return;
    }
    if (k == NULL) {
      atomic_store_explicit(&t->slots[i].val, val, memory_order_relaxed);
      atomic_store_explicit(&t->slots[i].key, key, memory_order_release);
      t->used++;
      return;
    }
  }
}

/* Caller holds reg_lock. Returns true on error (out of memory). */
static bool map_put(struct ptrmap *m, const void *key, void *val) {
  struct table *t = atomic_load_explicit(&m->t, memory_order_relaxed);
  if (t == NULL || (t->used + 1) * 4 > (t->mask + 1) * 3) {
    size_t cap = t == NULL ? 256 : (t->mask + 1) * 2;
    struct table *n = table_new(cap);
    if (n == NULL) return true;
    if (t != NULL) {
      for (size_t i = 0; i <= t->mask; i++) {
        const void *k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
        void *v = atomic_load_explicit(&t->slots[i].val, memory_order_relaxed);
        if (k != NULL && v != NULL) table_put(n, k, v);
      }
      n->retired = t;
    }
    atomic_store_explicit(&m->t, n, memory_order_release);
    t = n;
  }
  table_put(t, key, val);
  return false;
}

/* Caller holds reg_lock. */
static void map_set_existing(struct ptrmap *m, const void *key, void *val) {
  struct table *t = atomic_load_explicit(&m->t, memory_order_relaxed);
  if (t == NULL) return;
  for (size_t i = ptr_hash(key) & t->mask;; i = (i + 1) & t->mask) {
    const void *k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
    if (k == key) {
      atomic_store_explicit(&t->slots[i].val, val, memory_order_release);
      return;
    }
    if (k == NULL) return;
  }
}

/* ---- lookups ---------------------------------------------------------------- */

struct cudaev_kfunc *cudaev__kfunc_find(const void *func) {
  if (CUDAEV_UNLIKELY(func == NULL)) return NULL;
  return map_get(&funcs_map, func);
}

static bool fatbin_valid(const struct cudaev_fatbin *fb) {
  return fb != NULL && fb->magic == CUDAEV_FATBIN_MAGIC;
}

/* Resolves and publishes the managed variables of a freshly loaded
 * library: writes each one's address into its host shadow pointer, as
 * NVIDIA's runtime does at module load, and makes that address a key of
 * the variable map (host code names a managed variable through it). */
static void fatbin_init_managed(struct cudaev_fatbin *fb, CUlibrary lib) {
  for (struct cudaev_var *v = fb->vars; v != NULL; v = v->next) {
    if (v->kind != VAR_MANAGED) continue;
    CUdeviceptr p = 0;
    size_t n = 0;
    if (cudaev__drv.cuLibraryGetManaged(&p, &n, lib, v->name) != CUDA_SUCCESS) continue;
    if (v->shadow != NULL) *v->shadow = (void *)(uintptr_t)p;
    pthread_mutex_lock(&reg_lock);
    if (map_get(&vars_map, (const void *)(uintptr_t)p) == NULL)
      map_put(&vars_map, (const void *)(uintptr_t)p, v);
    pthread_mutex_unlock(&reg_lock);
  }
}

/* Set by an exit handler registered at the first load. atexit runs handlers
 * last-registered first, so this one runs before the unregistration
 * handlers nvcc's static constructors registered earlier: at exit the
 * driver (whose own teardown may already have run) is left alone, and the
 * process does not pay one cuLibraryUnload per fat binary. */
static atomic_bool exiting;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void mark_exiting(void) { atomic_store(&exiting, true); }
static void watch_exit(void) { atexit(mark_exiting); }

/* The fat binary's library, loaded on first use. Two threads may race to
 * load it: both load, one publishes, the other unloads its copy. */
static cudaError_t fatbin_library(struct cudaev_fatbin *fb, CUlibrary *out) {
  CUlibrary lib = atomic_load_explicit(&fb->lib, memory_order_acquire);
  if (CUDAEV_LIKELY(lib != NULL)) {
    *out = lib;
    return cudaSuccess;
  }
  cudaError_t e = cudaev__init();
  if (e != cudaSuccess) return e;
  if (atomic_load_explicit(&fb->dead, memory_order_acquire)) return cudaErrorInvalidDeviceFunction;
  if (fb->image == NULL) return cudaErrorInvalidKernelImage;
  /* The image lives in the program until it is unregistered, so the driver
   * need not copy it (the option takes no value). */
  CUlibraryOption opts[2];
  void *vals[2];
  unsigned n = 0;
  opts[n] = CU_LIBRARY_BINARY_IS_PRESERVED;
  vals[n++] = NULL;
  if (fb->has_table) {
    opts[n] = CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE;
    vals[n++] = &fb->table;
  }
  pthread_once(&exit_once, watch_exit);
  CUresult r = cudaev__drv.cuLibraryLoadData(&lib, fb->image, NULL, NULL, 0, opts, vals, n);
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  CUlibrary expected = NULL;
  if (!atomic_compare_exchange_strong(&fb->lib, &expected, lib)) {
    cudaev__drv.cuLibraryUnload(lib);
    *out = expected;
    return cudaSuccess;
  }
  fatbin_init_managed(fb, lib);
  *out = lib;
  return cudaSuccess;
}

cudaError_t cudaev__kfunc_resolve(struct cudaev_kfunc *f, CUkernel *out) {
  CUkernel k = atomic_load_explicit(&f->kernel, memory_order_acquire);
  if (k != NULL) {
    *out = k;
    return cudaSuccess;
  }
  if (f->fb == NULL) return cudaErrorInvalidDeviceFunction;
  CUlibrary lib;
  cudaError_t e = fatbin_library(f->fb, &lib);
  if (e != cudaSuccess) return e;
  CUresult r = cudaev__drv.cuLibraryGetKernel(&k, lib, f->name);
  if (r == CUDA_ERROR_NOT_FOUND) return cudaErrorInvalidDeviceFunction;
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  CUkernel expected = NULL;
  if (!atomic_compare_exchange_strong(&f->kernel, &expected, k)) k = expected;
  /* From now on the CUkernel itself names this kernel too (cudaGetKernel
   * hands it out, and programs pass it back cast to void*). */
  pthread_mutex_lock(&reg_lock);
  if (map_get(&funcs_map, k) == NULL) map_put(&funcs_map, k, f);
  pthread_mutex_unlock(&reg_lock);
  *out = k;
  return cudaSuccess;
}

/* A pointer the registry does not know is taken for a CUkernel of a
 * library loaded outside the runtime (NVIDIA's runtime does the same): the
 * driver, which validates CUkernel handles, decides. We never dereference
 * it ourselves. */
static cudaError_t kernel_foreign(const void *func, CUkernel *out) {
  CUlibrary lib = NULL;
  CUresult r = cudaev__drv.cuKernelGetLibrary(&lib, (CUkernel)func);
  if (r != CUDA_SUCCESS) return cudaErrorInvalidResourceHandle;
  *out = (CUkernel)func;
  return cudaSuccess;
}

cudaError_t cudaev__kernel_lookup(const void *func, CUkernel *out) {
  struct cudaev_kfunc *f = cudaev__kfunc_find(func);
  if (CUDAEV_LIKELY(f != NULL)) return cudaev__kfunc_kernel(f, out);
  *out = NULL;
  cudaError_t e = cudaev__init();
  if (e != cudaSuccess) return e;
  if (func == NULL) return cudaErrorInvalidDeviceFunction;
  return kernel_foreign(func, out);
}

cudaError_t cudaev__kernel_lookup_registered(const void *func, CUkernel *out) {
  struct cudaev_kfunc *f = cudaev__kfunc_find(func);
  if (f != NULL) return cudaev__kfunc_kernel(f, out);
  *out = NULL;
  cudaError_t e = cudaev__init();
  return e != cudaSuccess ? e : cudaErrorInvalidDeviceFunction;
}

cudaError_t cudaev__func_lookup(const void *func, CUfunction *out) {
  CUkernel k;
  *out = NULL;
  cudaError_t e = cudaev__kernel_lookup(func, &k);
  if (e != cudaSuccess) return e;
  CUresult r = cudaev__drv.cuKernelGetFunction(out, k);
  if (r == CUDA_ERROR_NOT_FOUND) return cudaErrorInvalidDeviceFunction;
  return cudaev__error_from_cu(r);
}

cudaError_t cudaev__symbol_lookup(const void *symbol, CUdeviceptr *ptr, size_t *size) {
  *ptr = 0;
  *size = 0;
  struct cudaev_var *v = symbol == NULL ? NULL : map_get(&vars_map, symbol);
  if (v == NULL) {
    cudaError_t e = cudaev__init();
    return e != cudaSuccess ? e : cudaErrorInvalidSymbol;
  }
  if (v->kind == VAR_HOST) {
    /* A host variable the device reaches through unified memory. */
    *ptr = (CUdeviceptr)(uintptr_t)v->host;
    *size = v->size;
    return cudaSuccess;
  }
  CUlibrary lib;
  cudaError_t e = fatbin_library(v->fb, &lib);
  if (e != cudaSuccess) return e == cudaErrorInvalidDeviceFunction ? cudaErrorInvalidSymbol : e;
  CUdeviceptr p = 0;
  size_t n = 0;
  CUresult r = v->kind == VAR_MANAGED ? cudaev__drv.cuLibraryGetManaged(&p, &n, lib, v->name)
                                      : cudaev__drv.cuLibraryGetGlobal(&p, &n, lib, v->name);
  if (r == CUDA_ERROR_NOT_FOUND) return cudaErrorInvalidSymbol;
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  *ptr = p;
  *size = n != 0 ? n : v->size;
  return cudaSuccess;
}

bool cudaev__kernel_adopt(CUkernel k, CUlibrary lib) {
  if (map_get(&funcs_map, k) != NULL) return false;
  struct cudaev_kfunc *f = calloc(1, sizeof *f);
  if (f == NULL) return true;
  f->magic = CUDAEV_KFUNC_MAGIC;
  atomic_init(&f->kernel, k);
  f->lib = lib;
  bool err = false;
  pthread_mutex_lock(&reg_lock);
  if (map_get(&funcs_map, k) == NULL) {
    err = map_put(&funcs_map, k, f);
  } else {
    free(f); /* another thread adopted it first */
  }
  pthread_mutex_unlock(&reg_lock);
  return err;
}

void cudaev__library_forget(CUlibrary lib) {
  pthread_mutex_lock(&reg_lock);
  struct table *t = atomic_load_explicit(&funcs_map.t, memory_order_relaxed);
  for (size_t i = 0; t != NULL && i <= t->mask; i++) {
    struct cudaev_kfunc *f = atomic_load_explicit(&t->slots[i].val, memory_order_relaxed);
    if (f != NULL && f->fb == NULL && f->lib == lib)
      atomic_store_explicit(&t->slots[i].val, NULL, memory_order_release);
  }
  pthread_mutex_unlock(&reg_lock);
}

/* ---- registration ----------------------------------------------------------- */

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void __cudaUnregisterFatBinary(void **fatCubinHandle);
void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                       const char *deviceName, int ext, size_t size, int constant, int global);
void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global);
void __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName, char *hostVar,
                           size_t size);
void __cudaRegisterUnifiedTable(void **fatCubinHandle, void *functionTable,
                                size_t functionWindowSize, void *dataTable, size_t dataWindowSize);
char __cudaInitModule(void **fatCubinHandle);
void *__cudaGetProcAddress(void);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun);

/* Runs from static constructors, possibly before anything else in the
 * process: records the image and touches no driver. */
CUDAEV_EXPORT void **__cudaRegisterFatBinary(void *fatCubin) {
  struct cudaev_fatbin *fb = calloc(1, sizeof *fb);
  if (fb == NULL) return NULL;
  fb->magic = CUDAEV_FATBIN_MAGIC;
  const struct fatbin_wrapper *w = fatCubin;
  if (w != NULL && w->magic == FATBINC_MAGIC) {
    fb->version = w->version;
    fb->image = w->data;
    if (w->version == 2) fb->prelinked = w->extra;
  }
  return (void **)fb;
}

CUDAEV_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }

/* Called from atexit handlers, and when a library is dlclose()d. Nothing
 * is unloaded when nothing was loaded (a program that never used CUDA never
 * loads the driver), nor at exit (see watch_exit); results are ignored. */
CUDAEV_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle) {
  struct cudaev_fatbin *fb = (struct cudaev_fatbin *)fatCubinHandle;
  if (!fatbin_valid(fb) || atomic_exchange(&fb->dead, true)) return;
  pthread_mutex_lock(&reg_lock);
  for (struct cudaev_kfunc *f = fb->funcs; f != NULL; f = f->next) {
    struct cudaev_kfunc *head = map_get(&funcs_map, f->stub);
    if (head == f) {
      /* Another translation unit's registration of the same kernel, if any,
       * takes over. */
      struct cudaev_kfunc *d = f->dup;
      while (d != NULL && atomic_load(&d->fb->dead)) d = d->dup;
      map_set_existing(&funcs_map, f->stub, d);
    } else {
      for (struct cudaev_kfunc *p = head; p != NULL; p = p->dup)
        if (p->dup == f) {
          p->dup = f->dup;
          break;
        }
    }
    CUkernel k = atomic_load(&f->kernel);
    if (k != NULL && map_get(&funcs_map, k) == f) map_set_existing(&funcs_map, k, NULL);
  }
  for (struct cudaev_var *v = fb->vars; v != NULL; v = v->next) {
    if (map_get(&vars_map, v->host) == v) map_set_existing(&vars_map, v->host, NULL);
    if (v->kind == VAR_MANAGED && v->shadow != NULL && *v->shadow != NULL &&
        map_get(&vars_map, *v->shadow) == v)
      map_set_existing(&vars_map, *v->shadow, NULL);
  }
  fb->retired = retired_fatbins;
  retired_fatbins = fb;
  pthread_mutex_unlock(&reg_lock);
  CUlibrary lib = atomic_exchange(&fb->lib, NULL);
  if (lib != NULL && !atomic_load(&exiting)) cudaev__drv.cuLibraryUnload(lib);
}

CUDAEV_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                                          char *deviceFun, const char *deviceName, int thread_limit,
                                          uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim,
                                          int *wSize) {
  struct cudaev_fatbin *fb = (struct cudaev_fatbin *)fatCubinHandle;
  const char *name = deviceName != NULL ? deviceName : deviceFun;
  if (!fatbin_valid(fb) || hostFun == NULL || name == NULL) return;
  struct cudaev_kfunc *f = calloc(1, sizeof *f);
  if (f == NULL) return;
  f->magic = CUDAEV_KFUNC_MAGIC;
  f->stub = hostFun;
  f->name = name;
  f->fb = fb;
  pthread_mutex_lock(&reg_lock);
  struct cudaev_kfunc *head = map_get(&funcs_map, hostFun);
  bool err = false;
  if (head == NULL) {
    err = map_put(&funcs_map, hostFun, f);
  } else {
    /* The same kernel from another translation unit (a template, an inline
     * function): the first registration stays in use, the others wait in
     * line in case its fat binary goes away first. */
    struct cudaev_kfunc *p = head;
    while (p->dup != NULL) p = p->dup;
    p->dup = f;
  }
  if (!err) {
    f->next = fb->funcs;
    fb->funcs = f;
  }
  pthread_mutex_unlock(&reg_lock);
}

static void register_var(struct cudaev_fatbin *fb, const void *host, const char *name, size_t size,
                         enum var_kind kind, void **shadow) {
  if (!fatbin_valid(fb) || host == NULL || name == NULL) return;
  struct cudaev_var *v = calloc(1, sizeof *v);
  if (v == NULL) return;
  v->host = host;
  v->name = name;
  v->size = size;
  v->kind = kind;
  v->shadow = shadow;
  v->fb = fb;
  pthread_mutex_lock(&reg_lock);
  /* A variable registered again (by another translation unit) keeps its
   * first registration. */
  if (map_get(&vars_map, host) == NULL) map_put(&vars_map, host, v);
  v->next = fb->vars;
  fb->vars = v;
  pthread_mutex_unlock(&reg_lock);
}

CUDAEV_EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                     const char *deviceName, int ext, size_t size, int constant,
                                     int global) {
  register_var((struct cudaev_fatbin *)fatCubinHandle, hostVar,
               deviceName != NULL ? deviceName : deviceAddress, size, VAR_DEVICE, NULL);
}

CUDAEV_EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                            char *deviceAddress, const char *deviceName, int ext,
                                            size_t size, int constant, int global) {
  register_var((struct cudaev_fatbin *)fatCubinHandle, hostVarPtrAddress,
               deviceName != NULL ? deviceName : deviceAddress, size, VAR_MANAGED,
               hostVarPtrAddress);
}

CUDAEV_EXPORT void __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName,
                                         char *hostVar, size_t size) {
  register_var((struct cudaev_fatbin *)fatCubinHandle, hostVar, deviceName, size, VAR_HOST, NULL);
}

/* The host universal function and data table (unified function pointers):
 * handed to cuLibraryLoadData as CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE. */
CUDAEV_EXPORT void __cudaRegisterUnifiedTable(void **fatCubinHandle, void *functionTable,
                                              size_t functionWindowSize, void *dataTable,
                                              size_t dataWindowSize) {
  struct cudaev_fatbin *fb = (struct cudaev_fatbin *)fatCubinHandle;
  if (!fatbin_valid(fb)) return;
  fb->table.functionTable = functionTable;
  fb->table.functionWindowSize = functionWindowSize;
  fb->table.dataTable = dataTable;
  fb->table.dataWindowSize = dataWindowSize;
  fb->has_table = true;
}

/* Host code reads a __managed__ variable through its shadow pointer after
 * calling this once: load the module, which writes the shadows. Nonzero on
 * success; the error is not recorded (NVIDIA's does not either). */
CUDAEV_EXPORT char __cudaInitModule(void **fatCubinHandle) {
  struct cudaev_fatbin *fb = (struct cudaev_fatbin *)fatCubinHandle;
  if (!fatbin_valid(fb)) return 0;
  if (cudaev__ctx() != cudaSuccess) return 0;
  CUlibrary lib;
  return fatbin_library(fb, &lib) == cudaSuccess;
}

/* NVIDIA's returns 0 and does nothing else. */
CUDAEV_EXPORT void *__cudaGetProcAddress(void) { return NULL; }

/* ---- the call configuration stack (<<<grid, block, shmem, stream>>>) ------ */

#define CONFIG_STACK_DEPTH 32

struct call_config {
  dim3 grid, block;
  size_t shmem;
  struct CUstream_st *stream;
};

static _Thread_local struct {
  unsigned depth;
  struct call_config cfg[CONFIG_STACK_DEPTH];
} config_stack;

/* Nonzero makes the generated code skip the launch. Needs no driver. */
CUDAEV_EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                   struct CUstream_st *stream) {
  unsigned d = config_stack.depth;
  if (CUDAEV_UNLIKELY(d >= CONFIG_STACK_DEPTH))
    return (unsigned)cudaev__ret(cudaErrorMemoryAllocation);
  config_stack.cfg[d] = (struct call_config){gridDim, blockDim, sharedMem, stream};
  config_stack.depth = d + 1;
  return 0;
}

CUDAEV_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                                     size_t *sharedMem, void *stream) {
  unsigned d = config_stack.depth;
  if (CUDAEV_UNLIKELY(d == 0)) return cudaev__ret(cudaErrorMissingConfiguration);
  const struct call_config *c = &config_stack.cfg[d - 1];
  config_stack.depth = d - 1;
  *gridDim = c->grid;
  *blockDim = c->block;
  *sharedMem = c->shmem;
  *(struct CUstream_st **)stream = c->stream;
  return cudaSuccess;
}

/* The handle written is our record of the kernel: __cudaLaunchKernel then
 * needs no lookup. Like NVIDIA's, it writes a usable handle (the stub)
 * before anything can fail, and initialises the runtime. */
CUDAEV_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun) {
  if (kernel == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (hostFun == NULL) return cudaev__ret(cudaErrorInvalidDeviceFunction);
  *kernel = (cudaKernel_t)(uintptr_t)hostFun;
  struct cudaev_kfunc *f = cudaev__kfunc_find(hostFun);
  if (f != NULL) *kernel = (cudaKernel_t)f;
  cudaError_t e = cudaev__init();
  if (e != cudaSuccess) return cudaev__ret(e);
  return f != NULL ? cudaSuccess : cudaev__ret(cudaErrorInvalidDeviceFunction);
}
