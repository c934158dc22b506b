/* Futures: outcome publication, continuations, wait, cancel
 * (cudaev_future_*).
 *
 * The core knows no device: a future reaches the source that tracks it
 * through its loop's table (loop->src_of[kind], struct cudaev__source_ops).
 * Promises and combinators are promise.c's source; the core reaches them
 * through that table too and calls no function of promise.c. */
#include "libev.h"
#include "loop_internal.h"

#include <errno.h>
#include <sched.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Thread_local struct cudaev_loop *cudaev__tls_loop;
_Atomic uint32_t cudaev__self_state_kinds;

/* cudart's cudaGetErrorName / cudaGetErrorString know our outcomes
 * (src/error_table.h); only NO_LIBEV's text says more here: why. */
CUDAEV_EXPORT const char *cudaev_error_name(cudaError_t e) { return cudaGetErrorName(e); }

CUDAEV_EXPORT const char *cudaev_error_string(cudaError_t e) {
  if (e == CUDAEV_ERROR_NO_LIBEV) return cudaev__libev_why();
  return cudaGetErrorString(e);
}

/* ---- life cycle ---------------------------------------------------------- */

struct cudaev_future *cudaev__future_new(struct cudaev_loop *loop, int kind) {
  struct cudaev_future *f = cudaev__alloc(sizeof *f);
  if (f == NULL) return NULL;
  memset(f, 0, sizeof *f);
  atomic_init(&f->refs, 1);
  atomic_init(&f->state, CUDAEV__PENDING);
  atomic_init(&f->msg_bits, 0);
  atomic_init(&f->msg.node.next, NULL);
  f->msg.kind = CUDAEV__MSG_FUTURE;
  f->kind = (uint8_t)kind;
  f->loop = loop;
  f->result = cudaErrorNotReady;
  f->x.pend_idx = UINT32_MAX;
  return f;
}

/* Complete at its creation, so nobody can have attached a continuation:
 * firing would run nothing. It is marked fired here instead of being sent
 * to the loop, whose only effect off the loop thread would be a wake-up of
 * the loop (a write to its fd) for nothing: a server awaiting GPU work
 * that is done by the time it asks would pay one per request. A
 * continuation attached later runs on the loop's next pass, as on any
 * fired future (cont_add). No loop reference: nothing listed holds it. */
struct cudaev_future *cudaev__future_new_done(struct cudaev_loop *loop, int kind,
                                              cudaError_t status) {
  struct cudaev_future *f = cudaev__future_new(loop, kind);
  if (f == NULL) return NULL;
  f->result = status;
  f->fired = 1;
  atomic_store_explicit(&f->msg_bits, CUDAEV__C0_CLOSED, memory_order_relaxed);
  atomic_store_explicit(&f->state, CUDAEV__DONE, memory_order_release);
  atomic_fetch_add_explicit(&loop->done_at_creation, 1, memory_order_relaxed);
  return f;
}

CUDAEV_EXPORT cudaev_future_t *cudaev_future_retain(cudaev_future_t *f) {
  if (f == NULL) return f;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_retain");
  atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
  return f;
}

CUDAEV_EXPORT void cudaev_future_release(cudaev_future_t *f) {
  if (f == NULL) return;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_release");
  if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1) return;
  if (f->dtor != NULL) f->dtor(f->user);
  if (__builtin_expect(cudaev__debug, 0))
    cudaev__future_quarantine(f);
  else
    cudaev__free(f, sizeof *f);
}

CUDAEV_EXPORT void cudaev_future_set_user(cudaev_future_t *f, void *user, cudaev_dtor dtor) {
  if (f == NULL) return;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_set_user");
  if (f->kind == CUDAEV__K_HOSTFN) return;
  f->user = user;
  f->dtor = dtor;
}

CUDAEV_EXPORT void *cudaev_future_user(const cudaev_future_t *f) {
  return f == NULL ? NULL : f->user;
}

CUDAEV_EXPORT cudaev_loop_t *cudaev_future_loop(const cudaev_future_t *f) {
  return f == NULL ? NULL : f->loop;
}

/* ---- completion ---------------------------------------------------------- */

