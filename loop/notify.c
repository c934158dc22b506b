/* Device notifications (cudaev_notify_register): the driver calls back on
 * a thread of its own; the record is copied and delivered on the loop
 * thread as a message that carries its handler (CUDAEV__MSG_RUN). Not a
 * completion source: nothing here is a future. */
#include "loop_internal.h"

struct cudaev_notify {
  _Atomic uint32_t refs;
  _Atomic uint32_t active;
  struct cudaev_loop *loop;
  cudaev_notify_cb cb;
  void *user;
  CUdevice dev;
  CUasyncCallbackHandle handle;
};

struct notify_msg {
  struct cudaev__run_msg rm;
  struct cudaev_notify *n;
  CUasyncNotificationInfo info;
};

static void notify_release(struct cudaev_notify *n) {
  if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) == 1) cudaev__free(n, sizeof *n);
}

/* On the loop thread (a CUDAEV__MSG_RUN). */
static void notify_run(struct cudaev_loop *loop, struct cudaev__msg *msg) {
  struct notify_msg *m = (struct notify_msg *)msg;
  if (atomic_load_explicit(&m->n->active, memory_order_acquire))
    m->n->cb(m->n, &m->info, m->n->user);
  notify_release(m->n);
  cudaev__free(m, sizeof *m);
}

/* Runs on a driver thread: copy and hand to the loop. */
static void notify_tramp(CUasyncNotificationInfo *info, void *user, CUasyncCallbackHandle h) {
  struct cudaev_notify *n = user;
  if (!atomic_load_explicit(&n->active, memory_order_acquire)) return;
  struct notify_msg *m = cudaev__alloc(sizeof *m);
  if (m == NULL) return; /* dropped: nothing else can be done on this thread */
  m->rm.msg.kind = CUDAEV__MSG_RUN;
  m->rm.run = notify_run;
  m->n = n;
  m->info = *info;
  atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
  cudaev__loop_send(n->loop, &m->rm.msg);
}

CUDAEV_EXPORT cudaError_t cudaev_notify_register(cudaev_loop_t *loop, int device,
                                                 cudaev_notify_cb cb, void *user,
                                                 cudaev_notify_t **out) {
  if (out != NULL) *out = NULL;
  if (loop == NULL || cb == NULL || out == NULL) return cudaErrorInvalidValue;
  cudaError_t e = cudaev__init();
  if (e != cudaSuccess) return e;
  if (!cudaev__device_valid(device)) return cudaErrorInvalidDevice;
  struct cudaev_notify *n = cudaev__alloc(sizeof *n);
  if (n == NULL) return cudaErrorMemoryAllocation;
  atomic_init(&n->refs, 1);
  atomic_init(&n->active, 1);
  n->loop = loop;
  n->cb = cb;
  n->user = user;
  n->dev = cudaev__rt.devices[device].dev;
  CUresult r = cudaev__drv.cuDeviceRegisterAsyncNotification(n->dev, notify_tramp, n, &n->handle);
  if (r != CUDA_SUCCESS) {
    cudaev__free(n, sizeof *n);
    return cudaev__error_from_cu(r);
  }
  *out = n;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_notify_unregister(cudaev_notify_t *n) {
  if (n == NULL) return cudaErrorInvalidValue;
  atomic_store_explicit(&n->active, 0, memory_order_release);
  CUresult r = cudaev__drv.cuDeviceUnregisterAsyncNotification(n->dev, n->handle);
  notify_release(n);
  return cudaev__error_from_cu(r);
}
