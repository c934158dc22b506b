/* requests.h: the work every examples/loop_*.c does, so that each of those
 * files holds only what differs between them: how one event loop drives a
 * cudaev loop. Header-only; copy it along with the example you start from.
 *
 * The work is a tiny request pipeline. NREQ requests each give one future:
 *  - with a GPU, a chain on the request's own stream: copy a pattern to the
 *    device, memset the second half of the device buffer, copy it all back.
 *    The request's future is the last copy's (a stream runs in order, so it
 *    completes after the other two); its continuation checks the bytes.
 *  - without one, a promise that a worker thread completes (the shape of a
 *    thread pool handing results back to the loop).
 * One more request, the slow one, is a promise nobody completes in time: the
 * host loop's timer calls requests_deadline(), which cancels it; then the
 * worker tries to complete it late and must be refused. The worker also
 * posts one call to the loop (cudaev_loop_post, the door into the loop from
 * other threads). cudaev_future_new_all over all NREQ + 1 futures says when the
 * work is over; once it and the posted call have run, `stop` is called so
 * that the example can stop its loop.
 *
 * requests_finish() then checks that every continuation ran exactly once
 * with the outcome expected (cudaSuccess; CUDAEV_ERROR_CANCELLED for the
 * slow request, and so for when_all too: its outcome is the first
 * non-success), that the late completion got cudaErrorIllegalState, that the
 * posted call ran once and that the loop has nothing pending, and prints one
 * line that does not depend on timing.
 *
 * Threads: continuations, the posted call and `stop` run on the loop thread:
 * the thread driving the loop (ev and foreign modes) or the library's own
 * thread (thread mode). The counters are atomic because in thread mode the
 * main thread reads them.
 * Ownership: struct requests belongs to the example; it holds one reference
 * to every future it made and drops them in requests_finish(). GPU buffers
 * and streams are made and freed here too; the example owns its loops.
 */
#ifndef REQUESTS_H
#define REQUESTS_H

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cudaev.h>

#define NREQ      8
#define REQ_BYTES (64 * 1024)

struct requests;
/* Called once on the loop thread when all the work is over. */
typedef void (*requests_stop_fn)(struct requests *r);

struct request_tag {
  struct requests *r;
  int i;
};

struct requests {
  const char *prog;
  cudaev_loop_t *loop;
  requests_stop_fn stop;
  void *user;                   /* the example's, for its stop hook */
  int gpu;                      /* the requests are GPU work */
  cudaev_future_t *f[NREQ + 1]; /* f[NREQ] is the slow request */
  cudaev_future_t *all;
  struct request_tag tag[NREQ + 1];
  atomic_int calls[NREQ + 1];  /* continuation runs, per request */
  atomic_int status[NREQ + 1]; /* each one's outcome */
  atomic_int data_ok[NREQ];    /* GPU: the bytes came back right */
  atomic_int all_calls, all_status, posts, stages, deadlines, cancelled;
  atomic_int late; /* the worker's late cudaev_promise_set */
  pthread_t worker;
  int worker_started;
  sem_t late_go;
  /* GPU only */
  cudaStream_t stream[NREQ];
  unsigned char *in[NREQ], *out[NREQ];
  void *dev[NREQ];
};

/* Parses the arguments and looks for a GPU. Returns -1 to go on, else the
 * exit code: 77 (skipped) when --gpu asks for the GPU path and there is no
 * GPU, 2 for an unknown argument. Prints one line saying why the GPU path
 * does not run ("SKIP: why" when it skips). */
static int requests_init(struct requests *r, const char *prog, int argc, char **argv) {
  int need_gpu = 0, n = 0;
  memset(r, 0, sizeof *r);
  r->prog = prog;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--gpu") == 0) {
      need_gpu = 1;
    } else {
      fprintf(stderr, "usage: %s [--gpu]  (--gpu: skip, exit 77, without a GPU)\n", prog);
      return 2;
    }
  }
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n == 0) e = cudaErrorNoDevice;
  if (e != cudaSuccess && need_gpu) {
    /* The test harnesses' form (tests/gpu/run.sh groups skips by it). */
    printf("SKIP: no GPU (%s: %s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    return 77;
  }
  if (e != cudaSuccess)
    printf("%s: no GPU (%s: %s), so the requests are promises a worker thread completes\n", prog,
           cudaGetErrorName(e), cudaGetErrorString(e));
  r->gpu = e == cudaSuccess;
  return -1;
}

/* Both stages of the end (when_all's continuation and the worker's posted
 * call) run on the loop thread, in either order; the second one stops. */
