/* The HTTP/1.1 server (http1.h): the listening socket, the connections'
 * epoll set, and sending what answers wait (http1_flush). The connections
 * and their deadlines are http1_conn.c's; it calls nothing here. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http1_impl.h"

#define BACKLOG 4096
#define EVENTS  64

/* Accepts from the backlog up to the connection limit. */
static void accept_some(struct http1 *h) {
  while (h->accept_ready && h->listen_fd >= 0 &&
         atomic_load_explicit(&h->nconn, memory_order_relaxed) < h->cfg.max_connections) {
    int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        /* Out of fds or memory: the backlog waits until a connection
         * closes (each event and flush try again while accept_ready). */
        if (!h->accept_failing) fprintf(stderr, "accept: %s\n", strerror(errno));
        h->accept_failing = 1;
        return;
      }
      h->accept_ready = 0;
      return;
    }
    h->accept_failing = 0;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (h->cfg.rx_timestamps) setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    struct http1_conn *c = http1_conn_open(h, fd);
    if (c == NULL) {
      close(fd);
      continue;
    }
    /* Edge-triggered for the connection's whole life: no epoll_ctl per
     * request. Bytes already there are reported at once. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) http1_conn_close(c);
  }
}

static void on_io(struct ev_loop *evl, ev_io *w, int revents) {
  struct http1 *h = w->data;
  struct epoll_event ev[EVENTS];
  (void)evl, (void)revents;
  int n = epoll_wait(h->epfd, ev, EVENTS, 0);
  h->events++;
  h->now = now_ns();
  h->depth++;
  for (int i = 0; i < n; i++) {
    struct http1_conn *c = ev[i].data.ptr;
    if (c == NULL) {
      h->accept_ready = 1;
      accept_some(h);
      continue;
    }
    if (c->dead) continue;
    uint32_t e = ev[i].events;
    if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->readable = 1;
    if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->rdhup = 1;
    http1_conn_serve(c);
  }
  h->depth--;
  http1_conns_reap(h);
  accept_some(h); /* connections that closed made room under the limit */
}

int http1_flush(struct http1 *h) {
  int any = !TAILQ_EMPTY(&h->flush);
  h->now = now_ns();
  h->depth++;
  while (!TAILQ_EMPTY(&h->flush)) http1_conn_serve(TAILQ_FIRST(&h->flush)); /* takes it off */
  h->depth--;
  http1_conns_reap(h);
  accept_some(h); /* a timer's or an answer's close made room under the limit */
  return any;
}

/* Right before libev blocks: answers made outside the connections' events
 * go out, and the backlog gets the room closes made. */
static void on_prepare(struct ev_loop *evl, ev_prepare *w, int revents) {
  (void)evl, (void)revents;
  http1_flush(w->data);
}

static int make_listener(const struct http1_config *cfg, char *err, size_t errlen) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
  if (inet_pton(AF_INET, cfg->host, &addr.sin_addr) != 1) {
    snprintf(err, errlen, "--listen: '%s' is not an IPv4 address", cfg->host);
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (cfg->reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, BACKLOG) != 0) {
    snprintf(err, errlen, "cannot listen on %s:%d: %s", cfg->host, cfg->port, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

struct http1 *http1_start(struct ev_loop *evl, const struct http1_config *cfg,
                          const struct http1_ops *ops, void *user, char *err, size_t errlen) {
  struct http1 *h = calloc(1, sizeof *h);
  if (h == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  h->evl = evl;
  h->cfg = *cfg;
  h->ops = ops;
  h->user = user;
  h->date_at = -1;
  LIST_INIT(&h->conns);
  TAILQ_INIT(&h->flush);
  LIST_INIT(&h->graveyard);
  h->listen_fd = cfg->listen_fd >= 0 ? cfg->listen_fd : make_listener(cfg, err, errlen);
  if (h->listen_fd < 0) {
    free(h);
    return NULL;
  }
  if (cfg->listen_fd >= 0) fcntl(h->listen_fd, F_SETFL, fcntl(h->listen_fd, F_GETFL) | O_NONBLOCK);
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  h->port =
      getsockname(h->listen_fd, (struct sockaddr *)&sa, &len) == 0 ? ntohs(sa.sin_port) : cfg->port;
  h->epfd = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = NULL};
  if (h->epfd < 0 || epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->listen_fd, &ev) != 0) {
    snprintf(err, errlen, "epoll: %s", strerror(errno));
    if (h->epfd >= 0) close(h->epfd);
    if (cfg->listen_fd < 0) close(h->listen_fd);
    free(h);
    return NULL;
  }
  http1_conns_init(h);
  ev_io_init(&h->io, on_io, h->epfd, EV_READ);
  ev_prepare_init(&h->prepare, on_prepare);
  h->io.data = h->prepare.data = h;
  ev_io_start(evl, &h->io);
  ev_prepare_start(evl, &h->prepare);
  return h;
}

int http1_port(const struct http1 *h) { return h->port; }

unsigned http1_connections(const struct http1 *h) {
  return atomic_load_explicit(&h->nconn, memory_order_relaxed);
}

unsigned long long http1_events(const struct http1 *h) { return h->events; }

int http1_quiesce(struct http1 *h) {
  int fd = h->listen_fd;
  if (fd < 0) return -1;
  epoll_ctl(h->epfd, EPOLL_CTL_DEL, fd, NULL);
  h->listen_fd = -1;
  h->accept_ready = 0;
  return fd;
}

void http1_stop(struct http1 *h) {
  if (h == NULL) return;
  ev_io_stop(h->evl, &h->io);
  ev_prepare_stop(h->evl, &h->prepare);
  h->accept_ready = 0;
  while (!LIST_EMPTY(&h->conns)) http1_conn_close(LIST_FIRST(&h->conns));
  http1_conns_fini(h);
  close(h->epfd);
  if (h->listen_fd >= 0) close(h->listen_fd);
  free(h);
}
