/* Counters, histograms and their Prometheus text (metrics.h). */
#include "metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const unsigned codes[METRICS_NCODES - 1] = METRICS_CODES;

uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void sb_printf(struct strbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap - b->len <= (size_t)n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

void sb_free(struct strbuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

static void hist_init(struct hist *h, const char *name, const char *help, double scale,
                      const double *bounds, int nb) {
  memset(h, 0, sizeof *h);
  h->name = name;
  h->help = help;
  h->scale = scale;
  h->nb = nb < HIST_MAX_BUCKETS ? nb : HIST_MAX_BUCKETS;
  for (int i = 0; i < h->nb; i++) h->le[i] = (uint64_t)(bounds[i] / scale + 0.5);
}

static void hist_observe(struct hist *h, uint64_t v) {
  int i = 0;
  while (i < h->nb && v > h->le[i]) i++;
  atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

static void hist_render(struct hist *h, struct strbuf *b) {
  uint64_t cum = 0;
  sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
  for (int i = 0; i <= h->nb; i++) {
    cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
    if (i < h->nb)
      sb_printf(b, "%s_bucket{le=\"%.9g\"} %llu\n", h->name, (double)h->le[i] * h->scale,
                (unsigned long long)cum);
    else
      sb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", h->name, (unsigned long long)cum);
  }
  sb_printf(b, "%s_sum %.9g\n%s_count %llu\n", h->name,
            (double)atomic_load_explicit(&h->sum, memory_order_relaxed) * h->scale, h->name,
            (unsigned long long)atomic_load_explicit(&h->count, memory_order_relaxed));
}

void metrics_init(struct metrics *m, int max_batch) {
  memset(m, 0, sizeof *m);
  static const double lat[] = {100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3, 5e-3, 10e-3, 25e-3,
                               50e-3,  100e-3, 250e-3, 500e-3, 1,      2.5,  5,     10};
  static const double gpu[] = {10e-6, 25e-6,  50e-6, 100e-6, 250e-6, 500e-6,
                               1e-3,  2.5e-3, 5e-3,  10e-3,  25e-3,  100e-3};
  double sizes[HIST_MAX_BUCKETS];
  int ns = 0;
  for (int s = 1; s < max_batch && ns < HIST_MAX_BUCKETS - 1; s *= 2) sizes[ns++] = s;
  sizes[ns++] = max_batch;
  hist_init(
      &m->latency, "infer_request_duration_seconds",
      "Time from an inference request's arrival (its headers read) to its answer being ready.",
      1e-9, lat, (int)(sizeof lat / sizeof lat[0]));
  hist_init(&m->gpu, "infer_gpu_batch_seconds",
            "Device time of one batch (copies in, the MLP, copy out).", 1e-9, gpu,
            (int)(sizeof gpu / sizeof gpu[0]));
  hist_init(&m->batch, "infer_batch_size", "Requests per batch sent to a device.", 1, sizes, ns);
  static const double wait[] = {10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3,
                                5e-3,  10e-3, 25e-3, 50e-3,  100e-3, 250e-3, 1,    10};
  hist_init(&m->socket_wait, "infer_socket_wait_seconds",
            "Time an inference request's first bytes waited in its socket before the service "
            "read them (the kernel's receive timestamp to the read; --socket-timing).",
            1e-9, wait, (int)(sizeof wait / sizeof wait[0]));
  hist_init(&m->send_wait, "infer_send_wait_seconds",
            "Time from an inference request's answer being ready to its being written to the "
            "socket (--socket-timing).",
            1e-9, wait, (int)(sizeof wait / sizeof wait[0]));
}

static int code_index(unsigned code) {
  int i = 0;
  while (i < METRICS_NCODES - 1 && codes[i] != code) i++;
  return i;
}

void metrics_request(struct metrics *m, unsigned code, uint64_t latency_ns) {
  atomic_fetch_add_explicit(&m->requests[code_index(code)], 1, memory_order_relaxed);
  hist_observe(&m->latency, latency_ns);
}

void metrics_socket_wait(struct metrics *m, uint64_t wait_ns) {
  hist_observe(&m->socket_wait, wait_ns);
}

void metrics_send_wait(struct metrics *m, uint64_t wait_ns) {
  hist_observe(&m->send_wait, wait_ns);
}

void metrics_other(struct metrics *m, enum metrics_path path, unsigned code) {
  if ((unsigned)path >= METRICS_NPATHS) path = METRICS_PATH_OTHER;
  atomic_fetch_add_explicit(&m->other[path][code_index(code)], 1, memory_order_relaxed);
}

void metrics_timeout(struct metrics *m, enum metrics_phase phase) {
  atomic_fetch_add_explicit(&m->timeouts[phase], 1, memory_order_relaxed);
}

unsigned long long metrics_answers(struct metrics *m) {
  unsigned long long n = 0;
  for (int i = 0; i < METRICS_NCODES; i++) {
    n += atomic_load_explicit(&m->requests[i], memory_order_relaxed);
    for (int p = 0; p < METRICS_NPATHS; p++)
      n += atomic_load_explicit(&m->other[p][i], memory_order_relaxed);
  }
  return n;
}

void metrics_batch(struct metrics *m, int rows, uint64_t gpu_ns) {
  hist_observe(&m->batch, (uint64_t)rows);
  hist_observe(&m->gpu, gpu_ns);
  atomic_fetch_add_explicit(&m->batch_rows, (uint64_t)rows, memory_order_relaxed);
  atomic_fetch_add_explicit(&m->gpu_ns, gpu_ns, memory_order_relaxed);
}

/* Resident memory, threads: from /proc/self/status (kB, count). */
static void proc_status(long *rss_kb, long *threads) {
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  *rss_kb = *threads = -1;
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmRSS:", 6) == 0) *rss_kb = strtol(line + 6, NULL, 10);
    if (strncmp(line, "Threads:", 8) == 0) *threads = strtol(line + 8, NULL, 10);
  }
  fclose(f);
}

static long open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  long n = 0;
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n - 3; /* ".", ".." and the directory's own fd */
}

/* The label value of code index i. */
static const char *code_label(int i, char buf[12]) {
  if (i == METRICS_NCODES - 1) return "other";
  snprintf(buf, 12, "%u", codes[i]);
  return buf;
}

void metrics_render(struct metrics *m, struct strbuf *b) {
  static const char *paths[METRICS_NPATHS] = {"/v1/infer", "/health", "/metrics", "other"};
  static const char *phases[METRICS_NPHASES] = {"headers", "body"};
  char code[12];
  sb_printf(b,
            "# HELP infer_requests_total Answers to inference requests (POST /v1/infer), by HTTP "
            "status code.\n"
            "# TYPE infer_requests_total counter\n");
  for (int i = 0; i < METRICS_NCODES; i++)
    sb_printf(b, "infer_requests_total{code=\"%s\"} %llu\n", code_label(i, code),
              (unsigned long long)atomic_load_explicit(&m->requests[i], memory_order_relaxed));
  /* Four paths by eleven codes, nearly all of them zero forever: only the
   * pairs that happened are printed. */
  sb_printf(b,
            "# HELP infer_other_requests_total Answers to every request that is not an "
            "inference (health checks, scrapes, unknown paths, wrong methods), by path and "
            "HTTP status code.\n"
            "# TYPE infer_other_requests_total counter\n");
  for (int p = 0; p < METRICS_NPATHS; p++) {
    for (int i = 0; i < METRICS_NCODES; i++) {
      unsigned long long v = atomic_load_explicit(&m->other[p][i], memory_order_relaxed);
      if (v)
        sb_printf(b, "infer_other_requests_total{path=\"%s\",code=\"%s\"} %llu\n", paths[p],
                  code_label(i, code), v);
    }
  }
  sb_printf(b,
            "# HELP infer_http_timeouts_total Connections cut because the client did not "
            "complete its request's headers or body within their deadline.\n"
            "# TYPE infer_http_timeouts_total counter\n");
  for (int p = 0; p < METRICS_NPHASES; p++)
    sb_printf(b, "infer_http_timeouts_total{phase=\"%s\"} %llu\n", phases[p],
              (unsigned long long)atomic_load_explicit(&m->timeouts[p], memory_order_relaxed));
  hist_render(&m->latency, b);
  if (atomic_load_explicit(&m->socket_wait.count, memory_order_relaxed))
    hist_render(&m->socket_wait, b);
  if (atomic_load_explicit(&m->send_wait.count, memory_order_relaxed))
    hist_render(&m->send_wait, b);
  hist_render(&m->batch, b);
  hist_render(&m->gpu, b);
  sb_printf(b,
            "# TYPE infer_batch_rows_total counter\ninfer_batch_rows_total %llu\n"
            "# TYPE infer_gpu_seconds_total counter\ninfer_gpu_seconds_total %.9g\n"
            "# TYPE infer_device_resets_total counter\ninfer_device_resets_total %llu\n"
            "# HELP infer_queue_depth Requests waiting for a batch.\n"
            "# TYPE infer_queue_depth gauge\ninfer_queue_depth %lld\n"
            "# TYPE infer_inflight_batches gauge\ninfer_inflight_batches %lld\n"
            "# HELP infer_active_requests Requests received and not yet finished.\n"
            "# TYPE infer_active_requests gauge\ninfer_active_requests %lld\n",
            (unsigned long long)atomic_load(&m->batch_rows), (double)atomic_load(&m->gpu_ns) * 1e-9,
            (unsigned long long)atomic_load(&m->device_resets),
            (long long)atomic_load(&m->queue_depth), (long long)atomic_load(&m->inflight_batches),
            (long long)atomic_load(&m->active_requests));
  struct rusage ru;
  long rss_kb, threads;
  getrusage(RUSAGE_SELF, &ru);
  proc_status(&rss_kb, &threads);
  sb_printf(b,
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.6f\n"
            "# TYPE process_threads gauge\nprocess_threads %ld\n"
            "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n"
            "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n",
            (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6,
            threads, open_fds(), rss_kb * 1024);
}
