/* One pass of the GPU source over its busy streams (cudaev__gpu_poll), and
 * what it shares with destroy and with waiters: finishing a future whose
 * marker the GPU passed, completing whole runs of events from the word
 * behind them, fetching the next streams' records and futures ahead, the
 * sticky-error watchdog. The per-completion loop stays in this file. */
#include "gpu_poll.h"
#include "gpu_done.h"
#include "gpu_marker.h"
#include "gpu_stream.h"
#include "hostfn.h"

#include <string.h>

#define WINDOW     256u      /* FIFO entries find_done looks at in one step */
#define GAP_MAX_NS 10000000u /* gaps between completions count up to this */

/* Words and events to give back, in batches (one lock per batch). */
struct recycle {
  uint32_t ndone; /* counted futures finished, for their stream's backlog */
  /* cudaev_loop_stats' GPU counters, added up per batch too */
  uint32_t ncomp, ncomp_ev, nfail;
  uint32_t w[64];
  uint32_t n;
  CUevent ev[64];
  uint32_t nev;
};

static void recycle_word(struct cudaev__gpu *g, struct recycle *rc, uint32_t w) {
  if (rc->n == 64) {
    cudaev__gpu_words_put(g, rc->w, rc->n);
    rc->n = 0;
  }
  rc->w[rc->n++] = w;
}

static void recycle_event(struct cudaev__gpu *g, struct recycle *rc, CUevent e) {
  if (rc->nev == 64) {
    cudaev__gpu_events_put(g, rc->ev, rc->nev);
    rc->nev = 0;
  }
  rc->ev[rc->nev++] = e;
}

static void recycle_flush(struct cudaev_loop *loop, struct cudaev__gpu *g, struct recycle *rc) {
  cudaev__gpu_words_put(g, rc->w, rc->n);
  cudaev__gpu_events_put(g, rc->ev, rc->nev);
  rc->n = rc->nev = 0;
  if (rc->ncomp != 0) {
    cudaev__stat_add(&loop->st.gpu_completions, rc->ncomp);
    cudaev__stat_add(&loop->st.gpu_words, rc->ncomp - rc->ncomp_ev);
    cudaev__stat_add(&loop->st.gpu_events, rc->ncomp_ev);
  }
  if (rc->nfail != 0) cudaev__stat_add(&loop->st.gpu_failed, rc->nfail);
  rc->ncomp = rc->ncomp_ev = rc->nfail = 0;
}

/* cudaev_loop_stats' GPU counters for an application's future popped
 * from its FIFO: the counts go with the batch (recycle_flush), the
 * latency into its bucket (loop thread: plain load and store). */
static inline void count(struct cudaev_loop *loop, struct recycle *rc,
                         const struct cudaev_future *f, cudaError_t fail, uint64_t now) {
  if (fail != cudaSuccess) {
    rc->nfail++;
    return;
  }
  rc->ncomp++;
  rc->ncomp_ev += f->use_event;
  uint64_t ns = now > f->t_submit ? now - f->t_submit : 0;
  unsigned b = 63u - (unsigned)__builtin_clzll(ns | 1u);
  if (b >= CUDAEV_LOOP_LATENCY_BUCKETS) b = CUDAEV_LOOP_LATENCY_BUCKETS - 1;
  cudaev__stat_add(&loop->st.gpu_latency[b], 1);
}

/* A popped entry whose marker the GPU has passed (or, with `fail`, whose
 * context died / loop is going away). */
