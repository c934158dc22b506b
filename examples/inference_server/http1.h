/* http1.h: HTTP/1.1 server connections on one libev loop thread, for the
 * service: a listening socket, its connections in one edge-triggered epoll
 * set (one ev_io watches the set), requests parsed by http-parser (Debian
 * libhttp-parser), answers the application gives at once or later.
 *
 * Why not libmicrohttpd, which the service used first: an answer that comes
 * later (a GPU batch) needs MHD's suspend/resume, which costs an epoll_ctl
 * pair per request and a scan of every suspended connection whenever one
 * resumes, five system calls a request in all. Here a request costs a recv
 * and a send: a connection stays in the epoll set for its whole life, and
 * one whose answer is pending is simply not read.
 *
 * A request's life: its first byte starts the header deadline (the first
 * request's: the connection's start); `on_head` when the head is complete
 * (the body deadline starts when one follows); `on_body` for each piece of
 * the body; `on_end` when it is complete. Reading stops until the answer
 * (http1_answer, from any of those callbacks or later) has been sent; then
 * `on_done` and the next pipelined request. A client that misses a deadline
 * gets "408 Request Timeout" and its connection is closed; one that sends
 * nothing for --connection-timeout seconds while it owes nothing, or while
 * it owes a request, is closed without a word (as libmicrohttpd's idle
 * timeout); the service owes nothing to a connection whose answer is
 * pending. Closes that follow an answer linger: the answer, a FIN, then what
 * the client still sends is read and dropped until it closes or LINGER_S
 * pass, so that a client still sending never gets a reset in place of its
 * answer.
 *
 * Malformed requests get 400, a head over the connection's buffer 431, both
 * with Connection: close, made here; the application never sees them.
 *
 * Thread: every function and callback on the loop thread of the server the
 * connection belongs to, except http1_connections (any thread). */
#ifndef INFER_HTTP1_H
#define INFER_HTTP1_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

struct http1;
struct http1_conn;

/* A request's head, valid during on_head. Strings are NUL-terminated. */
struct http1_head {
  const char *method; /* "GET", "POST", ... */
  const char *url;    /* the path: without its query */
  int is_head;        /* HEAD: answers carry no body */
  int has_body;       /* a Content-Length over 0, or a chunked body */
  int has_length;     /* Content-Length was given ... */
  uint64_t length;    /* ... and said this */
  /* With http1_config.rx_timestamps: how long the bytes of the read that
   * brought the request's start had waited in the socket (the kernel's
   * receive time to the read); 0 otherwise. */
  uint64_t socket_wait_ns;
  struct http1_conn *conn;
};

/* Looks a header up in the head being delivered (on_head only), by name,
 * case-insensitively; NULL when absent. */
const char *http1_header(const struct http1_head *h, const char *name);

struct http1_ops {
  /* A request's head is complete. Returns the application's request (kept
   * until on_done), or NULL to close the connection (out of memory). */
  void *(*on_head)(const struct http1_head *h, void *user);
  /* A piece of its body; `data` is valid during the call. */
  void (*on_body)(void *req, const char *data, size_t len);
  /* Its body is complete (at once for requests without one). */
  void (*on_end)(void *req);
  /* The request is over: its answer was sent (`sent`), or the connection
   * closed before. The application may free req now, not before. */
  void (*on_done)(void *req, int sent);
  /* A deadline passed and the 408 was written: `req` is the request whose
   * body was late, or NULL when its head was. Its on_done follows. */
  void (*on_cut)(void *req, enum metrics_phase phase, void *user);
};

struct http1_config {
  int listen_fd;            /* a listening socket to use (inherited), or -1 ... */
  const char *host;         /* ... to make one on host:port */
  int port;                 /* 0: any */
  int reuse_port;           /* SO_REUSEPORT (several loop threads on one port) */
  unsigned max_connections; /* more wait in the listen backlog */
  unsigned idle_timeout_s;  /* --connection-timeout */
  unsigned header_deadline_ms;
  unsigned body_deadline_ms;
  int rx_timestamps; /* SO_TIMESTAMPNS on each connection: http1_head.socket_wait_ns */
};

/* Starts listening and serving on `evl`. Returns the server, or NULL with a
 * reason in err. */
struct http1 *http1_start(struct ev_loop *evl, const struct http1_config *cfg,
                          const struct http1_ops *ops, void *user, char *err, size_t errlen);
/* The port bound. */
int http1_port(const struct http1 *h);
/* Open connections (any thread may ask). */
unsigned http1_connections(const struct http1 *h);
/* Readiness events handled so far (the service's spin policy watches it). */
unsigned long long http1_events(const struct http1 *h);
/* Stops accepting. Returns the listening socket, which the caller now owns,
 * or -1 if it was already given up. */
int http1_quiesce(struct http1 *h);
/* Closes every connection (on_done for each request still open) and frees
 * the server; the listening socket too unless http1_quiesce took it. */
void http1_stop(struct http1 *h);

/* The answer to `req`'s request on c: status, header lines ("Name: value\r\n"
 * each, hlen bytes, may be 0), body. Copied; sent at once when the
 * connection is being served in this call, else at the next http1_flush.
 * With `close`, the connection closes after it (also when the client asked,
 * or a body is still owed). Answering twice is a caller's bug (ignored). */
void http1_answer(struct http1_conn *c, unsigned status, const char *headers, size_t hlen,
                  const char *content_type, const void *body, size_t blen, int close);
/* Sends the answers given outside the connections' own events (a batch's
 * continuation) now; the server also does it right before libev blocks.
 * Returns whether there were any. */
int http1_flush(struct http1 *h);

#endif
