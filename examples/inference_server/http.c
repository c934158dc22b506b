/* HTTP/1.1 with libmicrohttpd in its external-event mode, on the service's
 * libev loop: MHD keeps an epoll set of its sockets (MHD_USE_EPOLL) whose
 * fd libev watches; MHD_run runs when that fd is readable, when the timeout
 * MHD asks for (MHD_get_timeout, read right before libev blocks) expires,
 * and right after a loop pass that resumed connections (http_kick).
 *
 * A POST /v1/infer is validated as it arrives; once its body is parsed the
 * request goes to the batch queue and its connection is suspended
 * (MHD_suspend_connection): MHD neither reads nor times it out meanwhile.
 * The answer (result, 503, 504) is made on the loop thread by a batch's
 * continuation or a timer, kept in the request, and the connection resumed;
 * MHD then calls the access handler again, which queues the answer.
 *
 * Every request, answered at once or later, gets a struct request (the
 * connection's con_cls) so that the drain can count what is still open:
 * MHD's request-completed callback frees it. Every connection gets a
 * struct conn (its socket context, conn.c) that holds the client to its
 * header and body deadlines. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "parse.h"
#include "service.h"

/* MHD's per-connection pool (headers, read and write buffers); it zeroes
 * the pool for every request, so its default 32 KiB cost a 32 KiB memset
 * per request, 17 % of the loop thread under load. Requests here are a few
 * hundred bytes of headers and a streamed body. */
#define CONNECTION_MEMORY 8192

enum {
  RQ_BODY,     /* reading the body */
  RQ_WAITING,  /* queued or in a batch: suspended */
  RQ_ANSWERED, /* answer made, not yet handed to MHD */
  RQ_SENT,     /* handed to MHD */
  RQ_CUT,      /* its connection missed a deadline and was cut (conn.c) */
};

/* The labels of /metrics' other requests (infer_other_requests_total). */
enum route {
  ROUTE_INFER = METRICS_PATH_INFER,
  ROUTE_HEALTH = METRICS_PATH_HEALTH,
  ROUTE_METRICS = METRICS_PATH_METRICS,
  ROUTE_NONE = METRICS_PATH_OTHER,
};

struct http {
  struct MHD_Daemon *d;
  ev_io io;
  ev_prepare prepare;
  ev_timer timer;
  int kicked;
  int port;
  atomic_uint nconn; /* open connections (MHD's notifications; /metrics on any thread) */
  struct conns conns;
};

static struct MHD_Response *text_response(const char *text, int close) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
  if (resp) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  }
  return resp;
}

/* Inference requests and the rest are counted apart. */
static void count_answer(struct request *r, unsigned status) {
  struct server *s = r->srv;
  if (r->infer)
    metrics_request(s->metrics, status, now_ns() - r->arrival_ns);
  else
    metrics_other(s->metrics, (enum metrics_path)r->route, status);
  atomic_fetch_add_explicit(&s->answers, 1, memory_order_relaxed);
}

/* Records the answer; resumes the connection if it waits for one. */
static void answer(struct request *r, unsigned status, struct MHD_Response *resp) {
  struct server *s = r->srv;
  ev_timer_stop(s->evl, &r->deadline);
  batch_forget(s, r);
  conn_body_end(r->cx); /* answered before its body was read: 413, 415, 503 */
  if (r->response) MHD_destroy_response(r->response);
  if (r->state == RQ_WAITING) s->waiting--;
  r->status = status;
  r->response = resp;
  r->state = RQ_ANSWERED;
  count_answer(r, status);
  if (r->suspended) {
    r->suspended = 0;
    MHD_resume_connection(r->conn);
    s->http->kicked = 1;
  }
}

void request_answer_error(struct request *r, unsigned status, const char *reason) {
  char line[512];
  snprintf(line, sizeof line, "%s\n", reason);
  answer(r, status, text_response(line, r->srv->draining));
}

/* Decimal digits of v in buf (24 bytes): four header values per answer,
 * where snprintf's parsing of its format showed in profiles. */
static const char *utoa(uint64_t v, char *buf) {
  char *p = buf + 23;
  *p = 0;
  do *--p = (char)('0' + v % 10);
  while (v /= 10);
  return p;
}

