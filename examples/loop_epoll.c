/* loop_epoll: a cudaev loop driven by a raw epoll_wait() loop (foreign mode).
 *
 * The pattern (the same for any loop that can watch an fd and sleep with a
 * timeout; curl-multi and c-ares work this way):
 *   - watch cudaev_loop_fd() for readability (level-triggered);
 *   - right before blocking, t = cudaev_loop_prepare(): block at most t ms
 *     (-1: no limit from cudaev; 0: do not block);
 *   - after waking, whatever woke it, call cudaev_loop_process(). It never
 *     blocks, so calling it more often than needed costs only a pass.
 * The application's own timer here is a timerfd in the same epoll set: the
 * deadline after which the slow request is cancelled (examples/requests.h
 * describes the work).
 *
 * Threads: every cudaev callback runs on this program's main thread, inside
 * cudaev_loop_process(). A worker thread completes promises; cudaev turns
 * that into a write to the loop's fd, so epoll_wait() wakes.
 * Ownership: the cudaev loop owns its fd (do not close it); the program owns
 * the epoll and timer fds and destroys the cudaev loop, outside
 * cudaev_loop_process(), once it stopped driving it.
 *
 *   loop_epoll [--gpu]     exit 0: every check passed; 77: --gpu, no GPU
 */
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "requests.h"

#define DEADLINE_MS 50

static int running = 1;

/* On the loop thread (inside cudaev_loop_process): the work is over. */
static void stop(struct requests *r) {
  (void)r;
  running = 0;
}

int main(int argc, char **argv) {
  static struct requests rq;
  int rc = requests_init(&rq, "loop_epoll", argc, argv);
  if (rc >= 0) return rc;

  cudaev_loop_t *loop;
  cudaError_t e = cudaev_loop_new_foreign(&loop);
  if (e != cudaSuccess) {
    printf("loop_epoll: cudaev_loop_new_foreign: %s\n", cudaev_error_string(e));
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int deadline = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  struct itimerspec when = {.it_value = {0, DEADLINE_MS * 1000000L}};
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = cudaev_loop_fd(loop)};
  if (ep < 0 || deadline < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) != 0) {
    perror("loop_epoll: epoll");
    return 1;
  }
  ev.data.fd = deadline;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, deadline, &ev) != 0 ||
      timerfd_settime(deadline, 0, &when, NULL) != 0) {
    perror("loop_epoll: timerfd");
    return 1;
  }
  if (requests_start(&rq, loop, stop, NULL) != 0) return 1;

  while (running) {
    struct epoll_event got[4];
    int n = epoll_wait(ep, got, 4, cudaev_loop_prepare(loop));
    for (int i = 0; i < n; i++) {
      if (got[i].data.fd != deadline) continue;
      uint64_t expirations;
      if (read(deadline, &expirations, sizeof expirations) > 0) requests_deadline(&rq);
    }
    cudaev_loop_process(loop);
  }

  /* Clean shutdown: check and free the work, then the cudaev loop (nothing
   * is pending, so no continuation runs in here), then our fds. */
  rc = requests_finish(&rq);
  epoll_ctl(ep, EPOLL_CTL_DEL, cudaev_loop_fd(loop), NULL); /* before the loop closes it */
  cudaev_loop_destroy(loop);
  close(deadline);
  close(ep);
  return rc;
}
