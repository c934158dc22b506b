/* The wakeup: one eventfd per loop, written at most once per drain, and
 * cudaev__loop_send, the one door into a loop from other threads (a queue
 * push and a wake, libev's ev_async_send and libuv's uv_async_send). */
#include "loop_internal.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

cudaError_t cudaev__waker_new(struct cudaev__waker **out) {
  struct cudaev__waker *w = cudaev__alloc(sizeof *w);
  if (w == NULL) return cudaErrorMemoryAllocation;
  w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->fd < 0) {
    cudaev__free(w, sizeof *w);
    return cudaErrorOperatingSystem;
  }
  atomic_init(&w->refs, 1);
  atomic_init(&w->pending, 0);
  *out = w;
  return cudaSuccess;
}

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

/* No read (a system call) in a pass nobody woke: the fd is readable only
 * after a wake set `pending`. Read first, then clear `pending`, and only
 * when the read took a write: clearing first would let a writer's write be
 * consumed here while its `pending` stays set, and the next writer would
 * skip its write with its message still queued (a lost wakeup). A wake
 * caught between its flag and its write leaves the read empty: `pending`
 * stays set (later wakes need not write), and its write makes the fd
 * readable for the next pass. */
bool cudaev__waker_drain(struct cudaev__waker *w) {
  if (!atomic_load_explicit(&w->pending, memory_order_seq_cst)) return false;
  uint64_t v;
  ssize_t r;
  do r = read(w->fd, &v, sizeof v);
  while (r < 0 && errno == EINTR);
  if (r != (ssize_t)sizeof v) return false;
  atomic_store_explicit(&w->pending, 0, memory_order_seq_cst);
  return true;
}

/* The message may lead the loop to close and free itself (a continuation
 * calling cudaev_loop_close) before the wake below returns: the loop is not
 * read after the push, and the waker is held across it. */
void cudaev__loop_send(struct cudaev_loop *loop, struct cudaev__msg *m) {
  struct cudaev__waker *w = loop->waker;
  atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
  cudaev__mpsc_push(&loop->q, &m->node);
  cudaev__waker_wake(w);
  cudaev__waker_release(w);
}
