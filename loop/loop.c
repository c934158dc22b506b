/* The loop object (cudaev_loop_*): one processing pass over the message
 * queue and the completion sources, the run modes' common entry points, and
 * the foreign run mode. The other two run modes are backend_ev.c and
 * backend_thread.c, behind the same const vtable; the wakeup and the queue's
 * sending side are waker.c. The sources are reached only through their
 * tables (struct cudaev__source_ops). */
#include "libev.h"
#include "loop_internal.h"

#include <sched.h>
#include <string.h>

/* Every kind of completion source, in the order a pass runs them. */
static const struct cudaev__source_ops *const sources[CUDAEV__NSOURCES] = {
    &cudaev__source_promise,
    &cudaev__source_timer,
    &cudaev__source_gpu,
};

/* ---- the sources, all together ---------------------------------------- */

/* Returns a bit per source that has something to leave. */
static unsigned sources_enter(struct cudaev_loop *loop) {
  unsigned entered = 0;
  for (uint32_t i = 0; i < loop->nrun; i++)
    if (loop->src[i]->enter != NULL && loop->src[i]->enter(loop)) entered |= 1u << i;
  return entered;
}

static void sources_leave(struct cudaev_loop *loop, unsigned entered) {
  for (uint32_t i = loop->nrun; i-- > 0;)
    if (loop->src[i]->leave != NULL) loop->src[i]->leave(loop, (entered >> i) & 1u);
}

/* Loop creation: every source that can start is run by this loop. */
static void sources_init(struct cudaev_loop *loop) {
  for (uint32_t i = 0; i < CUDAEV__NSOURCES; i++) {
    const struct cudaev__source_ops *s = sources[i];
    if (s->init != NULL && s->init(loop) != cudaSuccess) continue;
    loop->src[loop->nsrc++] = s;
    if (s->self_state != NULL)
      atomic_fetch_or_explicit(&cudaev__self_state_kinds, s->kinds, memory_order_relaxed);
    loop->nrun = loop->nsrc;
    for (uint32_t k = 0; k < CUDAEV__K_COUNT; k++)
      if (s->kinds & (1u << k)) loop->src_of[k] = s;
  }
}

/* After fini the passes run no source any more; they still count what the
 * sources hold (pending), and a future still queued for one is handed to its
 * track as before (src_of stays). */
static void sources_fini(struct cudaev_loop *loop) {
  for (uint32_t i = 0; i < loop->nrun; i++)
    if (loop->src[i]->fini != NULL) loop->src[i]->fini(loop);
  loop->nrun = 0;
}

void cudaev__loop_abandon(struct cudaev_loop *loop) {
  for (uint32_t i = 0; i < loop->nrun; i++)
    if (loop->src[i]->abandon != NULL) loop->src[i]->abandon(loop);
}

/* ---- one pass ------------------------------------------------------------- */

struct call_msg {
  struct cudaev__msg msg;
  cudaev_loop_fn fn;
  void *user;
};

static size_t publish_pending(struct cudaev_loop *loop) {
  size_t n = 0;
  for (uint32_t i = 0; i < loop->nsrc; i++)
    if (loop->src[i]->pending != NULL) n += loop->src[i]->pending(loop);
  atomic_store_explicit(&loop->npending_pub, n, memory_order_relaxed);
  return n;
}

