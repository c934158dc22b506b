/* inference_server_blocking: the service's twin in the thread-per-connection
 * design (twin.h says what is shared and what differs). Same flags, same
 * endpoints, same answers; no event loop: each connection's thread blocks
 * until its row is computed, each executor thread blocks in
 * cudaStreamSynchronize.
 *
 *   inference_server_blocking [OPTIONS]     (--help lists them)
 * Exit status as the service's: 0 after a complete drain, 1 on a start-up
 * error or a drain that timed out, 2 on a usage error. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "parse.h"
#include "twin.h"

/* The labels of /metrics' other requests, as the service's. */
enum route {
  ROUTE_INFER = METRICS_PATH_INFER,
  ROUTE_HEALTH = METRICS_PATH_HEALTH,
  ROUTE_METRICS = METRICS_PATH_METRICS,
  ROUTE_NONE = METRICS_PATH_OTHER,
};

/* A request, on its connection's thread. */
struct creq {
  enum route route;
  int infer, raw, fault, answered;
  char *body;
  size_t len, cap, received;
  uint64_t arrival_ns;
};

static struct twin twin;
static atomic_long active; /* requests begun and not completed */

static enum MHD_Result respond(struct MHD_Connection *c, struct creq *r, unsigned status,
                               struct MHD_Response *resp) {
  r->answered = 1;
  if (r->infer)
    metrics_request(&twin.metrics, status, now_ns() - r->arrival_ns);
  else
    metrics_other(&twin.metrics, (enum metrics_path)r->route, status);
  if (resp == NULL) return MHD_NO;
  if (twin.draining) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ok = MHD_queue_response(c, status, resp);
  MHD_destroy_response(resp);
  return ok;
}

static enum MHD_Result reply(struct MHD_Connection *c, struct creq *r, unsigned status,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result reply(struct MHD_Connection *c, struct creq *r, unsigned status,
                             const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  strcat(line, "\n");
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(strlen(line), line, MHD_RESPMEM_MUST_COPY);
  if (resp)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
  return respond(c, r, status, resp);
}

static enum MHD_Result not_allowed(struct MHD_Connection *c, struct creq *r, const char *allow) {
  char line[96];
  snprintf(line, sizeof line, "method not allowed: use %s\n", allow);
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(strlen(line), line, MHD_RESPMEM_MUST_COPY);
  if (resp) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
  }
  return respond(c, r, 405, resp);
}

