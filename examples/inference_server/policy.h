/* policy.h: the dynamic batching policy, one function that both servers
 * ask, so that the service and its blocking twin batch alike and only the
 * way they wait differs (a timerfd in the service's libev loop, a condition
 * variable in the twin's executors).
 *
 * Requests wait in arrival order. A batch leaves when it is full (max_batch
 * requests) or when the oldest waiting request has waited `window_us`; a
 * draining server does not wait for the window. With `eager` on, a partial
 * batch also leaves at once when no other request can come: every open
 * connection of the caller already has its request waiting. The window is
 * there to gather requests from other connections; when there are none
 * that could send, waiting for it only adds its length to every answer,
 * which is what several loop threads meet when each holds fewer
 * connections than a batch (256 connections over 12 threads: ~21 each,
 * under the 64 rows that would end the wait). Header-only, pure, any
 * thread. */
#ifndef INFER_POLICY_H
#define INFER_POLICY_H

#include <stddef.h>

struct policy {
  int max_batch;   /* rows per batch, >= 1 */
  double window_s; /* how long the oldest request may wait for others */
  int eager;       /* send at once when none_to_come (--eager-batch) */
};

/* How many of the `queued` requests to send as one batch now; 0 means
 * wait, and then *wait_s says for how long at most (until the oldest one's
 * window ends). `oldest_age_s` is how long the oldest has waited;
 * `none_to_come`: every open connection has a request queued or in a
 * batch, so none can arrive before an answer goes out. */
static inline int policy_take(const struct policy *p, size_t queued, double oldest_age_s,
                              int draining, int none_to_come, double *wait_s) {
  *wait_s = 0;
  if (queued == 0) return 0;
  if (queued >= (size_t)p->max_batch) return p->max_batch;
  if (draining || oldest_age_s >= p->window_s || (p->eager && none_to_come)) return (int)queued;
  *wait_s = p->window_s - oldest_age_s;
  return 0;
}

#endif
