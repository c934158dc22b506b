/* The service's HTTP API on http1.h (HTTP/1.1 on the loop thread's own
 * edge-triggered epoll set): routes, validation, answers.
 *
 * A POST /v1/infer is validated as it arrives (its head: method, type,
 * length; its body: parsed as it comes, straight from the connection's
 * buffer when it comes whole); once complete it goes to the batch queue.
 * The connection reads nothing more meanwhile. The answer (result, 503,
 * 504) is made on the loop thread by a batch's continuation or a timer and
 * handed to the connection, which sends it at the end of the loop pass
 * (http_kick) or at once when it is being served.
 *
 * Every request gets a struct request (made in on_head, freed in on_done)
 * so that the drain can count what is still open. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http1.h"
#include "parse.h"
#include "service.h"

enum {
  RQ_BODY,     /* reading the body */
  RQ_WAITING,  /* queued or in a batch */
  RQ_ANSWERED, /* answer handed to the connection, or cut at a deadline */
};

/* The labels of /metrics' other requests (infer_other_requests_total). */
enum route {
  ROUTE_INFER = METRICS_PATH_INFER,
  ROUTE_HEALTH = METRICS_PATH_HEALTH,
  ROUTE_METRICS = METRICS_PATH_METRICS,
  ROUTE_NONE = METRICS_PATH_OTHER,
};

struct http {
  struct http1 *h;
};

static const char TEXT[] = "text/plain; charset=utf-8";

/* Inference requests and the rest are counted apart. */
static void count_answer(struct request *r, unsigned status) {
  struct server *s = r->srv;
  if (r->infer) {
    uint64_t now = now_ns();
    metrics_request(s->metrics, status, now - r->arrival_ns);
    if (s->cfg->socket_timing) r->ready_ns = now;
  } else
    metrics_other(s->metrics, (enum metrics_path)r->route, status);
  atomic_fetch_add_explicit(&s->answers, 1, memory_order_relaxed);
}

/* Hands the answer to the connection (which copies it). */
static void answer(struct request *r, unsigned status, const char *headers, size_t hlen,
                   const char *ctype, const void *body, size_t blen) {
  struct server *s = r->srv;
  ev_timer_stop(s->evl, &r->deadline);
  batch_forget(s, r);
  if (r->state == RQ_WAITING) s->waiting--;
  r->state = RQ_ANSWERED;
  count_answer(r, status);
  http1_answer(r->conn, status, headers, hlen, ctype, body, blen, s->draining);
}

static void answer_text(struct request *r, unsigned status, const char *headers, size_t hlen,
                        const char *line) {
  answer(r, status, headers, hlen, TEXT, line, strlen(line));
}

void request_answer_error(struct request *r, unsigned status, const char *reason) {
  char line[512];
  snprintf(line, sizeof line, "%s\n", reason);
  answer_text(r, status, NULL, 0, line);
}

/* "Name: v\r\n" at `at`; returns its length. */
static size_t put_header(char *at, const char *name, uint64_t v) {
  char num[24];
  const char *d = format_uint(v, num + sizeof num);
  size_t n = strlen(name), m = (size_t)(num + sizeof num - d);
  memcpy(at, name, n);
  memcpy(at + n, d, m);
  memcpy(at + n + m, "\r\n", 2);
  return n + m + 2;
}

void request_answer_result(struct request *r, const float *out, const struct slot *slot) {
  struct server *s = r->srv;
  int n = s->model.dims[s->model.nlayers];
  /* Where the answer came from: tests check slices against these. */
  char hdr[160];
  size_t hlen = put_header(hdr, "X-Batch-Id: ", slot->batch_id);
  hlen += put_header(hdr + hlen, "X-Batch-Size: ", (uint64_t)slot->n);
  hlen += put_header(hdr + hlen, "X-Batch-Row: ", (uint64_t)r->row);
  hlen += put_header(hdr + hlen, "X-Device: ", (uint64_t)slot->dev->ordinal);
  if (r->raw) {
    answer(r, 200, hdr, hlen, "application/octet-stream", out, sizeof(float) * (size_t)n);
    return;
  }
  char stack[2048];
  size_t cap = format_json_max(n);
  char *buf = cap <= sizeof stack ? stack : malloc(cap);
  int len = buf ? format_json_floats(out, n, buf, cap) : -1;
  if (len < 0)
    answer_text(r, 500, NULL, 0, "out of memory\n");
  else
    answer(r, 200, hdr, hlen, "application/json", buf, (size_t)len);
  if (buf != stack) free(buf);
}