static enum MHD_Result serve_metrics(struct MHD_Connection *c, struct creq *r) {
  struct strbuf b = {0};
  metrics_render(&twin.metrics, &b);
  sb_printf(&b,
            "# HELP infer_executor_threads Threads running batches (one per device stream).\n"
            "# TYPE infer_executor_threads gauge\ninfer_executor_threads %d\n",
            twin.nexec);
  sb_printf(&b, "# TYPE infer_device_resets_by_device_total counter\n");
  for (int d = 0; d < twin.ndev; d++)
    sb_printf(&b, "infer_device_resets_by_device_total{device=\"%d\"} %llu\n", twin.dev[d].ordinal,
              (unsigned long long)atomic_load(&twin.dev[d].resets));
  if (b.oom) {
    sb_free(&b);
    return reply(c, r, 500, "out of memory");
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
  if (resp == NULL)
    sb_free(&b);
  else
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
  return respond(c, r, 200, resp);
}

/* The body is in: parse, queue, wait for the row (or the deadline). */
static enum MHD_Result finish_infer(struct MHD_Connection *c, struct creq *r) {
  const struct model *m = &twin.model;
  char err[256];
  if (r->received > twin.max_body)
    return reply(c, r, 413, "body is over the limit of %zu bytes", twin.max_body);
  struct job *j = calloc(1, sizeof *j);
  if (j == NULL) return reply(c, r, 500, "out of memory");
  j->in = malloc(sizeof(float) * (size_t)m->dims[0]);
  j->out = malloc(sizeof(float) * (size_t)m->dims[m->nlayers]);
  sem_init(&j->done, 0, 0);
  atomic_init(&j->state, JOB_QUEUED);
  atomic_init(&j->refs, 1);
  j->fault = r->fault;
  if (j->in == NULL || j->out == NULL) {
    job_put(j);
    return reply(c, r, 500, "out of memory");
  }
  int bad = r->raw ? parse_raw_floats(r->body, r->len, j->in, m->dims[0], err, sizeof err)
                   : parse_json_floats(r->body ? r->body : "", r->len, j->in, m->dims[0], err,
                                       sizeof err);
  if (bad) {
    job_put(j);
    return reply(c, r, 400, "%s", err);
  }
  /* As the service's: from the request's end, the service's own time. */
  uint64_t deadline = now_ns() + (uint64_t)twin.cfg.deadline_ms * 1000000u;
  unsigned status = 0;
  const char *why = NULL;
  int pushed = 0;
  pthread_mutex_lock(&twin.mu);
  if (twin.draining) {
    why = "shutting down";
    status = 503;
  } else if (twin.len >= (size_t)twin.cfg.max_queue) {
    why = "queue full: try again later";
    status = 503;
  } else {
    atomic_fetch_add(&j->refs, 1); /* the queue's, then the executor's */
    atomic_fetch_add(&twin.waiting, 1);
    pushed = 1;
    twin_push(&twin, j);
  }
  pthread_mutex_unlock(&twin.mu);
  while (status == 0) {
    /* In slices of at most 100 ms, so that a stop (drain timeout) is seen
     * without waking every job. */
    uint64_t now = now_ns(), at = now + 100000000u < deadline ? now + 100000000u : deadline;
    struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
    /* Posted after the executor's CAS to DONE; loading the state also
     * orders the answer's fields for ThreadSanitizer, which does not know
     * sem_clockwait. */
    if (sem_clockwait(&j->done, CLOCK_MONOTONIC, &ts) == 0 && atomic_load(&j->state) == JOB_DONE)
      break;
    int stop = atomic_load(&twin.stopping);
    if (!stop && now_ns() < deadline) continue;
    /* Give up (deadline, or stopping), unless the executor finished first. */
    pthread_mutex_lock(&twin.mu);
    int running = JOB_RUNNING;
    if (atomic_load(&j->state) == JOB_QUEUED) {
      twin_unlink(&twin, j);
      atomic_store(&j->state, JOB_ABANDONED);
      atomic_fetch_sub(&j->refs, 1); /* the queue's: nobody took it */
      status = stop ? 503 : 504;
    } else if (atomic_compare_exchange_strong(&j->state, &running, JOB_ABANDONED)) {
      status = stop ? 503 : 504; /* the executor drops it */
    } else {
      sem_wait(&j->done); /* DONE meanwhile: its post is due */
    }
    pthread_mutex_unlock(&twin.mu);
    if (status == 503) why = "shutting down";
    break;
  }
  if (pushed) atomic_fetch_sub(&twin.waiting, 1); /* its wait is over */
  struct answer done = {0};
  float *out = NULL;
  if (status == 0) {
    done = j->ans; /* the executor wrote it before posting */
    if (done.status == 200) {
      out = malloc(sizeof(float) * (size_t)m->dims[m->nlayers]);
      if (out) memcpy(out, j->out, sizeof(float) * (size_t)m->dims[m->nlayers]);
    }
  }
  job_put(j);
  if (status == 504) return reply(c, r, 504, "deadline of %u ms passed", twin.cfg.deadline_ms);
  if (status == 503) return reply(c, r, 503, "%s", why);
  if (done.status != 200) return reply(c, r, 503, "%s", done.reason);
  if (out == NULL) return reply(c, r, 500, "out of memory");
  int n = m->dims[m->nlayers];
  struct MHD_Response *resp;
  if (r->raw) {
    resp = MHD_create_response_from_buffer(sizeof(float) * (size_t)n, out, MHD_RESPMEM_MUST_FREE);
  } else {
    size_t cap = format_json_max(n);
    char *buf = malloc(cap);
    int len = buf ? format_json_floats(out, n, buf, cap) : -1;
    free(out);
    resp =
        len >= 0 ? MHD_create_response_from_buffer((size_t)len, buf, MHD_RESPMEM_MUST_FREE) : NULL;
    if (resp == NULL) free(buf);
  }
  if (resp == NULL) return reply(c, r, 500, "out of memory");
  char v[32];
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                          r->raw ? "application/octet-stream" : "application/json");
  snprintf(v, sizeof v, "%llu", done.batch_id);
  MHD_add_response_header(resp, "X-Batch-Id", v);
  snprintf(v, sizeof v, "%d", done.batch_size);
  MHD_add_response_header(resp, "X-Batch-Size", v);
  snprintf(v, sizeof v, "%d", done.row);
  MHD_add_response_header(resp, "X-Batch-Row", v);
  snprintf(v, sizeof v, "%d", done.device);
  MHD_add_response_header(resp, "X-Device", v);
  return respond(c, r, 200, resp);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
  struct creq *r = *con_cls;
  (void)cls, (void)version;
  if (r == NULL) {
    r = calloc(1, sizeof *r);
    if (r == NULL) return MHD_NO;
    *con_cls = r;
    atomic_fetch_add(&active, 1);
    atomic_fetch_add(&twin.metrics.active_requests, 1);
    r->arrival_ns = now_ns();
    r->route = strcmp(url, "/v1/infer") == 0  ? ROUTE_INFER
               : strcmp(url, "/health") == 0  ? ROUTE_HEALTH
               : strcmp(url, "/metrics") == 0 ? ROUTE_METRICS
                                              : ROUTE_NONE;
    r->infer = r->route == ROUTE_INFER && strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    if (!r->infer) return MHD_YES;
    /* What can be refused before the body is read is (as the service). */
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    enum body_kind kind = parse_content_type(ct);
    if (twin.draining) return reply(c, r, 503, "shutting down");
    if (kind == BODY_UNSUPPORTED)
      return reply(c, r, 415,
                   "unsupported Content-Type '%.100s': use application/json or "
                   "application/octet-stream",
                   ct);
    r->raw = kind == BODY_RAW;
    if (cl && strtoull(cl, NULL, 10) > twin.max_body)
      return reply(c, r, 413, "body of %llu bytes is over the limit of %zu", strtoull(cl, NULL, 10),
                   twin.max_body);
    if (twin.cfg.fault_injection) {
      const char *f = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Inject-Fault");
      r->fault = f && strcmp(f, "1") == 0;
    }
    return MHD_YES;
  }
  if (r->answered) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t len = *upload_size;
    *upload_size = 0;
    r->received += len;
    if (!r->infer || r->received > twin.max_body) return MHD_YES; /* dropped */
    if (r->len + len > r->cap) {
      size_t cap = 2 * (r->len + len) < twin.max_body ? 2 * (r->len + len) : twin.max_body;
      char *p = realloc(r->body, cap);
      if (p == NULL) return MHD_NO;
      r->body = p;
      r->cap = cap;
    }
    memcpy(r->body + r->len, upload, len);
    r->len += len;
    return MHD_YES;
  }
  int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (r->received > twin.max_body && !r->infer)
    return reply(c, r, 413, "body is over the limit of %zu bytes", twin.max_body);
  switch (r->route) {
  case ROUTE_INFER: return r->infer ? finish_infer(c, r) : not_allowed(c, r, "POST");
  case ROUTE_HEALTH:
    if (!get) return not_allowed(c, r, "GET, HEAD");
    return twin.draining ? reply(c, r, 503, "draining") : reply(c, r, 200, "ok");
  case ROUTE_METRICS: return get ? serve_metrics(c, r) : not_allowed(c, r, "GET, HEAD");
  default:
    return reply(c, r, 404,
                 "no such endpoint: %.200s (try POST /v1/infer, GET /health, GET /metrics)", url);
  }
}

