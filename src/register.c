/* The registry of what nvcc-built host code registered: fat binaries,
 * kernels, variables (register.h says its rules). nvcc's entry points that
 * fill it (__cudaRegisterFatBinary and friends) are in src/nvcc_abi.c;
 * this file holds what they record and how it is looked up and loaded. */
#include "register.h"
#include "handle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CUDAEV_FATBIN_MAGIC 0x6661746263756576ull /* "vecubtaf" */

struct cudaev__var {
  const void *host; /* host shadow (key) */
  const char *name;
  size_t size;
  enum cudaev__var_kind kind;
  void **shadow; /* managed: the host pointer that receives the address */
  struct cudaev__fatbin *fb;
  struct cudaev__var *next; /* next variable of the same fat binary */
};

struct cudaev__fatbin {
  uint64_t magic;
  const void *image;
  _Atomic(CUlibrary) lib;
  atomic_bool dead;
  bool has_table;
  CUlibraryHostUniversalFunctionAndDataTable table;
  struct cudaev__kfunc *funcs;
  struct cudaev__var *vars;
  struct cudaev__fatbin *retired; /* next unregistered fat binary */
};

/* Unregistered fat binaries, kept (with their kernels and variables) so a
 * lookup racing the unregistration never reads freed memory. */
static struct cudaev__fatbin *retired_fatbins;

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
static struct ptrmap funcs_map; /* stub / CUkernel / record -> struct cudaev__kfunc */
static struct ptrmap vars_map;  /* host shadow / managed address -> struct cudaev__var */

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

struct cudaev__kfunc *cudaev__kfunc_find(const void *func) {
  if (CUDAEV_UNLIKELY(func == NULL)) return NULL;
  return map_get(&funcs_map, func);
}

bool cudaev__fatbin_valid(const struct cudaev__fatbin *fb) {
  return fb != NULL && fb->magic == CUDAEV_FATBIN_MAGIC;
}

/* Resolves and publishes the managed variables of a freshly loaded
 * library: writes each one's address into its host shadow pointer, as
 * NVIDIA's runtime does at module load, and makes that address a key of
 * the variable map (host code names a managed variable through it). */