/* Answers at once with a one-line reason. */
static void reply(struct request *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply(struct request *r, unsigned status, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  strcat(line, "\n");
  answer_text(r, status, NULL, 0, line);
}

/* Runs from the request's end (its body parsed, RQ_WAITING on): the
 * client's part is over, what is late now is the service's. */
static void on_deadline(struct ev_loop *evl, ev_timer *w, int revents) {
  struct request *r = w->data;
  struct server *s = r->srv;
  (void)evl, (void)revents;
  if (r->state == RQ_WAITING) {
    char why[96];
    snprintf(why, sizeof why, "deadline of %u ms passed", s->cfg->deadline_ms);
    request_answer_error(r, 504, why);
    batch_dispatch(s); /* a row left a slot or the queue */
    http_kick(s);
  }
}
static void serve_health(struct request *r) {
  struct server *s = r->srv;
  if (s->draining) return reply(r, 503, "%s", s->restarting ? "restarting" : "draining");
  if (devices_up(s) == 0) return reply(r, 503, "no device is serving");
  if (s->restarts)
    return reply(
        r, 200, "ok; restarted %llu time%s after a device fault the reset did not clear (last: %s)",
        s->restarts, s->restarts == 1 ? "" : "s", s->restart_why);
  reply(r, 200, "ok");
}

static void serve_metrics(struct request *r) {
  struct server *s = r->srv;
  struct strbuf b = {0};
  int nt = s->cfg->loop_threads;
  metrics_render(s->metrics, &b);
  devices_metrics(s, &b);
  /* Sums over the loop threads, from what each publishes: its counters
   * (atomics) and its CPU clock. */
  double cpu = 0;
  unsigned long long iterations = 0;
  unsigned conns = 0;
  for (int i = 0; i < nt; i++) {
    struct server *p = &s->peers[i];
    clockid_t clk;
    struct timespec ts;
    if (pthread_getcpuclockid(p->tid, &clk) == 0 && clock_gettime(clk, &ts) == 0)
      cpu += (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    iterations += atomic_load_explicit(&p->iterations, memory_order_relaxed);
    conns += http_connections(p);
  }
  sb_printf(&b,
            "# HELP infer_loop_thread_answers_total Answers made by each loop thread.\n"
            "# TYPE infer_loop_thread_answers_total counter\n");
  for (int i = 0; i < nt; i++)
    sb_printf(&b, "infer_loop_thread_answers_total{thread=\"%d\"} %llu\n", i,
              (unsigned long long)atomic_load_explicit(&s->peers[i].answers, memory_order_relaxed));
  sb_printf(&b,
            "# HELP infer_loop_threads Threads running the event loop (HTTP, batching, GPU "
            "completions).\n# TYPE infer_loop_threads gauge\ninfer_loop_threads %d\n"
            "# TYPE infer_loop_iterations_total counter\ninfer_loop_iterations_total %llu\n"
            "# TYPE infer_loop_thread_cpu_seconds_total counter\n"
            "infer_loop_thread_cpu_seconds_total %.6f\n"
            "# TYPE infer_http_connections gauge\ninfer_http_connections %u\n"
            "# HELP infer_process_restarts_total Re-execs after a device fault its reset did not "
            "clear.\n# TYPE infer_process_restarts_total counter\n"
            "infer_process_restarts_total %llu\n",
            nt, iterations, cpu, conns, s->restarts);
  if (b.oom)
    reply(r, 500, "out of memory");
  else
    answer(r, 200, NULL, 0, "text/plain; version=0.0.4", b.p, b.len);
  sb_free(&b);
}

static void method_not_allowed(struct request *r, const char *allow) {
  char line[96], hdr[64];
  snprintf(line, sizeof line, "method not allowed: use %s\n", allow);
  int hlen = snprintf(hdr, sizeof hdr, "Allow: %s\r\n", allow);
  answer_text(r, 405, hdr, (size_t)hlen, line);
}

/* The head of POST /v1/infer is in: refuse early what can be refused. */
static void start_infer(struct request *r, const struct http1_head *h) {
  struct server *s = r->srv;
  const char *ct = http1_header(h, "Content-Type");
  enum body_kind kind = parse_content_type(ct);
  if (s->draining) return reply(r, 503, "%s", server_drain_reason(s));
  if (kind == BODY_UNSUPPORTED)
    return reply(r, 415,
                 "unsupported Content-Type '%.100s': use application/json or "
                 "application/octet-stream",
                 ct);
  r->raw = kind == BODY_RAW;
  if (h->has_length) {
    if (h->length > s->max_body)
      return reply(r, 413, "body of %llu bytes is over the limit of %zu",
                   (unsigned long long)h->length, s->max_body);
    r->cap = (size_t)h->length;
  }
  if (s->cfg->fault_injection) {
    const char *fault = http1_header(h, "X-Inject-Fault");
    r->fault = fault == NULL                  ? 0
               : strcmp(fault, "1") == 0      ? FAULT_DEVICE
               : strcmp(fault, "sticky") == 0 ? FAULT_DEVICE | FAULT_STICKY
                                              : 0;
  }
}

/* A piece of the body. Over the limit the body is dropped as it arrives
 * and answered 413 once complete; a sender still going at the body
 * deadline is cut (http1.h). */
static void on_body(void *req, const char *data, size_t len) {
  struct request *r = req;
  struct server *s = r->srv;
  if (r->state != RQ_BODY) return;
  r->received += len;
  if (r->received > s->max_body || !r->infer) {
    free(r->body);
    r->body = NULL;
    r->len = 0;
    return;
  }
  /* The usual body comes in one piece with its Content-Length: parsed
   * straight from the connection's buffer, no copy. A body that does not
   * parse is kept, so that finish_infer reports why. */
  if (r->len == 0 && r->received == len && len == r->cap && !r->parsed) {
    char err[8];
    int n = s->model.dims[0];
    if ((r->raw ? parse_raw_floats(data, len, r->in, n, err, sizeof err)
                : parse_json_floats(data, len, r->in, n, err, sizeof err)) == 0) {
      r->parsed = 1;
      return;
    }
  }
  if (r->len + len > r->cap || r->body == NULL) {
    size_t cap = r->cap > r->len + len ? r->cap : 2 * (r->len + len);
    if (cap > s->max_body) cap = s->max_body;
    char *p = realloc(r->body, cap);
    if (p == NULL) {
      reply(r, 500, "out of memory");
      return;
    }
    r->body = p;
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, len);
  r->len += len;
}

/* The whole body is in: parse it and queue the request. */
static void finish_infer(struct request *r) {
  struct server *s = r->srv;
  char err[256];
  int n = s->model.dims[0];
  if (r->received > s->max_body)
    return reply(r, 413, "body is over the limit of %zu bytes", s->max_body);
  int bad = r->parsed ? 0
            : r->raw  ? parse_raw_floats(r->body, r->len, r->in, n, err, sizeof err)
                     : parse_json_floats(r->body ? r->body : "", r->len, r->in, n, err, sizeof err);
  free(r->body);
  r->body = NULL;
  if (bad) return reply(r, 400, "%s", err);
  if (devices_up(s) == 0) return reply(r, 503, "no device is serving");
  if (s->batch.len >= (size_t)s->cfg->max_queue)
    return reply(r, 503, "queue full: try again later");
  r->state = RQ_WAITING;
  s->waiting++;
  ev_timer_start(s->evl, &r->deadline);
  batch_push(s, r);
}

/* Everything but the body of POST /v1/infer is answered once the request
 * is complete, so that a keep-alive client keeps its connection for a
 * health check with a body. (Early answers are kept for bodies nobody
 * should read: 413 and 415; the connection closes after them.) */
static void finish_other(struct request *r) {
  switch (r->route) {
  case ROUTE_INFER: return method_not_allowed(r, "POST");
  case ROUTE_HEALTH: return r->get ? serve_health(r) : method_not_allowed(r, "GET, HEAD");
  case ROUTE_METRICS: return r->get ? serve_metrics(r) : method_not_allowed(r, "GET, HEAD");
  default:
    return reply(r, 404, "no such endpoint: %.200s (try POST /v1/infer, GET /health, GET /metrics)",
                 r->url ? r->url : "");
  }
}

static void on_end(void *req) {
  struct request *r = req;
  struct server *s = r->srv;
  if (r->state != RQ_BODY) return;
  if (!r->infer && r->received > s->max_body)
    return reply(r, 413, "body is over the limit of %zu bytes", s->max_body);
  if (r->infer)
    finish_infer(r);
  else
    finish_other(r);
}

static void *on_head(const struct http1_head *h, void *user) {
  struct server *s = user;
  int post = strcmp(h->method, "POST") == 0;
  int infer = post && strcmp(h->url, "/v1/infer") == 0;
  enum route route = strcmp(h->url, "/v1/infer") == 0  ? ROUTE_INFER
                     : strcmp(h->url, "/health") == 0  ? ROUTE_HEALTH
                     : strcmp(h->url, "/metrics") == 0 ? ROUTE_METRICS
                                                       : ROUTE_NONE;
  /* An inference request's inputs live at its end; an unknown path's URL
   * (for its 404) too. */
  size_t extra = infer                 ? sizeof(float) * (size_t)s->model.dims[0]
                 : route == ROUTE_NONE ? strnlen(h->url, 200) + 1
                                       : 0;
  struct request *r = calloc(1, sizeof *r + extra);
  if (r == NULL) return NULL;
  r->in = infer ? (float *)(r + 1) : NULL;
  if (route == ROUTE_NONE) {
    r->url = (char *)(r + 1);
    memcpy(r->url, h->url, extra - 1);
  }
  r->srv = s;
  r->conn = h->conn;
  r->arrival_ns = now_ns();
  if (infer && s->cfg->socket_timing) metrics_socket_wait(s->metrics, h->socket_wait_ns);
  ev_timer_init(&r->deadline, on_deadline, s->cfg->deadline_ms * 1e-3, 0.);
  r->deadline.data = r;
  atomic_fetch_add(&s->metrics->active_requests, 1);
  s->active++;
  r->route = route;
  r->infer = infer;
  r->get = strcmp(h->method, "GET") == 0 || h->is_head;
  if (infer) start_infer(r, h);
  return r;
}

static void on_done(void *req, int sent) {
  struct request *r = req;
  struct server *s = r->srv;
  if (sent && r->ready_ns) metrics_send_wait(s->metrics, now_ns() - r->ready_ns);
  ev_timer_stop(s->evl, &r->deadline);
  batch_forget(s, r);
  if (r->state == RQ_WAITING) s->waiting--;
  free(r->body);
  free(r);
  atomic_fetch_sub(&s->metrics->active_requests, 1);
  s->active--;
  server_check_drained(s);
}

/* A connection cut at a deadline (the 408 is written): counted, and the
 * request whose body was late is over (its on_done follows). */
static void on_cut(void *req, enum metrics_phase phase, void *user) {
  struct server *s = user;
  struct request *r = req;
  metrics_timeout(s->metrics, phase);
  if (r == NULL) return;
  count_answer(r, 408);
}

static const struct http1_ops ops = {
    .on_head = on_head,
    .on_body = on_body,
    .on_end = on_end,
    .on_done = on_done,
    .on_cut = on_cut,
};

void http_kick(struct server *s) {
  if (s->http) http1_flush(s->http->h);
}

unsigned long long http_events(const struct server *s) {
  return s->http ? http1_events(s->http->h) : 0;
}

int http_start(struct server *s, int port, char *err, size_t errlen) {
  struct http *h = calloc(1, sizeof *h);
  if (h == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  /* A re-exec'd service gets its predecessor's listening socket, with the
   * connections waiting in its backlog; it is close-on-exec again at once. */
  int inherited = s->inherit_fd;
  if (inherited >= 0 && (inherited < 3 || fcntl(inherited, F_SETFD, FD_CLOEXEC) != 0)) {
    snprintf(err, errlen, "INFER_LISTEN_FD: %d is not an open socket", inherited);
    free(h);
    return -1;
  }
  struct http1_config c = {
      .listen_fd = inherited,
      .host = s->cfg->host,
      .port = port,
      /* Several loop threads: one listening socket each on the same port,
       * the kernel spreads the connections. */
      .reuse_port = s->cfg->loop_threads > 1,
      .max_connections = s->cfg->max_connections,
      .idle_timeout_s = s->cfg->connection_timeout_s,
      .header_deadline_ms = s->cfg->header_deadline_ms,
      .body_deadline_ms = s->cfg->body_deadline_ms,
      .rx_timestamps = s->cfg->socket_timing,
  };
  h->h = http1_start(s->evl, &c, &ops, s, err, errlen);
  if (h->h == NULL) {
    free(h);
    return -1;
  }
  s->http = h;
  return 0;
}

int http_port(struct server *s) { return http1_port(s->http->h); }

unsigned http_connections(struct server *s) {
  /* s->http is set before the loop threads start and cleared after they end. */
  return s->http ? http1_connections(s->http->h) : 0;
}

void http_quiesce(struct server *s, int keep) {
  int fd = http1_quiesce(s->http->h);
  if (fd < 0) return;
  if (keep)
    s->listen_fd = fd; /* connections wait in its backlog for the next process */
  else
    close(fd);
}

void http_stop(struct server *s) {
  struct http *h = s->http;
  if (h == NULL) return;
  http1_stop(h->h); /* every request still open gets its on_done */
  s->http = NULL;
  free(h);
}
