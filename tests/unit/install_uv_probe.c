/* A libuv program built against an installed cudaev: install.sh compiles it
 * with nothing but `pkg-config --cflags --libs cudaev libuv` and -Wall
 * -Wextra -pedantic -Werror, so the installed <cudaev_uv.h> must be found
 * beside <cudaev.h> and compile cleanly.
 *
 * It drives a foreign-mode loop from a libuv loop through the adapter: a
 * promise completed before uv_run wakes the loop through its fd (the
 * uv_poll_t), and its continuation starts a 2 ms timer future, which only
 * the adapter's uv_timer_t can wake (nothing writes the fd). The timer's
 * continuation closes the adapter; uv_run returns once the handles are
 * closed. Exits 0 and prints one line when both completed. */
#include <cudaev_uv.h>
#include <stdio.h>

static struct cudaev_uv adapter;
static int promise_done, timer_done, closed;

static void on_closed(struct cudaev_uv *a) {
  (void)a;
  closed = 1;
}

static void on_timer(cudaev_future_t *f, cudaError_t status, void *user) {
  (void)user;
  timer_done = status == cudaSuccess;
  cudaev_future_release(f);
  cudaev_uv_close(&adapter, on_closed);
}

static void on_promise(cudaev_future_t *f, cudaError_t status, void *user) {
  cudaev_loop_t *loop = user;
  cudaev_future_t *t = NULL;
  promise_done = status == cudaSuccess;
  cudaev_future_release(f);
  if (cudaev_future_new_timer(loop, 2000000, &t) != cudaSuccess ||
      cudaev_future_then(t, on_timer, NULL) != cudaSuccess)
    cudaev_uv_close(&adapter, on_closed);
}

int main(void) {
  uv_loop_t uvl;
  cudaev_loop_t *loop = NULL;
  cudaev_future_t *p = NULL;
  cudaError_t e;
  if (uv_loop_init(&uvl) != 0) return 1;
  if ((e = cudaev_loop_new_foreign(&loop)) != cudaSuccess) {
    printf("cudaev_loop_new_foreign: %s\n", cudaev_error_name(e));
    return 1;
  }
  if (cudaev_uv_start(&adapter, &uvl, loop) != 0 || cudaev_promise_new(loop, &p) != cudaSuccess ||
      cudaev_future_then(p, on_promise, loop) != cudaSuccess ||
      cudaev_promise_set(p, cudaSuccess) != cudaSuccess) {
    printf("set-up failed\n");
    return 1;
  }
  uv_run(&uvl, UV_RUN_DEFAULT);
  cudaev_loop_destroy(loop);
  uv_loop_close(&uvl);
  printf("cudaev_uv: promise %s, timer %s, adapter %s\n", promise_done ? "ok" : "FAILED",
         timer_done ? "ok" : "FAILED", closed ? "closed" : "NOT CLOSED");
  return promise_done && timer_done && closed ? 0 : 1;
}
