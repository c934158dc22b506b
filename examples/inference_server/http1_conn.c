/* The HTTP/1.1 connections (http1.h): reading, parsing with http-parser,
 * handing answers out, their deadlines (four lists, one timer) and the
 * close. */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "http1_impl.h"

/* Below this much room at the buffer's end, what is kept moves to its start
 * before a read. */
#define MIN_ROOM 1024

/* Stops the parser where it is (http-parser refuses a parser in error). */
static void pause_parser(struct http1_conn *c) {
  enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
  if (e == HPE_OK || e == HPE_PAUSED) http_parser_pause(&c->parser, 1);
}

static void queue_flush(struct http1_conn *c) {
  struct http1 *h = c->srv;
  if (c->serving || c->queued || c->dead) return;
  c->queued = 1;
  TAILQ_INSERT_TAIL(&h->flush, c, flush_link);
}

static void unqueue(struct http1_conn *c) {
  struct http1 *h = c->srv;
  if (!c->queued) return;
  c->queued = 0;
  TAILQ_REMOVE(&h->flush, c, flush_link);
}

/* ---- the deadlines: four lists, one timer ---- */

static struct http1_conn *from_due(struct deadline_item *it) {
  return (struct http1_conn *)((char *)it - offsetof(struct http1_conn, due));
}

static struct http1_conn *from_quiet(struct deadline_item *it) {
  return (struct http1_conn *)((char *)it - offsetof(struct http1_conn, quiet));
}

static void arm(struct http1 *h) {
  uint64_t at = deadline_fifo_next_due(&h->heads);
  uint64_t t;
  if ((t = deadline_fifo_next_due(&h->bodies)) < at) at = t;
  if ((t = deadline_fifo_next_due(&h->lingers)) < at) at = t;
  if ((t = deadline_fifo_next_due(&h->quiets)) < at) at = t;
  if (at == UINT64_MAX || (h->armed_ns != 0 && h->armed_ns <= at)) return;
  uint64_t now = now_ns();
  ev_timer_stop(h->evl, &h->timer);
  /* libev's timers may fire a little early: one that finds nothing due
   * re-arms for what is left. */
  ev_timer_set(&h->timer, at > now ? (double)(at - now) * 1e-9 : 0., 0.);
  ev_timer_start(h->evl, &h->timer);
  h->armed_ns = at;
}

static void expire(struct http1_conn *c, int quiet);

static void on_timer(struct ev_loop *evl, ev_timer *w, int revents) {
  struct http1 *h = w->data;
  struct deadline_item *it;
  (void)evl, (void)revents;
  uint64_t now = h->now = now_ns();
  h->armed_ns = 0;
  h->depth++;
  while ((it = deadline_fifo_pop_due(&h->heads, now)) != NULL) expire(from_due(it), 0);
  while ((it = deadline_fifo_pop_due(&h->bodies, now)) != NULL) expire(from_due(it), 0);
  while ((it = deadline_fifo_pop_due(&h->lingers, now)) != NULL) expire(from_due(it), 0);
  while ((it = deadline_fifo_pop_due(&h->quiets, now)) != NULL) expire(from_quiet(it), 1);
  arm(h);
  h->depth--;
  http1_conns_reap(h);
}

void http1_conns_init(struct http1 *h) {
  const uint64_t ms = 1000000u;
  deadline_fifo_init(&h->heads, h->cfg.header_deadline_ms * ms);
  deadline_fifo_init(&h->bodies, h->cfg.body_deadline_ms * ms);
  deadline_fifo_init(&h->lingers, HTTP1_LINGER_MS * ms);
  deadline_fifo_init(&h->quiets, (uint64_t)h->cfg.idle_timeout_s * 1000u * ms);
  ev_init(&h->timer, on_timer);
  h->timer.data = h;
}

void http1_conns_fini(struct http1 *h) {
  ev_timer_stop(h->evl, &h->timer);
  http1_conns_reap(h);
}

void http1_conns_reap(struct http1 *h) {
  if (h->depth > 0) return;
  struct http1_conn *c;
  while ((c = LIST_FIRST(&h->graveyard)) != NULL) {
    LIST_REMOVE(c, link);
    free(c->out);
    free(c);
  }
}

