/* loop_uring: a cudaev loop driven by an io_uring loop (foreign mode).
 *
 * The pattern:
 *   - an IORING_OP_POLL_ADD (one-shot) on cudaev_loop_fd() for POLLIN,
 *     armed again after each of its completions;
 *   - right before waiting, t = cudaev_loop_prepare() bounds the wait:
 *     io_uring_submit_and_wait_timeout() takes it as the wait's own timeout
 *     (kernels with IORING_FEAT_EXT_ARG; liburing uses a timeout SQE on
 *     older ones), so no stale timeout SQE piles up when the bound changes
 *     every iteration;
 *   - drain every completion, then call cudaev_loop_process(), whatever
 *     woke the wait (it never blocks).
 * The application's own timer is an IORING_OP_TIMEOUT SQE: the deadline
 * after which the slow request is cancelled (examples/requests.h describes
 * the work).
 *
 * Threads: every cudaev callback runs on this program's main thread, inside
 * cudaev_loop_process(). A worker thread completes promises; cudaev turns
 * that into a write to the loop's fd, which completes the poll.
 * Ownership: the program owns the ring; the cudaev loop owns its fd, so the
 * poll on it is removed (and its completion reaped) before
 * cudaev_loop_destroy closes the fd, and the ring is torn down with nothing
 * in flight.
 *
 *   loop_uring [--gpu]     exit 0: every check passed; 77: no io_uring here
 *                          (seccomp, old kernel) or --gpu and no GPU
 */
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "requests.h"

#define DEADLINE_MS 50

enum { TAG_POLL = 1, TAG_DEADLINE, TAG_POLL_REMOVE };

static int running = 1;

/* On the loop thread (inside cudaev_loop_process): the work is over. */
static void stop(struct requests *r) {
  (void)r;
  running = 0;
}

static void arm_poll(struct io_uring *ring, int fd) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(ring); /* room: at most 3 in flight */
  io_uring_prep_poll_add(sqe, fd, POLLIN);
  io_uring_sqe_set_data64(sqe, TAG_POLL);
}

int main(int argc, char **argv) {
  static struct requests rq;
  int rc = requests_init(&rq, "loop_uring", argc, argv);
  if (rc >= 0) return rc;

  struct io_uring ring;
  int err = io_uring_queue_init(8, &ring, 0);
  if (err < 0) {
    printf("loop_uring: skipped: io_uring_queue_init: %s\n", strerror(-err));
    return 77;
  }
  cudaev_loop_t *loop;
  cudaError_t e = cudaev_loop_new_foreign(&loop);
  if (e != cudaSuccess) {
    printf("loop_uring: cudaev_loop_new_foreign: %s\n", cudaev_error_string(e));
    return 1;
  }
  int fd = cudaev_loop_fd(loop);
  struct __kernel_timespec deadline = {0, DEADLINE_MS * 1000000LL};
  struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
  io_uring_prep_timeout(sqe, &deadline, 0, 0);
  io_uring_sqe_set_data64(sqe, TAG_DEADLINE);
  arm_poll(&ring, fd);
  int in_flight = 2; /* the deadline and the poll */
  int poll_armed = 1;
  if (requests_start(&rq, loop, stop, NULL) != 0) return 1;

  while (running) {
    if (!poll_armed) {
      arm_poll(&ring, fd);
      poll_armed = 1;
      in_flight++;
    }
    int ms = cudaev_loop_prepare(loop);
    struct __kernel_timespec bound = {ms / 1000, (ms % 1000) * 1000000LL};
    struct io_uring_cqe *cqe;
    err = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, ms >= 0 ? &bound : NULL, NULL);
    if (err < 0 && err != -ETIME && err != -EINTR) {
      printf("loop_uring: wait: %s\n", strerror(-err));
      return 1;
    }
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      seen++;
      in_flight--;
      switch (io_uring_cqe_get_data64(cqe)) {
      case TAG_POLL: poll_armed = 0; break;
      case TAG_DEADLINE: requests_deadline(&rq); break; /* res is -ETIME: it expired */
      default: break;
      }
    }
    io_uring_cq_advance(&ring, seen);
    cudaev_loop_process(loop);
  }

  /* Clean shutdown: remove the poll on cudaev's fd and reap every
   * completion (the removal's and the poll's -ECANCELED), so nothing is in
   * flight when the fd is closed and the ring torn down. */
  if (poll_armed) {
    sqe = io_uring_get_sqe(&ring);
    io_uring_prep_poll_remove(sqe, TAG_POLL);
    io_uring_sqe_set_data64(sqe, TAG_POLL_REMOVE);
    in_flight++;
    io_uring_submit(&ring);
  }
  while (in_flight > 0) {
    struct io_uring_cqe *cqe;
    if (io_uring_wait_cqe(&ring, &cqe) != 0) break;
    in_flight--;
    io_uring_cqe_seen(&ring, cqe);
  }
  rc = requests_finish(&rq);
  cudaev_loop_destroy(loop);
  io_uring_queue_exit(&ring);
  if (in_flight != 0) {
    printf("loop_uring: %d operations still in flight at shutdown\n", in_flight);
    rc = 1;
  }
  return rc;
}