static void finish(struct cudaev__gpu *g, struct cudaev_future *f, struct recycle *rc,
                   cudaError_t fail, uint64_t now) {
  struct cudaev__track *t = f->track;
  if (f->flush)
    t->flushing = 0;
  else
    g->ntracked--;
  if (f->solo) t->nsolo--;
  if (f->kind == CUDAEV__K_HOSTFN) {
    f->track->ngates--;
    struct cudaev_future *uf = f->user;
    if (uf != NULL) {
      cudaError_t res = fail;
      if (fail == cudaSuccess) res = f->u.h.fn(f->u.h.user);
      uf->aux.hostfn_result = res;
    }
    /* Open the gate: the stream goes on. */
    if (f->use_event) {
      cudaev__hgate_open(f->aux.hg);
      cudaev__hgate_release(f->aux.hg);
    } else {
      __atomic_store_n(word_ptr(g, f->gate), f->tag, __ATOMIC_RELEASE);
      recycle_word(g, rc, f->x.word);
    }
    cudaev_future_release(uf);
    cudaev_future_release(f);
    return;
  }
  if (f->counted) {
    f->counted = 0;
    rc->ndone++;
  }
  cudaError_t st = fail != cudaSuccess ? fail : f->has_gate ? f->aux.hostfn_result : cudaSuccess;
  if (cudaev__future_try_complete(f, st) && fail == cudaSuccess && now > f->t_submit && !f->flush)
    g->ewma_ns = g->ewma_ns - g->ewma_ns / 8 + (now - f->t_submit) / 8;
  if (!f->flush) count(f->loop, rc, f, fail, now);
  /* A waiter may be reading f's word or querying its event: not back to
   * the pool (nor, at destroy, freed) under its feet. */
  cudaev__future_unread(f);
  if (f->use_event)
    recycle_event(g, rc, f->u.ev);
  else
    recycle_word(g, rc, f->x.word);
  if (f->has_gate && !f->use_event) recycle_word(g, rc, f->gate);
  /* After its continuations (one may have asked for done). Destroy: the
   * GPU may still run it; its watch completes after the context's
   * synchronisation (gpu_fini). */
  f->passed = fail != CUDAEV_ERROR_LOOP_DESTROYED;
  if (f->watched && f->passed) cudaev__gpu_done_fire(g, f, st);
  cudaev_future_release(f); /* the FIFO's reference */
}

cudaError_t cudaev__gpu_self_state(struct cudaev_future *f) {
  /* Only a plain GPU future: a host function's outcome is fn's. Each
   * byte is loaded on its own: the compiler may otherwise read kind and
   * has_gate as one word that spans the bit-field byte the loop thread
   * writes meanwhile (finish), a race to a sanitizer. */
  if (__atomic_load_n(&f->kind, __ATOMIC_RELAXED) != CUDAEV__K_GPU ||
      __atomic_load_n(&f->has_gate, __ATOMIC_RELAXED))
    return cudaErrorNotReady;
  struct cudaev__gpu *g = gpu_of(f);
  if (!__atomic_load_n(&f->use_event, __ATOMIC_RELAXED)) return head_state(g, f);
  /* The loop may recycle the event once f is done; the caller re-checks
   * f's state first, and a recycled event only says "not ready" or
   * completes a future already claimed. */
  bool pushed = cudaev__ctx_in(g->ctx);
  cudaError_t st = head_state(g, f);
  cudaev__ctx_out(pushed);
  return st;
}

/* With many futures pending they are cold in the cache (100k pending:
 * ~20 MB). While the front entry is finished, the one PREFETCH_AHEAD
 * behind it is fetched, and the continuation and word of the one half as
 * far (fetched itself a few steps earlier). */
#define PREFETCH_AHEAD 8u
/* Futures pending (128 bytes each) past which they no longer fit in L2. */
#define COLD_PENDING   16384u
/* A future is 128 bytes, 16-aligned: its lines are those of its first,
 * middle and last bytes. `locality` as __builtin_prefetch's (a constant):
 * 3 into L1, 2 into L2 only (for those needed a stream later). */
#define PREFETCH_FUTURE(f, locality)                                        \
  do {                                                                      \
    const char *p_ = (const char *)(f);                                     \
    __builtin_prefetch(p_, 0, locality);                                    \
    __builtin_prefetch(p_ + 64, 0, locality);                               \
    __builtin_prefetch(p_ + sizeof(struct cudaev_future) - 1, 0, locality); \
  } while (0)
