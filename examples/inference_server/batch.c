/* The dynamic batcher of the service: one FIFO of parsed requests, a window
 * timer for its oldest, and the continuation that turns a finished batch
 * into answers. The policy itself (when a batch leaves) is policy.h's, the
 * twin's too.
 *
 * The window is a timerfd watched by libev rather than an ev_timer: libev
 * rounds the epoll wait up to whole milliseconds, which would turn a 200 us
 * window into a millisecond. The timer is armed only when the oldest
 * request changes, never disarmed (a spurious expiry dispatches nothing),
 * so a busy queue costs no timer syscall per request. */
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "service.h"

static void on_window(struct ev_loop *evl, ev_io *w, int revents) {
  struct server *s = w->data;
  uint64_t expirations;
  (void)evl, (void)revents;
  if (read(s->batch.tfd, &expirations, sizeof expirations) < 0) { /* EAGAIN: raced a re-arm */
  }
  s->batch.armed_ns = 0;
  batch_dispatch(s);
  http_kick(s);
}

int batch_init(struct server *s) {
  struct batcher *b = &s->batch;
  memset(b, 0, sizeof *b);
  b->policy.max_batch = s->cfg->max_batch;
  b->policy.window_s = s->cfg->window_us * 1e-6;
  b->policy.eager = s->cfg->eager_batch;
  b->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (b->tfd < 0) return -1;
  ev_io_init(&b->window, on_window, b->tfd, EV_READ);
  b->window.data = s;
  ev_io_start(s->evl, &b->window);
  return 0;
}

void batch_fini(struct server *s) {
  ev_io_stop(s->evl, &s->batch.window);
  close(s->batch.tfd);
}

/* Arms the window timer for the oldest request's end of window. */
static void arm_window(struct server *s) {
  struct batcher *b = &s->batch;
  uint64_t at = b->head->queued_ns + (uint64_t)s->cfg->window_us * 1000u;
  if (at == b->armed_ns) return;
  struct itimerspec its = {.it_value = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)}};
  timerfd_settime(b->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  b->armed_ns = at;
}

static void unlink_queued(struct server *s, struct request *r) {
  struct batcher *b = &s->batch;
  if (r->qprev)
    r->qprev->qnext = r->qnext;
  else
    b->head = r->qnext;
  if (r->qnext)
    r->qnext->qprev = r->qprev;
  else
    b->tail = r->qprev;
  r->qprev = r->qnext = NULL;
  b->len--;
  atomic_fetch_sub(&s->metrics->queue_depth, 1);
}

static int is_queued(const struct server *s, const struct request *r) {
  return r->qprev || r->qnext || s->batch.head == r;
}

void batch_push(struct server *s, struct request *r) {
  struct batcher *b = &s->batch;
  r->queued_ns = now_ns();
  r->qprev = b->tail;
  r->qnext = NULL;
  if (b->tail)
    b->tail->qnext = r;
  else
    b->head = r;
  b->tail = r;
  b->len++;
  atomic_fetch_add(&s->metrics->queue_depth, 1);
  batch_dispatch(s);
}

void batch_forget(struct server *s, struct request *r) {
  if (is_queued(s, r)) unlink_queued(s, r);
  if (r->slot) {
    r->slot->req[r->row] = NULL;
    r->slot = NULL;
  }
}

void batch_fail_queued(struct server *s, unsigned status, const char *why) {
  while (s->batch.head) request_answer_error(s->batch.head, status, why);
}

/* The continuation of a batch's future: on the loop thread, after the
 * device wrote slot->out (or failed). */
static void on_batch_done(cudaev_future_t *f, cudaError_t status, void *user) {
  struct slot *slot = user;
  struct device *dev = slot->dev;
  struct server *s = dev->srv;
  (void)f;
  atomic_fetch_sub(&s->metrics->inflight_batches, 1);
  if (status == cudaSuccess) {
    int nout = s->model.dims[s->model.nlayers];
    metrics_batch(s->metrics, slot->n, s->be->batch_ns(slot));
    dev->batches++;
    for (int i = 0; i < slot->n; i++) {
      struct request *r = slot->req[i];
      if (r) request_answer_result(r, slot->out + (size_t)i * (size_t)nout, slot);
    }
  } else {
    char why[160];
    snprintf(why, sizeof why, "device %d failed: %s", dev->ordinal, cudaev_error_name(status));
    for (int i = 0; i < slot->n; i++) {
      if (slot->req[i]) request_answer_error(slot->req[i], 503, why);
    }
    device_failed(dev, status);
  }
  slot->n = 0;
  device_put_slot(slot);
  /* Not here: sending a batch may make another device's context current,
   * which the rest of this loop pass must not find. The evdrive hook
   * (server_after_process) dispatches once the pass is over. */
  s->dispatch_due = 1;
  server_check_drained(s);
}

/* Fills a free slot with the oldest `take` requests and submits it.
 * Returns 0, or -1 when no slot is free. */
static int send_batch(struct server *s, int take) {
  struct slot *slot = device_take_slot(s);
  if (slot == NULL) return -1;
  size_t nin = (size_t)s->model.dims[0];
  slot->fault = 0;
  for (int i = 0; i < take; i++) {
    struct request *r = s->batch.head;
    unlink_queued(s, r);
    memcpy(slot->in + (size_t)i * nin, r->in, nin * sizeof(float));
    slot->req[i] = r;
    r->slot = slot;
    r->row = i;
    slot->fault |= r->fault;
  }
  slot->n = take;
  slot->batch_id = ++s->next_batch_id;
  slot->submitted_ns = now_ns();
  cudaev_future_t *f = NULL;
  cudaError_t e = s->be->submit(slot, &f);
  if (e == cudaSuccess) e = cudaev_future_then(f, on_batch_done, slot);
  if (e == cudaSuccess) {
    atomic_fetch_add(&s->metrics->inflight_batches, 1);
    cudaev_future_release(f); /* the continuation holds the future until it ran */
    return 0;
  }
  char why[160];
  snprintf(why, sizeof why, "device %d: submitting the batch failed: %s", slot->dev->ordinal,
           cudaev_error_name(e));
  for (int i = 0; i < take; i++) {
    if (slot->req[i]) request_answer_error(slot->req[i], 503, why);
  }
  if (f != NULL) {
    /* Submitted but no continuation could be added (out of memory): the
     * slot's buffers stay the device's until its loop goes, so the slot is
     * not reused. */
    fprintf(stderr, "%s; slot %d of device %d retired\n", why, slot->index, slot->dev->ordinal);
    cudaev_future_release(f);
    return 0;
  }
  slot->n = 0;
  device_put_slot(slot);
  device_failed(slot->dev, e);
  return 0;
}

void batch_dispatch(struct server *s) {
  struct batcher *b = &s->batch;
  for (;;) {
    double wait_s;
    double age = b->head ? (double)(now_ns() - b->head->queued_ns) * 1e-9 : 0;
    /* Every connection of this thread has a request waiting: no other
     * can come before an answer goes out (policy.h's eager). */
    int none_to_come = s->waiting >= http_connections(s);
    int take = policy_take(&b->policy, b->len, age, s->draining, none_to_come, &wait_s);
    if (take > 0 && send_batch(s, take) == 0) continue;
    /* Nothing to send yet (wait for the window), or no free slot (a batch's
     * end dispatches again). */
    if (take == 0 && b->len > 0) arm_window(s);
    return;
  }
}
