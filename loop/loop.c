/* The loop object (cudaev_loop_*): the wakeup, the message queue, one
 * processing pass, and the foreign run mode. The other two run modes are
 * backend_ev.c and backend_thread.c, behind the same const vtable. */
#include "libev.h"
#include "loop_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* ---- the wakeup ------------------------------------------------------------ */

/* One eventfd write per drain at most: `pending` says a write is already
 * on its way (libuv's uv_async_send pattern). */
void cudaev__waker_wake(struct cudaev__waker *w) {
  /* seq_cst: the queue push before this load and the loop's clear of
   * `pending` before its queue drain form a store/load pair (Dekker); at
   * least one side must see the other. */
  if (atomic_load_explicit(&w->pending, memory_order_seq_cst) ||
      atomic_exchange_explicit(&w->pending, 1, memory_order_seq_cst))
    return;
  uint64_t one = 1;
  ssize_t r;
  do r = write(w->fd, &one, sizeof one);
  while (r < 0 && errno == EINTR);
}

void cudaev__waker_release(struct cudaev__waker *w) {
  if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1) return;
  close(w->fd);
  cudaev__free(w, sizeof *w);
}

/* Read first, then clear `pending`: clearing first would let a writer's
 * eventfd write be consumed here while its `pending` stays set, and the next
 * writer would then skip its write with its message still queued (a lost
 * wakeup). The fd is read on every pass (nonblocking) so that a write that
 * lands after the clear never leaves it readable for nothing. */
static void waker_drain(struct cudaev__waker *w) {
  uint64_t v;
  ssize_t r;
  do r = read(w->fd, &v, sizeof v);
  while (r < 0 && errno == EINTR);
  atomic_store_explicit(&w->pending, 0, memory_order_seq_cst);
}

void cudaev__loop_send(struct cudaev_loop *loop, struct cudaev__msg *m) {
  cudaev__mpsc_push(&loop->q, &m->node);
  cudaev__loop_wake(loop);
}

/* ---- pending list (loop thread) --------------------------------------- */

bool cudaev__pend_add(struct cudaev_loop *loop, struct cudaev_future *f) {
  if (loop->npend == loop->cap_pend) {
    uint32_t cap = loop->cap_pend ? loop->cap_pend * 2 : 64;
    struct cudaev_future **p = cudaev__alloc(cap * sizeof *p);
    if (p == NULL) return false;
    if (loop->npend) memcpy(p, loop->pend, loop->npend * sizeof *p);
    cudaev__free(loop->pend, loop->cap_pend * sizeof *p);
    loop->pend = p;
    loop->cap_pend = cap;
  }
  f->x.pend_idx = loop->npend;
  loop->pend[loop->npend++] = f;
  return true;
}

void cudaev__pend_del(struct cudaev_loop *loop, struct cudaev_future *f) {
  uint32_t i = f->x.pend_idx;
  if (i == UINT32_MAX || i >= loop->npend || loop->pend[i] != f) return;
  struct cudaev_future *last = loop->pend[--loop->npend];
  loop->pend[i] = last;
  last->x.pend_idx = i;
  f->x.pend_idx = UINT32_MAX;
}

/* ---- one pass ------------------------------------------------------------- */

struct call_msg {
  struct cudaev__msg msg;
  cudaev_loop_fn fn;
  void *user;
};

static void publish_pending(struct cudaev_loop *loop) {
  size_t n = loop->npend + (loop->gpu ? cudaev__gpu_pending(loop) : 0);
  atomic_store_explicit(&loop->npending_pub, n, memory_order_relaxed);
}

bool cudaev__loop_process(struct cudaev_loop *loop) {
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  bool pushed = loop->gpu ? cudaev__gpu_enter(loop) : false;
  waker_drain(loop->waker);
  bool more = false;
  unsigned n = 0;
  struct cudaev__mpsc_node *node;
  while ((node = cudaev__mpsc_pop(&loop->q)) != NULL) {
    struct cudaev__msg *m = cudaev__msg_of(node);
    switch (m->kind) {
    case CUDAEV__MSG_FUTURE:
    case CUDAEV__MSG_THEN: cudaev__future_msg(loop, m); break;
    case CUDAEV__MSG_CALL: {
      struct call_msg *c = (struct call_msg *)m;
      c->fn(loop, c->user);
      cudaev__free(c, sizeof *c);
      break;
    }
    case CUDAEV__MSG_NOTIFY: cudaev__notify_msg(loop, m); break;
    default: break;
    }
    /* Bounded, so that GPU completions are not starved by a flood. */
    if (++n == 4096) break;
  }
  if (!cudaev__mpsc_empty(&loop->q)) more = true;
  if (loop->gpu) {
    cudaev__gpu_poll(loop);
    cudaev__gpu_watchdog(loop, cudaev__now_ns());
  }
  if (cudaev__run_deferred(loop)) more = true;
  publish_pending(loop);
  if (loop->gpu) cudaev__gpu_leave(loop, pushed);
  cudaev__tls_loop = prev;
  return more;
}

uint64_t cudaev__loop_before_sleep(struct cudaev_loop *loop) {
  if (loop->def_head != NULL || !cudaev__mpsc_empty(&loop->q)) return 0;
  if (loop->gpu == NULL) return UINT64_MAX;
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  bool pushed = cudaev__gpu_enter(loop);
  uint64_t t = cudaev__gpu_before_sleep(loop);
  cudaev__gpu_leave(loop, pushed);
  cudaev__tls_loop = prev;
  return t;
}

