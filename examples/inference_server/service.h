/* service.h: the asynchronous inference service's own types, shared by its
 * files. One thread does everything: it runs ev_run on the default libev
 * loop, which watches the HTTP connections' epoll fd (http1.h), the batch window
 * timer (batch.c), each request's deadline timer, the signals (main.c),
 * and one foreign-mode cudaev loop per device (evdrive.h, device.c). With
 * --loop-threads=N, N such servers (struct server) run side by side, one
 * per thread, sharing only the model, the metrics and the port.
 *
 * A request's way through (files in brackets):
 *   its connection reads head and body, each within its deadline [http1_conn.c]
 *   -> validated as they come [http.c]
 *   -> the request waits in the batch queue; its connection reads no more
 *   -> window or size reached: rows copied into a free slot's pinned input,
 *      the slot's batch submitted on the least-loaded device, one future
 *      per batch [batch.c, device.c, backend_*.c]
 *   -> the future's continuation (loop thread) answers each row's request;
 *      the answers are sent right after the loop pass [batch.c, http.c].
 *
 * Ownership: the server owns devices, slots and the queue; a request is
 * owned by its connection (made in http.c's on_head, freed in its on_done);
 * a slot row or the queue only points to it, and a request leaving early
 * (deadline, closed connection) unhooks itself.
 *
 * Thread: every function here runs on the loop thread (the CPU backend's
 * workers touch only their own job queue and cudaev_promise_set). */
#ifndef INFER_SERVICE_H
#define INFER_SERVICE_H

#include <cudaev.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "evdrive.h"
#include "metrics.h"
#include "model.h"
#include "policy.h"

struct server;
struct device;
struct request;
struct http1_conn;

/* One batch's place on a device: staging buffers and the rows' requests. */
struct slot {
  struct device *dev;
  int index;
  float *in, *out; /* cap rows of inputs / outputs (the backend's staging) */
  int n;           /* rows in the batch in flight */
  int fault;       /* test only: FAULT_* bits, this batch faults the device */
  uint64_t batch_id;
  uint64_t submitted_ns;
  struct request **req; /* [cap]; NULL where a request already left */
  struct slot *next_free;
  void *priv; /* the backend's */
};

enum device_state {
  DEV_UP,     /* takes batches */
  DEV_FAILED, /* a fault was seen: no new batches, a reset is scheduled */
  DEV_DOWN,   /* closed (reset failed, or shutting down) */
};

struct device {
  struct server *srv;
  int index;   /* in srv->dev */
  int ordinal; /* CUDA device ordinal (CPU backend: a stand-in number) */
  enum device_state state;
  cudaev_loop_t *loop; /* serves this device's context */
  struct evdrive drive;
  struct slot *slots, *free;
  int nslots, inflight;
  unsigned long long resets, batches;
  cudaError_t last_error;
  ev_timer recover; /* the reset runs from here: outside cudaev_loop_process */
  void *priv;       /* the backend's */
};

/* A model step: what runs a batch. The GPU backend (cuBLAS + our kernel,
 * a stream future per batch) and the CPU backend (the reference MLP on a
 * worker thread per device, a promise per batch) fill the same slots. */
/* X-Inject-Fault values (with --fault-injection). */
enum {
  FAULT_DEVICE = 1, /* "1": the batch faults the device (a reset recovers it) */
  FAULT_STICKY = 2, /* "sticky", cpu backend: the device stays unavailable after
                     * its reset, until the process is replaced */
};

struct backend_ops {
  const char *name;
  /* The devices to use: fills ordinals (at most max). Returns how many,
   * or -1 with a reason when none can be used. */
  int (*list)(struct server *s, int *ordinals, int max, char *err, size_t errlen);
  /* Opens dev (dev->ordinal set): its context, a foreign-mode cudaev loop
   * for it in dev->loop, dev->nslots slots with staging of cap rows. Prints
   * one line about it. Returns 0 or -1 with a reason (all freed). */
  int (*open)(struct device *dev, int cap, char *err, size_t errlen);
  /* Submits the slot's batch (rows in slot->in). The future completes when
   * slot->out holds the results, or with the error that stopped it. */
  cudaError_t (*submit)(struct slot *slot, cudaev_future_t **out);
  /* Device time of a completed batch, ns. */
  uint64_t (*batch_ns)(struct slot *slot);
  /* Closes dev: destroys dev->loop (so the continuations of batches still
   * in flight run, inside this call, with CUDAEV_ERROR_LOOP_DESTROYED or
   * the device's error) once nothing of the backend's can complete a
   * future any more, then frees what open made. With `reset`, the device
   * had a fault: reset it (cudaDeviceReset) so that it can be reopened.
   * Called outside cudaev_loop_process, as cudaev_loop_destroy needs. */
  void (*close)(struct device *dev, int reset);
};

extern const struct backend_ops backend_cpu;
#ifdef INFER_HAVE_GPU
extern const struct backend_ops backend_gpu;
#endif