bool cudaev__loop_process(struct cudaev_loop *loop) {
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  unsigned entered = sources_enter(loop);
  cudaev__stat_add(&loop->st.passes, 1);
  if (cudaev__waker_drain(loop->waker)) cudaev__stat_add(&loop->st.wakeups, 1);
  bool more = false;
  unsigned n = 0;
  struct cudaev__mpsc_node *node;
  while ((node = cudaev__mpsc_pop(&loop->q)) != NULL) {
    struct cudaev__msg *m = cudaev__msg_of(node);
    switch (m->kind) {
    case CUDAEV__MSG_FUTURE:
    case CUDAEV__MSG_THEN: cudaev__future_msg(loop, m); break;
    case CUDAEV__MSG_CALL: {
      struct call_msg *c = (struct call_msg *)m;
      c->fn(loop, c->user);
      cudaev__free(c, sizeof *c);
      break;
    }
    case CUDAEV__MSG_RUN: ((struct cudaev__run_msg *)m)->run(loop, m); break;
    default: break;
    }
    /* Bounded, so that GPU completions are not starved by a flood. */
    if (++n == 4096) break;
  }
  if (!cudaev__mpsc_empty(&loop->q)) more = true;
  for (uint32_t i = 0; i < loop->nrun; i++)
    if (loop->src[i]->poll != NULL) loop->src[i]->poll(loop);
  uint64_t now = 0;
  for (uint32_t i = 0; i < loop->nrun; i++)
    if (loop->src[i]->tick != NULL) {
      if (now == 0) now = cudaev__now_ns();
      loop->src[i]->tick(loop, now);
    }
  if (cudaev__run_deferred(loop)) more = true;
  publish_pending(loop);
  /* What this pass took in is in the published count now (struct
   * cudaev_loop, nqueued). */
  if (loop->ntaken != 0) {
    atomic_fetch_sub_explicit(&loop->nqueued, loop->ntaken, memory_order_release);
    loop->ntaken = 0;
  }
  sources_leave(loop, entered);
  cudaev__tls_loop = prev;
  return more;
}

uint64_t cudaev__loop_before_sleep(struct cudaev_loop *loop) {
  if (loop->def_head != NULL || !cudaev__mpsc_empty(&loop->q)) return 0;
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  unsigned entered = sources_enter(loop);
  uint64_t t = UINT64_MAX;
  for (uint32_t i = 0; i < loop->nrun && t != 0; i++)
    if (loop->src[i]->before_sleep != NULL) {
      uint64_t u = loop->src[i]->before_sleep(loop);
      if (u < t) t = u;
    }
  sources_leave(loop, entered);
  cudaev__tls_loop = prev;
  return t;
}

/* ---- backend: foreign loop ---------------------------------------------------- */

static bool foreign_start(struct cudaev_loop *loop) {
  /* Anything submitted before the first process call is seen then. */
  cudaev__loop_wake(loop);
  return false;
}
static void foreign_stop(struct cudaev_loop *loop) {}

const struct cudaev__backend cudaev__backend_foreign = {foreign_start, foreign_stop, NULL};

/* ---- public ---------------------------------------------------------------------- */

static cudaError_t loop_new(const struct cudaev__backend *be, struct ev_loop *evl,
                            cudaev_loop_t **out) {
  if (out != NULL) *out = NULL;
  if (out == NULL || (be == &cudaev__backend_ev && evl == NULL)) return cudaErrorInvalidValue;
  if (be == &cudaev__backend_ev && cudaev__libev_bind() != cudaSuccess)
    return CUDAEV_ERROR_NO_LIBEV;
  struct cudaev_loop *loop = cudaev__alloc(sizeof *loop);
  if (loop == NULL) return cudaErrorMemoryAllocation;
  memset(loop, 0, sizeof *loop);
  cudaError_t e = cudaev__waker_new(&loop->waker);
  if (e != cudaSuccess) {
    cudaev__free(loop, sizeof *loop);
    return e;
  }
  cudaev__mpsc_init(&loop->q);
  loop->be = be;
  loop->evl = evl;
  atomic_init(&loop->spin_max_us, 50);
  atomic_init(&loop->markers, CUDAEV_MARKERS_AUTO);
  atomic_init(&loop->npending_pub, 0);
  atomic_init(&loop->nqueued, 0);
  atomic_init(&loop->stopping, 0);
  sources_init(loop);
  if (be->start(loop)) {
    sources_fini(loop);
    cudaev__waker_release(loop->waker);
    cudaev__free(loop, sizeof *loop);
    return be == &cudaev__backend_ev ? cudaErrorMemoryAllocation : cudaErrorOperatingSystem;
  }
  *out = loop;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_loop_new_ev(struct ev_loop *evl, cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_ev, evl, out);
}
CUDAEV_EXPORT cudaError_t cudaev_loop_new_foreign(cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_foreign, NULL, out);
}
CUDAEV_EXPORT cudaError_t cudaev_loop_new_thread(cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_thread, NULL, out);
}

