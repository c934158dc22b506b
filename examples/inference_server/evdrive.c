/* libev drives a foreign-mode cudaev loop (evdrive.h). */
#include "evdrive.h"

static void process(struct evdrive *d) {
  d->passes++;
  cudaev_loop_process(d->loop);
  if (d->after) d->after(d->arg);
}

static void on_io(struct ev_loop *evl, ev_io *w, int revents) {
  (void)evl, (void)revents;
  process(w->data);
}

static void on_timer(struct ev_loop *evl, ev_timer *w, int revents) {
  (void)evl, (void)revents;
  process(w->data);
}

/* libev calls prepare watchers right before it blocks: the moment at which
 * cudaev_loop_prepare must be asked (it may spin briefly and arms the GPU
 * wakeups that make the fd readable). */
static void on_prepare(struct ev_loop *evl, ev_prepare *w, int revents) {
  struct evdrive *d = w->data;
  (void)revents;
  int ms = cudaev_loop_prepare(d->loop);
  ev_timer_stop(evl, &d->timer);
  if (ms >= 0) {
    ev_timer_set(&d->timer, ms / 1000.0, 0.);
    ev_timer_start(evl, &d->timer);
  }
}

void evdrive_start(struct evdrive *d, struct ev_loop *evl, cudaev_loop_t *loop,
                   void (*after)(void *arg), void *arg) {
  d->evl = evl;
  d->loop = loop;
  d->after = after;
  d->arg = arg;
  ev_io_init(&d->io, on_io, cudaev_loop_fd(loop), EV_READ);
  ev_prepare_init(&d->prepare, on_prepare);
  ev_init(&d->timer, on_timer);
  d->io.data = d->prepare.data = d->timer.data = d;
  ev_io_start(evl, &d->io);
  ev_prepare_start(evl, &d->prepare);
  d->active = 1;
}

void evdrive_stop(struct evdrive *d) {
  if (!d->active) return;
  ev_io_stop(d->evl, &d->io);
  ev_prepare_stop(d->evl, &d->prepare);
  ev_timer_stop(d->evl, &d->timer);
  d->active = 0;
}
