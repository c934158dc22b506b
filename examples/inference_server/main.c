/* inference_server: an MLP served over HTTP/1.1 by one thread.
 *
 * The thread runs ev_run on libev's default loop; libmicrohttpd (external
 * epoll mode), the batcher's timers and one foreign-mode cudaev loop per
 * GPU are all watchers of it (service.h draws a request's way through).
 * main() sets up, runs the loop, and tears down; the drain on SIGINT or
 * SIGTERM happens inside the loop.
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
static ev_timer drain_timer, restart_grace;
static ev_prepare spin_policy;

/* How long a restart's drain lets requests on just-accepted connections
 * arrive before the exec closes them. */
#define RESTART_GRACE_S 0.1

/* cudaev_loop_timeout may spin (up to the loop's spin limit) for a GPU
 * completion that is about to come, which saves the wakeup's latency when
 * the thread has nothing else to do. Here it often has: while HTTP traffic
 * arrives, every microsecond spun is one a request waits. So the device
 * loops spin only in passes that follow a quiet one (no MHD event since the
 * last). Runs first among the prepare watchers (highest priority), before
 * the evdrive ones ask cudaev_loop_timeout. */
static void on_spin_policy(struct ev_loop *evl, ev_prepare *w, int revents) {
  static unsigned long long seen;
  struct server *s = w->data;
  (void)evl, (void)revents;
  unsigned want = s->http_events != seen ? 0 : s->quiet_spin_us;
  seen = s->http_events;
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
  if (!s->draining || atomic_load(&s->metrics.active_requests) != 0) return;
  if (s->restarting && ev_is_active(&restart_grace)) return;
  ev_timer_stop(s->evl, &drain_timer);
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
  ev_timer_set(&drain_timer, s->cfg->drain_timeout_s, 0.);
  ev_timer_start(s->evl, &drain_timer);
  if (s->restarting) {
    /* A connection accepted just before the quiesce may not have sent its
     * request yet; closing it at the exec would lose it. Its request gets
     * this long to arrive (and a 503 that says to come back). */
    ev_timer_set(&restart_grace, RESTART_GRACE_S, 0.);
    ev_timer_start(s->evl, &restart_grace);
  }
  server_check_drained(s);
}

static void on_restart_grace(struct ev_loop *evl, ev_timer *w, int revents) {
  (void)evl, (void)revents;
  server_check_drained(w->data);
}

/* NVIDIA's runtime on some machines answers every call with
 * cudaErrorDevicesUnavailable after a sticky fault, cudaDeviceReset
 * included: only a new process gets the device back. So the service does
 * what a supervisor would, without one: it drains (503 to what the fault
 * hit and to requests on open connections, answers for everything in
 * flight elsewhere) and execs itself with the same arguments. The
 * listening socket, and with it every connection in its backlog, passes to
 * the new process (the one fd not close-on-exec); the restart count and
 * reason pass in the environment, for /health and /metrics. */
