/* Loop-thread host functions (cudaev_launch_host_func_async): a stream waits at a gate
 * that only the loop opens, after it has run fn on the loop thread, so fn
 * may call CUDA (docs/design.md, "Loop-thread host functions", says what it
 * must not call). The loop side (running fn, opening the gate) is in
 * finish(), gpu_poll.c. */
#include "hostfn.h"
#include "gpu_ctx.h"
#include "gpu_marker.h"
#include "gpu_wake.h"
#include "stall.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- event-path gates ---------------------------------------------------- */

void cudaev__hgate_release(struct cudaev__hgate *hg) {
  if (atomic_fetch_sub_explicit(&hg->refs, 1, memory_order_acq_rel) != 1) return;
  cudaev__waker_release(hg->w);
  cudaev__free(hg, sizeof *hg);
}

/* Loop thread: lets a blocked gate_fn return (or one not yet run pass). */
void cudaev__hgate_open(struct cudaev__hgate *hg) {
  atomic_store_explicit(&hg->open, 1, memory_order_release);
  syscall(SYS_futex, (uint32_t *)&hg->open, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Driver host-function thread (event path): no CUDA call in here. */
static void CUDA_CB gate_fn(void *arg) {
  struct cudaev__hgate *hg = arg;
  atomic_store_explicit(&hg->reached, 1, memory_order_release);
  cudaev__stall_reached(hg->stall, hg->stream);
  cudaev__stall_unhold(hg->stall);
  cudaev__waker_wake(hg->w);
  while (atomic_load_explicit(&hg->open, memory_order_acquire) == 0)
    syscall(SYS_futex, (uint32_t *)&hg->open, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
  cudaev__hgate_release(hg);
}

/* Event path of cudaev_launch_host_func_async: on the stream,
 *   launchHostFunc(gate_fn: reached = 1, wake, block until open); record(ev)
 * The loop sees `reached`, runs fn, sets `open`; the pooled event completes
 * the user's future once the stream has passed. While gate_fn blocks, the
 * driver may hold back other host functions of the context (NVIDIA may
 * serialize them): fn must not wait for one. */
static cudaError_t host_func_events(struct cudaev_loop *loop, struct cudaev__gpu *g, CUstream st,
                                    cudaev_host_fn fn, void *user, cudaev_future_t **out) {
  struct cudaev_future *t = cudaev__future_new(loop, CUDAEV__K_HOSTFN);
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  struct cudaev__hgate *hg = cudaev__alloc(sizeof *hg);
  if (t == NULL || f == NULL || hg == NULL) {
    cudaev_future_release(t);
    cudaev_future_release(f);
    cudaev__free(hg, sizeof *hg);
    return cudaErrorMemoryAllocation;
  }
  atomic_init(&hg->refs, 2); /* gate_fn's and t's */
  atomic_init(&hg->reached, 0);
  atomic_init(&hg->open, 0);
  hg->w = loop->waker;
  atomic_fetch_add_explicit(&hg->w->refs, 1, memory_order_relaxed);
  hg->stall = loop->gpu->stall;
  hg->stream = st;
  cudaev__stall_hold(hg->stall); /* gate_fn's */
  CUevent ev = NULL;
  struct cudaev__backlog *b = slot_of(g, st);
  bool solo;
  uint32_t began = order_begin(b, &solo);
  cudaError_t e = cudaev__gpu_event_get(g, &ev);
  if (e == cudaSuccess) e = cudaev__error_from_cu(cudaev__drv.cuLaunchHostFunc(st, gate_fn, hg));
  if (e != cudaSuccess) {
    order_end(b, began, &solo);
    /* Nothing is on the stream. */
    if (ev != NULL) cudaev__gpu_event_put(g, ev);
    cudaev__stall_unhold(hg->stall);
    cudaev__hgate_release(hg);
    cudaev__hgate_release(hg);
    cudaev_future_release(t);
    cudaev_future_release(f);
    return e;
  }
  /* From here gate_fn is on the stream: t must be tracked so that the loop
   * opens the gate (it would block the driver's thread forever). */
  t->use_event = 1;
  t->tag = f->tag = next_tag(g); /* only for g's index (gpu_of) */
  t->aux.hg = hg;
  t->u.h.fn = fn;
  t->u.h.user = user;
  t->t_submit = cudaev__now_ns();
  t->track = (struct cudaev__track *)(void *)st;
  e = cudaev__error_from_cu(cudaev__drv.cuEventRecord(ev, st));
  t->msg.seq = f->msg.seq = order_end(b, began, &solo);
  t->solo = f->solo = solo || st == CU_STREAM_PER_THREAD;
  if (e != cudaSuccess) {
    cudaev__gpu_event_put(g, ev);
    t->user = NULL; /* fn will not run; the gate still opens once reached */
    cudaev__future_submit(t);
    cudaev_future_release(f);
    return e;
  }
  f->use_event = 1;
  f->u.ev = ev;
  f->has_gate = 1;
  f->gate = UINT32_MAX; /* no gate word on this path */
  f->t_submit = t->t_submit;
  f->track = t->track;
  t->user = cudaev_future_retain(f); /* released when t finishes */
  cudaev_future_retain(f);           /* the FIFO's */
  cudaev__future_submit(t);
  cudaev__future_submit(f);
  *out = f;
  return cudaSuccess;
}

/* The wake-up of a gate (word path), on the driver's host-function
 * thread: the GPU has reached the gate, so the loop is woken and the time
 * goes on record for the stall monitor (stall.h). No CUDA call. */
struct gate_wake {
  struct cudaev__waker *w;
  struct cudaev__stall *stall;
  CUstream stream;
};

static void CUDA_CB gate_wake_fn(void *arg) {
  struct gate_wake *gw = arg;
  cudaev__stall_reached(gw->stall, gw->stream);
  cudaev__waker_wake(gw->w);
  cudaev__waker_release(gw->w);
  cudaev__stall_unhold(gw->stall);
  cudaev__free(gw, sizeof *gw);
}

/* Enqueues the wake-up of a gate on st, with gw (taken before anything
 * was on the stream, so that out of memory fails the submission cleanly).
 * If the enqueue fails, the loop still finds the signal by polling (the
 * watchdog's passes), unwatched. */
static void enqueue_gate_wake(struct cudaev_loop *loop, CUstream st, struct gate_wake *gw) {
  gw->w = loop->waker;
  atomic_fetch_add_explicit(&gw->w->refs, 1, memory_order_relaxed);
  gw->stall = loop->gpu->stall;
  gw->stream = st;
  cudaev__stall_hold(gw->stall);
  if (cudaev__drv.cuLaunchHostFunc(st, gate_wake_fn, gw) != CUDA_SUCCESS) {
    cudaev__stall_unhold(gw->stall);
    cudaev__waker_release(gw->w);
    cudaev__free(gw, sizeof *gw);
  }
}

/* Loop-thread host function: on the stream,
 *   write(sig = tagT); launchHostFunc(wake); wait(gate == tagT); write(fin = tagF)
 * The loop sees `sig`, runs fn, opens `gate`; `fin` completes the user's
 * future once the stream has passed. */
CUDAEV_EXPORT cudaError_t cudaev_launch_host_func_async(cudaev_loop_t *loop, cudaStream_t stream,
                                                        cudaev_host_fn fn, void *user,
                                                        cudaev_future_t **out) {
  struct cudaev__sub s;
  cudaError_t e = cudaev__sub_begin(&s, loop, (CUstream)stream, out);
  if (e != cudaSuccess) return cudaev__ret(e);
  struct cudaev__gpu *g = s.g;
  if (fn == NULL) return cudaev__sub_end(&s, cudaErrorInvalidValue);
  if (g->use_events)
    return cudaev__sub_end(&s, host_func_events(loop, g, (CUstream)stream, fn, user, out));
  CUstream st = (CUstream)stream;
  struct cudaev_future *t = cudaev__future_new(loop, CUDAEV__K_HOSTFN);
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  uint32_t gate = 0;
  bool have_sig = false, have_gate = false, have_fin = false;
  struct gate_wake *gw = cudaev__alloc(sizeof *gw);
  if (t == NULL || f == NULL || gw == NULL) {
    e = cudaErrorMemoryAllocation;
    goto fail;
  }
  if ((e = cudaev__gpu_word_get(g, &t->x.word)) != cudaSuccess) goto fail;
  have_sig = true;
  if ((e = cudaev__gpu_word_get(g, &gate)) != cudaSuccess) goto fail;
  have_gate = true;
  if ((e = cudaev__gpu_word_get(g, &f->x.word)) != cudaSuccess) goto fail;
  have_fin = true;
  t->tag = next_tag(g);
  f->tag = next_tag(g);
  t->gate = gate;
  t->u.h.fn = fn;
  t->u.h.user = user;
  struct cudaev__backlog *b = slot_of(g, st);
  bool solo;
  uint32_t began = order_begin(b, &solo);
  e = cudaev__error_from_cu(
      cudaev__drv.cuStreamWriteValue32(st, word_dev(g, t->x.word), t->tag, 0));
  if (e != cudaSuccess) {
    order_end(b, began, &solo);
    goto fail;
  }
  /* From here the signal is on the stream: t must be tracked so that its
   * word is recycled only after the GPU wrote it. */
  enqueue_gate_wake(loop, st, gw);
  gw = NULL; /* the host function's, or freed */
  e = cudaev__error_from_cu(
      cudaev__drv.cuStreamWaitValue32(st, word_dev(g, gate), t->tag, CU_STREAM_WAIT_VALUE_EQ));
  if (e == cudaSuccess)
    e = cudaev__error_from_cu(
        cudaev__drv.cuStreamWriteValue32(st, word_dev(g, f->x.word), f->tag, 0));
  t->msg.seq = f->msg.seq = order_end(b, began, &solo);
  t->solo = f->solo = solo || st == CU_STREAM_PER_THREAD;
  t->t_submit = cudaev__now_ns();
  t->track = (struct cudaev__track *)(void *)st;
  if (e != cudaSuccess) {
    /* fn will not run; t still opens the gate (harmless) once seen. The
     * gate word and fin word are leaked: the GPU may wait on / write them. */
    t->user = NULL;
    cudaev__future_submit(t);
    cudaev_future_release(f);
    return cudaev__sub_end(&s, e);
  }
  t->user = cudaev_future_retain(f); /* released when t finishes */
  f->has_gate = 1;
  f->gate = gate;
  f->t_submit = t->t_submit;
  f->track = t->track;
  cudaev_future_retain(f); /* the FIFO's */
  cudaev__future_submit(t);
  cudaev__future_submit(f);
  *out = f;
  return cudaev__sub_end(&s, cudaSuccess);
fail:
  cudaev__free(gw, sizeof *gw);
  if (have_sig) cudaev__gpu_words_put(g, &t->x.word, 1);
  if (have_gate) cudaev__gpu_words_put(g, &gate, 1);
  if (have_fin) cudaev__gpu_words_put(g, &f->x.word, 1);
  cudaev_future_release(t);
  cudaev_future_release(f);
  return cudaev__sub_end(&s, e);
}