static void requests_stage_done(struct requests *r) {
  if (atomic_fetch_add(&r->stages, 1) == 1) r->stop(r);
}

static void requests_on_one(cudaev_future_t *f, cudaError_t status, void *user) {
  struct request_tag *t = user;
  struct requests *r = t->r;
  (void)f; /* borrowed; requests_finish drops our reference */
  if (r->gpu && t->i < NREQ && status == cudaSuccess) {
    /* The stream has passed the last copy: the pinned buffer is ours. */
    int good = 1;
    for (int j = 0; good && j < REQ_BYTES; j++) {
      unsigned char want = j < REQ_BYTES / 2 ? r->in[t->i][j] : (unsigned char)(0x5a + t->i);
      good = r->out[t->i][j] == want;
    }
    atomic_store(&r->data_ok[t->i], good);
  }
  atomic_store(&r->status[t->i], status);
  atomic_fetch_add(&r->calls[t->i], 1);
}

static void requests_on_all(cudaev_future_t *f, cudaError_t status, void *user) {
  struct requests *r = user;
  (void)f;
  atomic_store(&r->all_status, status);
  atomic_fetch_add(&r->all_calls, 1);
  requests_stage_done(r);
}

static void requests_on_post(cudaev_loop_t *loop, void *user) {
  struct requests *r = user;
  (void)loop;
  atomic_fetch_add(&r->posts, 1);
  requests_stage_done(r);
}

/* The worker: completes the promise requests (CPU path), posts one call to
 * the loop, then, once the deadline has passed, tries to complete the slow
 * request. It only ever touches the loop through thread-safe calls. */
static void *requests_worker(void *arg) {
  struct requests *r = arg;
  for (int i = 0; !r->gpu && i < NREQ; i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL); /* a result every millisecond: several wakeups */
    if (cudaev_promise_set(r->f[i], cudaSuccess) != cudaSuccess)
      atomic_store(&r->status[i], cudaErrorIllegalState);
  }
  if (cudaev_loop_post(r->loop, requests_on_post, r) != cudaSuccess) return NULL;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10; /* a loop that never fires its deadline fails, not hangs */
  while (sem_timedwait(&r->late_go, &until) != 0 && errno == EINTR) {
  }
  atomic_store(&r->late, cudaev_promise_set(r->f[NREQ], cudaSuccess));
  return NULL;
}

static cudaError_t requests_submit_gpu(struct requests *r, int i) {
  cudaev_future_t *h2d = NULL, *set = NULL;
  cudaError_t e = cudaStreamCreateWithFlags(&r->stream[i], cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMallocHost((void **)&r->in[i], REQ_BYTES);
  if (e == cudaSuccess) e = cudaMallocHost((void **)&r->out[i], REQ_BYTES);
  if (e == cudaSuccess) e = cudaMalloc(&r->dev[i], REQ_BYTES);
  if (e != cudaSuccess) return e;
  for (int j = 0; j < REQ_BYTES; j++) r->in[i][j] = (unsigned char)(i * 31 + j);
  memset(r->out[i], 0, REQ_BYTES);
  e = cudaev_memcpy_async(r->loop, r->dev[i], r->in[i], REQ_BYTES, cudaMemcpyHostToDevice,
                          r->stream[i], &h2d);
  if (e == cudaSuccess)
    e = cudaev_memset_async(r->loop, (char *)r->dev[i] + REQ_BYTES / 2, 0x5a + i, REQ_BYTES / 2,
                            r->stream[i], &set);
  if (e == cudaSuccess)
    e = cudaev_memcpy_async(r->loop, r->out[i], r->dev[i], REQ_BYTES, cudaMemcpyDeviceToHost,
                            r->stream[i], &r->f[i]);
  /* Only the last future is watched: the stream orders the chain. Dropping
   * the others does not cancel them. */
  cudaev_future_release(h2d);
  cudaev_future_release(set);
  return e;
}

/* Submits the work on `loop` and starts the worker. Returns 0, or 1 after
 * printing what failed. Thread: the example's main thread. */
static int requests_start(struct requests *r, cudaev_loop_t *loop, requests_stop_fn stop,
                          void *user) {
  r->loop = loop;
  r->stop = stop;
  r->user = user;
  atomic_store(&r->late, cudaSuccess);
  if (sem_init(&r->late_go, 0, 0) != 0) return 1;
  for (int i = 0; i <= NREQ; i++) {
    cudaError_t e =
        r->gpu && i < NREQ ? requests_submit_gpu(r, i) : cudaev_promise_new(loop, &r->f[i]);
    r->tag[i] = (struct request_tag){r, i};
    atomic_store(&r->status[i], cudaErrorNotReady);
    if (e == cudaSuccess) e = cudaev_future_then(r->f[i], requests_on_one, &r->tag[i]);
    if (e != cudaSuccess) {
      printf("%s: request %d: %s\n", r->prog, i, cudaev_error_name(e));
      return 1;
    }
  }
  /* Added after the requests' own continuations, so when_all completes
   * after all of those ran (continuations run in the order added). */
  if (cudaev_future_new_all(loop, r->f, NREQ + 1, &r->all) != cudaSuccess ||
      cudaev_future_then(r->all, requests_on_all, r) != cudaSuccess ||
      pthread_create(&r->worker, NULL, requests_worker, r) != 0) {
    printf("%s: could not start\n", r->prog);
    return 1;
  }
  r->worker_started = 1;
  return 0;
}

/* The host loop's timer: the slow request has waited long enough. Cancels
 * it (its continuation then runs on the loop thread with
 * CUDAEV_ERROR_CANCELLED) and lets the worker try to complete it late.
 * Thread: any. */
static void requests_deadline(struct requests *r) {
  atomic_fetch_add(&r->deadlines, 1);
  atomic_fetch_add(&r->cancelled, cudaev_future_cancel(r->f[NREQ]));
  sem_post(&r->late_go);
}

#define REQUESTS_CHECK(r, cond, failures)                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "%s: check failed: %s\n", (r)->prog, #cond); \
      (failures)++;                                                \
    }                                                              \
  } while (0)

