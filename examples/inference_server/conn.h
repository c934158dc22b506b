/* conn.h: what the service keeps for each HTTP connection: the two
 * deadlines that bound a slow client (--header-deadline-ms,
 * --body-deadline-ms). libmicrohttpd's --connection-timeout is an idle
 * timeout that every byte restarts, so a client that sends a header line
 * every few seconds, or its body a few bytes at a time, would hold its
 * connection (and its share of --max-connections) as long as it likes.
 *
 * While the client owes the service something, its connection waits in
 * one of three deadline_fifo lists:
 *   headers  from the connection's start, or from a later request's request
 *            line (MHD's URI-log callback), until the access handler's first
 *            call (the headers are complete): --header-deadline-ms
 *   idle     kept alive between two requests, until the next request line:
 *            --connection-timeout + --header-deadline-ms (a connection that
 *            sends nothing meets MHD's idle timeout first; this one bounds a
 *            request line that trickles in byte by byte)
 *   body     from the headers until the body is complete: --body-deadline-ms
 * and in none while the service owes the client (the request is queued, in a
 * batch, or its answer is being sent). One ev_timer serves the three lists:
 * it is armed for the earliest head and left armed when items leave (an
 * early expiry finds nothing due and re-arms), so a request costs a few
 * list operations and, under steady traffic, no timer operation.
 *
 * A connection whose deadline passed is cut: libmicrohttpd 0.9.75 takes a
 * response only once the headers are complete and not while a body arrives
 * (MHD_queue_response), and closes a connection on the application's
 * request only when a callback returns MHD_NO, which it logs as the
 * application's internal error. So the cut writes a complete "408 Request
 * Timeout" (Connection: close, a one-line reason) on the socket itself (MHD
 * writes nothing while it reads a request) and shuts the socket's reading
 * side: MHD then reads the end of the stream, closes the connection as if
 * the client had, and calls the usual callbacks. A response MHD made itself
 * (400, 431) and is still sending is left to its idle timeout.
 *
 * Thread: everything on the loop thread of the daemon the connections
 * belong to. */
#ifndef INFER_CONN_H
#define INFER_CONN_H

#include <ev.h>
#include <stdint.h>

#include "config.h"
#include "deadline_fifo.h"
#include "metrics.h"

struct MHD_Connection;

enum conn_phase {
  CONN_HEADERS, /* in conns.headers */
  CONN_IDLE,    /* in conns.idle */
  CONN_BODY,    /* in conns.body */
  CONN_SERVED,  /* in none: the service owes the next step, or it was cut */
};

struct conn {
  struct conns *owner;
  struct MHD_Connection *mc;
  struct deadline_item due;
  enum conn_phase phase; /* read only */
  int cut;               /* its deadline passed: 408 written, reading side shut (read only) */
  void *req;             /* the owner's request of a CONN_BODY phase (conn_body_begin) */
};

struct conns;
/* Called at a cut, after the 408 was written: `phase` is where the client
 * was; c->req is the request whose body was late (NULL for headers). */
typedef void (*conn_cut_cb)(struct conn *c, enum metrics_phase phase, void *user);

struct conns {
  struct ev_loop *evl;
  const struct config *cfg;
  struct deadline_fifo headers, idle, body;
  ev_timer timer;
  uint64_t armed_ns; /* when the timer fires (0: not armed) */
  unsigned cut_open; /* connections cut whose close MHD has not reported yet */
  conn_cut_cb on_cut;
  void *user;
};

/* Sets up the lists and the timer (started when a list gets an item). */
void conns_init(struct conns *cs, struct ev_loop *evl, const struct config *cfg, conn_cut_cb on_cut,
                void *user);
/* Stops the timer; call after MHD reported every connection closed. */
void conns_fini(struct conns *cs);

/* MHD_CONNECTION_NOTIFY_STARTED: a new connection, in the headers list.
 * Returns its state (the socket context to keep), or NULL when out of
 * memory (then it has no deadlines; every function below takes NULL). */
struct conn *conn_open(struct conns *cs, struct MHD_Connection *mc);
/* MHD_CONNECTION_NOTIFY_CLOSED: frees c. */
void conn_close(struct conn *c);
/* The state of MHD's connection mc (its socket context), or NULL. */
struct conn *conn_of(struct MHD_Connection *mc);
/* A request line was read (MHD's URI-log callback): a kept-alive
 * connection's headers are due from now. */
void conn_request_line(struct conn *c);
/* The headers are complete (the access handler's first call): the body of
 * `req` is due from now. */
void conn_body_begin(struct conn *c, void *req);
/* The body is complete, or the request was answered before it: the
 * client owes nothing until the answer is sent. Idempotent. */
void conn_body_end(struct conn *c);
/* A request ended and the connection stays open for the next one. */
void conn_request_end(struct conn *c);

#endif
