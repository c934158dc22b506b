/* http1_impl.h: what http1_server.c (the listening socket, the epoll set,
 * the flush), http1_conn.c (the connections: reading, parsing, answering,
 * their deadlines, closing) and http1_response.c (a response's bytes)
 * share; the server calls the connections, they call the responses, never
 * the other way. Not for the application: http1.h. */
#ifndef INFER_HTTP1_IMPL_H
#define INFER_HTTP1_IMPL_H

#include <http_parser.h>
#include <stdatomic.h>
#include <sys/queue.h>

#include "deadline_fifo.h"
#include "http1.h"

/* A connection's buffer: a request's head must fit (else 431); bodies
 * stream through it. */
#define HTTP1_BUF         8192
#define HTTP1_MAX_HEADERS 48
/* How long a close after an answer waits for the client to close first. */
#define HTTP1_LINGER_MS   2000

enum http1_phase {
  PH_IDLE,   /* kept alive, no byte of a next request yet */
  PH_HEAD,   /* reading a request's head (in srv->heads) */
  PH_BODY,   /* reading its body (in srv->bodies) */
  PH_OWED,   /* the request is complete: the service owes its answer */
  PH_LINGER, /* answered with a close: reading to the client's end (in srv->lingers) */
};

struct http1_field {
  uint32_t name, name_len, value, value_len; /* offsets from the head's base */
};

struct http1_conn {
  struct http1 *srv;
  int fd;
  enum http1_phase phase;
  http_parser parser;
  struct deadline_item due;   /* the header or body deadline, or the linger's end */
  struct deadline_item quiet; /* the idle timeout (in srv->quiets while the client owes) */
  void *req;                  /* the application's request, from on_head to on_done */
  unsigned readable : 1;      /* the socket may hold bytes not read yet */
  unsigned rdhup : 1;         /* the client's FIN was reported: read to the end */
  unsigned peer_closed : 1;   /* the client's end of stream was seen */
  unsigned answered : 1;      /* the answer to req is in out */
  unsigned close_after : 1;   /* close once out is sent */
  unsigned keep_alive : 1;    /* the client's wish, from the head */
  unsigned is_head : 1;       /* a HEAD request: its answer has no body */
  unsigned in_body : 1;       /* its body is still arriving */
  unsigned serving : 1;       /* inside http1_conn_serve: answers go out there */
  unsigned heading : 1;       /* inside on_head: its answer has no req yet */
  unsigned queued : 1;        /* in srv->flush */
  unsigned dead : 1;          /* closed; freed when the serve returns */
  /* The head being parsed: offsets from its base (the URL's first byte). */
  size_t base;
  int has_url, nfields, field_open, value_open;
  uint32_t url, url_len;
  struct http1_field fields[HTTP1_MAX_HEADERS];
  /* Bytes read and not yet parsed: buf[start, end). */
  size_t start, end;
  /* With rx_timestamps: how long the last read's bytes had waited in the
   * socket, and that of the read before the request now parsed began. */
  uint64_t read_wait_ns, msg_wait_ns;
  /* Bytes to send: out[off, len). */
  char *out;
  size_t out_off, out_len, out_cap;
  TAILQ_ENTRY(http1_conn) flush_link; /* in srv->flush while queued */
  LIST_ENTRY(http1_conn) link;        /* in srv->conns, or in srv->graveyard once closed */
  char buf[HTTP1_BUF];
};

struct http1 {
  struct ev_loop *evl;
  struct http1_config cfg;
  const struct http1_ops *ops;
  void *user;
  int listen_fd, epfd, port;
  int accept_ready;   /* the backlog may hold connections not accepted yet */
  int accept_failing; /* accept failed for want of fds or memory (reported once) */
  ev_io io;           /* the epoll set's fd */
  ev_prepare prepare; /* http1_flush before libev blocks */
  ev_timer timer;     /* the earliest deadline of the four lists */
  uint64_t armed_ns;
  struct deadline_fifo heads, bodies, lingers, quiets;
  LIST_HEAD(, http1_conn) conns;     /* every open connection */
  TAILQ_HEAD(, http1_conn) flush;    /* answered outside their own events */
  LIST_HEAD(, http1_conn) graveyard; /* closed, freed after the event at hand */
  int depth; /* event handlers running (an answer's callback may flush inside one) */
  /* now_ns() at the start of the event being handled: one clock read for
   * all the deadlines it pushes (they are milliseconds long). */
  uint64_t now;
  char date[64]; /* "Date: ...\r\n" of date_at */
  size_t date_len;
  long long date_at;
  atomic_uint nconn;
  unsigned long long events;
};

/* http1_response.c */
/* Appends a whole response to c's output: with `close`, Connection: close
 * (and HTTP/1.0's keep-alive otherwise); `head_only`: no body, its length
 * still said. Returns -1 when out of memory. */
int http1_compose(struct http1_conn *c, unsigned status, const char *headers, size_t hlen,
                  const char *ctype, const void *body, size_t blen, int close, int head_only);
/* Appends "100 Continue". Returns -1 when out of memory. */
int http1_compose_continue(struct http1_conn *c);

/* http1_conn.c */
/* The deadline lists and their timer (started when a list gets an item). */
void http1_conns_init(struct http1 *h);
/* Stops the timer and frees the closed connections; after every close. */
void http1_conns_fini(struct http1 *h);
/* A new connection on fd (nonblocking): in heads and quiets. NULL when out
 * of memory (the caller closes fd). */
struct http1_conn *http1_conn_open(struct http1 *h, int fd);
/* Reads, parses and answers what it can; sends what is pending. */
void http1_conn_serve(struct http1_conn *c);
/* Closes at once; on_done for a request still open. The memory stays
 * until http1_conns_reap, which the server calls after each event it
 * handles (a later event of the same epoll_wait may name the connection). */
void http1_conn_close(struct http1_conn *c);
/* Frees the closed connections, unless an event handler is still running
 * (h->depth > 0: the outermost one reaps when it ends). */
void http1_conns_reap(struct http1 *h);

#endif
