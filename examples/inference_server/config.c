/* The command line (config.h). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERSION "0.1.0"

static void usage(const struct config *c, FILE *f) {
  fprintf(f,
          "Usage: %s [OPTION]...\n"
          "%s\n"
          "\n"
          "Endpoints:\n"
          "  POST /v1/infer   a JSON array of floats (Content-Type: application/json) or raw\n"
          "                   float32 (application/octet-stream); answers the MLP's output in\n"
          "                   the same form\n"
          "  GET  /health     200 \"ok\" while serving; 503 while draining or with no device\n"
          "  GET  /metrics    Prometheus text\n"
          "\n"
          "Listening:\n"
          "  -l, --listen=ADDR       IPv4 address to listen on (default 127.0.0.1)\n"
          "  -p, --port=PORT         TCP port (default 8080; 0 picks a free one, printed)\n"
          "      --port-file=FILE    write the port there once listening\n"
          "\n"
          "Model:\n"
          "      --backend=gpu|cpu   gpu: cuBLAS and our kernel on every GPU (default);\n"
          "                          cpu: the CPU reference on worker threads\n"
          "      --layers=SIZES      inputs,hidden[,hidden],outputs (default 64,256,256,16)\n"
          "      --weights=FILE      read the weights from FILE; if it does not exist,\n"
          "                          generate them and write FILE\n"
          "      --seed=N            seed of generated weights (default 1)\n"
          "\n"
          "Batching:\n"
          "      --max-batch=N       requests per batch (default 64)\n"
          "      --batch-window-us=N the longest a request waits for others (default 200)\n"
          "      --eager-batch       send a partial batch at once when every open\n"
          "                          connection (of this loop thread) has its request\n"
          "                          waiting, instead of at the window's end: no other\n"
          "                          request can come meanwhile (default off)\n"
          "      --streams=N         batches in flight per device (default 4)\n"
          "      --devices=LIST      GPUs to use: all (default) or ordinals, e.g. 0,2\n"
          "      --cpu-devices=N     cpu backend: stand-in devices (default 1)\n"
          "      --cpu-delay-us=N    cpu backend: added time per batch, a GPU's (default 0)\n"
          "      --loop-spin-us=N    how long a device's cudaev loop may spin for a GPU\n"
          "                          completion before sleeping, while no HTTP traffic\n"
          "                          waits (default 50; never while traffic waits; the\n"
          "                          blocking twin has no loop and ignores it)\n"
          "      --loop-threads=N    event-loop threads (default 1), each with its own\n"
          "                          listening socket on the port (SO_REUSEPORT), HTTP\n"
          "                          daemon, batcher and cudaev loop per device; with\n"
          "                          more than one, a device fault restarts the process\n"
          "                          (the twin ignores it)\n"
          "\n"
          "Limits:\n"
          "      --max-queue=N       requests waiting for a batch before 503 (default 8192)\n"
          "      --deadline-ms=N     a request not answered N ms after its body arrived\n"
          "                          gets 504 (default 2000)\n"
          "      --header-deadline-ms=N  the request line and headers must arrive within N ms\n"
          "                          of the connection's start (a later request on it: of\n"
          "                          its request line); else 408 and the connection is\n"
          "                          closed, however steadily they trickle (default 10000)\n"
          "      --body-deadline-ms=N  the body must arrive within N ms of the headers; else\n"
          "                          408 and the connection is closed (default 10000; the\n"
          "                          blocking twin ignores both)\n"
          "      --max-body=BYTES    larger request bodies get 413 (default: fits the input)\n"
          "      --max-connections=N concurrent connections (default 10000; also capped by\n"
          "                          the open-file limit, raised to its hard limit at start)\n"
          "      --connection-timeout=S  idle seconds before a connection is closed (default 30;\n"
          "                          any byte restarts it: the deadlines above bound\n"
          "                          a slow client)\n"
          "      --drain-timeout=S   on SIGINT/SIGTERM, how long in-flight requests may take\n"
          "                          before the rest get 503 (default 10)\n"
          "\n"
          "Diagnostics, testing and help:\n"
          "      --socket-timing     time inference requests in their sockets:\n"
          "                          infer_socket_wait_seconds (arrival, by the\n"
          "                          kernel's receive timestamp, SO_TIMESTAMPNS, to\n"
          "                          the read) and infer_send_wait_seconds (answer\n"
          "                          ready to written) in /metrics (the blocking twin\n"
          "                          ignores it)\n"
          "      --fault-injection   a request with the header X-Inject-Fault: 1 makes its\n"
          "                          batch fault on the device (an illegal address write);\n"
          "                          cpu backend: X-Inject-Fault: sticky makes the fault\n"
          "                          outlive the device's reset, as on some GPUs, which\n"
          "                          the service answers by restarting itself\n"
          "  -h, --help              this text\n"
          "  -V, --version           the version\n"
          "\n"
          "Signals: SIGINT or SIGTERM stops accepting, answers what is in flight and exits 0\n"
          "(1 if the drain timed out); a second one exits at once.\n",
          c->prog, c->what);
}

static int number(const char *opt, const char *s, unsigned long long min, unsigned long long max,
                  unsigned long long *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*s == '-' || end == s || *end || errno || v < min || v > max) {
    fprintf(stderr, "--%s: '%s': want a number %llu..%llu\n", opt, s, min, max);
    return -1;
  }
  *out = v;
  return 0;
}

int config_parse(struct config *c, const char *prog, const char *what, int argc, char **argv) {
  static const struct option opts[] = {
      {"listen", required_argument, NULL, 'l'},
      {"port", required_argument, NULL, 'p'},
      {"port-file", required_argument, NULL, 1},
      {"backend", required_argument, NULL, 2},
      {"layers", required_argument, NULL, 3},
      {"weights", required_argument, NULL, 4},
      {"seed", required_argument, NULL, 5},
      {"max-batch", required_argument, NULL, 6},
      {"batch-window-us", required_argument, NULL, 7},
      {"streams", required_argument, NULL, 8},
      {"devices", required_argument, NULL, 9},
      {"cpu-devices", required_argument, NULL, 10},
      {"cpu-delay-us", required_argument, NULL, 11},
      {"max-queue", required_argument, NULL, 12},
      {"deadline-ms", required_argument, NULL, 13},
      {"max-body", required_argument, NULL, 14},
      {"max-connections", required_argument, NULL, 15},
      {"connection-timeout", required_argument, NULL, 16},
      {"drain-timeout", required_argument, NULL, 17},
      {"fault-injection", no_argument, NULL, 18},
      {"loop-spin-us", required_argument, NULL, 19},
      {"loop-threads", required_argument, NULL, 20},
      {"header-deadline-ms", required_argument, NULL, 21},
      {"body-deadline-ms", required_argument, NULL, 22},
      {"eager-batch", no_argument, NULL, 23},
      {"socket-timing", no_argument, NULL, 24},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {0},
  };
  *c = (struct config){
      .prog = prog,
      .what = what,
      .host = "127.0.0.1",
      .port = 8080,
      .backend = "gpu",
      .layers = "64,256,256,16",
      .seed = 1,
      .max_batch = 64,
      .window_us = 200,
      .streams = 4,
      .devices = "all",
      .cpu_devices = 1,
      .max_queue = 8192,
      .deadline_ms = 2000,
      .header_deadline_ms = 10000,
      .body_deadline_ms = 10000,
      .max_connections = 10000,
      .connection_timeout_s = 30,
      .drain_timeout_s = 10,
      .loop_spin_us = -1,
      .loop_threads = 1,
  };
  int o;
  unsigned long long v;
  opterr = 0;
  optind = 1;
  while ((o = getopt_long(argc, argv, ":l:p:hV", opts, NULL)) != -1) {
    const char *name = NULL;
    for (int i = 0; opts[i].name; i++)
      if (opts[i].val == o) name = opts[i].name;
    switch (o) {
    case 'l':
      if (strlen(optarg) >= sizeof c->host) {
        fprintf(stderr, "--listen: address too long\n");
        return 2;
      }
      strcpy(c->host, optarg);
      break;
    case 'p':
      if (number(name, optarg, 0, 65535, &v)) return 2;
      c->port = (int)v;
      break;
    case 1: c->port_file = optarg; break;
    case 2:
      if (strcmp(optarg, "gpu") != 0 && strcmp(optarg, "cpu") != 0) {
        fprintf(stderr, "--backend: '%s': want gpu or cpu\n", optarg);
        return 2;
      }
      c->backend = optarg;
      break;
    case 3: c->layers = optarg; break;
    case 4: c->weights = optarg; break;
    case 5:
      if (number(name, optarg, 0, UINT64_MAX, &v)) return 2;
      c->seed = v;
      break;
    case 6:
      if (number(name, optarg, 1, 4096, &v)) return 2;
      c->max_batch = (int)v;
      break;
    case 7:
      if (number(name, optarg, 0, 10000000, &v)) return 2;
      c->window_us = (unsigned)v;
      break;
    case 8:
      if (number(name, optarg, 1, 64, &v)) return 2;
      c->streams = (int)v;
      break;
    case 9: c->devices = optarg; break;
    case 23: c->eager_batch = 1; break;
    case 24: c->socket_timing = 1; break;
    case 10:
      if (number(name, optarg, 1, 16, &v)) return 2;
      c->cpu_devices = (int)v;
      break;
    case 11:
      if (number(name, optarg, 0, 10000000, &v)) return 2;
      c->cpu_delay_us = (unsigned)v;
      break;
    case 12:
      if (number(name, optarg, 1, 1000000, &v)) return 2;
      c->max_queue = (int)v;
      break;
    case 13:
      if (number(name, optarg, 1, 3600000, &v)) return 2;
      c->deadline_ms = (unsigned)v;
      break;
    case 14:
      if (number(name, optarg, 1, 1u << 30, &v)) return 2;
      c->max_body = (size_t)v;
      break;
    case 15:
      if (number(name, optarg, 1, 1000000, &v)) return 2;
      c->max_connections = (unsigned)v;
      break;
    case 16:
      if (number(name, optarg, 1, 86400, &v)) return 2;
      c->connection_timeout_s = (unsigned)v;
      break;
    case 17:
      if (number(name, optarg, 0, 3600, &v)) return 2;
      c->drain_timeout_s = (unsigned)v;
      break;
    case 18: c->fault_injection = 1; break;
    case 19:
      if (number(name, optarg, 0, 100000, &v)) return 2;
      c->loop_spin_us = (int)v;
      break;
    case 20:
      if (number(name, optarg, 1, 64, &v)) return 2;
      c->loop_threads = (int)v;
      break;
    case 21:
      if (number(name, optarg, 1, 3600000, &v)) return 2;
      c->header_deadline_ms = (unsigned)v;
      break;
    case 22:
      if (number(name, optarg, 1, 3600000, &v)) return 2;
      c->body_deadline_ms = (unsigned)v;
      break;
    case 'h': usage(c, stdout); return 0;
    case 'V': printf("%s %s\n", prog, VERSION); return 0;
    case ':':
      fprintf(stderr, "%s: option '%s' needs a value (--help lists them)\n", prog,
              argv[optind - 1]);
      return 2;
    default:
      fprintf(stderr, "%s: unknown option '%s' (--help lists them)\n", prog, argv[optind - 1]);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s' (--help lists the options)\n", prog,
            argv[optind]);
    return 2;
  }
  return -1;
}

int config_devices(const char *list, int count, int *ids, int max, char *err, size_t errlen) {
  int n = 0;
  if (strcmp(list, "all") == 0) {
    for (int i = 0; i < count && n < max; i++) ids[n++] = i;
    return n;
  }
  const char *p = list;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || (*end && *end != ',') || v < 0) {
      snprintf(err, errlen, "--devices: '%s': want all or ordinals like 0,2", list);
      return -1;
    }
    if (v >= count) {
      snprintf(err, errlen, "--devices: device %ld does not exist (%d found)", v, count);
      return -1;
    }
    for (int i = 0; i < n; i++) {
      if (ids[i] == v) {
        snprintf(err, errlen, "--devices: device %ld named twice", v);
        return -1;
      }
    }
    if (n == max) {
      snprintf(err, errlen, "--devices: at most %d devices", max);
      return -1;
    }
    ids[n++] = (int)v;
    p = *end ? end + 1 : end;
  }
  if (n == 0) {
    snprintf(err, errlen, "--devices: empty list");
    return -1;
  }
  return n;
}