/* The client owes bytes (or nothing yet): it is idle-timed from now. */
static void touch(struct http1_conn *c) {
  deadline_fifo_push(&c->srv->quiets, &c->quiet, c->srv->now);
  arm(c->srv);
}

static void enter_due(struct http1_conn *c, enum http1_phase phase, struct deadline_fifo *f) {
  c->phase = phase;
  deadline_fifo_push(f, &c->due, c->srv->now);
  arm(c->srv);
}

/* An answer of the connection's own (400, 408, 431): the request, if the
 * application holds one, is over for it; the connection closes after. */
static void own_answer(struct http1_conn *c, unsigned status, const char *line) {
  if (c->req) {
    void *r = c->req;
    c->req = NULL;
    c->srv->ops->on_done(r, 0);
  }
  c->in_body = 0;
  c->phase = PH_OWED;
  deadline_item_remove(&c->due);
  pause_parser(c); /* nothing more is read as requests */
  c->close_after = 1;
  if (http1_compose(c, status, NULL, 0, "text/plain; charset=utf-8", line, strlen(line), 1, 0) !=
      0) {
    http1_conn_close(c);
    return;
  }
  c->answered = 1;
  queue_flush(c);
}

void http1_answer(struct http1_conn *c, unsigned status, const char *headers, size_t hlen,
                  const char *ctype, const void *body, size_t blen, int close) {
  if (c == NULL || c->dead || c->answered || (c->req == NULL && !c->heading)) return;
  /* A body still on its way is not read: the connection cannot go on. */
  if (c->in_body) {
    close = 1;
    c->in_body = 0;
    c->phase = PH_OWED;
    deadline_item_remove(&c->due);
    pause_parser(c);
  }
  if (!c->keep_alive) close = 1;
  if (http1_compose(c, status, headers, hlen, ctype, body, blen, close, c->is_head) != 0) {
    http1_conn_close(c);
    return;
  }
  c->answered = 1;
  c->close_after |= (unsigned)close;
  queue_flush(c);
}

/* ---- http-parser's callbacks ---- */

static struct http1_conn *of(http_parser *p) { return p->data; }

static int on_message_begin(http_parser *p) {
  struct http1_conn *c = of(p);
  c->msg_wait_ns = c->read_wait_ns;
  c->has_url = 0;
  c->nfields = 0;
  c->field_open = 0;
  /* The first request's head is due from the connection's start. */
  if (c->phase == PH_IDLE) enter_due(c, PH_HEAD, &c->srv->heads);
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  struct http1_conn *c = of(p);
  if (!c->has_url) {
    c->has_url = 1;
    c->base = (size_t)(at - c->buf);
    c->url = 0;
    c->url_len = 0;
  }
  c->url_len = (uint32_t)((size_t)(at + len - c->buf) - c->base - c->url);
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  struct http1_conn *c = of(p);
  if (!c->field_open) {
    if (c->nfields == HTTP1_MAX_HEADERS) return -1;
    struct http1_field *f = &c->fields[c->nfields++];
    f->name = (uint32_t)((size_t)(at - c->buf) - c->base);
    f->name_len = 0;
    f->value_len = 0;
    f->value = f->name; /* an empty value has no callback */
    c->field_open = 1;
    c->value_open = 0;
  }
  struct http1_field *f = &c->fields[c->nfields - 1];
  f->name_len = (uint32_t)((size_t)(at + len - c->buf) - c->base - f->name);
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  struct http1_conn *c = of(p);
  struct http1_field *f = &c->fields[c->nfields - 1];
  if (!c->value_open) {
    f->value = (uint32_t)((size_t)(at - c->buf) - c->base);
    f->value_len = 0;
    c->value_open = 1;
  }
  /* The span from the first piece to the end of this one: a folded value
   * keeps its line break (a space for the parsers here). */
  f->value_len = (uint32_t)((size_t)(at + len - c->buf) - c->base - f->value);
  c->field_open = 0;
  return 0;
}

/* The head's strings end in place: each is followed by a byte of syntax
 * already parsed (a space, a colon, a CR). */
