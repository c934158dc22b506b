/* How the loop sleeps while GPU work is pending (the source's
 * before_sleep): an adaptive spin while completions are near, then one
 * armed wakeup per busy stream (a host function that writes the loop's
 * eventfd, struct cudaev__arm), never one per operation. */
#include "gpu_wake.h"
#include "gpu_stream.h"

#define FLOW_NS          20000u   /* spin on while the last completion is this recent */
#define GAP_MIN_NS       10000u   /* shortest sleep while streams are deep */
#define DEEP_POLL_NS     1000000u /* sleep cap with deep streams, no gap known */
#define WAKE_LATE_MAX_NS 200000u  /* most a hybrid wake is advanced for lateness */
#define FOLLOW_MAX_NS    250000u  /* longest sleep between looks at overdue work */

/* The argument of an armed wakeup (wake_arm_fn): refcounted, so that it
 * outlives the stream's record and the loop when the driver runs the host
 * function late. One reference is the record's, one each armed wakeup's. */
struct cudaev__arm {
  _Atomic uint32_t refs;
  _Atomic uint32_t armed; /* 1 while a wakeup is queued on the stream */
  struct cudaev__waker *w;
};

void CUDA_CB cudaev__gpu_wake_fn(void *arg) {
  struct cudaev__waker *w = arg;
  cudaev__waker_wake(w);
  cudaev__waker_release(w);
}

struct cudaev__arm *cudaev__arm_new(struct cudaev__waker *w) {
  struct cudaev__arm *a = cudaev__alloc(sizeof *a);
  if (a == NULL) return NULL;
  atomic_init(&a->refs, 1);
  atomic_init(&a->armed, 0);
  a->w = w;
  atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
  return a;
}

bool cudaev__arm_armed(struct cudaev__arm *a) {
  return atomic_load_explicit(&a->armed, memory_order_seq_cst) != 0;
}

void cudaev__arm_release(struct cudaev__arm *a) {
  if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1) return;
  cudaev__waker_release(a->w);
  cudaev__free(a, sizeof *a);
}

/* An armed wakeup: clear `armed` before waking, so that the pass the wake
 * causes may arm the next one. */
static void CUDA_CB wake_arm_fn(void *arg) {
  struct cudaev__arm *a = arg;
  atomic_store_explicit(&a->armed, 0, memory_order_seq_cst);
  cudaev__waker_wake(a->w);
  cudaev__arm_release(a);
}

static bool any_head_done(struct cudaev__gpu *g) {
  for (uint32_t i = 0; i < g->nbusy; i++)
    if (head_state(g, head_of(g->busy[i])) != cudaErrorNotReady) return true;
  return false;
}

/* The first pass at or after a hybrid wake the loop asked for tells how
 * late such a wake comes (timer slack; in a VM, a vCPU idle for long is
 * descheduled and comes back late): the next ask is that much earlier, up
 * to a bound that keeps an early wake's spin within reach of `due`. */
static void note_hybrid_wake(struct cudaev__gpu *g, uint64_t now) {
  uint64_t late = now - g->hybrid_at;
  if (late > WAKE_LATE_MAX_NS) late = WAKE_LATE_MAX_NS;
  g->wake_late_ns = g->wake_late_ns - g->wake_late_ns / 8 + late / 8;
  g->hybrid_at = 0;
}

static uint64_t oldest_submit(struct cudaev__gpu *g) {
  uint64_t oldest = UINT64_MAX;
  for (uint32_t i = 0; i < g->nbusy; i++)
    if (head_of(g->busy[i])->t_submit < oldest) oldest = head_of(g->busy[i])->t_submit;
  return oldest;
}