void request_answer_result(struct request *r, const float *out, const struct slot *slot) {
  struct server *s = r->srv;
  int n = s->model.dims[s->model.nlayers];
  struct MHD_Response *resp;
  if (r->raw) {
    resp = MHD_create_response_from_buffer(sizeof(float) * (size_t)n, (void *)out,
                                           MHD_RESPMEM_MUST_COPY);
  } else {
    size_t cap = format_json_max(n);
    char *buf = malloc(cap);
    int len = buf ? format_json_floats(out, n, buf, cap) : -1;
    resp =
        len >= 0 ? MHD_create_response_from_buffer((size_t)len, buf, MHD_RESPMEM_MUST_FREE) : NULL;
    if (resp == NULL) free(buf);
  }
  if (resp == NULL) {
    answer(r, 500, text_response("out of memory\n", 1));
    return;
  }
  char v[24];
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                          r->raw ? "application/octet-stream" : "application/json");
  /* Where the answer came from: tests check slices against these. */
  MHD_add_response_header(resp, "X-Batch-Id", utoa(slot->batch_id, v));
  MHD_add_response_header(resp, "X-Batch-Size", utoa((uint64_t)slot->n, v));
  MHD_add_response_header(resp, "X-Batch-Row", utoa((uint64_t)r->row, v));
  MHD_add_response_header(resp, "X-Device", utoa((uint64_t)slot->dev->ordinal, v));
  if (s->draining) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  answer(r, 200, resp);
}

/* Hands the recorded answer to MHD. */
static enum MHD_Result send_answer(struct request *r) {
  r->state = RQ_SENT;
  if (r->response == NULL) return MHD_NO; /* out of memory: drop the connection */
  enum MHD_Result ok = MHD_queue_response(r->conn, r->status, r->response);
  MHD_destroy_response(r->response);
  r->response = NULL;
  return ok;
}