static void futex_wake_all(_Atomic uint32_t *addr) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Sends f to the loop with `bit`; the queued message holds a reference. */
static void send_bits(struct cudaev_future *f, uint32_t bit) {
  if (atomic_fetch_or_explicit(&f->msg_bits, bit, memory_order_acq_rel) & CUDAEV__MB_MSG) return;
  cudaev_future_retain(f);
  cudaev__loop_send(f->loop, &f->msg);
}

bool cudaev__future_claim(struct cudaev_future *f) {
  uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);
  while ((s & CUDAEV__STATE_MASK) == CUDAEV__PENDING) {
    if (atomic_compare_exchange_weak_explicit(&f->state, &s,
                                              (s & ~CUDAEV__STATE_MASK) | CUDAEV__CLAIMED,
                                              memory_order_acq_rel, memory_order_relaxed))
      return true;
  }
  return false;
}

void cudaev__future_complete(struct cudaev_future *f, cudaError_t status) {
  f->result = status;
  /* CLAIMED + 1 == DONE: the flag bits stay, a reader's bit above all
   * (its owner clears it; cudaev__future_unread waits for that). */
  uint32_t old = atomic_fetch_add_explicit(&f->state, 1, memory_order_acq_rel);
  if (old & CUDAEV__WAITERS) futex_wake_all(&f->state);
  if (cudaev__on_loop(f->loop))
    cudaev__future_fire(f);
  else
    send_bits(f, CUDAEV__MB_FIRE);
}

bool cudaev__future_try_complete(struct cudaev_future *f, cudaError_t status) {
  if (!cudaev__future_claim(f)) return false;
  cudaev__future_complete(f, status);
  return true;
}

void cudaev__future_unread(struct cudaev_future *f) {
  for (unsigned i = 0; atomic_load_explicit(&f->state, memory_order_acquire) & CUDAEV__READER;
       i++) {
    /* The reader may have been preempted (two cores, or TSan): give it
     * the CPU after a short spin. */
    if (i < 64)
      __builtin_ia32_pause();
    else
      sched_yield();
  }
}

/* Promises and combinators (on the pending list) and timers (in their
 * heap): the loop holds a reference until they fire. */
#define HELD_KINDS (CUDAEV__LISTED_KINDS | (1u << CUDAEV__K_TIMER))
static bool is_held(const struct cudaev_future *f) { return (HELD_KINDS >> f->kind) & 1u; }

/* ---- registration, firing, messages --------------------------------------- */

static void register_now(struct cudaev_loop *loop, struct cudaev_future *f) {
  loop->src_of[f->kind]->track(loop, f);
}

void cudaev__future_submit(struct cudaev_future *f) {
  if (cudaev__on_loop(f->loop)) {
    register_now(f->loop, f);
  } else {
    /* Counted from now (cudaev_loop_pending); the queue's push and pop
     * order this before the pass that takes it in subtracts it. */
    atomic_fetch_add_explicit(&f->loop->nqueued, 1, memory_order_relaxed);
    send_bits(f, CUDAEV__MB_SUBMIT);
  }
}

static struct cudaev__cont *reverse(struct cudaev__cont *c) {
  struct cudaev__cont *r = NULL;
  while (c != NULL) {
    struct cudaev__cont *n = c->next;
    c->next = r;
    r = c;
    c = n;
  }
  return r;
}

void cudaev__future_fire(struct cudaev_future *f) {
  if (f->fired) return;
  f->fired = 1;
  cudaev__stat_add(&f->loop->st.completions, 1);
  cudaev_future_retain(f); /* alive until the last continuation ran */
  bool listed = is_held(f);
  if (listed) f->loop->src_of[f->kind]->untrack(f->loop, f);
  /* The inline first continuation, when it was published in time. */
  if (atomic_fetch_or_explicit(&f->msg_bits, CUDAEV__C0_CLOSED, memory_order_acq_rel) &
      CUDAEV__C0_READY) {
    f->c0_cb(f, f->result, f->u.c0_user);
    cudaev_future_release(f); /* the continuation's reference */
  }
  struct cudaev__cont *c = reverse(f->conts);
  f->conts = NULL;
  while (c != NULL) {
    struct cudaev__cont *n = c->next;
    c->cb(f, f->result, c->user);
    cudaev__free(c, sizeof *c);
    cudaev_future_release(f); /* the continuation's reference */
    c = n;
  }
  if (listed) cudaev_future_release(f); /* the loop's reference */
  cudaev_future_release(f);
}

