/* inference_server: an MLP served over HTTP/1.1 by one thread.
 *
 * The thread runs ev_run on libev's default loop; the HTTP connections'
 * epoll set (http1.h), the batcher's timers and one foreign-mode cudaev loop per
 * GPU are all watchers of it (service.h draws a request's way through).
 * main() sets up, runs the loop, and tears down; the drain on SIGINT or
 * SIGTERM happens inside the loop. With --loop-threads=N there are N such
 * loops, each a complete server on its own thread (its own listening
 * socket on the shared port, HTTP server, batcher and cudaev loop per
 * device); they share the model and the metrics, and main()'s loop (thread
 * 0) takes the signals and passes them on (ev_async).
 *
 * SIGINT and SIGTERM are blocked in every thread from the start (threads,
 * the driver's included, inherit the mask) and read from a signalfd by
 * thread 0's loop: a stop request waits in the kernel until the loop reads
 * it, whichever thread it was sent to and whatever the thread was doing.
 * (A handler, libev's default, may run on a thread that cannot act on it,
 * and under ThreadSanitizer, which defers handlers, a SIGTERM right after
 * start-up was seen lost.)
 *
 *   inference_server [OPTIONS]     (--help lists them)
 * Prints "listening on http://ADDR:PORT/" once it serves. Exit status: 0
 * after a complete drain, 1 on a start-up error or a drain that timed out,
 * 2 on a usage error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "service.h"

static ev_signal sigint_w, sigterm_w;

/* How long a restart's drain lets requests on just-accepted connections
 * arrive before the exec closes them. */
#define RESTART_GRACE_S 0.1

/* What one loop thread asks of the others (server.asked). */
enum {
  ASK_STOP = 1,    /* a signal: drain and exit (or stop instead of restarting) */
  ASK_FORCE = 2,   /* a second signal: stop now */
  ASK_RESTART = 4, /* a peer restarts the process: drain, keep the socket */
};

/* The reason of the restart under way (the first thread's to ask). */
static pthread_mutex_t restart_mu = PTHREAD_MUTEX_INITIALIZER;
static char restart_pending[160];

/* cudaev_loop_prepare may spin (up to the loop's spin limit) for a GPU
 * completion that is about to come, which saves the wakeup's latency when
 * the thread has nothing else to do. Here it often has: while HTTP traffic
 * arrives, every microsecond spun is one a request waits. So the device
 * loops spin only in passes that follow a quiet one (no HTTP event since the
 * last). Runs first among the prepare watchers (highest priority), before
 * the evdrive ones ask cudaev_loop_prepare. */
static void on_spin_policy(struct ev_loop *evl, ev_prepare *w, int revents) {
  struct server *s = w->data;
  (void)evl, (void)revents;
  atomic_fetch_add_explicit(&s->iterations, 1, memory_order_relaxed);
  unsigned long long events = http_events(s);
  unsigned want = events != s->spin_seen ? 0 : s->quiet_spin_us;
  s->spin_seen = events;
  if (want != s->spin_us) devices_set_spin(s, want);
}

void server_after_process(void *arg) {
  struct server *s = arg;
  if (s->dispatch_due) {
    s->dispatch_due = 0;
    batch_dispatch(s);
  }
  http_kick(s);
}

void server_check_drained(struct server *s) {
  if (!s->draining || s->active != 0) return;
  if (s->restarting && ev_is_active(&s->restart_grace)) return;
  ev_timer_stop(s->evl, &s->drain_timer);
  ev_break(s->evl, EVBREAK_ALL);
}

/* Answers everything still waiting with 503, now. */
static void fail_everything(struct server *s, const char *why) {
  batch_fail_queued(s, 503, why);
  for (int d = 0; d < s->ndev; d++) {
    struct device *dev = &s->dev[d];
    for (int i = 0; dev->slots && i < dev->nslots; i++) {
      for (int k = 0; k < dev->slots[i].n; k++) {
        if (dev->slots[i].req[k]) request_answer_error(dev->slots[i].req[k], 503, why);
      }
    }
  }
  http_kick(s);
}