static inline void prefetch_future(const struct cudaev_future *f) { PREFETCH_FUTURE(f, 3); }
static inline void prefetch_ahead(struct cudaev__gpu *g, const struct cudaev__track *t) {
  if (t->rlen > PREFETCH_AHEAD) {
    prefetch_future(ent(t, PREFETCH_AHEAD));
  }
  if (t->rlen > PREFETCH_AHEAD / 2) {
    struct cudaev_future *n = ent(t, PREFETCH_AHEAD / 2);
    __builtin_prefetch(n->conts);
    if (!n->use_event && n->kind == CUDAEV__K_GPU) __builtin_prefetch(word_ptr(g, n->x.word));
  }
}

/* When a pass starts on a stream whose head has passed: the first entries
 * (prefetch_ahead covers those from PREFETCH_AHEAD on), then the
 * continuations of those the ahead-fetch of continuations will not reach
 * (one wait for the first of them, the rest arrive meanwhile). */
static inline void prefetch_front(struct cudaev__gpu *g, const struct cudaev__track *t) {
  uint32_t n = t->rlen <= PREFETCH_AHEAD ? t->rlen : PREFETCH_AHEAD + 1;
  for (uint32_t j = 1; j < n; j++) prefetch_future(ent(t, j));
  __builtin_prefetch(ent(t, 0)->conts);
  for (uint32_t j = 1; j < n && j <= PREFETCH_AHEAD / 2; j++) {
    struct cudaev_future *f = ent(t, j);
    __builtin_prefetch(f->conts);
    if (!f->use_event && f->kind == CUDAEV__K_GPU) __builtin_prefetch(word_ptr(g, f->x.word));
  }
}

/* The ring slots of t's first n entries. */
static inline void prefetch_ring(const struct cudaev__track *t, uint32_t n) {
  if (n > t->rlen) n = t->rlen;
  for (uint32_t j = 0; j < n; j += 8) __builtin_prefetch(t->ring + ((t->rhead + j) & (t->cap - 1)));
  if (n > 0) __builtin_prefetch(t->ring + ((t->rhead + n - 1) & (t->cap - 1)));
}
static inline bool head_passed(const struct cudaev__track *t) {
  return t->hw == NULL || __atomic_load_n(t->hw, __ATOMIC_RELAXED) == t->htag;
}
/* What a visit of t reads first from its record: the head and tail words,
 * the ring slots of its first entries, its backlog slot. */
static inline void prefetch_record(struct cudaev__gpu *g, const struct cudaev__track *t,
                                   bool cold) {
  if (t->hw != NULL) __builtin_prefetch(t->hw);
  if (t->tw != NULL) __builtin_prefetch(t->tw);
  prefetch_ring(t, cold ? 2 * PREFETCH_AHEAD : 1);
  __builtin_prefetch(slot_of(g, t->stream));
}

/* Every line of a record: the next stage reads its head and tail words,
 * ring and stream (prefetch_record), which are not all in the first line
 * (a record is 152 bytes at malloc's 16-byte alignment: three or four
 * lines). Fetching only the first left one miss in a row per stream. */
static inline void prefetch_track(const struct cudaev__track *t) {
  const char *p = (const char *)t;
  for (size_t o = 0; o < sizeof *t; o += 64) __builtin_prefetch(p + o);
  __builtin_prefetch(p + sizeof *t - 1);
}

/* A pass visits the busy streams in turn; each visit's first touches (the
 * record, its ring, the head's word, the stream's backlog slot, the front
 * futures) are cold with many futures pending, so they are fetched streams
 * ahead, in stages: records three ahead, ring, words and slot two ahead,
 * and the front futures of a stream whose head word has passed one ahead.
 * With more futures pending than L2 holds (`cold`), one stage more,
 * records four and rings three ahead, and the futures of the next two
 * streams come with this stream's completions (prefetch_spread) instead of
 * here. The GPU A/B behind the extra stage (faster with 100k pending,
 * slower with 1k, hence only past COLD_PENDING) is in bench/RESULTS.md. */