/* Passes until the queue is empty and every push begun on it is linked:
 * one pass takes at most 4096 messages, and a sender on another thread
 * between its push's two steps (a waiter completing a future) hides the
 * message queued just before its own, and every one after, until it links
 * it (the yield gives it its turn). */
static void drain_all(struct cudaev_loop *loop) {
  while (cudaev__loop_process(loop) || !cudaev__mpsc_empty(&loop->q)) sched_yield();
}

/* cudaev_loop_destroy's work, on the destroying thread (which becomes the
 * loop thread), outside any pass of the loop. */
static void loop_teardown(struct cudaev_loop *loop) {
  loop->be->stop(loop);
  /* From here the calling thread is the loop thread. Everything sent
   * before the destroy is taken in before the sources are finalized: a
   * submission still queued then would reach a source that is gone. */
  drain_all(loop);
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  /* Each source fails what it has pending (promises first). */
  sources_fini(loop);
  cudaev__tls_loop = prev;
  /* What the continuations run by fini sent. */
  drain_all(loop);
  /* The promise source's list, which late submissions above may have used. */
  cudaev__free(loop->pend, loop->cap_pend * sizeof *loop->pend);
  cudaev__waker_release(loop->waker);
}

CUDAEV_EXPORT void cudaev_loop_destroy(cudaev_loop_t *loop) {
  if (loop == NULL || loop->is_default) return;
  if (cudaev__on_loop(loop))
    cudaev__die("cudaev_loop_destroy inside a callback of the same loop; use cudaev_loop_close");
  loop_teardown(loop);
  cudaev__free(loop, sizeof *loop);
}

void cudaev__loop_close_now(struct cudaev_loop *loop) {
  loop_teardown(loop);
  if (loop->close_cb != NULL) loop->close_cb(loop, loop->close_user);
  cudaev__free(loop, sizeof *loop);
}

CUDAEV_EXPORT cudaError_t cudaev_loop_close(cudaev_loop_t *loop, cudaev_close_cb cb, void *user) {
  if (loop == NULL || loop->is_default) return cudaErrorInvalidValue;
  bool on = cudaev__on_loop(loop);
  if (on && loop->closing) return cudaErrorIllegalState;
  loop->close_cb = cb;
  loop->close_user = user;
  if (on) {
    /* Inside a callback: the run mode closes after the pass (deferred).
     * `closing` is the loop thread's alone. */
    loop->closing = true;
  } else {
    cudaev__loop_close_now(loop);
  }
  return cudaSuccess;
}

CUDAEV_EXPORT int cudaev_loop_fd(cudaev_loop_t *loop) {
  if (loop == NULL || loop->be != &cudaev__backend_foreign) return -1;
  return loop->waker->fd;
}