static void deferred_push(struct cudaev_loop *loop, struct cudaev__cont *c) {
  c->next = NULL;
  if (loop->def_tail != NULL)
    loop->def_tail->next = c;
  else
    loop->def_head = c;
  loop->def_tail = c;
}

static void cont_add(struct cudaev_loop *loop, struct cudaev__cont *c) {
  struct cudaev_future *f = c->f;
  if (f->fired) {
    deferred_push(loop, c);
  } else {
    c->next = f->conts;
    f->conts = c;
  }
}

/* A continuation run outside its source's poll sees what the source makes
 * current for it (a GPU future's context). */
static bool src_enter(struct cudaev_future *f) {
  const struct cudaev__source_ops *src = f->loop->src_of[f->kind];
  return src->enter_future != NULL && src->enter_future(f);
}
static void src_leave(struct cudaev_future *f, bool entered) {
  if (entered) f->loop->src_of[f->kind]->leave_future(true);
}

bool cudaev__run_deferred(struct cudaev_loop *loop) {
  /* Only what was queued before this pass: a continuation that adds
   * another one to a completed future does not starve the loop. */
  struct cudaev__cont *c = loop->def_head;
  loop->def_head = loop->def_tail = NULL;
  while (c != NULL) {
    struct cudaev__cont *n = c->next;
    struct cudaev_future *f = c->f;
    bool entered = src_enter(f);
    c->cb(f, f->result, c->user);
    src_leave(f, entered);
    cudaev__free(c, sizeof *c);
    cudaev_future_release(f);
    c = n;
  }
  return loop->def_head != NULL;
}

void cudaev__future_msg(struct cudaev_loop *loop, struct cudaev__msg *m) {
  if (m->kind == CUDAEV__MSG_THEN) {
    cont_add(loop, (struct cudaev__cont *)m);
    return;
  }
  struct cudaev_future *f = (struct cudaev_future *)m;
  uint32_t bits = atomic_fetch_and_explicit(&f->msg_bits, ~CUDAEV__MB_MSG, memory_order_acq_rel) &
                  CUDAEV__MB_MSG;
  if (bits & CUDAEV__MB_SUBMIT) {
    loop->ntaken++; /* still in nqueued until the pass has published */
    register_now(loop, f);
  }
  if (bits & CUDAEV__MB_FIRE) {
    bool entered = src_enter(f);
    cudaev__future_fire(f);
    src_leave(f, entered);
  }
  cudaev_future_release(f); /* the message's reference */
}

/* ---- public: continuations, state, wait, cancel ----------------------- */

CUDAEV_EXPORT cudaError_t cudaev_future_then(cudaev_future_t *f, cudaev_future_cb cb, void *user) {
  if (f == NULL || cb == NULL) return cudaErrorInvalidValue;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_then");
  if (f->kind == CUDAEV__K_HOSTFN) return cudaErrorInvalidValue;
  if (!(atomic_fetch_or_explicit(&f->msg_bits, CUDAEV__C0_TAKEN, memory_order_relaxed) &
        CUDAEV__C0_TAKEN)) {
    /* The inline first continuation: no allocation. */
    f->c0_cb = cb;
    f->u.c0_user = user;
    cudaev_future_retain(f);
    if (!(atomic_fetch_or_explicit(&f->msg_bits, CUDAEV__C0_READY, memory_order_acq_rel) &
          CUDAEV__C0_CLOSED))
      return cudaSuccess;
    /* It fired first: hand the continuation over as below (the reference
     * taken goes with it). */
    cudaev_future_release(f);
  }
  struct cudaev__cont *c = cudaev__alloc(sizeof *c);
  if (c == NULL) return cudaErrorMemoryAllocation;
  atomic_init(&c->msg.node.next, NULL);
  c->msg.kind = CUDAEV__MSG_THEN;
  c->next = NULL;
  c->f = cudaev_future_retain(f);
  c->cb = cb;
  c->user = user;
  if (cudaev__on_loop(f->loop))
    cont_add(f->loop, c);
  else
    cudaev__loop_send(f->loop, &c->msg);
  return cudaSuccess;
}

CUDAEV_EXPORT int cudaev_future_ready(const cudaev_future_t *f) {
  if (f == NULL) return 0;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_ready");
  return (atomic_load_explicit(&((cudaev_future_t *)f)->state, memory_order_acquire) &
          CUDAEV__STATE_MASK) == CUDAEV__DONE;
}