static void terminate_head(struct http1_conn *c) {
  char *b = c->buf + c->base;
  b[c->url_len] = 0;
  /* The application routes on the path: a query ends it (as libmicrohttpd
   * hands its access handler the URL without the query). */
  char *q = memchr(b, '?', c->url_len);
  if (q) *q = 0;
  for (int i = 0; i < c->nfields; i++) {
    struct http1_field *f = &c->fields[i];
    b[f->name + f->name_len] = 0;
    while (f->value_len > 0 &&
           (b[f->value + f->value_len - 1] == ' ' || b[f->value + f->value_len - 1] == '\t'))
      f->value_len--;
    if (f->value_len == 0)
      f->value = UINT32_MAX; /* "" */
    else
      b[f->value + f->value_len] = 0;
  }
}

const char *http1_header(const struct http1_head *h, const char *name) {
  const struct http1_conn *c = h->conn;
  const char *b = c->buf + c->base;
  for (int i = 0; i < c->nfields; i++)
    if (strcasecmp(b + c->fields[i].name, name) == 0)
      return c->fields[i].value == UINT32_MAX ? "" : b + c->fields[i].value;
  return NULL;
}

static int on_headers_complete(http_parser *p) {
  struct http1_conn *c = of(p);
  struct http1 *h = c->srv;
  if (!c->has_url) return -1;
  terminate_head(c);
  deadline_item_remove(&c->due);
  struct http1_head probe = {.conn = c};
  if (p->http_major == 1 && p->http_minor >= 1 && http1_header(&probe, "Host") == NULL) {
    /* RFC 9112, 3.2: a server answers 400 to an HTTP/1.1 request without one. */
    own_answer(c, 400, "bad request: an HTTP/1.1 request without a Host header\n");
    return 0;
  }
  int chunked = (p->flags & F_CHUNKED) != 0;
  int has_length = p->content_length != ULLONG_MAX;
  struct http1_head head = {
      .method = http_method_str((enum http_method)p->method),
      .url = c->buf + c->base,
      .is_head = p->method == HTTP_HEAD,
      .has_body = chunked || (has_length && p->content_length > 0),
      .has_length = has_length && !chunked,
      .length = has_length ? p->content_length : 0,
      .socket_wait_ns = c->msg_wait_ns,
      .conn = c,
  };
  c->keep_alive = http_should_keep_alive(p) && !p->upgrade;
  c->is_head = (unsigned)head.is_head;
  c->in_body = (unsigned)head.has_body;
  c->phase = PH_BODY;
  if (head.has_body) enter_due(c, PH_BODY, &h->bodies);
  c->heading = 1;
  void *r = h->ops->on_head(&head, h->user);
  c->heading = 0;
  if (r == NULL) {
    http1_conn_close(c);
    return -1;
  }
  c->req = r;
  if (c->answered) {
    /* Answered from its head: http1_answer paused the parser where a body
     * follows; without one, the end of the message comes next. */
    return 0;
  }
  if (c->in_body && p->http_minor >= 1) {
    const char *expect = http1_header(&head, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0) {
      http1_compose_continue(c); /* out of memory: the client sends its body anyway */
    }
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  struct http1_conn *c = of(p);
  if (c->req && !c->answered) c->srv->ops->on_body(c->req, at, len);
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct http1_conn *c = of(p);
  c->in_body = 0;
  c->phase = PH_OWED;
  deadline_item_remove(&c->due);
  deadline_item_remove(&c->quiet);
  if (c->req && !c->answered) c->srv->ops->on_end(c->req);
  /* The next pipelined request waits until this one is answered. */
  if (!c->dead) pause_parser(c);
  return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- the connection's life ---- */

struct http1_conn *http1_conn_open(struct http1 *h, int fd) {
  struct http1_conn *c = malloc(sizeof *c);
  if (c == NULL) return NULL;
  memset(c, 0, offsetof(struct http1_conn, buf));
  c->srv = h;
  c->fd = fd;
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  c->keep_alive = 1;
  enter_due(c, PH_HEAD, &h->heads);
  touch(c);
  LIST_INSERT_HEAD(&h->conns, c, link);
  atomic_fetch_add_explicit(&h->nconn, 1, memory_order_relaxed);
  return c;
}

void http1_conn_close(struct http1_conn *c) {
  struct http1 *h = c->srv;
  if (c->dead) return;
  c->dead = 1;
  deadline_item_remove(&c->due);
  deadline_item_remove(&c->quiet);
  unqueue(c);
  close(c->fd); /* also leaves the epoll set */
  /* Freed once the event that closed it is handled: a later event of the
   * same epoll_wait may still name it. */
  LIST_REMOVE(c, link);
  LIST_INSERT_HEAD(&h->graveyard, c, link);
  atomic_fetch_sub_explicit(&h->nconn, 1, memory_order_relaxed);
  if (c->req) {
    void *r = c->req;
    c->req = NULL;
    h->ops->on_done(r, 0);
  }
}

/* The answer is out: the request is over; the next one, or the close. */
static void finish_request(struct http1_conn *c) {
  void *r = c->req;
  c->req = NULL;
  c->answered = 0;
  if (r) c->srv->ops->on_done(r, 1);
  if (c->dead) return;
  if (c->close_after) {
    /* Lingering close: the answer, then the FIN; what the client still
     * sends is read and dropped (a close with unread bytes would send a
     * reset, which may overtake the answer). */
    deadline_item_remove(&c->quiet);
    shutdown(c->fd, SHUT_WR);
    enter_due(c, PH_LINGER, &c->srv->lingers);
    return;
  }
  c->phase = PH_IDLE;
  touch(c);
  http_parser_pause(&c->parser, 0); /* paused at the message's end (never in error here) */
}

/* Sends what is pending. Returns 0 when all of it went, else -1 (the
 * socket is full: EPOLLOUT resumes; or the connection closed). */
static int send_out(struct http1_conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      touch(c); /* a client that never reads its answer is timed out */
      return -1;
    }
    http1_conn_close(c);
    return -1;
  }
  c->out_off = c->out_len = 0;
  return 0;
}