static void on_drain_timeout(struct ev_loop *evl, ev_timer *w, int revents) {
  struct server *s = w->data;
  (void)revents;
  if (s->exit_code == 0) {
    fprintf(stderr, "%s: drain timed out after %u s: the rest get 503\n", s->cfg->prog,
            s->cfg->drain_timeout_s);
    s->exit_code = 1;
    fail_everything(s, server_drain_reason(s));
    /* Time to send those answers; then stop whatever is left. */
    ev_timer_set(w, 1., 0.);
    ev_timer_start(evl, w);
    server_check_drained(s);
    return;
  }
  ev_break(evl, EVBREAK_ALL);
}

const char *server_drain_reason(const struct server *s) {
  return s->restarting ? "restarting: a device fault its reset did not clear" : "shutting down";
}

/* Stops accepting (the listening socket kept when the drain ends in a
 * re-exec), sends what is queued without waiting for the window, and ends
 * the loop once nothing is in flight, or at the drain timeout. */
static void start_drain(struct server *s) {
  s->draining = 1;
  http_quiesce(s, s->restarting);
  if (devices_up(s) == 0)
    batch_fail_queued(s, 503, server_drain_reason(s));
  else
    batch_dispatch(s); /* a draining batcher does not wait for the window */
  ev_timer_set(&s->drain_timer, s->cfg->drain_timeout_s, 0.);
  ev_timer_start(s->evl, &s->drain_timer);
  if (s->restarting) {
    /* A connection accepted just before the quiesce may not have sent its
     * request yet; closing it at the exec would lose it. Its request gets
     * this long to arrive (and a 503 that says to come back). */
    ev_timer_set(&s->restart_grace, RESTART_GRACE_S, 0.);
    ev_timer_start(s->evl, &s->restart_grace);
  }
  server_check_drained(s);
}

static void on_restart_grace(struct ev_loop *evl, ev_timer *w, int revents) {
  (void)evl, (void)revents;
  server_check_drained(w->data);
}

/* What a signal or a peer asks of this loop thread, on it. */
static void handle_ask(struct server *s, int bits) {
  if (bits & ASK_FORCE) {
    ev_timer_stop(s->evl, &s->drain_timer);
    if (!s->draining) start_drain(s);
    s->exit_code = 0; /* let the timeout path run at once */
    on_drain_timeout(s->evl, &s->drain_timer, 0);
  } else if (bits & ASK_STOP) {
    if (s->draining && s->restarting) {
      /* A stop asked for during a restart's drain: the drain goes on and
       * ends the process instead. */
      s->restarting = 0;
      server_check_drained(s);
    } else if (!s->draining) {
      start_drain(s);
    }
  } else if ((bits & ASK_RESTART) && !s->draining) {
    s->restarting = 1;
    start_drain(s);
  }
}

static void tell_peers(struct server *s, int bits) {
  for (int i = 0; i < s->cfg->loop_threads; i++) {
    struct server *p = &s->peers[i];
    if (p == s) continue;
    atomic_fetch_or(&p->asked, bits);
    ev_async_send(p->evl, &p->ask);
  }
}

static void on_ask(struct ev_loop *evl, ev_async *w, int revents) {
  struct server *s = w->data;
  (void)evl, (void)revents;
  handle_ask(s, atomic_exchange(&s->asked, 0));
}

/* NVIDIA's runtime on some machines answers every call with
 * cudaErrorDevicesUnavailable after a sticky fault, cudaDeviceReset
 * included: only a new process gets the device back. So the service does
 * what a supervisor would, without one: it drains (503 to what the fault
 * hit and to requests on open connections, answers for everything in
 * flight elsewhere) and execs itself with the same arguments. The
 * listening sockets, and with them every connection in their backlogs,
 * pass to the new process (the only fds not close-on-exec); the restart
 * count and reason pass in the environment, for /health and /metrics. */
void server_restart(struct server *s, const char *why) {
  if (s->draining) return; /* shutting down anyway, or already restarting */
  pthread_mutex_lock(&restart_mu);
  int first = restart_pending[0] == 0;
  if (first) snprintf(restart_pending, sizeof restart_pending, "%s", why);
  pthread_mutex_unlock(&restart_mu);
  if (first)
    fprintf(stderr, "%s: %s: restarting the process (drain, then exec)\n", s->cfg->prog, why);
  s->restarting = 1;
  start_drain(s);
  tell_peers(s, ASK_RESTART);
}

/* Every fd above stderr close-on-exec, whoever opened it (the driver's
 * device files included): the new process must not inherit the old
 * context's resources. */
