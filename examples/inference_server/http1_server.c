/* The HTTP/1.1 server (http1.h): the listening socket, the connections'
 * epoll set and the one timer for their deadlines. */
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

static void free_graveyard(struct http1 *h) {
  while (h->graveyard) {
    struct http1_conn *c = h->graveyard;
    h->graveyard = c->next;
    http1_conn_free(c);
  }
}

/* Accepts from the backlog up to the connection limit. */
static void accept_some(struct http1 *h) {
  while (h->accept_ready && h->listen_fd >= 0 &&
         atomic_load_explicit(&h->nconn, memory_order_relaxed) < h->cfg.max_connections) {
    int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        /* Out of fds or memory: the backlog waits until a connection
         * closes (http1_conn_gone tries again). */
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

void http1_conn_gone(struct http1 *h) {
  if (h->accept_ready) accept_some(h);
}

static void on_io(struct ev_loop *evl, ev_io *w, int revents) {
  struct http1 *h = w->data;
  struct epoll_event ev[EVENTS];
  (void)evl, (void)revents;
  int n = epoll_wait(h->epfd, ev, EVENTS, 0);
  h->events++;
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
  free_graveyard(h);
}

static struct http1_conn *from_due(struct deadline_item *it) {
  return (struct http1_conn *)((char *)it - offsetof(struct http1_conn, due));
}

static struct http1_conn *from_quiet(struct deadline_item *it) {
  return (struct http1_conn *)((char *)it - offsetof(struct http1_conn, quiet));
}

void http1_arm(struct http1 *h) {
  uint64_t at = deadline_fifo_next_due(&h->heads);
  uint64_t t;
  if ((t = deadline_fifo_next_due(&h->bodies)) < at) at = t;
  if ((t = deadline_fifo_next_due(&h->lingers)) < at) at = t;
  if ((t = deadline_fifo_next_due(&h->quiets)) < at) at = t;
  if (at == UINT64_MAX || (h->armed_ns != 0 && h->armed_ns <= at)) return;
  uint64_t now = now_ns();
  ev_timer_stop(h->evl, &h->timer);
  /* libev's timers may fire a little early: one that finds nothing due
   * re-arms for what is left. */
  ev_timer_set(&h->timer, at > now ? (double)(at - now) * 1e-9 : 0., 0.);
  ev_timer_start(h->evl, &h->timer);
  h->armed_ns = at;
}

static void on_timer(struct ev_loop *evl, ev_timer *w, int revents) {
  struct http1 *h = w->data;
  struct deadline_item *it;
  (void)evl, (void)revents;
  uint64_t now = now_ns();
  h->armed_ns = 0;
  while ((it = deadline_fifo_pop_due(&h->heads, now)) != NULL) http1_conn_expired(from_due(it), 0);
  while ((it = deadline_fifo_pop_due(&h->bodies, now)) != NULL) http1_conn_expired(from_due(it), 0);
  while ((it = deadline_fifo_pop_due(&h->lingers, now)) != NULL)
    http1_conn_expired(from_due(it), 0);
  while ((it = deadline_fifo_pop_due(&h->quiets, now)) != NULL)
    http1_conn_expired(from_quiet(it), 1);
  http1_arm(h);
  free_graveyard(h);
}

int http1_flush(struct http1 *h) {
  if (h->flush == NULL) return 0;
  while (h->flush) http1_conn_serve(h->flush); /* takes it off the list */
  free_graveyard(h);
  return 1;
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
  const uint64_t ms = 1000000u;
  deadline_fifo_init(&h->heads, cfg->header_deadline_ms * ms);
  deadline_fifo_init(&h->bodies, cfg->body_deadline_ms * ms);
  deadline_fifo_init(&h->lingers, HTTP1_LINGER_MS * ms);
  deadline_fifo_init(&h->quiets, (uint64_t)cfg->idle_timeout_s * 1000u * ms);
  ev_io_init(&h->io, on_io, h->epfd, EV_READ);
  ev_init(&h->timer, on_timer);
  h->io.data = h->timer.data = h;
  ev_io_start(evl, &h->io);
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
  ev_timer_stop(h->evl, &h->timer);
  h->accept_ready = 0;
  while (h->conns) http1_conn_close(h->conns);
  free_graveyard(h);
  close(h->epfd);
  if (h->listen_fd >= 0) close(h->listen_fd);
  free(h);
}
