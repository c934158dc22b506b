/* cudaev_future_new_work_done for GPU futures: a promise that completes once the
 * GPU has really passed a future's marker, even if the future was
 * cancelled (cancelling completes the future at once; the GPU work goes
 * on, and its entry stays in the stream's FIFO until the marker passes).
 *
 * The request travels to the loop thread as a CUDAEV__MSG_RUN message
 * (the FIFO and the future's `passed` / `watched` bits are the loop's);
 * there it completes the promise at once when the marker has passed, or
 * puts the pair on its context's watch list, which finish() (gpu_poll.c)
 * consults when it pops a watched future. Destroy fails futures before it
 * lets the GPU finish: the watches it leaves complete only after that
 * (cudaev__gpu_done_fini). */
#include "gpu_done.h"
#include "gpu_marker.h"
#include "gpu_stream.h"

/* A cudaev_future_new_work_done waiting for f's marker: g completes when it passes. */
struct cudaev__watch {
  struct cudaev_future *f, *g;
};

struct done_msg {
  struct cudaev__run_msg rm;
  struct cudaev_future *f, *g;
};

/* The outcome for a marker already passed: f's, unless it was cancelled
 * (the GPU's own outcome is not kept then: success). */
static cudaError_t passed_outcome(const struct cudaev_future *f) {
  cudaError_t r = cudaev_future_result(f);
  return r == CUDAEV_ERROR_CANCELLED || r == CUDAEV_ERROR_LOOP_DESTROYED ? cudaSuccess : r;
}

static void settle(struct cudaev_future *f, struct cudaev_future *g, cudaError_t st) {
  cudaev__future_try_complete(g, st);
  cudaev_future_release(g); /* the watcher's */
  cudaev_future_release(f); /* the watch's */
}

static void done_run(struct cudaev_loop *loop, struct cudaev__msg *m) {
  struct done_msg *d = (struct done_msg *)m;
  struct cudaev_future *f = d->f, *g = d->g;
  cudaev__free(d, sizeof *d);
  /* The source is gone (destroy has synchronised the contexts), or the
   * marker has passed. */
  if (loop->gpu == NULL || f->passed) {
    settle(f, g, passed_outcome(f));
    return;
  }
  struct cudaev__gpu *s = gpu_of(f);
  if (!cudaev__gpu_grow((void **)&s->watch, &s->cap_watch, sizeof *s->watch, s->nwatch + 1)) {
    settle(f, g, cudaErrorMemoryAllocation);
    return;
  }
  s->watch[s->nwatch].f = f;
  s->watch[s->nwatch].g = g;
  s->nwatch++;
  f->watched = 1;
}

cudaError_t cudaev__gpu_done(struct cudaev_future *f, struct cudaev_future *g) {
  struct done_msg *d = cudaev__alloc(sizeof *d);
  if (d == NULL) return cudaErrorMemoryAllocation;
  atomic_init(&d->rm.msg.node.next, NULL);
  d->rm.msg.kind = CUDAEV__MSG_RUN;
  d->rm.run = done_run;
  d->f = cudaev_future_retain(f);
  d->g = g;
  if (cudaev__on_loop(f->loop))
    done_run(f->loop, &d->rm.msg);
  else
    cudaev__loop_send(f->loop, &d->rm.msg);
  return cudaSuccess;
}

void cudaev__gpu_done_fire(struct cudaev__gpu *s, struct cudaev_future *f, cudaError_t st) {
  f->watched = 0;
  for (uint32_t i = 0; i < s->nwatch; i++)
    if (s->watch[i].f == f) {
      struct cudaev_future *g = s->watch[i].g;
      s->watch[i] = s->watch[--s->nwatch];
      settle(f, g, st);
      return;
    }
}

void cudaev__gpu_done_fini(struct cudaev__gpu *s, cudaError_t st) {
  while (s->nwatch > 0) {
    struct cudaev__watch w = s->watch[--s->nwatch];
    w.f->watched = 0;
    settle(w.f, w.g, st);
  }
  cudaev__free(s->watch, s->cap_watch * sizeof *s->watch);
  s->watch = NULL;
  s->cap_watch = 0;
}
