/* loop_thread: a blocking program (no event loop of its own) on a
 * thread-mode cudaev loop, using cudaev_future_wait.
 *
 * The pattern:
 *   cudaev_loop_new_thread(&loop);           (or cudaev_loop_default())
 *   ... submit work, get futures ...
 *   if (cudaev_future_wait(f, timeout_ns) == CUDAEV_ERROR_TIMEOUT)
 *     cudaev_future_cancel(f);               (the timeout path)
 *   cudaev_loop_destroy(loop);
 * cudaev_loop_default() is the same kind of loop, made on first use and
 * never destroyed (it is stopped at exit); a program that wants to check
 * its shutdown, as this one does, makes its own.
 *
 * Threads: the library runs the loop on a thread of its own; every cudaev
 * callback (continuations, the posted call, requests.h's stop hook) runs
 * there, concurrently with main, so what they share with main is atomic or
 * handed over through a future. cudaev_future_wait must not be called on
 * that thread (it returns cudaErrorNotPermitted there). The host loop's
 * timer of the other examples is the waiting call's timeout here.
 * Ownership: main owns the loop and destroys it from main (never from a
 * callback: destroy joins the loop's thread).
 *
 *   loop_thread [--gpu]    exit 0: every check passed; 77: --gpu, no GPU
 */
#include <stdio.h>

#include "requests.h"

#define DEADLINE_NS (50 * 1000000LL)
#define FOREVER     (-1)

/* On the loop's thread: the work is over; main waits on this promise. */
static void stop(struct requests *r) { cudaev_promise_set(r->user, cudaSuccess); }

int main(int argc, char **argv) {
  static struct requests rq;
  int rc = requests_init(&rq, "loop_thread", argc, argv);
  if (rc >= 0) return rc;

  cudaev_loop_t *loop;
  cudaev_future_t *over;
  cudaError_t e = cudaev_loop_new_thread(&loop);
  if (e == cudaSuccess) e = cudaev_promise_new(loop, &over);
  if (e != cudaSuccess) {
    printf("loop_thread: %s\n", cudaev_error_string(e));
    return 1;
  }
  if (requests_start(&rq, loop, stop, over) != 0) return 1;

  /* The slow request gets DEADLINE_NS, then is cancelled. */
  e = cudaev_future_wait(rq.f[NREQ], DEADLINE_NS);
  if (e == CUDAEV_ERROR_TIMEOUT) requests_deadline(&rq);
  /* when_all's outcome: the first failure among its inputs (the cancel). */
  e = cudaev_future_wait(rq.all, FOREVER);
  if (e == CUDAEV_ERROR_CANCELLED) e = cudaev_future_wait(over, FOREVER);
  if (e != cudaSuccess) printf("loop_thread: waiting: %s\n", cudaev_error_name(e));

  rc = requests_finish(&rq);
  cudaev_future_release(over);
  cudaev_loop_destroy(loop);
  return rc != 0 || e != cudaSuccess;
}