static inline void prefetch_streams(struct cudaev__gpu *g, uint32_t i, bool cold) {
  uint32_t d = cold ? 1 : 0; /* one stage more when the futures are cold */
  if (i + 3 + d < g->nbusy) prefetch_track(g->busy[i + 3 + d]);
  if (i + 2 + d < g->nbusy) prefetch_record(g, g->busy[i + 2 + d], cold);
  if (i == 0) /* the first streams: nothing fetched them yet */
    for (uint32_t j = 0; j < 2 + d && j < g->nbusy; j++) prefetch_record(g, g->busy[j], cold);
  const struct cudaev__track *t = g->busy[i];
  if (t->rlen > 1 && head_passed(t)) prefetch_front(g, t);
  if (!cold && i + 1 < g->nbusy) {
    const struct cudaev__track *n = g->busy[i + 1];
    if (n->rlen > 1 && n->hw != NULL && head_passed(n))
      for (uint32_t j = 0; j < n->rlen && j < PREFETCH_AHEAD; j++) prefetch_future(ent(n, j));
  }
}

/* With `cold` futures, those of the two streams after busy stream i come
 * with i's completions: as i's j-th entry completes, entry j of the next
 * stream is fetched into L1 and entry j of the one after into L2 (streams
 * whose head word has passed, up to 2 * PREFETCH_AHEAD entries;
 * prefetch_ahead covers the rest). Fetched all at a stream's start
 * instead (up to 48 lines into L2 and 24 into L1 at once), the misses fill
 * the core's miss buffers and the stream's first completions wait behind
 * them: bench/cpu-loop-cost timed per position with 100k pending showed
 * each stream's first completion ~400 cycles slower than with 1k and the
 * step to it ~250 cycles slower. */
static inline void prefetch_spread(struct cudaev__gpu *g, uint32_t i, uint32_t j) {
  if (j >= 2 * PREFETCH_AHEAD) return;
  if (i + 1 < g->nbusy) {
    const struct cudaev__track *n = g->busy[i + 1];
    if (j < n->rlen && n->hw != NULL && head_passed(n)) prefetch_future(ent(n, j));
  }
  if (i + 2 < g->nbusy) {
    const struct cudaev__track *n = g->busy[i + 2];
    if (j < n->rlen && n->hw != NULL && head_passed(n)) PREFETCH_FUTURE(ent(n, j), 2);
  }
}

/* How many entries at the front of t's FIFO the GPU has passed, when the
 * head is an event and no word was appended behind it, with few driver
 * calls: stream order makes the passed entries a prefix. In order: the
 * head (a stream not there yet costs one query); the tail (one query
 * completes a whole passed run); then, over the first WINDOW entries, the
 * newest passed word or host-function entry (one placed out of order)
 * bounds the prefix from below for free, the oldest unpassed one from
 * above, and the events between are searched by halves. *st gets the
 * outcome that decided: cudaSuccess, or the error a query returned (a
 * sticky error, which every entry up to it gets: querying each would have
 * returned it too). */
static uint32_t find_done(struct cudaev__gpu *g, struct cudaev__track *t, cudaError_t *st) {
  cudaError_t r;
  uint32_t n = t->rlen;
  if ((r = head_state(g, ent(t, 0))) == cudaErrorNotReady) return 0;
  *st = r;
  if (n == 1) return 1;
  if (ent_event(t, n - 1) && (r = head_state(g, ent(t, n - 1))) != cudaErrorNotReady) {
    *st = r;
    return n;
  }
  if (n > WINDOW) n = WINDOW;
  /* lo: index of the newest entry known passed; hi: of the oldest known
   * not passed (n: none in the window). */
  int64_t lo = 0, hi = n;
  for (int64_t i = (int64_t)n - 1; i > 0; i--) {
    if (ent_event(t, (uint32_t)i)) continue;
    if (head_state(g, ent(t, (uint32_t)i)) != cudaErrorNotReady) {
      lo = i;
      break;
    }
    hi = i;
  }
  /* Only events lie strictly between lo and hi. */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    r = head_state(g, ent(t, (uint32_t)mid));
    if (r != cudaErrorNotReady) {
      lo = mid;
      *st = r;
    } else {
      hi = mid;
    }
  }
  return (uint32_t)(lo + 1);
}

