/* The bad-input harness: the generated cases (cases.c, from gen.py) and the
 * objects they are made of (harness.c).
 *
 * A case calls one export with the baseline arguments, or with one argument
 * replaced by a bad one. The harness dlopen()s libcudart.so.13 (the loader
 * picks it by LD_LIBRARY_PATH), so every call, setup calls included, goes
 * to the library under test. */
#ifndef CUDAEV_TESTS_BADINPUT_HARNESS_H
#define CUDAEV_TESTS_BADINPUT_HARNESS_H

#include <cuda_runtime_api.h>
#include <cuda_profiler_api.h>
#include <cuda_gl_interop.h>
#include <cuda_egl_interop.h>
#include <cuda_vdpau_interop.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* Objects a case can ask for, live or destroyed. */
enum bi_kind {
  BI_STREAM,
  BI_EVENT,
  BI_GRAPH,
  BI_NODE, /* an empty node of the live graph */
  BI_EXEC, /* the live graph, instantiated */
  BI_ARRAY,
  BI_MIPMAP,
  BI_POOL,
  BI_UOBJ,
  BI_LIBRARY, /* bi_ptx, loaded */
  BI_KERNEL,  /* its kernel "k" */
  BI_TEX,     /* a texture object of the live array */
  BI_SURF,    /* a surface object of the live array */
  BI_ASYNCCB,
  BI_LOGSCB,
  BI_NKINDS
};

enum bi_how { BI_LIVE, BI_DESTROYED };

enum bi_ret { BI_RET_ERR, BI_RET_STR, BI_RET_CHAN };

/* One case's state, fresh for every case. */
struct bi_run {
  int skip; /* a destroyed object could not be made: the call is not made */
  cudaError_t err;
  const char *str;
  struct cudaChannelFormatDesc chan;
  int made[BI_NKINDS];
  uintptr_t live[BI_NKINDS];
  void *devbuf;
};

struct bi_case {
  int fn;              /* index into bi_exports / bi_fn */
  const char *variant; /* "base", or "param=kind" */
  void (*run)(struct bi_run *);
  int ret;   /* enum bi_ret */
  int setup; /* makes objects: needs an initialised runtime when there is a device */
};

struct bi_errname {
  int code;
  const char *name;
};

/* Generated (cases.c). */
extern const int bi_nexports, bi_ncases;
extern const char *const bi_exports[];
extern const struct bi_case bi_cases[];
extern const struct bi_errname bi_errnames[];
extern void *bi_fn[]; /* dlsym of each export, filled before the first case */

/* How bi_release gives back what a successful allocation case made. */
enum bi_release {
  BI_FREE_DEV,     /* p is a void **: cudaFree(*p) */
  BI_FREE_PITCHED, /* p is a struct cudaPitchedPtr *: cudaFree(p->ptr) */
  BI_FREE_HOST,    /* p is a void **: cudaFreeHost(*p) */
  BI_FREE_ARRAY,   /* p is a cudaArray_t *: cudaFreeArray(*p) */
  BI_FREE_MIPMAP,  /* p is a cudaMipmappedArray_t *: cudaFreeMipmappedArray(*p) */
  BI_UNREGISTER    /* p was registered: cudaHostUnregister(p) */
};

/* Provided by harness.c to the cases. */
void bi_release(enum bi_release how, void *p);
uintptr_t bi_obj(struct bi_run *r, enum bi_kind k, enum bi_how how);
void *bi_devbuf(struct bi_run *r);
typedef void bi_fill_fn(struct bi_run *r, void *p);
void *bi_scratch(struct bi_run *r, int param, bi_fill_fn *fill);
bi_fill_fn bi_fill_chan, bi_fill_pool_props, bi_fill_resdesc, bi_fill_nodes;
void bi_host_fn(void *user);
void bi_stream_cb(cudaStream_t s, cudaError_t e, void *user);
void bi_async_cb(cudaAsyncNotificationInfo_t *info, void *user, cudaAsyncCallbackHandle_t h);
void bi_logs_cb(void *data, cudaLogLevel level, char *message, size_t length);
void bi_not_a_kernel(void);
extern const char bi_ptx[];

#endif