/* ---- backend: foreign loop ---------------------------------------------------- */

static bool foreign_start(struct cudaev_loop *loop) {
  /* Anything submitted before the first process call is seen then. */
  cudaev__loop_wake(loop);
  return false;
}
static void foreign_stop(struct cudaev_loop *loop) {}

const struct cudaev__backend cudaev__backend_foreign = {foreign_start, foreign_stop};

/* ---- public ---------------------------------------------------------------------- */

static cudaError_t loop_new(const struct cudaev__backend *be, struct ev_loop *evl,
                            cudaev_loop_t **out) {
  if (out != NULL) *out = NULL;
  if (out == NULL || (be == &cudaev__backend_ev && evl == NULL)) return cudaErrorInvalidValue;
  if (be == &cudaev__backend_ev && cudaev__libev_bind() != cudaSuccess)
    return CUDAEV_ERROR_NO_LIBEV;
  struct cudaev_loop *loop = cudaev__alloc(sizeof *loop);
  struct cudaev__waker *w = cudaev__alloc(sizeof *w);
  if (loop == NULL || w == NULL) {
    cudaev__free(loop, sizeof *loop);
    cudaev__free(w, sizeof *w);
    return cudaErrorMemoryAllocation;
  }
  memset(loop, 0, sizeof *loop);
  w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->fd < 0) {
    cudaev__free(loop, sizeof *loop);
    cudaev__free(w, sizeof *w);
    return cudaErrorOperatingSystem;
  }
  atomic_init(&w->refs, 1);
  atomic_init(&w->pending, 0);
  loop->waker = w;
  cudaev__mpsc_init(&loop->q);
  loop->be = be;
  loop->evl = evl;
  atomic_init(&loop->spin_max_us, 50);
  atomic_init(&loop->npending_pub, 0);
  atomic_init(&loop->stopping, 0);
  loop->gpu_error = cudaev__gpu_init(loop);
  if (be->start(loop)) {
    if (loop->gpu) cudaev__gpu_fini(loop);
    cudaev__waker_release(w);
    cudaev__free(loop, sizeof *loop);
    return be == &cudaev__backend_ev ? cudaErrorMemoryAllocation : cudaErrorOperatingSystem;
  }
  *out = loop;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_loop_new_ev(struct ev_loop *evl, cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_ev, evl, out);
}
CUDAEV_EXPORT cudaError_t cudaev_loop_new_foreign(cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_foreign, NULL, out);
}
CUDAEV_EXPORT cudaError_t cudaev_loop_new_thread(cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_thread, NULL, out);
}

CUDAEV_EXPORT void cudaev_loop_destroy(cudaev_loop_t *loop) {
  if (loop == NULL || cudaev__loop_is_default(loop)) return;
  loop->be->stop(loop);
  /* From here the calling thread is the loop thread. */
  cudaev__loop_process(loop);
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  /* Fail what is pending; each completion takes itself off the list. */
  while (loop->npend > 0) {
    struct cudaev_future *f = loop->pend[loop->npend - 1];
    if (!cudaev__future_try_complete(f, CUDAEV_ERROR_LOOP_DESTROYED)) {
      /* Completed but not fired yet: its FIRE is queued; fire it here. */
      cudaev__future_fire(f);
    }
  }
  if (loop->gpu) cudaev__gpu_fini(loop);
  cudaev__tls_loop = prev;
  while (cudaev__loop_process(loop) || !cudaev__mpsc_empty(&loop->q)) {
  }
  cudaev__free(loop->pend, loop->cap_pend * sizeof *loop->pend);
  cudaev__waker_release(loop->waker);
  cudaev__free(loop, sizeof *loop);
}

CUDAEV_EXPORT int cudaev_loop_fd(cudaev_loop_t *loop) {
  if (loop == NULL || loop->be != &cudaev__backend_foreign) return -1;
  return loop->waker->fd;
}

CUDAEV_EXPORT int cudaev_loop_timeout(cudaev_loop_t *loop) {
  if (loop == NULL) return -1;
  uint64_t t = cudaev__loop_before_sleep(loop);
  if (t == UINT64_MAX) return -1;
  uint64_t ms = (t + 999999) / 1000000;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

CUDAEV_EXPORT void cudaev_loop_process(cudaev_loop_t *loop) {
  if (loop == NULL) return;
  /* More work ready: make the fd readable so the driving loop returns. */
  if (cudaev__loop_process(loop)) cudaev__loop_wake(loop);
}

CUDAEV_EXPORT void cudaev_loop_set_spin(cudaev_loop_t *loop, unsigned max_us) {
  if (loop != NULL) atomic_store_explicit(&loop->spin_max_us, max_us, memory_order_relaxed);
}

CUDAEV_EXPORT cudaError_t cudaev_loop_post(cudaev_loop_t *loop, cudaev_loop_fn fn, void *user) {
  if (loop == NULL || fn == NULL) return cudaErrorInvalidValue;
  struct call_msg *c = cudaev__alloc(sizeof *c);
  if (c == NULL) return cudaErrorMemoryAllocation;
  c->msg.kind = CUDAEV__MSG_CALL;
  c->fn = fn;
  c->user = user;
  cudaev__loop_send(loop, &c->msg);
  return cudaSuccess;
}

CUDAEV_EXPORT size_t cudaev_loop_pending(cudaev_loop_t *loop) {
  if (loop == NULL) return 0;
  if (cudaev__on_loop(loop)) publish_pending(loop);
  return atomic_load_explicit(&loop->npending_pub, memory_order_relaxed);
}
