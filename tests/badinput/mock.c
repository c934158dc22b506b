/* A stand-in libcudart.so.13 with one "device", for testing the harness
 * itself where there is no GPU (selftest.py): it makes and destroys every
 * kind of object the harness's setup asks for, and misbehaves on purpose
 * in a few functions so that crashes, hangs and crashes caused by an
 * earlier case are seen to be recorded.
 *
 * Objects are counted tokens; a destroyed one is remembered, so a call can
 * tell live, destroyed and never-made handles apart. Only what the harness
 * calls is defined; the rest of the exports are missing (NOSYM). */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define MAX_OBJS 4096
static uintptr_t next_obj = 0x10000;
static unsigned char state[MAX_OBJS]; /* 1 live, 2 destroyed */
static int broken;                    /* set by cudaEventRecord(bogus): later calls abort */

static uintptr_t make_obj(void) {
  uintptr_t o = next_obj;
  next_obj += 16;
  state[((o - 0x10000) / 16) % MAX_OBJS] = 1;
  return o;
}

/* 1 live, 2 destroyed, 0 never made. */
static int obj_state(uintptr_t o) {
  if (o < 0x10000 || o >= next_obj || (o & 15) != 0) return 0;
  return state[((o - 0x10000) / 16) % MAX_OBJS];
}

static cudaError_t destroy_obj(uintptr_t o) {
  if (obj_state(o) != 1) return cudaErrorInvalidResourceHandle;
  state[((o - 0x10000) / 16) % MAX_OBJS] = 2;
  return cudaSuccess;
}

#define MAKE(out, type)                              \
  do {                                               \
    if ((out) == NULL) return cudaErrorInvalidValue; \
    *(out) = (type)make_obj();                       \
    return cudaSuccess;                              \
  } while (0)

EXPORT cudaError_t cudaGetDeviceCount(int *n) {
  if (n == NULL) return cudaErrorInvalidValue;
  *n = 1;
  return cudaSuccess;
}
EXPORT cudaError_t cudaGetLastError(void) { return cudaSuccess; }

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f) {
  (void)f;
  MAKE(s, cudaStream_t);
}
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s) { return destroy_obj((uintptr_t)s); }
EXPORT cudaError_t cudaEventCreate(cudaEvent_t *e) { MAKE(e, cudaEvent_t); }
EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e) { return destroy_obj((uintptr_t)e); }
EXPORT cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned f) {
  (void)f;
  MAKE(g, cudaGraph_t);
}
EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t g) { return destroy_obj((uintptr_t)g); }
EXPORT cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *n, cudaGraph_t g,
                                         const cudaGraphNode_t *d, size_t nd) {
  (void)d, (void)nd;
  if (obj_state((uintptr_t)g) != 1) return cudaErrorInvalidValue;
  MAKE(n, cudaGraphNode_t);
}
EXPORT cudaError_t cudaGraphDestroyNode(cudaGraphNode_t n) { return destroy_obj((uintptr_t)n); }
EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f) {
  (void)f;
  if (obj_state((uintptr_t)g) != 1) return cudaErrorInvalidValue;
  MAKE(x, cudaGraphExec_t);
}
EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { return destroy_obj((uintptr_t)x); }
EXPORT cudaError_t cudaMallocArray(cudaArray_t *a, const struct cudaChannelFormatDesc *d, size_t w,
                                   size_t h, unsigned f) {
  (void)d, (void)w, (void)h, (void)f;
  MAKE(a, cudaArray_t);
}
EXPORT cudaError_t cudaFreeArray(cudaArray_t a) { return destroy_obj((uintptr_t)a); }
EXPORT cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t *m,
                                            const struct cudaChannelFormatDesc *d,
                                            struct cudaExtent e, unsigned n, unsigned f) {
  (void)d, (void)e, (void)n, (void)f;
  MAKE(m, cudaMipmappedArray_t);
}
EXPORT cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t m) {
  return destroy_obj((uintptr_t)m);
}
EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *p, const struct cudaMemPoolProps *props) {
  if (props == NULL) return cudaErrorInvalidValue;
  MAKE(p, cudaMemPool_t);
}
EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t p) { return destroy_obj((uintptr_t)p); }
EXPORT cudaError_t cudaUserObjectCreate(cudaUserObject_t *o, void *ptr, cudaHostFn_t fn, unsigned n,
                                        unsigned f) {
  (void)ptr, (void)fn, (void)n, (void)f;
  MAKE(o, cudaUserObject_t);
}
EXPORT cudaError_t cudaUserObjectRelease(cudaUserObject_t o, unsigned n) {
  (void)n;
  return destroy_obj((uintptr_t)o);
}
EXPORT cudaError_t cudaLibraryLoadData(cudaLibrary_t *l, const void *code, enum cudaJitOption *jo,
                                       void **jv, unsigned nj, enum cudaLibraryOption *lo,
                                       void **lv, unsigned nl) {
  (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  if (code == NULL) return cudaErrorInvalidValue;
  MAKE(l, cudaLibrary_t);
}
EXPORT cudaError_t cudaLibraryUnload(cudaLibrary_t l) { return destroy_obj((uintptr_t)l); }
/* A kernel is its library's token + 8: it lives as long as the library. */
EXPORT cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t l, const char *name) {
  (void)name;
  if (k == NULL || name == NULL) return cudaErrorInvalidValue;
  if (obj_state((uintptr_t)l) != 1) return cudaErrorInvalidResourceHandle;
  *k = (cudaKernel_t)((uintptr_t)l + 8);
  return cudaSuccess;
}
EXPORT cudaError_t cudaCreateTextureObject(cudaTextureObject_t *t, const struct cudaResourceDesc *r,
                                           const struct cudaTextureDesc *d,
                                           const struct cudaResourceViewDesc *v) {
  (void)d, (void)v;
  if (r == NULL || obj_state((uintptr_t)r->res.array.array) != 1) return cudaErrorInvalidValue;
  MAKE(t, cudaTextureObject_t);
}
EXPORT cudaError_t cudaDestroyTextureObject(cudaTextureObject_t t) { return destroy_obj(t); }
EXPORT cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t *s,
                                           const struct cudaResourceDesc *r) {
  if (r == NULL || obj_state((uintptr_t)r->res.array.array) != 1) return cudaErrorInvalidValue;
  MAKE(s, cudaSurfaceObject_t);
}
EXPORT cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t s) { return destroy_obj(s); }
EXPORT cudaError_t cudaDeviceRegisterAsyncNotification(int d, cudaAsyncCallback cb, void *u,
                                                       cudaAsyncCallbackHandle_t *h) {
  (void)u;
  if (d != 0 || cb == NULL) return cudaErrorInvalidValue;
  MAKE(h, cudaAsyncCallbackHandle_t);
}
EXPORT cudaError_t cudaDeviceUnregisterAsyncNotification(int d, cudaAsyncCallbackHandle_t h) {
  (void)d;
  return destroy_obj((uintptr_t)h);
}
EXPORT cudaError_t cudaLogsRegisterCallback(cudaLogsCallback_t cb, void *u,
                                            cudaLogsCallbackHandle *h) {
  (void)cb, (void)u;
  MAKE(h, cudaLogsCallbackHandle);
}
EXPORT cudaError_t cudaLogsUnregisterCallback(cudaLogsCallbackHandle h) {
  return destroy_obj((uintptr_t)h);
}