struct request {
  struct server *srv;
  struct http1_conn *conn; /* until on_done (http1.h) */
  int state;               /* enum in http.c */
  int route;               /* enum in http.c */
  int infer;               /* POST /v1/infer */
  int raw;                 /* octet-stream in and out */
  int fault;               /* X-Inject-Fault: 1 (with --fault-injection) */
  int get;                 /* GET or HEAD */
  char *url;               /* an unknown path (for its 404; after the struct) */
  int parsed;              /* `in` holds the body's values (parsed as it arrived) */
  char *body;
  size_t len, cap;
  size_t received;               /* body bytes seen, kept or not */
  float *in;                     /* model inputs (POST /v1/infer: after the struct) */
  uint64_t arrival_ns;           /* headers read: the latency counts from here */
  uint64_t ready_ns;             /* --socket-timing: its answer handed to the connection */
  uint64_t queued_ns;            /* body parsed, in the batch queue: the window counts from here */
  ev_timer deadline;             /* --deadline-ms, started when the body is parsed */
  struct request *qprev, *qnext; /* batch queue */
  struct slot *slot;             /* in flight: its row */
  int row;
};

struct batcher {
  struct policy policy;
  struct request *head, *tail;
  size_t len;
  int tfd;           /* the window's timerfd */
  ev_io window;      /* ... watched by libev */
  uint64_t armed_ns; /* when it is set to expire (0: not armed) */
};

struct server {
  const struct config *cfg;
  struct model model; /* shared by the loop threads (read only) */
  struct ev_loop *evl;
  struct metrics *metrics; /* shared by the loop threads (atomics) */
  int thread;              /* this loop thread's index; 0 runs on main() */
  struct server *peers;    /* every loop thread's server, [cfg->loop_threads] */
  long active;             /* this thread's requests not yet completed */
  unsigned waiting;        /* ... of them queued or in a batch (RQ_WAITING) */
  atomic_int asked;        /* ASK_* bits other threads left for this one */
  ev_async ask;            /* ... and the wakeup that makes it look */
  ev_timer drain_timer, restart_grace;
  ev_prepare spin_policy;
  unsigned long long spin_seen;      /* http_events at the last pass */
  atomic_ullong iterations, answers; /* for /metrics, read by every thread */
  pthread_t tid;
  int inherit_fd; /* a predecessor's listening socket for this thread, or -1 */
  const struct backend_ops *be;
  struct device *dev;
  int ndev, rr;
  struct batcher batch;
  struct http *http;
  uint64_t next_batch_id;
  int dispatch_due;       /* a slot came free inside a loop pass */
  unsigned spin_us;       /* what the device loops may spin now */
  unsigned quiet_spin_us; /* ... when HTTP is quiet (--loop-spin-us) */
  int draining;
  int restarting;              /* the drain ends in a re-exec (a device stayed unavailable) */
  int listen_fd;               /* kept across the re-exec; -1 until the drain takes it */
  unsigned long long restarts; /* re-execs so far, carried in the environment */
  char restart_why[160];       /* the last one's reason */
  int exit_code;
  size_t max_body;
  unsigned long long ev_iterations_at_start;
};

/* batch.c */
int batch_init(struct server *s);
void batch_fini(struct server *s);
/* Queues a parsed request (the caller checked --max-queue) and sends what
 * the policy allows. */
void batch_push(struct server *s, struct request *r);
/* Unhooks a request from the queue or from its slot row. */
void batch_forget(struct server *s, struct request *r);
/* Sends every batch the policy allows to free slots. */
void batch_dispatch(struct server *s);
/* Answers everything queued with `status` (drain timeout, no device). */
void batch_fail_queued(struct server *s, unsigned status, const char *why);

/* device.c */
int devices_open(struct server *s, char *err, size_t errlen);
void devices_close(struct server *s);
/* A free slot on the least-loaded device that is up, or NULL. */
struct slot *device_take_slot(struct server *s);
void device_put_slot(struct slot *slot);
/* A batch on dev failed with e: stop using it, reset it from a timer. */
void device_failed(struct device *dev, cudaError_t e);
int devices_up(struct server *s);
void devices_metrics(struct server *s, struct strbuf *b);
/* cudaev_loop_set_spin on every device's loop. */
void devices_set_spin(struct server *s, unsigned us);

/* http.c */
/* Starts the HTTP daemon on `port` (0: any; several loop threads share one
 * with SO_REUSEPORT), or on s->inherit_fd when that is set. */
int http_start(struct server *s, int port, char *err, size_t errlen);
/* The port actually bound. */
int http_port(struct server *s);
/* Sends the answers made since the connections were last served. */
void http_kick(struct server *s);
/* Readiness events of this thread's connections so far (the spin policy). */
unsigned long long http_events(const struct server *s);
/* Stops accepting connections (drain). With `keep`, the listening socket
 * stays open in s->listen_fd (for the re-exec), else it is closed. */
void http_quiesce(struct server *s, int keep);
void http_stop(struct server *s);
/* Open connections of this thread's daemon (any thread may ask). */
unsigned http_connections(struct server *s);
/* Answers r with the model's output row `out`. */
void request_answer_result(struct request *r, const float *out, const struct slot *slot);
/* Answers r with an error status and a one-line reason. */
void request_answer_error(struct request *r, unsigned status, const char *reason);

/* main.c */
/* Called whenever requests finish: ends the drain when nothing is left. */
void server_check_drained(struct server *s);
/* Runs after each cudaev_loop_process (evdrive's hook): sends what a
 * freed slot allows, then sends the answers. */
void server_after_process(void *arg);
/* A device stayed unavailable after its reset: drain, then replace the
 * process with a fresh one (exec) that inherits the listening socket. */
void server_restart(struct server *s, const char *why);
/* The one-line reason new requests get 503 while draining. */
const char *server_drain_reason(const struct server *s);

#endif