/* Answers at once, inside the access handler. */
static enum MHD_Result reply(struct request *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply(struct request *r, unsigned status, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  strcat(line, "\n");
  answer(r, status, text_response(line, r->srv->draining));
  return send_answer(r);
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

static enum MHD_Result serve_health(struct request *r) {
  struct server *s = r->srv;
  if (s->draining) return reply(r, 503, "%s", s->restarting ? "restarting" : "draining");
  if (devices_up(s) == 0) return reply(r, 503, "no device is serving");
  if (s->restarts)
    return reply(
        r, 200, "ok; restarted %llu time%s after a device fault the reset did not clear (last: %s)",
        s->restarts, s->restarts == 1 ? "" : "s", s->restart_why);
  return reply(r, 200, "ok");
}

static enum MHD_Result serve_metrics(struct request *r) {
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
  if (b.oom) {
    sb_free(&b);
    return reply(r, 500, "out of memory");
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
  if (resp == NULL) {
    sb_free(&b);
    return reply(r, 500, "out of memory");
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
  answer(r, 200, resp);
  return send_answer(r);
}

static enum MHD_Result method_not_allowed(struct request *r, const char *allow) {
  char line[96];
  snprintf(line, sizeof line, "method not allowed: use %s\n", allow);
  struct MHD_Response *resp = text_response(line, r->srv->draining);
  if (resp) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
  answer(r, 405, resp);
  return send_answer(r);
}

/* The headers of POST /v1/infer are in: refuse early what can be refused. */
static enum MHD_Result start_infer(struct request *r) {
  struct server *s = r->srv;
  const char *ct = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
  const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
  enum body_kind kind = parse_content_type(ct);
  if (s->draining) return reply(r, 503, "%s", server_drain_reason(s));
  if (kind == BODY_UNSUPPORTED)
    return reply(r, 415,
                 "unsupported Content-Type '%.100s': use application/json or "
                 "application/octet-stream",
                 ct);
  r->raw = kind == BODY_RAW;
  if (cl) {
    unsigned long long n = strtoull(cl, NULL, 10);
    if (n > s->max_body)
      return reply(r, 413, "body of %llu bytes is over the limit of %zu", n, s->max_body);
    r->cap = (size_t)n;
  }
  if (s->cfg->fault_injection) {
    const char *fault = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Inject-Fault");
    r->fault = fault == NULL                  ? 0
               : strcmp(fault, "1") == 0      ? FAULT_DEVICE
               : strcmp(fault, "sticky") == 0 ? FAULT_DEVICE | FAULT_STICKY
                                              : 0;
  }
  return MHD_YES;
}

/* A piece of the body. Over the limit the body is dropped as it arrives
 * and answered 413 once complete (MHD takes no answer in the middle of a
 * body); a sender still going at the body deadline is cut (conn.c). */
static enum MHD_Result body_chunk(struct request *r, const char *data, size_t len) {
  struct server *s = r->srv;
  r->received += len;
  if (r->received > s->max_body || !r->infer) {
    free(r->body);
    r->body = NULL;
    r->len = 0;
    return MHD_YES;
  }
  /* The usual body comes in one piece with its Content-Length: parsed
   * straight from MHD's read buffer, no copy. A body that does not parse
   * is kept, so that finish_infer reports why. */
  if (r->len == 0 && r->received == len && len == r->cap && !r->parsed) {
    char err[8];
    int n = s->model.dims[0];
    if ((r->raw ? parse_raw_floats(data, len, r->in, n, err, sizeof err)
                : parse_json_floats(data, len, r->in, n, err, sizeof err)) == 0) {
      r->parsed = 1;
      return MHD_YES;
    }
  }
  if (r->len + len > r->cap || r->body == NULL) {
    size_t cap = r->cap > r->len + len ? r->cap : 2 * (r->len + len);
    if (cap > s->max_body) cap = s->max_body;
    char *p = realloc(r->body, cap);
    if (p == NULL) return MHD_NO;
    r->body = p;
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, len);
  r->len += len;
  return MHD_YES;
}

/* The whole body is in: parse it and queue the request. */
static enum MHD_Result finish_infer(struct request *r) {
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
  /* Suspend before queueing: the push may send a batch at once, and
   * whatever answers it (a continuation in a later loop pass, or a failed
   * submission right now) must find a suspended connection to resume. */
  MHD_suspend_connection(r->conn);
  r->suspended = 1;
  batch_push(s, r);
  return MHD_YES;
}

/* Everything but the body of POST /v1/infer is answered once the request
 * is complete: an answer queued while MHD still expects a body makes it
 * close the connection, which a keep-alive client should not pay for a
 * health check. (Early answers are kept for bodies nobody should read:
 * 413 and 415.) */
static enum MHD_Result finish_other(struct request *r, const char *url, const char *method) {
  int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  switch (r->route) {
  case ROUTE_INFER: return method_not_allowed(r, "POST");
  case ROUTE_HEALTH: return get ? serve_health(r) : method_not_allowed(r, "GET, HEAD");
  case ROUTE_METRICS: return get ? serve_metrics(r) : method_not_allowed(r, "GET, HEAD");
  default:
    return reply(r, 404, "no such endpoint: %.200s (try POST /v1/infer, GET /health, GET /metrics)",
                 url);
  }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  struct server *s = cls;
  struct request *r = *con_cls;
  (void)version;
  if (r == NULL) {
    int infer = strcmp(url, "/v1/infer") == 0 && strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    /* An inference request's inputs live at its end: one allocation. */
    r = calloc(1, sizeof *r + (infer ? sizeof(float) * (size_t)s->model.dims[0] : 0));
    if (r == NULL) return MHD_NO;
    r->in = infer ? (float *)(r + 1) : NULL;
    r->srv = s;
    r->conn = conn;
    r->cx = conn_of(conn);
    r->arrival_ns = now_ns();
    ev_timer_init(&r->deadline, on_deadline, s->cfg->deadline_ms * 1e-3, 0.);
    r->deadline.data = r;
    *con_cls = r;
    atomic_fetch_add(&s->metrics->active_requests, 1);
    s->active++;
    r->route = strcmp(url, "/v1/infer") == 0  ? ROUTE_INFER
               : strcmp(url, "/health") == 0  ? ROUTE_HEALTH
               : strcmp(url, "/metrics") == 0 ? ROUTE_METRICS
                                              : ROUTE_NONE;
    r->infer = infer;
    if (r->cx && r->cx->cut) {
      /* Cut at the header deadline, with the rest of the headers already
       * on their way: the 408 is written, this request goes unserved. */
      r->state = RQ_CUT;
      return MHD_YES;
    }
    conn_body_begin(r->cx, r);
    return r->infer ? start_infer(r) : MHD_YES;
  }
  if (r->state == RQ_ANSWERED) return send_answer(r);
  if (r->state == RQ_CUT) {
    /* The rest of a cut request is dropped. When all of it came in before
     * MHD read the end of the stream, MHD waits for an answer and reads no
     * more: a timeout of its own, one second, closes the connection then. */
    if (*upload_size == 0) MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->state != RQ_BODY) {
    *upload_size = 0; /* answered early (413, ...): the rest of the body is dropped */
    return MHD_YES;
  }
  if (*upload_size != 0) {
    size_t len = *upload_size;
    *upload_size = 0;
    return body_chunk(r, upload, len);
  }
  conn_body_end(r->cx);
  if (!r->infer && r->received > s->max_body)
    return reply(r, 413, "body is over the limit of %zu bytes", s->max_body);
  return r->infer ? finish_infer(r) : finish_other(r, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct server *s = cls;
  struct request *r = *con_cls;
  if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) conn_request_end(conn_of(conn));
  if (r == NULL) return;
  ev_timer_stop(s->evl, &r->deadline);
  batch_forget(s, r);
  if (r->state == RQ_WAITING) s->waiting--;
  if (r->response) MHD_destroy_response(r->response);
  free(r->body);
  free(r);
  *con_cls = NULL;
  atomic_fetch_sub(&s->metrics->active_requests, 1);
  s->active--;
  server_check_drained(s);
}

static void run_mhd(struct server *s) {
  struct http *h = s->http;
  unsigned before = atomic_load_explicit(&h->nconn, memory_order_relaxed);
  h->kicked = 0;
  MHD_run(h->d);
  /* At the connection limit MHD takes its listening socket out of its epoll
   * set and puts it back at the start of a later MHD_run. When connections
   * end inside this run (idle timeouts) nothing else may wake the loop for
   * that later run, so it happens now. */
  if (before >= s->cfg->max_connections &&
      atomic_load_explicit(&h->nconn, memory_order_relaxed) < before)
    MHD_run(h->d);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
  struct server *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    *socket_ctx = conn_open(&s->http->conns, conn);
    atomic_fetch_add_explicit(&s->http->nconn, 1, memory_order_relaxed);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    conn_close(*socket_ctx);
    *socket_ctx = NULL;
    atomic_fetch_sub_explicit(&s->http->nconn, 1, memory_order_relaxed);
  }
}

/* MHD read a request line: its value becomes the request's con_cls, which
 * stays NULL for the access handler to fill. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)cls, (void)uri;
  conn_request_line(conn_of(conn));
  return NULL;
}

/* A connection cut at a deadline (conn.c wrote the 408): counted, and the
 * request whose body was late is over. MHD reports the connection's end. */
static void on_cut(struct conn *cx, enum metrics_phase phase, void *user) {
  struct server *s = user;
  struct request *r = cx->req;
  metrics_timeout(s->metrics, phase);
  if (r == NULL) return;
  count_answer(r, 408);
  if (r->state == RQ_WAITING) s->waiting--;
  r->state = RQ_CUT;
  free(r->body);
  r->body = NULL;
}

/* MHD's messages go to stderr as before, less one that would be false:
 * a connection the service cut reaches its end of stream mid-request,
 * which MHD reports as the client's closing. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  struct server *s = cls;
  if (s->http && s->http->conns.cut_open > 0 &&
      strcmp(fmt, "Connection was closed by remote side with incomplete request.\n") == 0)
    return;
  vfprintf(stderr, fmt, ap);
}

static void on_io(struct ev_loop *evl, ev_io *w, int revents) {
  struct server *s = w->data;
  (void)evl, (void)revents;
  s->http_events++;
  run_mhd(s);
}

static void on_timer(struct ev_loop *evl, ev_timer *w, int revents) {
  (void)evl, (void)revents;
  run_mhd(w->data);
}

/* Right before libev blocks: MHD's own deadline (idle timeouts, data it
 * already holds) bounds the wait. */
static void on_prepare(struct ev_loop *evl, ev_prepare *w, int revents) {
  struct server *s = w->data;
  struct http *h = s->http;
  MHD_UNSIGNED_LONG_LONG ms;
  (void)revents;
  if (h->kicked) run_mhd(s);
  ev_timer_stop(evl, &h->timer);
  if (MHD_get_timeout(h->d, &ms) == MHD_YES) {
    ev_timer_set(&h->timer, (double)ms / 1000.0, 0.);
    ev_timer_start(evl, &h->timer);
  }
}

void http_kick(struct server *s) {
  if (s->http && s->http->kicked) run_mhd(s);
}

int http_start(struct server *s, int port, char *err, size_t errlen) {
  struct http *h = calloc(1, sizeof *h);
  if (h == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, s->cfg->host, &addr.sin_addr) != 1) {
    snprintf(err, errlen, "--listen: '%s' is not an IPv4 address", s->cfg->host);
    free(h);
    return -1;
  }
  s->http = h;
  conns_init(&h->conns, s->evl, s->cfg, on_cut, s);
  /* A re-exec'd service gets its predecessor's listening socket, with the
   * connections waiting in its backlog; it is close-on-exec again at once. */
  int inherited = s->inherit_fd;
  if (inherited >= 0) {
    if (inherited < 3 || fcntl(inherited, F_SETFD, FD_CLOEXEC) != 0) {
      snprintf(err, errlen, "INFER_LISTEN_FD: %d is not an open socket", inherited);
      s->http = NULL;
      free(h);
      return -1;
    }
    fcntl(inherited, F_SETFL, fcntl(inherited, F_GETFL) | O_NONBLOCK);
  }
  struct MHD_OptionItem where[] = {
      inherited >= 0 ? (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, inherited, NULL}
                     : (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &addr},
      /* Several loop threads: one listening socket each on the same port,
       * the kernel spreads the connections (SO_REUSEPORT). */
      {s->cfg->loop_threads > 1 ? MHD_OPTION_LISTENING_ADDRESS_REUSE : MHD_OPTION_END, 1, NULL},
      {MHD_OPTION_END, 0, NULL},
  };
  /* External polling through MHD's epoll fd; suspend/resume (which brings
   * the ITC that resumes and quiesce use); turbo: fewer syscalls per
   * request, fine on loopback and behind a proxy. The logger is the first
   * option: MHD reports on the options before it with its own logger. */
  h->d = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_TURBO,
      (uint16_t)s->cfg->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
      MHD_OPTION_ARRAY, where, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_URI_LOG_CALLBACK, on_request_line,
      s, MHD_OPTION_CONNECTION_LIMIT, s->cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
      s->cfg->connection_timeout_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY, MHD_OPTION_END);
  if (h->d == NULL) {
    snprintf(err, errlen, "cannot listen on %s:%d (libmicrohttpd says why above)", s->cfg->host,
             port);
    s->http = NULL;
    free(h);
    return -1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
  const union MHD_DaemonInfo *bound = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
  h->port = bound ? bound->port : port;
  if (inherited >= 0) {
    struct sockaddr_in sa;
    socklen_t blen = sizeof sa;
    if (getsockname(inherited, (struct sockaddr *)&sa, &blen) == 0) h->port = ntohs(sa.sin_port);
  }
  ev_io_init(&h->io, on_io, info->epoll_fd, EV_READ);
  ev_prepare_init(&h->prepare, on_prepare);
  ev_init(&h->timer, on_timer);
  h->io.data = h->prepare.data = h->timer.data = s;
  ev_io_start(s->evl, &h->io);
  ev_prepare_start(s->evl, &h->prepare);
  return 0;
}

int http_port(struct server *s) { return s->http->port; }

unsigned http_connections(struct server *s) {
  /* s->http is set before the loop threads start and cleared after they end. */
  return s->http ? atomic_load_explicit(&s->http->nconn, memory_order_relaxed) : 0;
}

void http_quiesce(struct server *s, int keep) {
  MHD_socket fd = MHD_quiesce_daemon(s->http->d);
  if (fd == MHD_INVALID_SOCKET) return;
  if (keep)
    s->listen_fd = fd; /* connections wait in its backlog for the next process */
  else
    close(fd);
}

void http_stop(struct server *s) {
  struct http *h = s->http;
  if (h == NULL) return;
  ev_io_stop(s->evl, &h->io);
  ev_prepare_stop(s->evl, &h->prepare);
  ev_timer_stop(s->evl, &h->timer);
  MHD_stop_daemon(h->d);
  conns_fini(&h->conns); /* every connection's close was reported */
  s->http = NULL;
  free(h);
}
