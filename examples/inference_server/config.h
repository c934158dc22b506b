/* config.h: the command line of the service and of its blocking twin (the
 * same flags, so that a benchmark starts both alike). */
#ifndef INFER_CONFIG_H
#define INFER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct config {
  const char *prog;
  const char *what; /* one line: what this program is (for --help) */
  char host[64];    /* numeric IPv4 address to listen on */
  int port;         /* 0: an ephemeral port (printed) */
  const char *port_file;
  const char *backend; /* "gpu" or "cpu" */
  const char *layers;
  const char *weights; /* NULL: generate, do not write */
  uint64_t seed;
  int max_batch;
  unsigned window_us;
  int streams;         /* batches in flight per device */
  const char *devices; /* "all" or a list of ordinals */
  int cpu_devices;     /* CPU backend: stand-in devices */
  unsigned cpu_delay_us;
  int max_queue;
  unsigned deadline_ms;        /* from the request's end (body in) to its answer */
  unsigned header_deadline_ms; /* a request's line and headers, from the connection's start */
  unsigned body_deadline_ms;   /* a request's body, from its headers */
  size_t max_body;             /* 0: computed from the model's input size */
  unsigned max_connections;
  unsigned connection_timeout_s;
  unsigned drain_timeout_s;
  int loop_spin_us; /* cudaev_loop_set_spin; -1: the library's default */
  int loop_threads; /* the service's event-loop threads */
  int fault_injection;
  int eager_batch;   /* policy.h's eager: a partial batch leaves when no request can come */
  int socket_timing; /* infer_socket_wait_seconds, infer_send_wait_seconds */
};

/* Fills c from argv. Returns -1 to go on, else the exit code: 0 after
 * --help or --version, 2 after printing a usage error. */
int config_parse(struct config *c, const char *prog, const char *what, int argc, char **argv);

/* Parses a device list ("all" or "0,2,3") against `count` devices into
 * ids (at most max). Returns how many, or -1 with a reason. */
int config_devices(const char *list, int count, int *ids, int max, char *err, size_t errlen);

#endif