/* Memory: cudaMalloc hands out tokens too; freeing checks them. */
EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
  if (p == NULL) return cudaErrorInvalidValue;
  if (n > ((size_t)1 << 40)) return cudaErrorMemoryAllocation;
  *p = (void *)make_obj();
  return cudaSuccess;
}
EXPORT cudaError_t cudaFree(void *p) { return p == NULL ? cudaSuccess : destroy_obj((uintptr_t)p); }

/* The misbehaviour the self-test looks for. */
EXPORT cudaError_t cudaStreamQuery(cudaStream_t s) {
  switch (obj_state((uintptr_t)s)) {
  case 1: return cudaSuccess;
  case 2: return cudaErrorInvalidResourceHandle;
  default:
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread) return cudaSuccess;
    raise(SIGSEGV); /* a never-made handle: crash, as a driver would */
    return cudaErrorUnknown;
  }
}
EXPORT cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e == (cudaEvent_t)(uintptr_t)0x1234)
    for (;;) pause(); /* hang */
  return obj_state((uintptr_t)e) == 1 ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
/* A bogus event breaks the process; the next cudaEventSynchronize in the
 * same process aborts: a crash that is not its case's fault. */
EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  (void)s;
  if (obj_state((uintptr_t)e) == 0) broken = 1;
  return obj_state((uintptr_t)e) == 1 ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (broken) abort();
  return obj_state((uintptr_t)e) == 1 ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
EXPORT cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t k, enum cudaFuncAttribute a, int v,
                                                   int d) {
  (void)a, (void)v, (void)d;
  uintptr_t lib = (uintptr_t)k - 8;
  return ((uintptr_t)k & 15) == 8 && obj_state(lib) == 1 ? cudaSuccess
                                                         : cudaErrorInvalidResourceHandle;
}
