/* loop_libuv: a cudaev loop driven by a libuv loop (foreign mode), through
 * the adapter examples/cudaev_uv.h (a uv_poll_t on cudaev's fd, a
 * uv_prepare_t + uv_timer_t for cudaev's timeout), which `meson install`
 * puts beside cudaev.h as <cudaev_uv.h>.
 *
 * The application's own timer here is a uv_timer_t: the deadline after
 * which the slow request is cancelled (examples/requests.h describes the
 * work). When the work is over the adapter is closed; uv_run then returns
 * because nothing is active, and uv_loop_close() succeeding proves that no
 * handle was left behind.
 *
 * Threads: every cudaev callback runs on the uv_run thread (inside the
 * adapter's poll or timer callback). A worker thread completes promises;
 * cudaev wakes libuv through its own fd (no uv_async_t needed).
 * Ownership: the program owns the uv loop, the adapter and the cudaev loop;
 * the cudaev loop is destroyed after the adapter's handles are closed.
 *
 *   loop_libuv [--gpu]     exit 0: every check passed; 77: --gpu, no GPU
 */
#include <stdio.h>
#include <uv.h>

#include "cudaev_uv.h"
#include "requests.h"

#define DEADLINE_MS 50

static struct requests rq;
static struct cudaev_uv adapter;
static int closed;

static void on_closed(struct cudaev_uv *a) {
  (void)a;
  closed = 1;
}

/* On the uv_run thread, inside a cudaev callback: the work is over. */
static void stop(struct requests *r) { cudaev_uv_close(r->user, on_closed); }

static void on_deadline(uv_timer_t *t) {
  (void)t;
  requests_deadline(&rq);
}

int main(int argc, char **argv) {
  int rc = requests_init(&rq, "loop_libuv", argc, argv);
  if (rc >= 0) return rc;

  uv_loop_t uvl;
  cudaev_loop_t *loop;
  cudaError_t e = cudaev_loop_new_foreign(&loop);
  if (e != cudaSuccess) {
    printf("loop_libuv: cudaev_loop_new_foreign: %s\n", cudaev_error_string(e));
    return 1;
  }
  int uerr = uv_loop_init(&uvl);
  if (uerr == 0) uerr = cudaev_uv_start(&adapter, &uvl, loop);
  if (uerr != 0) {
    printf("loop_libuv: %s\n", uv_strerror(uerr));
    return 1;
  }
  uv_timer_t deadline;
  uv_timer_init(&uvl, &deadline);
  uv_timer_start(&deadline, on_deadline, DEADLINE_MS, 0);
  if (requests_start(&rq, loop, stop, &adapter) != 0) return 1;

  uv_run(&uvl, UV_RUN_DEFAULT);

  /* Clean shutdown: the adapter closed itself (stop), the one-shot deadline
   * is inactive but must be closed too; then the work is checked and freed
   * and the cudaev loop destroyed (nothing pending, so no continuation runs
   * in there). uv_loop_close fails with UV_EBUSY if a handle is left. */
  uv_close((uv_handle_t *)&deadline, NULL);
  uv_run(&uvl, UV_RUN_DEFAULT);
  rc = requests_finish(&rq);
  cudaev_loop_destroy(loop);
  uerr = uv_loop_close(&uvl);
  if (!closed || uerr != 0) {
    printf("loop_libuv: shutdown: adapter %s, uv_loop_close: %s\n", closed ? "closed" : "open",
           uerr ? uv_strerror(uerr) : "ok");
    rc = 1;
  }
  return rc;
}