void server_restart(struct server *s, const char *why) {
  if (s->draining) return; /* shutting down anyway, or already restarting */
  fprintf(stderr, "%s: %s: restarting the process (drain, then exec)\n", s->cfg->prog, why);
  snprintf(s->restart_why, sizeof s->restart_why, "%s", why);
  s->restarting = 1;
  start_drain(s);
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

/* Replaces the process with a fresh copy of itself. Returns only on failure. */
static void exec_self(struct server *s, char **argv) {
  char v[32];
  snprintf(v, sizeof v, "%d", s->listen_fd);
  setenv("INFER_LISTEN_FD", v, 1);
  snprintf(v, sizeof v, "%llu", s->restarts + 1);
  setenv("INFER_RESTARTS", v, 1);
  snprintf(v, sizeof v, "%llu", (unsigned long long)atomic_load(&s->metrics.device_resets));
  setenv("INFER_DEVICE_RESETS", v, 1);
  setenv("INFER_RESTART_WHY", s->restart_why, 1);
  all_fds_cloexec();
  if (s->listen_fd >= 0) fcntl(s->listen_fd, F_SETFD, 0);
  fflush(stdout);
  fflush(stderr);
  execv("/proc/self/exe", argv);
  fprintf(stderr, "%s: exec of itself failed: %s\n", s->cfg->prog, strerror(errno));
}

/* What a predecessor left in the environment (see server_restart). */
static void take_restart_env(struct server *s) {
  const char *v = getenv("INFER_RESTARTS");
  if (v) s->restarts = strtoull(v, NULL, 10);
  if ((v = getenv("INFER_DEVICE_RESETS")) != NULL)
    atomic_store(&s->metrics.device_resets, strtoull(v, NULL, 10));
  if ((v = getenv("INFER_RESTART_WHY")) != NULL)
    snprintf(s->restart_why, sizeof s->restart_why, "%s", v);
  unsetenv("INFER_RESTARTS");
  unsetenv("INFER_DEVICE_RESETS");
  unsetenv("INFER_RESTART_WHY");
  if (s->restarts)
    printf("%s: restart %llu after a device fault its reset did not clear (%s)\n", s->cfg->prog,
           s->restarts, s->restart_why);
}

static void on_signal(struct ev_loop *evl, ev_signal *w, int revents) {
  struct server *s = w->data;
  (void)evl, (void)revents;
  if (s->draining && s->restarting) {
    /* A stop asked for during a restart's drain: the drain goes on and
     * ends the process instead. */
    printf("%s: %s: stopping instead of restarting\n", s->cfg->prog, strsignal(w->signum));
    s->restarting = 0;
    return;
  }
  if (s->draining) {
    fprintf(stderr, "%s: second signal: stopping now\n", s->cfg->prog);
    ev_timer_stop(s->evl, &drain_timer);
    s->exit_code = 0; /* let the timeout path run at once */
    on_drain_timeout(s->evl, &drain_timer, 0);
    return;
  }
  printf("%s: %s: draining (%lld requests in flight)\n", s->cfg->prog, strsignal(w->signum),
         (long long)atomic_load(&s->metrics.active_requests));
  fflush(stdout);
  start_drain(s);
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

int main(int argc, char **argv) {
  static struct config cfg;
  static struct server srv;
  struct server *s = &srv;
  char err[512];
  int rc = config_parse(&cfg, "inference_server",
                        "An MLP over HTTP/1.1: one thread, libmicrohttpd and cudaev on one libev "
                        "loop, dynamic batching on every GPU.",
                        argc, argv);
  if (rc >= 0) return rc;
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  s->cfg = &cfg;
  s->listen_fd = -1;
  if (load_model(s, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", cfg.prog, err);
    return 1;
  }
  s->max_body = cfg.max_body ? cfg.max_body : (size_t)s->model.dims[0] * 32 + 1024;
  fit_fd_limit(&cfg);
  s->evl = EV_DEFAULT;
  metrics_init(&s->metrics, cfg.max_batch);
  take_restart_env(s);
  if (batch_init(s) != 0) {
    fprintf(stderr, "%s: timerfd: %s\n", cfg.prog, strerror(errno));
    return 1;
  }
  if (strcmp(cfg.backend, "cpu") == 0) {
    s->be = &backend_cpu;
  } else {
#ifdef INFER_HAVE_GPU
    s->be = &backend_gpu;
#else
    fprintf(stderr, "%s: built without the GPU backend (no nvcc or cuBLAS): use --backend=cpu\n",
            cfg.prog);
    return 1;
#endif
  }
  /* 50 us: cudaev's documented default (cudaev_loop_set_spin). */
  s->quiet_spin_us = cfg.loop_spin_us >= 0 ? (unsigned)cfg.loop_spin_us : 50;
  s->spin_us = s->quiet_spin_us;
  if (devices_open(s, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", cfg.prog, err);
    return 1;
  }
  if (http_start(s, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", cfg.prog, err);
    devices_close(s);
    return 1;
  }
  ev_prepare_init(&spin_policy, on_spin_policy);
  spin_policy.data = s;
  ev_set_priority(&spin_policy, EV_MAXPRI);
  ev_prepare_start(s->evl, &spin_policy);
  ev_init(&drain_timer, on_drain_timeout);
  drain_timer.data = s;
  ev_init(&restart_grace, on_restart_grace);
  restart_grace.data = s;
  ev_signal_init(&sigint_w, on_signal, SIGINT);
  ev_signal_init(&sigterm_w, on_signal, SIGTERM);
  sigint_w.data = sigterm_w.data = s;
  ev_signal_start(s->evl, &sigint_w);
  ev_signal_start(s->evl, &sigterm_w);
  printf(
      "listening on http://%s:%d/ (backend %s, %d device(s) x %d streams, batches of up to %d "
      "within %u us, one loop thread)\n",
      cfg.host, http_port(s), s->be->name, s->ndev, cfg.streams, cfg.max_batch, cfg.window_us);
  if (cfg.port_file) {
    FILE *f = fopen(cfg.port_file, "w");
    if (f) {
      fprintf(f, "%d\n", http_port(s));
      fclose(f);
    }
  }

  ev_run(s->evl, 0);

  /* Drained (or forced): every connection is resumed, so MHD may stop;
   * then the devices' loops go (nothing is pending after a full drain). */
  ev_prepare_stop(s->evl, &spin_policy);
  ev_signal_stop(s->evl, &sigint_w);
  ev_signal_stop(s->evl, &sigterm_w);
  ev_timer_stop(s->evl, &drain_timer);
  ev_timer_stop(s->evl, &restart_grace);
  unsigned long long answered = 0;
  for (int i = 0; i < METRICS_NCODES; i++) answered += atomic_load(&s->metrics.requests[i]);
  http_stop(s);
  devices_close(s);
  batch_fini(s);
  model_free(&s->model);
  if (s->restarting) {
    printf("%s: %llu answers; restarting\n", cfg.prog, answered);
    exec_self(s, argv);
    return 1;
  }
  if (s->listen_fd >= 0) close(s->listen_fd);
  printf("%s: stopped after %llu answers; exit %d\n", cfg.prog, answered, s->exit_code);
  return s->exit_code;
}