/* After the example stopped its loop (and before it destroys the cudaev
 * loop): joins the worker, checks, prints the summary, frees everything of
 * the requests'. Returns the exit code: 0 if every check passed, else 1.
 * Thread: the example's main thread, not the loop thread. */
static int requests_finish(struct requests *r) {
  int failures = 0;
  if (r->worker_started) pthread_join(r->worker, NULL);
  /* Read off the loop thread (thread mode), the count is the one the loop
   * published at the end of its last pass; give that pass time to end. */
  size_t pending = cudaev_loop_pending(r->loop);
  for (int ms = 0; pending != 0 && ms < 2000; ms++) {
    struct timespec one = {0, 1000000};
    nanosleep(&one, NULL);
    pending = cudaev_loop_pending(r->loop);
  }
  for (int i = 0; i <= NREQ; i++) {
    cudaError_t want = i < NREQ ? cudaSuccess : CUDAEV_ERROR_CANCELLED;
    int calls = atomic_load(&r->calls[i]), status = atomic_load(&r->status[i]);
    if (calls != 1 || status != (int)want || cudaev_future_result(r->f[i]) != want) {
      fprintf(stderr, "%s: request %d: %d continuation runs, outcome %s (want 1, %s)\n", r->prog, i,
              calls, cudaev_error_name((cudaError_t)status), cudaev_error_name(want));
      failures++;
    }
    if (r->gpu && i < NREQ && !atomic_load(&r->data_ok[i])) {
      fprintf(stderr, "%s: request %d: wrong bytes came back\n", r->prog, i);
      failures++;
    }
  }
  REQUESTS_CHECK(r, atomic_load(&r->all_calls) == 1, failures);
  REQUESTS_CHECK(r, atomic_load(&r->all_status) == (int)CUDAEV_ERROR_CANCELLED, failures);
  REQUESTS_CHECK(r, atomic_load(&r->posts) == 1, failures);
  REQUESTS_CHECK(r, atomic_load(&r->deadlines) == 1, failures);
  REQUESTS_CHECK(r, atomic_load(&r->cancelled) == 1, failures);
  REQUESTS_CHECK(r, atomic_load(&r->late) == (int)cudaErrorIllegalState, failures);
  REQUESTS_CHECK(r, pending == 0, failures);
  for (int i = 0; i <= NREQ; i++) cudaev_future_release(r->f[i]);
  cudaev_future_release(r->all);
  for (int i = 0; r->gpu && i < NREQ; i++) {
    if (r->stream[i] != NULL) cudaStreamDestroy(r->stream[i]);
    cudaFreeHost(r->in[i]);
    cudaFreeHost(r->out[i]);
    cudaFree(r->dev[i]);
  }
  sem_destroy(&r->late_go);
  printf(
      "%s: %d requests done (%s); the slow one cancelled at the deadline, its late completion "
      "refused; when_all: %s; %zu pending; %s\n",
      r->prog, NREQ, r->gpu ? "GPU copies and memsets" : "promises",
      cudaev_error_name((cudaError_t)atomic_load(&r->all_status)), pending,
      failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

#endif