static void fatbin_init_managed(struct cudaev__fatbin *fb, CUlibrary lib) {
  for (struct cudaev__var *v = fb->vars; v != NULL; v = v->next) {
    if (v->kind != CUDAEV__VAR_MANAGED) continue;
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

/* Two threads may race to load the library: both load, one publishes, the
 * other unloads its copy. */
cudaError_t cudaev__fatbin_library(struct cudaev__fatbin *fb, CUlibrary *out) {
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
  /* An unregistration that ran since the check above found no library to
   * unload: whoever takes the published one back (it, or this call)
   * unloads it. Both sides publish before they look (sequentially
   * consistent), so one of them sees the other. */
  if (atomic_load(&fb->dead)) {
    CUlibrary mine = lib;
    if (atomic_compare_exchange_strong(&fb->lib, &mine, NULL) && !atomic_load(&exiting))
      cudaev__drv.cuLibraryUnload(lib);
    return cudaErrorInvalidDeviceFunction;
  }
  fatbin_init_managed(fb, lib);
  *out = lib;
  return cudaSuccess;
}

cudaError_t cudaev__kfunc_resolve(struct cudaev__kfunc *f, CUkernel *out) {
  CUkernel k = atomic_load_explicit(&f->kernel, memory_order_acquire);
  if (k != NULL) {
    *out = k;
    return cudaSuccess;
  }
  if (f->fb == NULL) return cudaErrorInvalidDeviceFunction;
  CUlibrary lib;
  cudaError_t e = cudaev__fatbin_library(f->fb, &lib);
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
  /* Only a refusal of the handle means "not a kernel"; a driver that
   * cannot answer at all (out of memory, a dead context, no device) says
   * so itself. */
  if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_NOT_FOUND)
    return cudaErrorInvalidResourceHandle;
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  *out = (CUkernel)func;
  return cudaSuccess;
}

cudaError_t cudaev__kernel_lookup(const void *func, CUkernel *out) {
  struct cudaev__kfunc *f = cudaev__kfunc_find(func);
  if (CUDAEV_LIKELY(f != NULL)) return cudaev__kfunc_kernel(f, out);
  *out = NULL;
  cudaError_t e = cudaev__init();
  if (e != cudaSuccess) return e;
  /* The driver reads through a foreign pointer: one that can be no
   * object at all (handle.h) is refused before it crashes there. */
  if (func == NULL || cudaev__addr_impossible((uintptr_t)func))
    return cudaErrorInvalidDeviceFunction;
  return kernel_foreign(func, out);
}

cudaError_t cudaev__kernel_lookup_registered(const void *func, CUkernel *out) {
  struct cudaev__kfunc *f = cudaev__kfunc_find(func);
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
  struct cudaev__var *v = symbol == NULL ? NULL : map_get(&vars_map, symbol);
  if (v == NULL) {
    cudaError_t e = cudaev__init();
    return e != cudaSuccess ? e : cudaErrorInvalidSymbol;
  }
  if (v->kind == CUDAEV__VAR_HOST) {
    /* A host variable the device reaches through unified memory. */
    *ptr = (CUdeviceptr)(uintptr_t)v->host;
    *size = v->size;
    return cudaSuccess;
  }
  CUlibrary lib;
  cudaError_t e = cudaev__fatbin_library(v->fb, &lib);
  if (e != cudaSuccess) return e == cudaErrorInvalidDeviceFunction ? cudaErrorInvalidSymbol : e;
  CUdeviceptr p = 0;
  size_t n = 0;
  CUresult r = v->kind == CUDAEV__VAR_MANAGED
                   ? cudaev__drv.cuLibraryGetManaged(&p, &n, lib, v->name)
                   : cudaev__drv.cuLibraryGetGlobal(&p, &n, lib, v->name);
  if (r == CUDA_ERROR_NOT_FOUND) return cudaErrorInvalidSymbol;
  if (r != CUDA_SUCCESS) return cudaev__error_from_cu(r);
  *ptr = p;
  *size = n != 0 ? n : v->size;
  return cudaSuccess;
}

bool cudaev__kernel_adopt(CUkernel k, CUlibrary lib) {
  /* The driver may hand out an unloaded library's kernel address again. */
  cudaev__handle_revive(k);
  if (map_get(&funcs_map, k) != NULL) return false;
  struct cudaev__kfunc *f = calloc(1, sizeof *f);
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

/* Kernels of unloaded libraries, kept like retired fat binaries: a lookup
 * racing the unload may still hold one. */
static struct cudaev__kfunc *retired_kfuncs;

void cudaev__library_forget(CUlibrary lib) {
  pthread_mutex_lock(&reg_lock);
  struct table *t = atomic_load_explicit(&funcs_map.t, memory_order_relaxed);
  for (size_t i = 0; t != NULL && i <= t->mask; i++) {
    struct cudaev__kfunc *f = atomic_load_explicit(&t->slots[i].val, memory_order_relaxed);
    if (f != NULL && f->fb == NULL && f->lib == lib) {
      atomic_store_explicit(&t->slots[i].val, NULL, memory_order_release);
      /* The driver frees the kernel with its library and reads freed
       * memory through the handle afterwards (handle.h). */
      cudaev__handle_bury(atomic_load_explicit(&f->kernel, memory_order_relaxed));
      /* A library kernel belongs to no fat binary: its `next` is free. */
      f->next = retired_kfuncs;
      retired_kfuncs = f;
    }
  }
  pthread_mutex_unlock(&reg_lock);
}

/* ---- registration ----------------------------------------------------------- */

struct cudaev__fatbin *cudaev__fatbin_new(const void *image) {
  struct cudaev__fatbin *fb = calloc(1, sizeof *fb);
  if (fb == NULL) return NULL;
  fb->magic = CUDAEV_FATBIN_MAGIC;
  fb->image = image;
  return fb;
}

/* Nothing is unloaded when nothing was loaded (a program that never used
 * CUDA never loads the driver), nor at exit (see watch_exit); results are
 * ignored. */
void cudaev__fatbin_unregister(struct cudaev__fatbin *fb) {
  if (!cudaev__fatbin_valid(fb) || atomic_exchange(&fb->dead, true)) return;
  pthread_mutex_lock(&reg_lock);
  for (struct cudaev__kfunc *f = fb->funcs; f != NULL; f = f->next) {
    struct cudaev__kfunc *head = map_get(&funcs_map, f->stub);
    if (head == f) {
      /* Another translation unit's registration of the same kernel, if any,
       * takes over. */
      struct cudaev__kfunc *d = f->dup;
      while (d != NULL && atomic_load(&d->fb->dead)) d = d->dup;
      map_set_existing(&funcs_map, f->stub, d);
    } else {
      for (struct cudaev__kfunc *p = head; p != NULL; p = p->dup)
        if (p->dup == f) {
          p->dup = f->dup;
          break;
        }
    }
    CUkernel k = atomic_load(&f->kernel);
    if (k != NULL && map_get(&funcs_map, k) == f) map_set_existing(&funcs_map, k, NULL);
  }
  for (struct cudaev__var *v = fb->vars; v != NULL; v = v->next) {
    if (map_get(&vars_map, v->host) == v) map_set_existing(&vars_map, v->host, NULL);
    if (v->kind == CUDAEV__VAR_MANAGED && v->shadow != NULL && *v->shadow != NULL &&
        map_get(&vars_map, *v->shadow) == v)
      map_set_existing(&vars_map, *v->shadow, NULL);
  }
  fb->retired = retired_fatbins;
  retired_fatbins = fb;
  pthread_mutex_unlock(&reg_lock);
  CUlibrary lib = atomic_exchange(&fb->lib, NULL);
  if (lib != NULL && !atomic_load(&exiting)) cudaev__drv.cuLibraryUnload(lib);
}

void cudaev__fatbin_add_kernel(struct cudaev__fatbin *fb, const void *stub, const char *name) {
  if (!cudaev__fatbin_valid(fb) || stub == NULL || name == NULL) return;
  struct cudaev__kfunc *f = calloc(1, sizeof *f);
  if (f == NULL) return;
  f->magic = CUDAEV_KFUNC_MAGIC;
  f->stub = stub;
  f->name = name;
  f->fb = fb;
  pthread_mutex_lock(&reg_lock);
  struct cudaev__kfunc *head = map_get(&funcs_map, stub);
  bool err = false;
  if (head == NULL) {
    err = map_put(&funcs_map, stub, f);
  } else {
    /* The same kernel from another translation unit (a template, an inline
     * function): the first registration stays in use, the others wait in
     * line in case its fat binary goes away first. */
    struct cudaev__kfunc *p = head;
    while (p->dup != NULL) p = p->dup;
    p->dup = f;
  }
  if (!err) {
    f->next = fb->funcs;
    fb->funcs = f;
  }
  pthread_mutex_unlock(&reg_lock);
}

void cudaev__fatbin_add_var(struct cudaev__fatbin *fb, const void *host, const char *name,
                            size_t size, enum cudaev__var_kind kind, void **shadow) {
  if (!cudaev__fatbin_valid(fb) || host == NULL || name == NULL) return;
  struct cudaev__var *v = calloc(1, sizeof *v);
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

void cudaev__fatbin_set_unified_table(struct cudaev__fatbin *fb, void *functionTable,
                                      size_t functionWindowSize, void *dataTable,
                                      size_t dataWindowSize) {
  if (!cudaev__fatbin_valid(fb)) return;
  fb->table.functionTable = functionTable;
  fb->table.functionWindowSize = functionWindowSize;
  fb->table.dataTable = dataTable;
  fb->table.dataWindowSize = dataWindowSize;
  fb->has_table = true;
}
