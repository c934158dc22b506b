/* http_floor: the most requests a second that one thread can answer on this
 * host under bench/serve.sh's load, whatever the server. It does the least
 * an HTTP/1.1 keep-alive server can: edge-triggered epoll, one read per
 * readable connection, finding each request's end (the blank line and its
 * Content-Length), and one write of a fixed 200 answer per batch of
 * requests read, the size of the inference service's. No parsing of the
 * body, no model, no timers, no limits.
 *
 * It is the ceiling for the "one loop thread" target: a design
 * that answers by reading the request can be no faster on one thread.
 *
 *   SERVE_SERVERS="floor twin-nvidia" bench/serve.sh OUT
 *   bench-http-floor --port 0 --port-file F      (the other serve.sh flags
 *                                                 are accepted and ignored)
 *
 * GET /metrics answers a comment line (serve.sh reads the service's
 * counters there). SIGINT/SIGTERM: exit 0. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BUF = 16384, MAXFD = 1 << 20 };

/* The service's answer to 64 inputs: 16 floats of JSON. */
static const char BODY[] =
    "[0.1234567,-0.2345678,0.3456789,-0.4567891,0.5678912,-0.6789123,"
    "0.7891234,-0.8912345,0.9123456,-0.1234567,0.2345678,-0.3456789,"
    "0.4567891,-0.5678912,0.6789123,-0.7891234]\n";
static const char METRICS[] = "# http floor: no metrics\n";
static char answer[512], metrics_answer[256];
static size_t answer_len, metrics_len;

struct conn {
  size_t len; /* bytes of unanswered requests in buf */
  char buf[BUF];
};
static struct conn *conns[MAXFD];

static void die(const char *what) {
  perror(what);
  exit(2);
}

/* The length of the first whole request in p[0, n), 0 if incomplete,
 * -1 if it cannot be one (no end of headers in a full buffer). */
static long request_len(const char *p, size_t n) {
  const char *end = memmem(p, n, "\r\n\r\n", 4);
  if (end == NULL) return n == BUF ? -1 : 0;
  size_t head = (size_t)(end - p) + 4, body = 0;
  for (const char *l = memchr(p, '\n', head); l != NULL && l < end;
       l = memchr(l + 1, '\n', head - (size_t)(l + 1 - p)))
    if (strncasecmp(l + 1, "Content-Length:", 15) == 0) body = strtoul(l + 16, NULL, 10);
  if (head + body > BUF) return -1;
  return head + body <= n ? (long)(head + body) : 0;
}

static void drop(int ep, int fd) {
  epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
  free(conns[fd]);
  conns[fd] = NULL;
}

/* Reads what fd has and answers every whole request, in one write per
 * read (more only past 64 answers). */
static void serve(int ep, int fd) {
  struct conn *c = conns[fd];
  char out[64 * sizeof answer];
  for (;;) {
    size_t room = BUF - c->len;
    ssize_t r = recv(fd, c->buf + c->len, room, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return;
    if (r <= 0) goto gone;
    c->len += (size_t)r;
    size_t used = 0, o = 0;
    long n;
    while ((n = request_len(c->buf + used, c->len - used)) > 0) {
      bool m = strncmp(c->buf + used, "GET /metrics", 12) == 0;
      size_t k = m ? metrics_len : answer_len;
      if (o + k > sizeof out) {
        if (send(fd, out, o, MSG_NOSIGNAL) != (ssize_t)o) goto gone;
        o = 0;
      }
      memcpy(out + o, m ? metrics_answer : answer, k);
      o += k;
      used += (size_t)n;
    }
    if (n < 0) goto gone;
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    if (o > 0 && send(fd, out, o, MSG_NOSIGNAL) != (ssize_t)o) goto gone;
    if ((size_t)r < room) return; /* a short read: nothing more until the next edge */
  }
gone: /* closed, failed, or a request that cannot fit */
  drop(ep, fd);
}

int main(int argc, char **argv) {
  int port = 8080;
  const char *port_file = NULL;
  static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
                                       {"port-file", required_argument, NULL, 'f'},
                                       {"help", no_argument, NULL, 'h'},
                                       {"backend", required_argument, NULL, 'x'},
                                       {"max-connections", required_argument, NULL, 'x'},
                                       {"deadline-ms", required_argument, NULL, 'x'},
                                       {"connection-timeout", required_argument, NULL, 'x'},
                                       {NULL, 0, NULL, 0}};
  for (int o; (o = getopt_long(argc, argv, "p:h", opts, NULL)) != -1;) {
    if (o == 'p')
      port = atoi(optarg);
    else if (o == 'f')
      port_file = optarg;
    else if (o == 'h') {
      printf("usage: %s [--port=PORT] [--port-file=FILE]\n", argv[0]);
      return 0;
    } else if (o != 'x')
      return 2;
  }
  answer_len = (size_t)snprintf(answer, sizeof answer,
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                "Content-Length: %zu\r\n\r\n%s",
                                sizeof BODY - 1, BODY);
  metrics_len = (size_t)snprintf(metrics_answer, sizeof metrics_answer,
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                 "Content-Length: %zu\r\n\r\n%s",
                                 sizeof METRICS - 1, METRICS);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ls < 0) die("socket");
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 4096) != 0) die("bind/listen");
  socklen_t al = sizeof a;
  getsockname(ls, (struct sockaddr *)&a, &al);
  printf("http floor: listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
  fflush(stdout);
  if (port_file != NULL) {
    FILE *f = fopen(port_file, "w");
    if (f == NULL) die(port_file);
    fprintf(f, "%d\n", ntohs(a.sin_port));
    fclose(f);
  }
  sigset_t ss;
  sigemptyset(&ss);
  sigaddset(&ss, SIGINT);
  sigaddset(&ss, SIGTERM);
  sigprocmask(SIG_BLOCK, &ss, NULL);
  int sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (sfd < 0 || ep < 0) die("signalfd/epoll");
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  ev.data.fd = sfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == sfd) return 0;
      if (fd != ls) {
        if (conns[fd] != NULL) serve(ep, fd);
        continue;
      }
      int c;
      while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        if (c >= MAXFD || (conns[c] = malloc(sizeof *conns[c])) == NULL) {
          close(c);
          continue;
        }
        conns[c]->len = 0;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ce = {.events = EPOLLIN | EPOLLET | EPOLLRDHUP, .data.fd = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
        serve(ep, c);
      }
    }
  }
}