uint64_t cudaev__gpu_before_sleep(struct cudaev_loop *loop, struct cudaev__gpu *g) {
  uint64_t now = cudaev__now_ns();
  /* This pass is the one a hybrid wake asked for (or the first after it). */
  bool woke = g->hybrid_at != 0 && now >= g->hybrid_at;
  if (woke) note_hybrid_wake(g, now);
  if (g->nbusy == 0) {
    g->hybrid_at = 0; /* the work came before the ask: nothing to learn */
    return UINT64_MAX;
  }
  /* Asked inside a pass (a callback driving the loop, or asking for its
   * timeout): the outer pass goes on and the loop asks again after it,
   * when the busy list no longer lists the streams drained meanwhile. */
  if (g->passing > 0) return 0;
  /* Adaptive spin (CUDA.jl): only while the oldest work is expected to
   * finish within the window, judged from recent completion times. */
  uint64_t max = (uint64_t)atomic_load_explicit(&loop->spin_max_us, memory_order_relaxed) * 1000;
  bool polls = max > 0 && !g->use_events; /* spins, and wakes to spin (hybrid) */
  uint64_t due = 0;                       /* when the oldest work is expected (polls only) */
  if (polls) {
    uint64_t oldest = oldest_submit(g);
    due = oldest + g->ewma_ns;
    uint64_t end = oldest + 2 * g->ewma_ns + 5000;
    /* While completions flow (a pass completed something lately), the
     * next is likely near too: keep polling rather than sleep until a
     * stream's armed wakeup, which sits behind all of its queued work. */
    bool flowing = g->last_done + FLOW_NS > now;
    if (end < g->last_done + FLOW_NS) end = g->last_done + FLOW_NS;
    uint64_t limit = now + max;
    if (woke) {
      /* A hybrid wake spins until half a window past `due`, however early
       * it came (its ask allows for the usual lateness). */
      if (g->hybrid_due + max / 2 > limit) limit = g->hybrid_due + max / 2;
    } else if (!flowing && due > now + 2 * max) {
      /* Expected only well after the window, with nothing flowing: a spin
       * would give up before the GPU got there, and the wakeup armed after
       * it would come no sooner; it only holds the thread (a server's loop
       * has other work). Sleep at once. "Well after": twice the window,
       * because latencies seen through wakeups include the wakeup's own
       * tens of microseconds, and work just past the window would otherwise
       * never be polled for again. */
      limit = now;
    } else if (!flowing && due + max / 2 < now) {
      /* Overdue, past the window a hybrid wake spun through: look, and
       * look again after a while (below), rather than spin. */
      limit = now;
    }
    if (end > limit) end = limit;
    uint64_t spun_from = now;
    while (now < end) {
      /* New submissions are not tracked yet: process them first. */
      if (any_head_done(g) || !cudaev__mpsc_empty(&loop->q)) break;
      for (int k = 0; k < 16; k++) __builtin_ia32_pause();
      now = cudaev__now_ns();
    }
    if (now > spun_from) cudaev__stat_add(&loop->st.spin_ns, now - spun_from);
    if (now < end) return 0; /* left early: something to process */
  }
  if (any_head_done(g)) return 0;
  /* Arm one host function per busy stream with work submitted since its
   * last one (UCX): it writes the eventfd when the stream gets there. */
  bool deep = false;
  for (uint32_t i = 0; i < g->nbusy; i++) {
    struct cudaev__track *t = g->busy[i];
    if (t->rlen > 1) deep = true;
    /* Nothing new; or a wakeup still queued (it fires when the stream has
     * passed it, and the pass it causes arms the next); or the loop must
     * not enqueue there (may_enqueue: a loop-thread host function's own
     * wakeup comes first; a stream hundreds deep is polled, below). */
    if (t->nsub <= t->armed_upto || !may_enqueue(g, t) ||
        atomic_load_explicit(&t->arm->armed, memory_order_seq_cst))
      continue;
    atomic_store_explicit(&t->arm->armed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->arm->refs, 1, memory_order_relaxed);
    if (cudaev__drv.cuLaunchHostFunc(t->stream, wake_arm_fn, t->arm) == CUDA_SUCCESS) {
      t->armed_upto = t->nsub;
      cudaev__stat_add(&loop->st.gpu_armed, 1);
    } else {
      atomic_store_explicit(&t->arm->armed, 0, memory_order_relaxed);
      cudaev__arm_release(t->arm); /* the watchdog still polls */
    }
  }
  /* Something may have finished while arming. */
  if (any_head_done(g)) return 0;
  now = cudaev__now_ns();
  uint64_t t = g->next_watchdog > now ? g->next_watchdog - now : 0;
  /* An armed wakeup fires when its stream has passed all of its queued
   * work: with more than one entry queued, the ones before it would wait
   * for that (and a stream too deep to arm has none). So while streams are
   * deep, sleep no longer than a quarter of the usual time between
   * completions (at least GAP_MIN_NS), or DEEP_POLL_NS before any was seen. */
  if (deep) {
    uint64_t cap = g->gap_ns == 0               ? DEEP_POLL_NS
                   : g->gap_ns / 4 > GAP_MIN_NS ? g->gap_ns / 4
                                                : GAP_MIN_NS;
    if (cap < t) t = cap;
  }
  /* Hybrid polling (Linux's, for NVMe): the oldest work is expected at
   * `due` (its usual time); wake half a window before it and spin into it,
   * rather than learn of it only through the armed wakeup, whose host
   * function arrives tens of microseconds late on bare metal and over a
   * hundred in a VM (up to a millisecond after a long sleep). */
  g->hybrid_at = 0; /* an ask not renewed here is not waited for */
  if (polls) {
    uint64_t lead = max / 2 + g->wake_late_ns;
    if (due > now + lead) {
      if (due - lead - now < t) {
        t = due - lead - now;
        g->hybrid_at = due - lead;
        g->hybrid_due = due;
      }
    } else if (now < due + g->ewma_ns) {
      /* Due, and the spin did not see it (the GPU took longer this time):
       * look again after as long as the work has been overdue (at least
       * half a window, at most FOLLOW_MAX_NS or an eighth of the usual
       * time for long work), so that the looks come at doubling intervals,
       * rather than wait for the armed wakeup. A look is a pass with no
       * spin; short sleeps also keep a VM's vCPU from being descheduled.
       * Only while overdue by less than the usual time: work that runs
       * that much longer is not what the estimate is of, and the armed
       * wakeup serves it without a look every few hundred microseconds. */
      uint64_t most = g->ewma_ns / 8 > FOLLOW_MAX_NS ? g->ewma_ns / 8 : FOLLOW_MAX_NS;
      uint64_t iv = now > due + max / 2 ? now - due : max / 2;
      if (iv > most) iv = most;
      if (iv < t) t = iv;
    }
  }
  return t;
}
