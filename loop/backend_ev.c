/* Backend ev: the loop runs inside the application's libev loop. Four
 * watchers: io on the wakeup fd, a prepare hook that spins/arms before libev
 * blocks and sets the timer to the GPU's next deadline, an idle watcher
 * that keeps libev polling while more work is ready, and the timer. libev
 * is reached through cudaev__ev (libev.h), bound when the loop is made. */
#include "libev.h"
#include "loop_internal.h"

#include <string.h>

struct ev_state {
  ev_io io;
  ev_prepare prep;
  ev_idle idle;
  ev_timer timer;
};

/* Keep-alive, as libuv's active handles: while futures are pending (or the
 * application holds cudaev_loop_ref), the loop holds one reference on the
 * libev loop, so ev_run does not return under pending work. */
static void ev_keep(struct cudaev_loop *loop) {
  bool want =
      loop->user_refs > 0 || atomic_load_explicit(&loop->npending_pub, memory_order_relaxed) > 0;
  if (want == loop->host_refd) return;
  loop->host_refd = want;
  if (want)
    cudaev__ev.ref(loop->evl);
  else
    cudaev__ev.unref(loop->evl);
}

static void after_pass(struct ev_loop *evl, struct cudaev_loop *loop, bool more) {
  struct ev_state *s = loop->be_state;
  ev_keep(loop);
  if (more)
    cudaev__ev.idle_start(evl, &s->idle); /* idle watchers make libev poll without blocking */
  else
    cudaev__ev.idle_stop(evl, &s->idle);
}

/* A pass from one of our watchers; a cudaev_loop_close from a callback
 * in it closes the loop here, after the pass (stopping our own watchers
 * inside their callbacks is allowed in libev). */
static void pass(struct ev_loop *evl, struct cudaev_loop *loop) {
  bool more = cudaev__loop_process(loop);
  if (loop->closing && !cudaev__on_loop(loop)) {
    cudaev__loop_close_now(loop);
    return;
  }
  after_pass(evl, loop, more);
}

static void io_cb(struct ev_loop *evl, ev_io *w, int revents) {
  struct cudaev_loop *loop = w->data;
  pass(evl, loop);
}

static void idle_cb(struct ev_loop *evl, ev_idle *w, int revents) {
  struct cudaev_loop *loop = w->data;
  pass(evl, loop);
}

static void timer_cb(struct ev_loop *evl, ev_timer *w, int revents) {
  struct cudaev_loop *loop = w->data;
  pass(evl, loop);
}

static void prepare_cb(struct ev_loop *evl, ev_prepare *w, int revents) {
  struct cudaev_loop *loop = w->data;
  struct ev_state *s = loop->be_state;
  if (ev_is_active(&s->idle)) return; /* not going to block anyway */
  uint64_t t = cudaev__loop_before_sleep(loop);
  cudaev__ev.timer_stop(evl, &s->timer);
  if (t == 0) {
    cudaev__ev.idle_start(evl, &s->idle);
  } else if (t != UINT64_MAX) {
    ev_timer_set(&s->timer, (ev_tstamp)t / 1e9, 0.);
    cudaev__ev.timer_start(evl, &s->timer);
  }
}

static bool ev_start_(struct cudaev_loop *loop) {
  struct ev_state *s = cudaev__alloc(sizeof *s);
  if (s == NULL) return true;
  memset(s, 0, sizeof *s);
  loop->be_state = s;
  ev_io_init(&s->io, io_cb, loop->waker->fd, EV_READ);
  ev_prepare_init(&s->prep, prepare_cb);
  ev_idle_init(&s->idle, idle_cb);
  ev_timer_init(&s->timer, timer_cb, 0., 0.);
  s->io.data = s->prep.data = s->idle.data = s->timer.data = loop;
  cudaev__ev.io_start(loop->evl, &s->io);
  cudaev__ev.prepare_start(loop->evl, &s->prep);
  /* Our watchers alone must not keep the caller's ev_run going. */
  cudaev__ev.unref(loop->evl);
  cudaev__ev.unref(loop->evl);
  /* Anything submitted before the loop first runs is seen at once. */
  cudaev__ev.idle_start(loop->evl, &s->idle);
  return false;
}

static void ev_stop_(struct cudaev_loop *loop) {
  struct ev_state *s = loop->be_state;
  if (s == NULL) return;
  cudaev__ev.ref(loop->evl);
  cudaev__ev.ref(loop->evl);
  if (loop->host_refd) cudaev__ev.unref(loop->evl);
  loop->host_refd = false;
  cudaev__ev.io_stop(loop->evl, &s->io);
  cudaev__ev.prepare_stop(loop->evl, &s->prep);
  cudaev__ev.idle_stop(loop->evl, &s->idle);
  cudaev__ev.timer_stop(loop->evl, &s->timer);
  cudaev__free(s, sizeof *s);
  loop->be_state = NULL;
}

const struct cudaev__backend cudaev__backend_ev = {ev_start_, ev_stop_, ev_keep};