static void all_fds_cloexec(void) {
#ifdef CLOSE_RANGE_CLOEXEC
  if (close_range(3, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int fd = atoi(e->d_name);
    if (fd > 2 && fd != dirfd(d)) fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  closedir(d);
}

/* Replaces the process with a fresh copy of itself, handing over every
 * loop thread's listening socket. Returns only on failure. */
static void exec_self(struct server *srv, int n, char **argv) {
  char v[32], fds[16 * 64] = "";
  all_fds_cloexec();
  for (int i = 0, at = 0; i < n; i++) {
    int fd = srv[i].listen_fd;
    at += snprintf(fds + at, sizeof fds - (size_t)at, "%s%d", i ? "," : "", fd);
    if (fd >= 0) fcntl(fd, F_SETFD, 0);
  }
  setenv("INFER_LISTEN_FD", fds, 1);
  snprintf(v, sizeof v, "%llu", srv->restarts + 1);
  setenv("INFER_RESTARTS", v, 1);
  snprintf(v, sizeof v, "%llu", (unsigned long long)atomic_load(&srv->metrics->device_resets));
  setenv("INFER_DEVICE_RESETS", v, 1);
  setenv("INFER_RESTART_WHY", restart_pending, 1);
  fflush(stdout);
  fflush(stderr);
  execv("/proc/self/exe", argv);
  fprintf(stderr, "%s: exec of itself failed: %s\n", srv->cfg->prog, strerror(errno));
}

/* What a predecessor left in the environment (see server_restart): the
 * counts, the reason, and the listening sockets (one per loop thread). */
static void take_restart_env(struct server *srv, int n) {
  struct server *s = &srv[0];
  const char *v = getenv("INFER_RESTARTS");
  if (v) s->restarts = strtoull(v, NULL, 10);
  if ((v = getenv("INFER_DEVICE_RESETS")) != NULL)
    atomic_store(&s->metrics->device_resets, strtoull(v, NULL, 10));
  if ((v = getenv("INFER_RESTART_WHY")) != NULL)
    snprintf(s->restart_why, sizeof s->restart_why, "%s", v);
  for (int i = 0; i < n; i++) srv[i].inherit_fd = -1;
  if ((v = getenv("INFER_LISTEN_FD")) != NULL) {
    char *end;
    for (int i = 0; i < n && *v; i++, v = *end ? end + 1 : end) {
      srv[i].inherit_fd = (int)strtol(v, &end, 10);
      if (end == v) break;
    }
  }
  for (int i = 1; i < n; i++) {
    srv[i].restarts = s->restarts;
    memcpy(srv[i].restart_why, s->restart_why, sizeof s->restart_why);
  }
  unsetenv("INFER_RESTARTS");
  unsetenv("INFER_DEVICE_RESETS");
  unsetenv("INFER_RESTART_WHY");
  unsetenv("INFER_LISTEN_FD");
  if (s->restarts)
    printf("%s: restart %llu after a device fault its reset did not clear (%s)\n", s->cfg->prog,
           s->restarts, s->restart_why);
}

static void on_signal(struct ev_loop *evl, ev_signal *w, int revents) {
  struct server *s = w->data;
  (void)evl, (void)revents;
  int bits = ASK_STOP;
  if (s->draining && s->restarting) {
    printf("%s: %s: stopping instead of restarting\n", s->cfg->prog, strsignal(w->signum));
  } else if (s->draining) {
    fprintf(stderr, "%s: second signal: stopping now\n", s->cfg->prog);
    bits = ASK_FORCE;
  } else {
    long long inflight = atomic_load(&s->metrics->active_requests);
    printf("%s: %s: draining (%lld requests in flight)\n", s->cfg->prog, strsignal(w->signum),
           inflight);
    fflush(stdout);
  }
  handle_ask(s, bits);
  tell_peers(s, bits);
}

/* A daemon that holds thousands of connections needs thousands of fds:
 * the soft limit goes up to the hard one, and the connection limit stays
 * below it with room for the driver's and the loops' own fds. */
static void fit_fd_limit(struct config *c) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  rlim_t room = rl.rlim_cur > 256 ? rl.rlim_cur - 128 : rl.rlim_cur / 2;
  if (rl.rlim_cur != RLIM_INFINITY && c->max_connections > room) {
    fprintf(stderr, "%s: --max-connections %u lowered to %llu (open-file limit %llu)\n", c->prog,
            c->max_connections, (unsigned long long)room, (unsigned long long)rl.rlim_cur);
    c->max_connections = (unsigned)room;
  }
}

static int load_model(struct server *s, char *err, size_t errlen) {
  const struct config *c = s->cfg;
  if (model_parse_dims(&s->model, c->layers, err, errlen) != 0) return -1;
  const char *from = "generated";
  if (c->weights) {
    if (model_load(&s->model, c->weights, err, errlen) == 0) {
      from = "read from";
    } else if (errno != ENOENT) {
      return -1;
    } else {
      if (model_generate(&s->model, c->seed) != 0 ||
          model_save(&s->model, c->weights, err, errlen) != 0)
        return -1;
      from = "generated, written to";
    }
  } else if (model_generate(&s->model, c->seed) != 0) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  printf("model: MLP");
  for (int i = 0; i <= s->model.nlayers; i++) printf("%c%d", i ? '-' : ' ', s->model.dims[i]);
  printf(", %zu parameters, weights %s%s%s (seed %llu)\n", model_params(&s->model), from,
         c->weights ? " " : "", c->weights ? c->weights : "", (unsigned long long)s->model.seed);
  return 0;
}

/* The loop threads wait until all of them exist (each one's /metrics
 * reads the others' thread ids): 1 runs them, -1 ends them unrun. */
static pthread_mutex_t go_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cv = PTHREAD_COND_INITIALIZER;
static int go;

static void set_go(int v) {
  pthread_mutex_lock(&go_mu);
  go = v;
  pthread_cond_broadcast(&go_cv);
  pthread_mutex_unlock(&go_mu);
}

static void *loop_thread(void *arg) {
  struct server *s = arg;
  pthread_mutex_lock(&go_mu);
  while (go == 0) pthread_cond_wait(&go_cv, &go_mu);
  int run = go > 0;
  pthread_mutex_unlock(&go_mu);
  if (run) ev_run(s->evl, 0);
  return NULL;
}

/* Sets up loop thread i's server: loop, batcher, devices, HTTP daemon. */
static int server_open(struct server *s, int port, char *err, size_t errlen) {
  s->evl = s->thread == 0 ? ev_default_loop(EVFLAG_SIGNALFD) : ev_loop_new(EVFLAG_AUTO);
  if (s->evl == NULL) {
    snprintf(err, errlen, "cannot make an event loop");
    return -1;
  }
  if (batch_init(s) != 0) {
    snprintf(err, errlen, "timerfd: %s", strerror(errno));
    return -1;
  }
  s->spin_us = s->quiet_spin_us;
  if (devices_open(s, err, errlen) != 0) return -1;
  if (http_start(s, port, err, errlen) != 0) {
    devices_close(s);
    return -1;
  }
  ev_prepare_init(&s->spin_policy, on_spin_policy);
  s->spin_policy.data = s;
  ev_set_priority(&s->spin_policy, EV_MAXPRI);
  ev_prepare_start(s->evl, &s->spin_policy);
  ev_init(&s->drain_timer, on_drain_timeout);
  s->drain_timer.data = s;
  ev_init(&s->restart_grace, on_restart_grace);
  s->restart_grace.data = s;
  ev_async_init(&s->ask, on_ask);
  s->ask.data = s;
  ev_async_start(s->evl, &s->ask);
  return 0;
}

static void server_close(struct server *s) {
  if (s->evl == NULL) return;
  ev_prepare_stop(s->evl, &s->spin_policy);
  ev_timer_stop(s->evl, &s->drain_timer);
  ev_timer_stop(s->evl, &s->restart_grace);
  ev_async_stop(s->evl, &s->ask);
  http_stop(s);
  devices_close(s);
  batch_fini(s);
  if (s->listen_fd >= 0 && !s->restarting) close(s->listen_fd);
  if (s->thread != 0) ev_loop_destroy(s->evl);
}

int main(int argc, char **argv) {
  static struct config cfg;
  static struct metrics metrics;
  char err[512];
  int rc = config_parse(&cfg, "inference_server",
                        "An MLP over HTTP/1.1: one thread, HTTP and cudaev on one libev "
                        "loop, dynamic batching on every GPU.",
                        argc, argv);
  if (rc >= 0) return rc;
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int nt = cfg.loop_threads;
  struct server *srv = calloc((size_t)nt, sizeof *srv);
  if (srv == NULL) {
    fprintf(stderr, "%s: out of memory\n", cfg.prog);
    return 1;
  }
  struct server *s = &srv[0];
  s->cfg = &cfg;
  if (load_model(s, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", cfg.prog, err);
    return 1;
  }
  fit_fd_limit(&cfg);
  metrics_init(&metrics, cfg.max_batch);
  const struct backend_ops *be = NULL;
  if (strcmp(cfg.backend, "cpu") == 0) {
    be = &backend_cpu;
  } else {
#ifdef INFER_HAVE_GPU
    be = &backend_gpu;
#else
    fprintf(stderr, "%s: built without the GPU backend (no nvcc or cuBLAS): use --backend=cpu\n",
            cfg.prog);
    return 1;
#endif
  }
  for (int i = 0; i < nt; i++) {
    struct server *p = &srv[i];
    p->cfg = &cfg;
    p->model = s->model;
    p->metrics = &metrics;
    p->thread = i;
    p->peers = srv;
    p->listen_fd = -1;
    p->be = be;
    p->max_body = cfg.max_body ? cfg.max_body : (size_t)s->model.dims[0] * 32 + 1024;
    /* 50 us: cudaev's documented default (cudaev_loop_set_spin). */
    p->quiet_spin_us = cfg.loop_spin_us >= 0 ? (unsigned)cfg.loop_spin_us : 50;
  }
  take_restart_env(srv, nt);
  s->tid = pthread_self();
  int port = cfg.port;
  for (int i = 0; i < nt; i++) {
    if (server_open(&srv[i], port, err, sizeof err) != 0) {
      fprintf(stderr, "%s: %s\n", cfg.prog, err);
      for (int k = 0; k <= i; k++) server_close(&srv[k]);
      return 1;
    }
    port = http_port(&srv[i]); /* the others listen on the port the first got */
  }
  ev_signal_init(&sigint_w, on_signal, SIGINT);
  ev_signal_init(&sigterm_w, on_signal, SIGTERM);
  sigint_w.data = sigterm_w.data = s;
  ev_signal_start(s->evl, &sigint_w);
  ev_signal_start(s->evl, &sigterm_w);
  /* The other loop threads inherit the blocked stop signals: thread 0's
   * loop reads them (its signalfd) and passes them on. */
  int started = 1;
  for (; started < nt; started++) {
    if (pthread_create(&srv[started].tid, NULL, loop_thread, &srv[started]) != 0) {
      fprintf(stderr, "%s: cannot start loop thread %d\n", cfg.prog, started);
      break;
    }
  }
  set_go(started < nt ? -1 : 1);
  if (started < nt) {
    for (int i = 1; i < started; i++) pthread_join(srv[i].tid, NULL);
    for (int i = 0; i < nt; i++) server_close(&srv[i]);
    return 1;
  }
  printf(
      "listening on http://%s:%d/ (backend %s, %d device(s) x %d streams, batches of up to %d "
      "within %u us, %d loop thread%s)\n",
      cfg.host, port, be->name, s->ndev, cfg.streams, cfg.max_batch, cfg.window_us, nt,
      nt == 1 ? "" : "s");
  if (cfg.port_file) {
    FILE *f = fopen(cfg.port_file, "w");
    if (f) {
      fprintf(f, "%d\n", port);
      fclose(f);
    }
  }

  ev_run(s->evl, 0);

  /* Drained (or forced): every answer is out, so HTTP may stop;
   * then the devices' loops go (nothing is pending after a full drain). */
  for (int i = 1; i < nt; i++) pthread_join(srv[i].tid, NULL);
  ev_signal_stop(s->evl, &sigint_w);
  ev_signal_stop(s->evl, &sigterm_w);
  int restart = 0, exit_code = 0;
  for (int i = 0; i < nt; i++) {
    restart |= srv[i].restarting;
    if (srv[i].exit_code > exit_code) exit_code = srv[i].exit_code;
  }
  unsigned long long answered = metrics_answers(&metrics);
  for (int i = 0; i < nt; i++) server_close(&srv[i]);
  if (restart) {
    printf("%s: %llu answers; restarting\n", cfg.prog, answered);
    exec_self(srv, nt, argv);
    return 1;
  }
  model_free(&s->model);
  free(srv);
  printf("%s: stopped after %llu answers; exit %d\n", cfg.prog, answered, exit_code);
  return exit_code;
}