/* Open connections, for the eager batching rule (policy.h). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
  (void)cls, (void)c, (void)socket_ctx;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) atomic_fetch_add(&twin.nconn, 1);
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) atomic_fetch_sub(&twin.nconn, 1);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct creq *r = *con_cls;
  (void)cls, (void)c, (void)toe;
  if (r == NULL) return;
  free(r->body);
  free(r);
  *con_cls = NULL;
  atomic_fetch_sub(&twin.metrics.active_requests, 1);
  atomic_fetch_sub(&active, 1);
}

static int load_model(char *err, size_t errlen) {
  if (model_parse_dims(&twin.model, twin.cfg.layers, err, errlen) != 0) return -1;
  if (twin.cfg.weights) {
    if (model_load(&twin.model, twin.cfg.weights, err, errlen) == 0) return 0;
    if (errno != ENOENT) return -1;
    return model_generate(&twin.model, twin.cfg.seed) != 0 ||
                   model_save(&twin.model, twin.cfg.weights, err, errlen) != 0
               ? -1
               : 0;
  }
  return model_generate(&twin.model, twin.cfg.seed);
}

/* Waits up to `secs` for the active requests to end; a second signal ends
 * the wait at once. Returns 0 when they all ended. */
static int wait_drained(const sigset_t *sigs, double secs) {
  uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
  while (atomic_load(&active) > 0) {
    if (now_ns() >= end) return -1;
    struct timespec tick = {0, 10 * 1000000};
    if (sigtimedwait(sigs, NULL, &tick) > 0) {
      fprintf(stderr, "%s: second signal: stopping now\n", twin.cfg.prog);
      return -1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  char err[512];
  int rc = config_parse(&twin.cfg, "inference_server_blocking",
                        "The inference service's blocking twin: a thread per connection, blocking "
                        "CUDA calls, the same model, batching and endpoints.",
                        argc, argv);
  if (rc >= 0) return rc;
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  /* Signals are taken by sigwait in main() only: every thread started
   * from here on (MHD's, the executors) inherits the blocked mask. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);

  if (load_model(err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", twin.cfg.prog, err);
    return 1;
  }
  twin.max_body = twin.cfg.max_body ? twin.cfg.max_body : (size_t)twin.model.dims[0] * 32 + 1024;
  twin.policy =
      (struct policy){twin.cfg.max_batch, twin.cfg.window_us * 1e-6, twin.cfg.eager_batch};
  twin.gpu = strcmp(twin.cfg.backend, "gpu") == 0;
#ifndef INFER_HAVE_GPU
  if (twin.gpu) {
    fprintf(stderr, "%s: built without the GPU backend (no nvcc or cuBLAS): use --backend=cpu\n",
            twin.cfg.prog);
    return 1;
  }
#endif
  metrics_init(&twin.metrics, twin.cfg.max_batch);
  pthread_mutex_init(&twin.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&twin.work, &ca);
  pthread_condattr_destroy(&ca);

  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      twin.cfg.max_connections + 128 > rl.rlim_cur)
    twin.cfg.max_connections = rl.rlim_cur > 256 ? (unsigned)rl.rlim_cur - 128 : 64;

  if (twin_devices_open(&twin, err, sizeof err) != 0 ||
      twin_executors_start(&twin, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", twin.cfg.prog, err);
    return 1;
  }
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)twin.cfg.port)};
  if (inet_pton(AF_INET, twin.cfg.host, &addr.sin_addr) != 1) {
    fprintf(stderr, "%s: --listen: '%s' is not an IPv4 address\n", twin.cfg.prog, twin.cfg.host);
    return 1;
  }
  /* poll(), not select(): thousands of fds. Small stacks: thousands of
   * threads. The service's connection pool size (http.c says why). */
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
          MHD_USE_ERROR_LOG,
      (uint16_t)twin.cfg.port, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &addr,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
      NULL, MHD_OPTION_CONNECTION_LIMIT, twin.cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
      twin.cfg.connection_timeout_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u,
      MHD_OPTION_THREAD_STACK_SIZE, (size_t)256 << 10, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)8192, MHD_OPTION_END);
  if (d == NULL) {
    fprintf(stderr, "%s: cannot listen on %s:%d\n", twin.cfg.prog, twin.cfg.host, twin.cfg.port);
    twin_devices_close(&twin);
    return 1;
  }
  const union MHD_DaemonInfo *port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  int bound = port ? port->port : twin.cfg.port;
  printf(
      "listening on http://%s:%d/ (blocking twin, backend %s, %d device(s) x %d executor "
      "threads, batches of up to %d within %u us, a thread per connection)\n",
      twin.cfg.host, bound, twin.cfg.backend, twin.ndev, twin.cfg.streams, twin.cfg.max_batch,
      twin.cfg.window_us);
  if (twin.cfg.port_file) {
    FILE *f = fopen(twin.cfg.port_file, "w");
    if (f) {
      fprintf(f, "%d\n", bound);
      fclose(f);
    }
  }

  int sig = 0;
  while (sigwait(&sigs, &sig) != 0) {
  }
  printf("%s: %s: draining (%ld requests in flight)\n", twin.cfg.prog, strsignal(sig),
         atomic_load(&active));
  pthread_mutex_lock(&twin.mu);
  twin.draining = 1;
  pthread_cond_broadcast(&twin.work);
  pthread_mutex_unlock(&twin.mu);
  MHD_socket lfd = MHD_quiesce_daemon(d);
  if (lfd != MHD_INVALID_SOCKET) close(lfd);
  int code = 0;
  if (wait_drained(&sigs, twin.cfg.drain_timeout_s) != 0) {
    fprintf(stderr, "%s: drain timed out: the rest get 503\n", twin.cfg.prog);
    code = 1;
    pthread_mutex_lock(&twin.mu);
    twin.stopping = 1; /* waiting connections give up with 503 */
    pthread_cond_broadcast(&twin.work);
    pthread_mutex_unlock(&twin.mu);
    wait_drained(&sigs, 1.0);
  }
  MHD_stop_daemon(d);
  twin_devices_close(&twin);
  model_free(&twin.model);
  printf("%s: stopped; exit %d\n", twin.cfg.prog, code);
  return code;
}
