/* loop_libev: a cudaev loop inside the application's own libev loop (ev
 * mode).
 *
 * The pattern:
 *   struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);   (or EV_DEFAULT)
 *   cudaev_loop_new_ev(evl, &loop);    binds to this program's libev
 *   ... submit work ...
 *   ev_run(evl, 0);                    GPU completions arrive as events
 *   cudaev_loop_destroy(loop);         after ev_run, before ev_loop_destroy
 * Pending futures keep ev_run running (the loop holds an ev_ref while any
 * is pending), but cudaev's watchers alone do not. This example's work
 * ends with a posted call after its last future, so it also holds the
 * loop (cudaev_loop_ref) until that call has run (cudaev_loop_unref). The
 * application's
 * own timer here is an ev_timer: the deadline after which the slow request
 * is cancelled (examples/requests.h describes the work).
 *
 * Threads: every cudaev callback runs on the thread running ev_run(), as a
 * libev callback of cudaev's watchers. A worker thread completes promises;
 * cudaev wakes the libev loop through its own fd (no ev_async needed).
 * Ownership: the program owns both loops; cudaev's watchers live on `evl`
 * until cudaev_loop_destroy, which must run on the ev_run thread while
 * ev_run is not running (or not inside one of its callbacks).
 *
 * libcudart.so.13 does not link libev: cudaev_loop_new_ev binds to the
 * libev this program links (found in the global scope). If it cannot, it
 * returns CUDAEV_ERROR_NO_LIBEV and cudaev_error_string says why.
 *
 *   loop_libev [--gpu]     exit 0: every check passed; 77: --gpu, no GPU
 */
#include <ev.h>
#include <stdio.h>

#include "requests.h"

#define DEADLINE_S 0.05

static struct requests rq;

/* On the ev_run thread: the work is over; ev_run may return. */
static void stop(struct requests *r) { cudaev_loop_unref(r->user); }

static void on_deadline(struct ev_loop *evl, ev_timer *w, int revents) {
  (void)evl, (void)w, (void)revents;
  requests_deadline(&rq);
}

int main(int argc, char **argv) {
  int rc = requests_init(&rq, "loop_libev", argc, argv);
  if (rc >= 0) return rc;

  struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);
  cudaev_loop_t *loop;
  cudaError_t e = evl ? cudaev_loop_new_ev(evl, &loop) : cudaErrorOperatingSystem;
  if (e != cudaSuccess) {
    printf("loop_libev: cudaev_loop_new_ev: %s\n", cudaev_error_string(e));
    return 1;
  }
  ev_timer deadline;
  ev_timer_init(&deadline, on_deadline, DEADLINE_S, 0.);
  ev_timer_start(evl, &deadline);
  if (requests_start(&rq, loop, stop, loop) != 0) return 1;
  cudaev_loop_ref(loop); /* kept until the last posted call; stop() drops it */

  ev_run(evl, 0);

  /* Clean shutdown: the deadline fired (one-shot, so it is stopped), the
   * work is checked and freed, then the cudaev loop goes (nothing is
   * pending, so no continuation runs in here), then the libev loop. */
  rc = requests_finish(&rq);
  cudaev_loop_destroy(loop);
  ev_timer_stop(evl, &deadline);
  ev_loop_destroy(evl);
  return rc;
}
