/* Per-connection deadlines and the cut of a connection that missed one
 * (conn.h). */
#include "conn.h"

#include <microhttpd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

static struct conn *conn_from_item(struct deadline_item *it) {
  return (struct conn *)((char *)it - offsetof(struct conn, due));
}

/* Arms the timer for the earliest head, unless it fires by then anyway. */
static void arm(struct conns *cs) {
  uint64_t at = deadline_fifo_next_due(&cs->headers);
  uint64_t idle = deadline_fifo_next_due(&cs->idle), body = deadline_fifo_next_due(&cs->body);
  if (idle < at) at = idle;
  if (body < at) at = body;
  if (at == UINT64_MAX || (cs->armed_ns != 0 && cs->armed_ns <= at)) return;
  uint64_t now = now_ns();
  ev_timer_stop(cs->evl, &cs->timer);
  /* libev's timers may fire a little early: one that finds nothing due
   * re-arms for what is left. */
  ev_timer_set(&cs->timer, at > now ? (double)(at - now) * 1e-9 : 0., 0.);
  ev_timer_start(cs->evl, &cs->timer);
  cs->armed_ns = at;
}

static void enter(struct conn *c, enum conn_phase phase, struct deadline_fifo *f) {
  c->phase = phase;
  deadline_fifo_push(f, &c->due, now_ns());
  arm(c->owner);
}

/* A one-line reason in a complete response, with Connection: close: the
 * client learns why, and where the next request may go (a new connection). */
static void write_408(int fd, enum metrics_phase phase, unsigned ms) {
  char body[96], msg[384], date[40];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  int blen = snprintf(body, sizeof body, "request %s not complete within %u ms\n",
                      phase == METRICS_PHASE_BODY ? "body" : "headers", ms);
  int len = snprintf(msg, sizeof msg,
                     "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nDate: %s\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s",
                     date, blen, body);
  /* Nonblocking: a client that reads nothing and filled its socket buffer
   * gets what fits, and the close. */
  if (send(fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) { /* closed meanwhile */
  }
}

static void cut(struct conns *cs, struct conn *c, enum metrics_phase phase) {
  c->phase = CONN_SERVED;
  /* MHD is sending an error of its own (a malformed request): it writes
   * the socket, so nothing else may; its idle timeout bounds that. */
  if (MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_HTTP_STATUS) != NULL) return;
  const union MHD_ConnectionInfo *fd =
      MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (fd == NULL) return;
  write_408(fd->connect_fd, phase,
            phase == METRICS_PHASE_BODY ? cs->cfg->body_deadline_ms : cs->cfg->header_deadline_ms);
  /* The end of the stream for MHD's next read (epoll reports it at once):
   * bytes already received are still read first, then MHD closes the
   * connection and the 408 is followed by the FIN. */
  shutdown(fd->connect_fd, SHUT_RD);
  c->cut = 1;
  cs->cut_open++;
  cs->on_cut(c, phase, cs->user);
  c->req = NULL;
}

static void on_timer(struct ev_loop *evl, ev_timer *w, int revents) {
  struct conns *cs = w->data;
  struct deadline_item *it;
  (void)evl, (void)revents;
  uint64_t now = now_ns();
  cs->armed_ns = 0;
  while ((it = deadline_fifo_pop_due(&cs->headers, now)) != NULL)
    cut(cs, conn_from_item(it), METRICS_PHASE_HEADERS);
  while ((it = deadline_fifo_pop_due(&cs->idle, now)) != NULL)
    cut(cs, conn_from_item(it), METRICS_PHASE_HEADERS);
  while ((it = deadline_fifo_pop_due(&cs->body, now)) != NULL)
    cut(cs, conn_from_item(it), METRICS_PHASE_BODY);
  arm(cs);
}

void conns_init(struct conns *cs, struct ev_loop *evl, const struct config *cfg, conn_cut_cb on_cut,
                void *user) {
  const uint64_t ms = 1000000u;
  cs->evl = evl;
  cs->cfg = cfg;
  deadline_fifo_init(&cs->headers, cfg->header_deadline_ms * ms);
  deadline_fifo_init(
      &cs->idle, (uint64_t)cfg->connection_timeout_s * 1000u * ms + cfg->header_deadline_ms * ms);
  deadline_fifo_init(&cs->body, cfg->body_deadline_ms * ms);
  ev_init(&cs->timer, on_timer);
  cs->timer.data = cs;
  cs->armed_ns = 0;
  cs->cut_open = 0;
  cs->on_cut = on_cut;
  cs->user = user;
}

void conns_fini(struct conns *cs) { ev_timer_stop(cs->evl, &cs->timer); }

struct conn *conn_open(struct conns *cs, struct MHD_Connection *mc) {
  struct conn *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->owner = cs;
  c->mc = mc;
  enter(c, CONN_HEADERS, &cs->headers);
  return c;
}

void conn_close(struct conn *c) {
  if (c == NULL) return;
  deadline_item_remove(&c->due);
  if (c->cut) c->owner->cut_open--;
  free(c);
}

struct conn *conn_of(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *i =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return i ? i->socket_context : NULL;
}

void conn_request_line(struct conn *c) {
  /* The first request's headers are due from the connection's start. */
  if (c && c->phase == CONN_IDLE) enter(c, CONN_HEADERS, &c->owner->headers);
}

void conn_body_begin(struct conn *c, void *req) {
  if (c == NULL || c->cut) return;
  c->req = req;
  enter(c, CONN_BODY, &c->owner->body);
}

void conn_body_end(struct conn *c) {
  if (c == NULL || c->phase != CONN_BODY) return;
  deadline_item_remove(&c->due);
  c->phase = CONN_SERVED;
  c->req = NULL;
}

void conn_request_end(struct conn *c) {
  if (c == NULL || c->cut) return;
  c->req = NULL;
  enter(c, CONN_IDLE, &c->owner->idle);
}