/* The index of the oldest word (or host-function) entry behind t's head,
 * which is an event, up to the newest word `tw` (so there is one);
 * cached in t->probe. */
static uint32_t probe_of(struct cudaev__track *t, uint32_t tw) {
  uint32_t i = t->probe - t->rhead;
  if (t->probe != UINT32_MAX && i > 0 && i <= tw) return i;
  for (i = 1; i < tw && ent_event(t, i); i++) {
  }
  t->probe = t->rhead + i;
  return i;
}

/* How many entries at the front of t's FIFO have passed, its head being an
 * event. Words decide for free: the newest word appended (the loop's flush
 * marker, usually), from the stream's record, then the oldest word behind
 * the head (one of every WORD_EVERY markers) cover the events before them.
 * Events are queried only where no word follows them (find_done), and the
 * head's event, so that a short job queued before a long one is not held
 * back until the long one ends, is queried no more often than every 1/8
 * of its age (20 us at least). */
static uint32_t events_done(struct cudaev__gpu *g, struct cudaev__track *t, cudaError_t *st,
                            uint64_t *now) {
  uint32_t tw = tail_word(t);
  if (tw == UINT32_MAX) return find_done(g, t, st);
  *st = cudaSuccess;
  if (__atomic_load_n(t->tw, __ATOMIC_ACQUIRE) == t->twtag) return tw + 1;
  uint32_t w = probe_of(t, tw);
  if (w < tw && (*st = head_state(g, ent(t, w))) != cudaErrorNotReady) return w + 1;
  if (*now == 0) *now = cudaev__now_ns();
  if (*now < t->next_query) return 0;
  struct cudaev_future *h = ent(t, 0);
  uint64_t age = *now > h->t_submit ? *now - h->t_submit : 0;
  t->next_query = *now + (age / 8 > 20000 ? age / 8 : 20000);
  return (*st = head_state(g, h)) != cudaErrorNotReady;
}

/* Puts a word marker of the loop's own behind t's tail, an event, so that
 * the runs of events before it complete by a read, not by queries. At most
 * one per stream at a time; none where the loop must not enqueue: behind
 * a loop-thread host function (the stream may be full behind its gate),
 * on a per-thread default stream (the loop thread's would be another
 * stream), or without stream memory operations. */
static void flush_tail(struct cudaev_loop *loop, struct cudaev__gpu *g, struct cudaev__track *t) {
  if (g->use_events || t->flushing || !may_enqueue(g, t)) return;
  /* Told to use events only: no word of the loop's own either. */
  if (atomic_load_explicit(&loop->markers, memory_order_relaxed) == CUDAEV_MARKERS_EVENTS) return;
  struct cudaev_future *f = cudaev__future_new(loop, CUDAEV__K_GPU);
  if (f == NULL) return;
  f->flush = 1;
  if (cudaev__gpu_enqueue_marker(g, f, t->stream) != cudaSuccess) {
    cudaev_future_release(f);
    return;
  }
  f->t_submit = cudaev__now_ns();
  f->track = (struct cudaev__track *)(void *)t->stream;
  cudaev__future_submit(f); /* on the loop thread: into t's FIFO now; its
                               one reference is the FIFO's */
}