CUDAEV_EXPORT int cudaev_loop_prepare(cudaev_loop_t *loop) {
  if (loop == NULL) return -1;
  uint64_t t = cudaev__loop_before_sleep(loop);
  if (t == UINT64_MAX) return -1;
  uint64_t ms = (t + 999999) / 1000000;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Push-style deadline (curl's CURLMOPT_TIMERFUNCTION): after a pass, the
 * sources' before_sleep (spin, arm wakeups, nearest deadline) as the
 * application would call cudaev_loop_prepare before blocking; the callback
 * hears the answer t when the absolute deadline moved. */
static void tell_timer(struct cudaev_loop *loop, uint64_t t) {
  uint64_t at = t == UINT64_MAX ? UINT64_MAX : cudaev__now_ns() + t;
  /* The same deadline read a few us later is no news (10 us slack). */
  uint64_t told = loop->timer_told;
  if (t != 0 && (at == told || (at != UINT64_MAX && told != UINT64_MAX &&
                                (at > told ? at - told : told - at) < 10000)))
    return;
  loop->timer_told = at;
  loop->timer_cb(loop,
                 t == UINT64_MAX ? -1
                 : t > INT64_MAX ? INT64_MAX
                                 : (int64_t)t,
                 loop->timer_user);
}

/* Passes one cudaev_loop_process call may run back to back: after a pass
 * that ran no continuation, when the loop's check before sleeping says
 * "call again now" (its spin saw the GPU pass a marker). Without the next
 * pass here, the completion would cost the application's loop one more
 * turn through its poller (a timerfd read, a callback). A pass that ran
 * continuations returns: the application may have work to do because of
 * them (an awaiting task to resume, the next GPU work to enqueue), and
 * holding it for the next completion would starve the GPU. */
#define PROCESS_PASSES 3

CUDAEV_EXPORT void cudaev_loop_process(cudaev_loop_t *loop) {
  if (loop == NULL) return;
  /* One driver at a time: the pass's state has no lock. The address of a
   * thread-local tells threads apart; a nested call (from a callback on the
   * same thread) is the same driver. */
  void *me = &cudaev__tls_loop;
  void *was = atomic_exchange_explicit(&loop->driver, me, memory_order_acquire);
  if (was != NULL && was != me)
    cudaev__die(
        "two threads drive one loop at once (cudaev_loop_process); a foreign loop has "
        "one driving thread at a time");
  for (int pass = 1;; pass++) {
    uint64_t ran = atomic_load_explicit(&loop->st.completions, memory_order_relaxed);
    bool more = cudaev__loop_process(loop);
    ran = atomic_load_explicit(&loop->st.completions, memory_order_relaxed) - ran;
    if (was == NULL && loop->closing) {
      cudaev__loop_close_now(loop); /* the outermost call: the loop is gone after */
      return;
    }
    /* More work ready: make the fd readable so the driving loop returns. */
    if (more) cudaev__loop_wake(loop);
    if (loop->timer_cb == NULL) break;
    uint64_t t = cudaev__loop_before_sleep(loop);
    /* Another pass here only for "call again now" after a quiet pass, in
     * the outermost call (a nested one's caller comes back itself); a
     * flood (more) goes back to the application's loop. */
    if (t != 0 || was != NULL || more || ran != 0 || pass == PROCESS_PASSES) {
      tell_timer(loop, t);
      break;
    }
  }
  if (was == NULL) atomic_store_explicit(&loop->driver, NULL, memory_order_release);
}

CUDAEV_EXPORT int64_t cudaev_loop_prepare_ns(cudaev_loop_t *loop) {
  if (loop == NULL) return -1;
  uint64_t t = cudaev__loop_before_sleep(loop);
  return t > INT64_MAX ? -1 : (int64_t)t;
}

CUDAEV_EXPORT void cudaev_loop_set_timer_cb(cudaev_loop_t *loop,
                                            void (*cb)(cudaev_loop_t *, int64_t, void *),
                                            void *user) {
  if (loop == NULL) return;
  loop->timer_cb = cb;
  loop->timer_user = user;
  loop->timer_told = UINT64_MAX - 1; /* differs from any deadline: the next pass tells */
  if (cb != NULL) tell_timer(loop, cudaev__loop_before_sleep(loop));
}

CUDAEV_EXPORT void cudaev_loop_ref(cudaev_loop_t *loop) {
  if (loop == NULL) return;
  loop->user_refs++;
  if (loop->be->keep != NULL) loop->be->keep(loop);
}

CUDAEV_EXPORT void cudaev_loop_unref(cudaev_loop_t *loop) {
  if (loop == NULL || loop->user_refs == 0) return;
  loop->user_refs--;
  if (loop->be->keep != NULL) loop->be->keep(loop);
}

CUDAEV_EXPORT void cudaev_loop_set_spin(cudaev_loop_t *loop, unsigned max_us) {
  if (loop != NULL) atomic_store_explicit(&loop->spin_max_us, max_us, memory_order_relaxed);
}

CUDAEV_EXPORT cudaError_t cudaev_loop_set_markers(cudaev_loop_t *loop, cudaev_markers_t markers) {
  if (loop == NULL || (markers != CUDAEV_MARKERS_AUTO && markers != CUDAEV_MARKERS_EVENTS))
    return cudaErrorInvalidValue;
  atomic_store_explicit(&loop->markers, (uint32_t)markers, memory_order_relaxed);
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_loop_post(cudaev_loop_t *loop, cudaev_loop_fn fn, void *user) {
  if (loop == NULL || fn == NULL) return cudaErrorInvalidValue;
  struct call_msg *c = cudaev__alloc(sizeof *c);
  if (c == NULL) return cudaErrorMemoryAllocation;
  c->msg.kind = CUDAEV__MSG_CALL;
  c->fn = fn;
  c->user = user;
  cudaev__loop_send(loop, &c->msg);
  return cudaSuccess;
}

/* The sources' count plus the futures still on their way to a source
 * (struct cudaev_loop, nqueued, says why the loads come in this order). */
CUDAEV_EXPORT size_t cudaev_loop_pending(cudaev_loop_t *loop) {
  if (loop == NULL) return 0;
  if (cudaev__on_loop(loop)) {
    size_t n = publish_pending(loop);
    return n + atomic_load_explicit(&loop->nqueued, memory_order_relaxed) - loop->ntaken;
  }
  size_t queued = atomic_load_explicit(&loop->nqueued, memory_order_acquire);
  return atomic_load_explicit(&loop->npending_pub, memory_order_relaxed) + queued;
}

CUDAEV_EXPORT cudaError_t cudaev_loop_stats(cudaev_loop_t *loop, struct cudaev_loop_stats *out,
                                            size_t size) {
  if (loop == NULL || out == NULL || size < sizeof(size_t)) return cudaErrorInvalidValue;
  struct cudaev_loop_stats s;
  memset(&s, 0, sizeof s);
  s.size = size < sizeof s ? size : sizeof s;
  s.passes = atomic_load_explicit(&loop->st.passes, memory_order_relaxed);
  s.wakeups = atomic_load_explicit(&loop->st.wakeups, memory_order_relaxed);
  s.completions = atomic_load_explicit(&loop->st.completions, memory_order_relaxed) +
                  atomic_load_explicit(&loop->done_at_creation, memory_order_relaxed);
  s.timers_fired = atomic_load_explicit(&loop->st.timers_fired, memory_order_relaxed);
  s.gpu_completions = atomic_load_explicit(&loop->st.gpu_completions, memory_order_relaxed);
  s.gpu_word_markers = atomic_load_explicit(&loop->st.gpu_words, memory_order_relaxed);
  s.gpu_event_markers = atomic_load_explicit(&loop->st.gpu_events, memory_order_relaxed);
  s.gpu_failed = atomic_load_explicit(&loop->st.gpu_failed, memory_order_relaxed);
  s.gpu_wakeups_armed = atomic_load_explicit(&loop->st.gpu_armed, memory_order_relaxed);
  s.spin_ns = atomic_load_explicit(&loop->st.spin_ns, memory_order_relaxed);
  s.watchdog_checks = atomic_load_explicit(&loop->st.watchdog_checks, memory_order_relaxed);
  s.watchdog_errors = atomic_load_explicit(&loop->st.watchdog_errors, memory_order_relaxed);
  for (int i = 0; i < CUDAEV_LOOP_LATENCY_BUCKETS; i++)
    s.gpu_latency_log2_ns[i] = atomic_load_explicit(&loop->st.gpu_latency[i], memory_order_relaxed);
  memcpy(out, &s, s.size);
  return cudaSuccess;
}
