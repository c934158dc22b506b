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
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "service.h"

static ev_signal sigint_w, sigterm_w;
static ev_timer drain_timer;
static ev_prepare spin_policy;

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
    fail_everything(s, "shutting down");
    /* Time to send those answers; then stop whatever is left. */
    ev_timer_set(w, 1., 0.);
    ev_timer_start(evl, w);
    server_check_drained(s);
    return;
  }
  ev_break(evl, EVBREAK_ALL);
}

static void on_signal(struct ev_loop *evl, ev_signal *w, int revents) {
  struct server *s = w->data;
  (void)evl, (void)revents;
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
  s->draining = 1;
  http_quiesce(s);
  batch_dispatch(s); /* a draining batcher does not wait for the window */
  ev_timer_set(&drain_timer, s->cfg->drain_timeout_s, 0.);
  ev_timer_start(s->evl, &drain_timer);
  server_check_drained(s);
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
  if (load_model(s, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", cfg.prog, err);
    return 1;
  }
  s->max_body = cfg.max_body ? cfg.max_body : (size_t)s->model.dims[0] * 32 + 1024;
  fit_fd_limit(&cfg);
  s->evl = EV_DEFAULT;
  metrics_init(&s->metrics, cfg.max_batch);
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
  unsigned long long answered = 0;
  for (int i = 0; i < METRICS_NCODES; i++) answered += atomic_load(&s->metrics.requests[i]);
  http_stop(s);
  devices_close(s);
  batch_fini(s);
  model_free(&s->model);
  printf("%s: stopped after %llu answers; exit %d\n", cfg.prog, answered, s->exit_code);
  return s->exit_code;
}