bool cudaev__gpu_poll(struct cudaev_loop *loop, struct cudaev__gpu *g) {
  struct recycle rc = {.n = 0, .nev = 0};
  bool any = false;
  uint64_t now = 0;
  /* More pending than the caches hold: the futures to finish are cold. */
  bool cold = loop->npend + g->ntracked > COLD_PENDING;
  /* Callbacks run inside finish() may submit more work (appends to FIFOs
   * and to `busy`), so everything is re-read on each step. */
  g->passing++;
  for (uint32_t i = 0; i < g->nbusy; i++) {
    struct cudaev__track *t = g->busy[i];
    if (t->rlen == 0) continue; /* drained by a pass inside a callback */
    prefetch_streams(g, i, cold);
    uint32_t popped = 0; /* entries of t finished in this visit */
    while (t->rlen > 0) {
      if (t->hw != NULL && __atomic_load_n(t->hw, __ATOMIC_ACQUIRE) != t->htag) break;
      struct cudaev_future *f = ent(t, 0);
      uint32_t k = 1;
      cudaError_t st;
      if (ent_event(t, 0) && t->nsolo == 0) {
        /* A run of k entries at once (submissions that callbacks make land
         * behind them: only the loop pops, and their seqs are higher). */
        if ((k = events_done(g, t, &st, &now)) == 0) break;
      } else if ((st = head_state(g, f)) == cudaErrorNotReady) {
        /* (With solo entries in the FIFO each is checked on its own: a
         * passed entry says nothing of those before it.) */
        break;
      }
      if (now == 0) now = cudaev__now_ns();
      while (k-- > 0) {
        f = ent(t, 0);
        pop(t);
        prefetch_ahead(g, t);
        if (cold) prefetch_spread(g, i, popped++);
        /* Entries before the one that decided are passed: success, unless
         * a query returned an error (sticky: theirs too). A host-function
         * entry among them was reached (the stream got past it). */
        finish(g, f, &rc, st, now);
        any = true;
      }
      if (rc.ndone) {
        atomic_fetch_sub_explicit(&slot_of(g, t->stream)->v, rc.ndone, memory_order_relaxed);
        rc.ndone = 0;
      }
      head_changed(g, t);
      t->next_query = 0;
    }
    if (t->rlen > 0 && t->tail_ev) flush_tail(loop, g, t);
    if (t->rlen == 0) cudaev__gpu_busy_drained(g, i);
  }
  if (--g->passing == 0) cudaev__gpu_busy_compact(g);
  recycle_flush(loop, g, &rc);
  if (any) {
    if (g->last_done != 0 && g->ntracked > 0) {
      uint64_t gap = now - g->last_done;
      if (gap > GAP_MAX_NS) gap = GAP_MAX_NS;
      g->gap_ns = g->gap_ns == 0 ? gap : g->gap_ns - g->gap_ns / 8 + gap / 8;
    }
    g->last_done = now;
  }
  return any;
}

/* Fails everything tracked with `err` (sticky context error or destroy). */
void cudaev__gpu_fail_all(struct cudaev_loop *loop, struct cudaev__gpu *g, cudaError_t err) {
  struct recycle rc = {.n = 0, .nev = 0};
  /* Until every FIFO is empty: the continuations run here may submit. */
  for (bool again = true; again;) {
    again = false;
    for (uint32_t i = 0; i < g->nbusy; i++) {
      struct cudaev__track *t = g->busy[i];
      while (t->rlen > 0) {
        struct cudaev_future *f = ent(t, 0);
        pop(t);
        finish(g, f, &rc, err, 0);
        if (rc.ndone) {
          atomic_fetch_sub_explicit(&slot_of(g, t->stream)->v, rc.ndone, memory_order_relaxed);
          rc.ndone = 0;
        }
        again = true;
      }
      cudaev__gpu_busy_drained(g, i);
    }
  }
  /* Inside a pass (the watchdog run by a callback's nested pass) the
   * outermost pass compacts. */
  if (g->passing == 0) cudaev__gpu_busy_compact(g);
  recycle_flush(loop, g, &rc);
}

void cudaev__gpu_watchdog(struct cudaev_loop *loop, struct cudaev__gpu *g, uint64_t now) {
  if (g->nbusy == 0 || now < g->next_watchdog) return;
  g->next_watchdog = now + WATCHDOG_NS;
  /* A sticky error is returned by every later call in the context, so a
   * query of our own idle stream sees it without blocking, and is no
   * part of any capture (driver.h). */
  struct cudaev__capture_mode mode = cudaev__capture_relax();
  CUresult r = cudaev__drv.cuStreamQuery(g->internal);
  cudaev__capture_restore(mode);
  cudaev__stat_add(&loop->st.watchdog_checks, 1);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) return;
  cudaError_t e = cudaev__error_from_cu(r);
  if (!cudaev__error_is_sticky(e)) return;
  cudaev__stat_add(&loop->st.watchdog_errors, 1);
  cudaev__gpu_fail_all(loop, g, e);
}