CUDAEV_EXPORT cudaError_t cudaev_future_result(const cudaev_future_t *f) {
  if (f == NULL) return cudaErrorInvalidValue;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_result");
  return cudaev_future_ready(f) ? f->result : cudaErrorNotReady;
}

CUDAEV_EXPORT int cudaev_future_cancel(cudaev_future_t *f) {
  if (f == NULL) return 0;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_cancel");
  if (f->kind == CUDAEV__K_HOSTFN) return 0;
  return cudaev__future_try_complete(f, CUDAEV_ERROR_CANCELLED);
}

/* A source may let the waiter complete a future itself (a GPU future from
 * its completion word), so that waiting works while nobody drives the
 * loop. The loop, and what its source keeps for f, live only while f is
 * pending: destroy completes f, then frees them. So the waiter marks f
 * (CUDAEV__READER, set only while f is pending, in the same CAS that sees
 * it pending) before it reads the loop, and the source waits for the mark
 * to go (cudaev__future_unread) before freeing what it reads. One reader
 * at a time: another waiter of the same future just waits. Returns
 * whether f is complete now. */
static bool self_complete(struct cudaev_future *f) {
  uint32_t s = atomic_load_explicit(&f->state, memory_order_relaxed);
  if ((s & (CUDAEV__STATE_MASK | CUDAEV__READER)) != CUDAEV__PENDING ||
      !atomic_compare_exchange_strong_explicit(&f->state, &s, s | CUDAEV__READER,
                                               memory_order_acquire, memory_order_relaxed))
    return false;
  const struct cudaev__source_ops *src = f->loop->src_of[f->kind];
  cudaError_t st = src != NULL && src->self_state != NULL ? src->self_state(f) : cudaErrorNotReady;
  /* Completing sends the firing to the loop, which is still alive. */
  if (st != cudaErrorNotReady) cudaev__future_try_complete(f, st);
  atomic_fetch_and_explicit(&f->state, ~CUDAEV__READER, memory_order_release);
  return st != cudaErrorNotReady;
}

CUDAEV_EXPORT cudaError_t cudaev_future_wait(cudaev_future_t *f, int64_t timeout_ns) {
  if (f == NULL) return cudaErrorInvalidValue;
  CUDAEV__CHECK_LIVE(f, "cudaev_future_wait");
  if (cudaev__tls_loop != NULL && cudaev__tls_loop == f->loop) return cudaErrorNotPermitted;
  uint64_t start = cudaev__now_ns();
  uint64_t deadline = timeout_ns < 0 ? UINT64_MAX : start + (uint64_t)timeout_ns;
  /* Only a kind whose source checks by itself reads the loop, and only
   * inside self_complete: a promise's waiter racing the loop's destroy
   * never touches the loop. (Every loop that runs a source with a
   * self_state runs it: the flag is process-wide.) */
  bool self =
      (atomic_load_explicit(&cudaev__self_state_kinds, memory_order_relaxed) >> f->kind) & 1u;
  for (unsigned spins = 0;; spins++) {
    uint32_t s = atomic_load_explicit(&f->state, memory_order_acquire);
    if ((s & CUDAEV__STATE_MASK) == CUDAEV__DONE) return f->result;
    if (self && (s & CUDAEV__STATE_MASK) == CUDAEV__PENDING && self_complete(f)) continue;
    uint64_t now = cudaev__now_ns();
    if (now >= deadline) return CUDAEV_ERROR_TIMEOUT; /* one answer for every deadline */
    /* A short spin first: GPU work waited for is often microseconds away. */
    if (now - start < 20000 && spins < 100000) {
      __builtin_ia32_pause();
      continue;
    }
    uint64_t slice = deadline - now;
    if (self && slice > 1000000) slice = 1000000; /* re-check the source each ms */
    if ((s & CUDAEV__WAITERS) == 0) {
      if (!atomic_compare_exchange_strong_explicit(&f->state, &s, s | CUDAEV__WAITERS,
                                                   memory_order_acq_rel, memory_order_acquire))
        continue;
      s |= CUDAEV__WAITERS;
    }
    struct timespec ts = {(time_t)(slice / 1000000000u), (long)(slice % 1000000000u)};
    syscall(SYS_futex, (uint32_t *)&f->state, FUTEX_WAIT_PRIVATE, s, &ts, NULL, 0);
  }
}