/* Where the bytes to keep begin: the head's base while a head with a URL
 * is being parsed (its fields are offsets from it), else the unparsed. */
static size_t keep_from(const struct http1_conn *c) {
  return c->phase == PH_HEAD && c->has_url ? c->base : c->start;
}

/* recv() with the kernel's receive time of the bytes read (SO_TIMESTAMPNS,
 * set at accept: the oldest segment's, in CLOCK_REALTIME): how long they
 * waited in the socket goes to read_wait_ns (0 when none came with them). */
static ssize_t recv_stamped(struct http1_conn *c, size_t room) {
  struct iovec iov = {.iov_base = c->buf + c->end, .iov_len = room};
  union {
    char buf[CMSG_SPACE(sizeof(struct timespec))];
    struct cmsghdr align;
  } ctl;
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  ssize_t n = recvmsg(c->fd, &msg, 0);
  if (n <= 0) return n;
  c->read_wait_ns = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_TIMESTAMPNS) continue;
    struct timespec at, now;
    memcpy(&at, CMSG_DATA(cm), sizeof at);
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t d = ((int64_t)now.tv_sec - at.tv_sec) * 1000000000 + (now.tv_nsec - at.tv_nsec);
    c->read_wait_ns = d > 0 ? (uint64_t)d : 0; /* the clock may step back */
  }
  return n;
}

/* Reads once. Returns 0, or -1 when the connection closed or the head
 * outgrew the buffer (answered 431). */
