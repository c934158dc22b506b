/* metrics.h: the counters and histograms behind GET /metrics (Prometheus
 * text format 0.0.4), shared by the service and its twin. Updates are
 * relaxed atomics, so the twin's threads may update them concurrently;
 * the service updates them on its loop thread only.
 *
 * Names (the bench scrapes some of them, bench/serve.sh):
 *   infer_requests_total{code}            answers to inference requests (POST
 *                                         /v1/infer), by status code
 *   infer_other_requests_total{path,code} answers to everything else (health
 *                                         checks, scrapes, 404s, 405s); only
 *                                         the pairs seen so far are printed
 *   infer_http_timeouts_total{phase}      connections cut at the header or
 *                                         the body deadline (slow clients)
 *   infer_request_duration_seconds        arrival (headers read) to answer ready,
 *                                         inference requests only
 *   infer_socket_wait_seconds             with --socket-timing (the service only):
 *                                         an inference request's first bytes
 *                                         in its socket, the kernel's receive
 *                                         time to the read
 *   infer_send_wait_seconds               the same: its answer ready to written
 *   infer_batch_size                      rows per batch sent to a device
 *   infer_gpu_batch_seconds               device time of a batch (events around it)
 *   infer_batch_rows_total, infer_gpu_seconds_total
 *   infer_queue_depth, infer_inflight_batches, infer_active_requests (gauges)
 *   infer_device_resets_total
 *   process_*                             CPU, threads, fds, resident memory
 * Each server adds its own lines (loop statistics, devices) after these. */
#ifndef INFER_METRICS_H
#define INFER_METRICS_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HIST_MAX_BUCKETS 24

struct hist {
  const char *name, *help;
  int nb;                                            /* finite buckets */
  double scale;                                      /* printed value = stored value * scale */
  uint64_t le[HIST_MAX_BUCKETS];                     /* upper bounds, in stored units */
  atomic_uint_fast64_t bucket[HIST_MAX_BUCKETS + 1]; /* last: +Inf */
  atomic_uint_fast64_t sum, count;
};

/* Status codes counted one by one; others count as "other". */
#define METRICS_CODES \
  { 200, 400, 404, 405, 408, 413, 415, 500, 503, 504 }
#define METRICS_NCODES 11

/* What a request that is not an inference asked for (the label `path`). */
enum metrics_path {
  METRICS_PATH_INFER,   /* /v1/infer with a method other than POST */
  METRICS_PATH_HEALTH,  /* /health */
  METRICS_PATH_METRICS, /* /metrics */
  METRICS_PATH_OTHER,   /* any other path (the label says "other": paths are unbounded) */
  METRICS_NPATHS
};

/* Where a too slow client was when its deadline passed (the label `phase`). */
enum metrics_phase { METRICS_PHASE_HEADERS, METRICS_PHASE_BODY, METRICS_NPHASES };

struct metrics {
  atomic_uint_fast64_t requests[METRICS_NCODES];
  atomic_uint_fast64_t other[METRICS_NPATHS][METRICS_NCODES];
  atomic_uint_fast64_t timeouts[METRICS_NPHASES];
  struct hist latency;     /* nanoseconds */
  struct hist gpu;         /* nanoseconds */
  struct hist batch;       /* rows */
  struct hist socket_wait; /* nanoseconds; rendered once observed (--socket-timing) */
  struct hist send_wait;   /* nanoseconds; the same */
  atomic_uint_fast64_t batch_rows, gpu_ns, device_resets;
  atomic_int_fast64_t queue_depth, inflight_batches, active_requests;
};

/* A growable string; on allocation failure it stops growing and sets oom. */
struct strbuf {
  char *p;
  size_t len, cap;
  int oom;
};
void sb_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_free(struct strbuf *b);

void metrics_init(struct metrics *m, int max_batch);
/* An answer to an inference request with `code`, `latency_ns` after the
 * request arrived. */
void metrics_request(struct metrics *m, unsigned code, uint64_t latency_ns);
/* An inference request's first bytes waited `wait_ns` in its socket. */
void metrics_socket_wait(struct metrics *m, uint64_t wait_ns);
/* An inference request's answer was written `wait_ns` after it was ready. */
void metrics_send_wait(struct metrics *m, uint64_t wait_ns);
/* An answer with `code` to a request that was not an inference. */
void metrics_other(struct metrics *m, enum metrics_path path, unsigned code);
/* A connection cut because its client was too slow in `phase`. */
void metrics_timeout(struct metrics *m, enum metrics_phase phase);
/* Every answer counted so far, inference or not. */
unsigned long long metrics_answers(struct metrics *m);
/* A batch of `rows` done on a device in gpu_ns of device time. */
void metrics_batch(struct metrics *m, int rows, uint64_t gpu_ns);
/* Appends every metric above, then the process_* lines. */
void metrics_render(struct metrics *m, struct strbuf *out);

/* The monotonic clock in nanoseconds. */
uint64_t now_ns(void);

#endif
