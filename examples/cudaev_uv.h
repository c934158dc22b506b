/* cudaev_uv.h: drives a foreign-mode cudaev loop from a libuv loop.
 * Header-only; `meson install` puts it beside cudaev.h, so a program built
 * with `pkg-config --cflags --libs cudaev libuv` includes <cudaev_uv.h>
 * (or copy it into your project).
 *
 *   struct cudaev_uv a;
 *   cudaev_loop_new_foreign(&loop);
 *   cudaev_uv_start(&a, uv_default_loop(), loop);
 *   uv_run(uv_default_loop(), UV_RUN_DEFAULT);
 *   ... from a callback, when done: cudaev_uv_close(&a, on_closed);
 *   after uv_run returned: cudaev_loop_destroy(loop);
 *
 * How: a uv_poll_t watches cudaev_loop_fd() for readability; a uv_prepare_t
 * asks cudaev_loop_prepare() right before libuv blocks (libuv computes its
 * poll timeout after the prepare callbacks, from its timers) and sets a
 * uv_timer_t to that many milliseconds, or stops it for -1; the poll and the
 * timer callbacks call cudaev_loop_process(). So libuv never sleeps past a
 * cudaev deadline and wakes as soon as cudaev's fd is written (a GPU
 * completion, a promise completed on another thread, cudaev_loop_post).
 *
 * Like any active libuv handle, the poll handle keeps uv_run running until
 * cudaev_uv_close(); the prepare and timer handles are unref'd (they only
 * serve the poll).
 * Threads: all of this, and every cudaev callback, runs on the uv_run
 * thread (cudaev callbacks inside the poll or timer callback). Not
 * thread-safe, as libuv handles are not.
 * Every function is static inline: a file that uses some of them gets no
 * unused-function warning for the others.
 * Ownership: the caller owns `a` (it must stay valid until the close
 * callback ran) and the cudaev loop; the cudaev loop owns the fd. Destroy the
 * cudaev loop only after the close callback, so that libuv no longer polls
 * an fd that cudaev_loop_destroy closes.
 */
#ifndef CUDAEV_UV_H
#define CUDAEV_UV_H

#include <uv.h>

#include <cudaev.h>

struct cudaev_uv {
  cudaev_loop_t *loop;
  uv_poll_t poll;
  uv_prepare_t prepare;
  uv_timer_t timer;
  int open_handles;
  void (*on_close)(struct cudaev_uv *a);
};

static inline void cudaev_uv__process(struct cudaev_uv *a) { cudaev_loop_process(a->loop); }

static inline void cudaev_uv__on_poll(uv_poll_t *h, int status, int events) {
  (void)status, (void)events; /* on an error too: processing never hurts */
  cudaev_uv__process(h->data);
}

static inline void cudaev_uv__on_timer(uv_timer_t *h) { cudaev_uv__process(h->data); }

static inline void cudaev_uv__on_prepare(uv_prepare_t *h) {
  struct cudaev_uv *a = h->data;
  int ms = cudaev_loop_prepare(a->loop);
  if (ms < 0)
    uv_timer_stop(&a->timer);
  else
    uv_timer_start(&a->timer, cudaev_uv__on_timer, (uint64_t)ms, 0);
}

/* Starts driving `loop` (from cudaev_loop_new_foreign) on `uvl`. Returns 0
 * or a libuv error code. Thread: the uv_run thread. */
static inline int cudaev_uv_start(struct cudaev_uv *a, uv_loop_t *uvl, cudaev_loop_t *loop) {
  int e;
  a->loop = loop;
  a->open_handles = 0;
  a->on_close = NULL;
  if ((e = uv_poll_init(uvl, &a->poll, cudaev_loop_fd(loop))) != 0) return e;
  a->open_handles++;
  uv_prepare_init(uvl, &a->prepare);
  uv_timer_init(uvl, &a->timer);
  a->open_handles += 2;
  a->poll.data = a->prepare.data = a->timer.data = a;
  uv_unref((uv_handle_t *)&a->prepare);
  uv_unref((uv_handle_t *)&a->timer);
  uv_prepare_start(&a->prepare, cudaev_uv__on_prepare);
  return uv_poll_start(&a->poll, UV_READABLE, cudaev_uv__on_poll);
}

static inline void cudaev_uv__on_closed(uv_handle_t *h) {
  struct cudaev_uv *a = h->data;
  if (--a->open_handles == 0 && a->on_close) a->on_close(a);
}

/* Stops driving the loop and closes the handles; on_close (may be NULL)
 * runs once all three are closed. Legal inside any callback, cudaev's
 * included. Thread: the uv_run thread. */
static inline void cudaev_uv_close(struct cudaev_uv *a, void (*on_close)(struct cudaev_uv *a)) {
  a->on_close = on_close;
  uv_close((uv_handle_t *)&a->poll, cudaev_uv__on_closed);
  uv_close((uv_handle_t *)&a->prepare, cudaev_uv__on_closed);
  uv_close((uv_handle_t *)&a->timer, cudaev_uv__on_closed);
}

#endif