static int read_some(struct http1_conn *c) {
  size_t from = keep_from(c);
  if (from == c->end) {
    c->start = c->end = 0;
    if (c->phase == PH_HEAD && c->has_url) c->base = 0;
  } else if (HTTP1_BUF - c->end < MIN_ROOM && from > 0) {
    memmove(c->buf, c->buf + from, c->end - from);
    c->end -= from;
    c->start -= from;
    if (c->phase == PH_HEAD && c->has_url) c->base -= from;
  }
  size_t room = HTTP1_BUF - c->end;
  if (room == 0) {
    char line[64];
    snprintf(line, sizeof line, "request head over %d bytes\n", HTTP1_BUF);
    own_answer(c, 431, line);
    return -1;
  }
  ssize_t n =
      c->srv->cfg.rx_timestamps ? recv_stamped(c, room) : recv(c->fd, c->buf + c->end, room, 0);
  if (n > 0) {
    c->end += (size_t)n;
    /* A short read emptied the socket: the next bytes bring an edge. Not
     * so after the peer's FIN (its edge came with the data). */
    if ((size_t)n < room && !c->rdhup) c->readable = 0;
    if (c->phase != PH_OWED) touch(c);
    return 0;
  }
  if (n == 0) {
    c->peer_closed = 1;
    c->readable = 0;
    return 0;
  }
  if (errno == EINTR) return 0;
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    c->readable = 0;
    return 0;
  }
  http1_conn_close(c);
  return -1;
}

static void parse(struct http1_conn *c) {
  size_t n = http_parser_execute(&c->parser, &settings, c->buf + c->start, c->end - c->start);
  if (c->dead) return;
  c->start += n;
  enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
  if (e == HPE_PAUSED) return;
  if (e != HPE_OK && c->answered) {
    /* Answered from its head, and what followed does not parse (http-parser
     * judges Transfer-Encoding after the head's callback): the answer goes
     * out, and nothing after it is read as a request. */
    c->close_after = 1;
    return;
  }
  if (c->answered) return;
  if (e != HPE_OK) {
    char line[160];
    snprintf(line, sizeof line, "bad request: %s\n", http_errno_description(e));
    int big = e == HPE_HEADER_OVERFLOW || e == HPE_CB_header_field;
    if (e == HPE_CB_header_field)
      snprintf(line, sizeof line, "more than %d header fields\n", HTTP1_MAX_HEADERS);
    own_answer(c, big ? 431 : 400, line);
    return;
  }
  if (c->parser.upgrade) {
    /* What follows is another protocol, which nobody here speaks. */
    c->start = c->end;
    c->close_after = 1;
  }
}

/* Reads and drops what a lingering close still gets. */
static void drain(struct http1_conn *c) {
  while (c->readable && !c->dead) {
    ssize_t n = recv(c->fd, c->buf, HTTP1_BUF, 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c->readable = 0;
      return;
    }
    http1_conn_close(c); /* the client's end, or an error */
  }
  if (c->peer_closed && !c->dead) http1_conn_close(c);
}

void http1_conn_serve(struct http1_conn *c) {
  if (c->dead) return;
  c->serving = 1;
  unqueue(c);
  while (!c->dead) {
    if (c->out_off < c->out_len && send_out(c) != 0) break;
    if (c->answered) {
      finish_request(c);
      continue;
    }
    if (c->phase == PH_LINGER) {
      drain(c);
      break;
    }
    if (c->phase == PH_OWED) break; /* the answer comes later */
    if (c->start < c->end && !(c->parser.http_errno == HPE_PAUSED)) {
      size_t before = c->start;
      parse(c);
      if (c->start != before || c->answered || c->phase == PH_OWED) continue;
    }
    if (c->peer_closed) {
      /* The client is gone before its request was complete (or with none
       * begun): nothing to answer. */
      http1_conn_close(c);
      break;
    }
    if (!c->readable) break;
    if (read_some(c) != 0) continue;
  }
  c->serving = 0;
}

static void expire(struct http1_conn *c, int quiet) {
  if (c->dead) return;
  if (quiet || c->phase == PH_LINGER) {
    http1_conn_close(c);
    return;
  }
  enum metrics_phase phase = c->phase == PH_BODY ? METRICS_PHASE_BODY : METRICS_PHASE_HEADERS;
  struct http1 *h = c->srv;
  unsigned ms = phase == METRICS_PHASE_BODY ? h->cfg.body_deadline_ms : h->cfg.header_deadline_ms;
  char line[96];
  snprintf(line, sizeof line, "request %s not complete within %u ms\n",
           phase == METRICS_PHASE_BODY ? "body" : "headers", ms);
  void *r = c->req;
  c->req = NULL;
  h->ops->on_cut(r, phase, h->user);
  if (r) h->ops->on_done(r, 0);
  own_answer(c, 408, line);
  http1_conn_serve(c);
}
