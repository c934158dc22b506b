/* Internal contracts of the loop layer (loop/). Every loop source file includes
 * this header first.
 *
 * Layering: loop/ sits above src/ (it may use the driver table and
 * src/internal.h); src/ never includes anything from loop/.
 *
 * Thread model in one paragraph: the state of a future's continuations and
 * of every tracking structure (stream FIFOs, the pending list) is touched
 * only by the loop thread, inside cudaev__loop_process(). Other threads talk
 * to the loop through one intrusive MPSC queue (cudaev__msg) plus one
 * eventfd write; a future's outcome is published by whichever thread claims
 * it first (one CAS on `state`), so completion is exactly-once without a
 * lock.
 */
#ifndef CUDAEV_LOOP_INTERNAL_H
#define CUDAEV_LOOP_INTERNAL_H

#include "internal.h"

#include "clock.h"
#include "cudaev.h"
#include "mpsc.h"

#include <pthread.h>
#include <stdint.h>

/* ---- allocation (loop/alloc.c) ------------------------------------------ */

/* Allocation of loop objects from per-thread free lists (plain
 * malloc/free under sanitizers, so they see every object). Returns NULL on
 * out-of-memory. Thread: any. */
void *cudaev__alloc(size_t size);
void cudaev__free(void *p, size_t size);

/* ---- misuse (loop/debug.c) --------------------------------------------- */

/* CUDAEV_DEBUG=1 in the environment (read at load): freed futures are
 * poisoned and quarantined, and the public future calls check them. */
extern bool cudaev__debug;
/* Prints "cudaev: msg" on stderr and aborts. Thread: any. */
_Noreturn void cudaev__die(const char *msg);
/* Hands "cudaev: msg" to the application's log hook (cudaev_log_set), or
 * writes it on stderr when there is none. Thread: any. */
void cudaev__log(int level, const char *msg);
struct cudaev_future;
/* CUDAEV_DEBUG: names `call` and the freed future, then aborts. */
_Noreturn void cudaev__future_misuse(const struct cudaev_future *f, const char *call);
/* CUDAEV_DEBUG: poisons a future whose last reference went and keeps it
 * from reuse for a while (the oldest quarantined is freed). */
void cudaev__future_quarantine(struct cudaev_future *f);

/* ---- messages to the loop (on the MPSC queue, mpsc.h) ------------------- */

enum cudaev__msg_kind {
  CUDAEV__MSG_FUTURE = 1,     /* a future with msg_bits set */
  CUDAEV__MSG_THEN,           /* a continuation added off the loop thread */
  CUDAEV__MSG_CALL,           /* cudaev_loop_post */
  CUDAEV__MSG_RUN,            /* a struct cudaev__run_msg: device notifications */
  CUDAEV__MSG_FREED = 0xdead, /* CUDAEV_DEBUG: a freed future's poison */
};

struct cudaev__msg {
  struct cudaev__mpsc_node node; /* first: a popped node is its message */
  uint32_t kind;
  uint32_t seq; /* GPU futures: place in stream order (struct cudaev__backlog) */
};

static inline struct cudaev__msg *cudaev__msg_of(struct cudaev__mpsc_node *n) {
  return (struct cudaev__msg *)(void *)n;
}

/* A message that brings its own handler, so that the loop delivers what a
 * source sends itself (device notifications) without knowing the source:
 * the pass calls run(loop, msg), which then owns msg. */
struct cudaev__run_msg {
  struct cudaev__msg msg; /* CUDAEV__MSG_RUN */
  void (*run)(struct cudaev_loop *loop, struct cudaev__msg *m);
};

/* ---- futures ------------------------------------------------------------ */

enum cudaev__fstate {
  CUDAEV__PENDING = 0,
  CUDAEV__CLAIMED = 1, /* one completer won; outcome being written */
  CUDAEV__DONE = 2,    /* outcome published */
  CUDAEV__STATE_MASK = 3,
  /* A waiter is reading f's source state (self_state) and may complete f
   * from it: set only on a PENDING future, kept through the completion,
   * cleared by that waiter. A source waits for it to clear
   * (cudaev__future_unread) before it lets go of what self_state reads. */
  CUDAEV__READER = 1u << 30,
  CUDAEV__WAITERS = 1u << 31, /* a thread sleeps on the futex */
};

enum cudaev__fkind {
  CUDAEV__K_PROMISE = 1, /* the application's (cudaev_promise_new): the one kind
                            cudaev_promise_set completes */
  CUDAEV__K_ALL,
  CUDAEV__K_ANY,
  CUDAEV__K_GPU,    /* completion word (or pooled event) on a stream */
  CUDAEV__K_HOSTFN, /* internal: the loop-thread host function trigger */
  CUDAEV__K_TIMER,  /* completes at a deadline (loop/timer.c) */
  /* A promise only the library completes (cudaev__relay_new): the *out of
   * cudaev_future_then_chain, of cudaev_future_new_work_done and of a staged
   * device-to-host copy. A kind of its own so that cudaev_promise_set
   * refuses it: set by the application it would inject an outcome. */
  CUDAEV__K_RELAY,
  CUDAEV__K_COUNT
};

/* msg_bits: what a queued MSG_FUTURE asks of the loop ... */
#define CUDAEV__MB_SUBMIT 1u /* register with the loop (pending list / stream FIFO) */
#define CUDAEV__MB_FIRE   2u /* claimed off the loop: run continuations */
#define CUDAEV__MB_MSG    3u
/* ... and the inline first continuation (c0_cb, c0_user), which costs no
 * allocation: the first cudaev_future_then takes it (TAKEN), writes it and
 * publishes it (READY); firing closes it (CLOSED). A then() that finds it
 * CLOSED when publishing hands its continuation over the ordinary way. */
#define CUDAEV__C0_TAKEN  4u
#define CUDAEV__C0_READY  8u
#define CUDAEV__C0_CLOSED 16u

struct cudaev__cont {
  struct cudaev__msg msg; /* CUDAEV__MSG_THEN when sent off-loop */
  struct cudaev__cont *next;
  struct cudaev_future *f;
  cudaev_future_cb cb;
  void *user;
};

struct cudaev__track; /* loop/gpu_internal.h */
struct cudaev__hgate; /* loop/gpu_internal.h */

struct cudaev_future {
  struct cudaev__msg msg; /* 16: queue link (MSG_FUTURE) */
  _Atomic uint32_t refs;
  _Atomic uint32_t state;    /* cudaev__fstate | WAITERS */
  _Atomic uint32_t msg_bits; /* CUDAEV__MB_* waiting in the queue, CUDAEV__C0_* */
  cudaError_t result;        /* valid once DONE */
  uint8_t kind;              /* cudaev__fkind */
  uint8_t fired : 1;         /* loop only: continuations ran */
  uint8_t passed : 1;        /* loop only, GPU: its stream passed its marker */
  uint8_t watched : 1;       /* loop only, GPU: a cudaev_future_new_work_done waits for it */
  uint8_t counted : 1;       /* GPU: counted in its stream's backlog slot */
  uint8_t flush : 1;         /* GPU: the loop's own tail marker (no user) */
  uint8_t solo : 1;          /* GPU/HOSTFN: its marker was enqueued while
                                another submission to the stream was, so
                                its place in stream order is unknown */
  uint8_t has_gate;          /* GPU: completes a host function (its
                                      outcome is aux.hostfn_result); word
                                      path: owns the gate word `gate` */
  /* GPU: pooled event instead of a word; HOSTFN: event path (gate in
   * aux.hg). A byte of its own, not a bit beside those the loop writes:
   * a waiter reads it while the loop completes f (self_state). */
  uint8_t use_event;
  union {
    uint32_t pend_idx; /* PROMISE/ALL/ANY: index in loop->pend; TIMER: in the heap */
    uint32_t word;     /* GPU/HOSTFN: completion word index */
  } x;
  struct cudaev_loop *loop;
  struct cudaev__cont *conts; /* loop only; newest first */
  void *user;                 /* HOSTFN: the user-visible future */
  cudaev_dtor dtor;
  struct cudaev__track *track; /* GPU/HOSTFN: the stream's record */
  uint64_t t_submit;           /* ns, for the adaptive spin */
  uint32_t tag;                /* GPU/HOSTFN: value the GPU writes */
  uint32_t gate;               /* HOSTFN: word it opens; GPU: word to recycle */
  union {
    struct {
      union {
        CUevent ev;        /* GPU, event path */
        uint64_t left;     /* ALL: inputs still pending */
        uint64_t index;    /* ANY: winning input */
        uint64_t deadline; /* TIMER: cudaev__now_ns() when it completes */
      };
      void *c0_user; /* the inline first continuation's (not HOSTFN) */
    };
    struct {
      cudaev_host_fn fn;
      void *user;
    } h; /* HOSTFN (never has continuations) */
  } u;
  union {
    struct cudaev__hgate *hg;  /* HOSTFN, event path: the blocking gate */
    cudaError_t hostfn_result; /* GPU future of a host function: fn's outcome */
  } aux;
  cudaev_future_cb c0_cb; /* the inline first continuation (msg_bits C0_*) */
};

_Static_assert(sizeof(struct cudaev_future) <= 128,
               "a pending future costs at most 128 bytes, its first continuation included");

/* CUDAEV_DEBUG: aborts naming `call` when f was freed (poisoned). One
 * load of a global while CUDAEV_DEBUG is off. */
#define CUDAEV__CHECK_LIVE(f, call)                                               \
  do {                                                                            \
    if (__builtin_expect(cudaev__debug, 0) && (f)->msg.kind == CUDAEV__MSG_FREED) \
      cudaev__future_misuse((f), (call));                                         \
  } while (0)

/* Allocates a future of `kind` with refs = 1 (the caller's). */
struct cudaev_future *cudaev__future_new(struct cudaev_loop *loop, int kind);

/* A promise of the library's own (CUDAEV__K_RELAY), with the caller's
 * reference and the loop's (dropped when it fires); complete it with
 * cudaev__future_try_complete. `listed`: registered on the loop's pending
 * list, as cudaev_promise_new's (counted, failed by destroy); unlisted,
 * the caller completes it even through a destroy (cudaev_future_new_work_done's,
 * after the GPU's writes). NULL when out of memory. Thread: any. */
struct cudaev_future *cudaev__relay_new(struct cudaev_loop *loop, bool listed);

/* Claims the right to complete f (exactly one caller ever gets true). */
bool cudaev__future_claim(struct cudaev_future *f);
/* After a successful claim: publishes the outcome (waiters wake) and runs
 * the continuations now if on the loop thread, else sends them there. */
void cudaev__future_complete(struct cudaev_future *f, cudaError_t status);
/* claim + complete; false if someone else completed it first. */
bool cudaev__future_try_complete(struct cudaev_future *f, cudaError_t status);
/* Returns once no waiter reads f's source state (CUDAEV__READER). A source
 * calls it, after f completed, before it frees or destroys anything its
 * self_state reads for f; the waiter's read is short and never blocks on
 * the loop, so this spins. Thread: the loop thread (any thread may). */
void cudaev__future_unread(struct cudaev_future *f);

/* Registers a new future with the loop (pending list or stream FIFO): now
 * if on the loop thread, else through the queue. Takes over one reference
 * (the loop's). */
void cudaev__future_submit(struct cudaev_future *f);

/* Loop thread: runs f's continuations (fired once). */
void cudaev__future_fire(struct cudaev_future *f);
/* Loop thread: handles a MSG_FUTURE / MSG_THEN popped from the queue. */
void cudaev__future_msg(struct cudaev_loop *loop, struct cudaev__msg *m);
/* Loop thread: runs the continuations queued for already-fired futures. */
bool cudaev__run_deferred(struct cudaev_loop *loop);

/* ---- completion sources ------------------------------------------------- */

/* A completion source is a kind of work that completes futures: GPU work on
 * streams (loop/gpu*.c), promises and combinators (loop/promise.c), later
 * timers or a second device. Each plugs into the loop through one const
 * table, as libuv's handle types do: the loop walks the sources it runs
 * once per pass (never once per future: a source keeps its inner loops to
 * itself), and the future core reaches a future's source only through
 * loop->src_of[f->kind] (track, self_state). Neither calls a source by
 * name. A NULL member is skipped. Members run on the loop thread (the
 * thread inside cudaev__loop_process, or the one destroying the loop)
 * unless they say otherwise. */
struct cudaev__source_ops {
  /* The future kinds it tracks: bit (1u << kind) per enum cudaev__fkind. */
  uint32_t kinds;
  /* Loop creation, on the creating thread: sets up the source's state in
   * the loop. Any result but cudaSuccess leaves the loop without this
   * source; its own entry points report why. */
  cudaError_t (*init)(struct cudaev_loop *loop);
  /* Loop destroy: fails what is pending with CUDAEV_ERROR_LOOP_DESTROYED
   * (continuations run on the destroying thread) and frees what passes
   * use. Afterwards the loop calls only pending, and track for a future
   * that was still queued. */
  void (*fini)(struct cudaev_loop *loop);
  /* Takes a submitted future of one of `kinds` in (the pending list, its
   * stream's FIFO) with the loop's reference. */
  void (*track)(struct cudaev_loop *loop, struct cudaev_future *f);
  /* Thread: any (a waiter off the loop thread). Where f's work stands
   * without the loop: cudaErrorNotReady, else the outcome the waiter
   * completes f with. NULL: waiters only wait for the loop. The waiter
   * calls it only with CUDAEV__READER set on f (f still pending then), so
   * the loop and what the source keeps for f live through the call as long
   * as the source calls cudaev__future_unread(f) before freeing them. */
  cudaError_t (*self_state)(struct cudaev_future *f);
  /* Around each pass and each before_sleep: makes current what the source
   * needs (the loop's CUDA context); returns whether leave must undo it. */
  bool (*enter)(struct cudaev_loop *loop);
  void (*leave)(struct cudaev_loop *loop, bool entered);
  /* Thread: any. cudaev_future_new_work_done for f: completes g (a promise not on
   * the pending list, with a reference of its own) once f's work has
   * really finished, even if f was cancelled. NULL: when f completes. */
  cudaError_t (*done)(struct cudaev_future *f, struct cudaev_future *g);
  /* Around continuations of f that run outside the source's poll (f was
   * completed off the loop thread, or they were added after it fired):
   * makes current what they should see (a GPU future's own context);
   * returns whether leave_future must undo it. */
  bool (*enter_future)(struct cudaev_future *f);
  void (*leave_future)(bool entered);
  /* Once per pass: completes what has finished. True if anything did. */
  bool (*poll)(struct cudaev_loop *loop);
  /* Once per pass, after every poll, with the pass's clock (cudaev__now_ns):
   * the source's periodic work (the GPU's sticky-error watchdog). */
  void (*tick)(struct cudaev_loop *loop, uint64_t now);
  /* Before the loop blocks, when no message or continuation is waiting:
   * spins or arms wakeups as the source sees fit, and returns the longest
   * the loop may block in ns (UINT64_MAX: until woken; 0: not at all). */
  uint64_t (*before_sleep)(struct cudaev_loop *loop);
  /* Loop thread, when a future of its kinds that the loop holds a
   * reference for until it fires (promises, combinators, timers) fires:
   * takes it off the source's lists; the firing drops that reference. */
  void (*untrack)(struct cudaev_loop *loop, struct cudaev_future *f);
  /* Futures it tracks (cudaev_loop_pending). */
  size_t (*pending)(struct cudaev_loop *loop);
  /* Process exit, with the loop thread stopped (or calling exit itself):
   * lets go of what outside the process waits for the loop (host-function
   * gates on streams), without a driver call or user code. */
  void (*abandon)(struct cudaev_loop *loop);
};

/* The future kinds whose source has a self_state (future.c; loop.c adds
 * a source's kinds when a loop starts it): a waiter reads the loop only
 * for these. */
extern _Atomic uint32_t cudaev__self_state_kinds;

/* The kinds the promise source keeps on the loop's pending list (promise.c):
 * promises, combinators, relays. */
#define CUDAEV__LISTED_KINDS                                                   \
  ((1u << CUDAEV__K_PROMISE) | (1u << CUDAEV__K_ALL) | (1u << CUDAEV__K_ANY) | \
   (1u << CUDAEV__K_RELAY))

/* The sources, in the order the loop runs them (loop.c lists them). */
extern const struct cudaev__source_ops cudaev__source_promise; /* promise.c */
extern const struct cudaev__source_ops cudaev__source_timer;   /* timer.c */
extern const struct cudaev__source_ops cudaev__source_gpu;     /* gpu.c */
#define CUDAEV__NSOURCES 3

/* ---- the loop ----------------------------------------------------------- */

/* The wakeup (waker.c): an eventfd shared by the loop and by the driver's
 * host functions that wake it. Refcounted because a host function may still
 * be queued on a stream when the loop is destroyed. */
struct cudaev__waker {
  _Atomic uint32_t refs;
  _Atomic uint32_t pending; /* 1 once written since the loop last drained */
  int fd;
};
/* A new waker with one reference, or the error (out of memory, no eventfd). */
cudaError_t cudaev__waker_new(struct cudaev__waker **out);
/* Makes the fd readable, at most once per drain. Thread: any. */
void cudaev__waker_wake(struct cudaev__waker *w);
void cudaev__waker_release(struct cudaev__waker *w);
/* The loop thread, at the start of a pass: reads the fd if a wake wrote
 * it and re-arms wake. Returns whether the fd had been written. */
bool cudaev__waker_drain(struct cudaev__waker *w);

/* A loop statistic: one writer (the loop thread), readers anywhere. */
static inline void cudaev__stat_add(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* A run mode: who waits for the wakeup fd and the timer (const vtable,
 * chosen at creation). */
struct cudaev__backend {
  /* Starts watching (io on the fd, timer, prepare hook). true on error. */
  bool (*start)(struct cudaev_loop *loop);
  /* Stops and frees the backend's state; from the destroying thread. */
  void (*stop)(struct cudaev_loop *loop);
  /* Loop thread, after a pass and on cudaev_loop_ref/_unref: whether the
   * loop keeps its host loop running (pending futures or the
   * application's references) changed, maybe. NULL: nothing to do. */
  void (*keep)(struct cudaev_loop *loop);
};

extern const struct cudaev__backend cudaev__backend_ev;
extern const struct cudaev__backend cudaev__backend_foreign;
extern const struct cudaev__backend cudaev__backend_thread;

struct cudaev__gpu; /* loop/gpu_internal.h */

struct cudaev_loop {
  struct cudaev__mpsc q;
  struct cudaev__waker *waker;
  const struct cudaev__backend *be;
  void *be_state;      /* the backend's: ev mode's watchers, thread mode's thread */
  struct ev_loop *evl; /* ev mode: the application's libev loop */
  _Atomic uint32_t spin_max_us;
  _Atomic size_t npending_pub; /* published count for cudaev_loop_pending */
  /* Futures sent to the loop to be registered (CUDAEV__MB_SUBMIT) that no
   * published count holds yet: cudaev_loop_pending adds them, so that a
   * future counts from the moment the call that made it returns, on any
   * thread. Added to before the message is sent; a pass subtracts what it
   * took in (ntaken) only after it published its count, with release, so
   * a reader that loads this first (acquire) and npending_pub second
   * counts such a future in one of the two, or both, never in neither. */
  _Atomic size_t nqueued;
  size_t ntaken; /* loop thread: taken in by this pass, still in nqueued */
  _Atomic uint32_t stopping;
  /* Foreign mode: a per-thread address of the thread inside
   * cudaev_loop_process, so that a second thread is caught. */
  _Atomic(void *) driver;
  /* ev mode, loop thread: cudaev_loop_ref count, and whether the loop
   * holds a reference on the host loop (backend_ev.c). */
  uint32_t user_refs;
  bool host_refd;
  /* Foreign mode, loop thread: cudaev_loop_set_timer_cb's, and the
   * deadline it was last told (cudaev__now_ns; UINT64_MAX: none). */
  /* cudaev_loop_stats: written by the loop thread only (relaxed load +
   * store, no locked instruction), read from any. */
  struct {
    _Atomic uint64_t passes, wakeups, completions, timers_fired;
    /* The GPU source's (struct cudaev_loop_stats says what each counts). */
    _Atomic uint64_t gpu_completions, gpu_words, gpu_events, gpu_failed, gpu_armed, spin_ns,
        watchdog_checks, watchdog_errors;
    _Atomic uint64_t gpu_latency[CUDAEV_LOOP_LATENCY_BUCKETS];
  } st;
  /* cudaev_loop_close from inside a callback: the pass's caller (the run
   * mode) closes the loop when its outermost pass returns. */
  cudaev_close_cb close_cb;
  void *close_user;
  bool closing;
  void (*timer_cb)(struct cudaev_loop *loop, int64_t timeout_ns, void *user);
  void *timer_user;
  uint64_t timer_told;
  /* The process's default loop, which cudaev_loop_destroy leaves alone:
   * set before the loop is published (backend_thread.c), cleared in a fork
   * child, where the default loop is a new one. */
  bool is_default;
  /* Set at creation: the sources this loop runs, and the source of each
   * future kind. Passes run the first nrun (nsrc until destroy finalized
   * them); the pending count asks all nsrc. */
  uint32_t nsrc, nrun;
  const struct cudaev__source_ops *src[CUDAEV__NSOURCES];
  const struct cudaev__source_ops *src_of[CUDAEV__K_COUNT];
  /* loop thread only: */
  struct cudaev__cont *def_head, *def_tail; /* continuations of fired futures */
  /* The promise source's (promise.c): promises and combinators not fired. */
  struct cudaev_future **pend;
  uint32_t npend, cap_pend;
  /* The timer source's (timer.c): a min-heap of pending timers by
   * deadline; NULL once finalized. */
  struct cudaev__timers *timers;
  /* The GPU source's (gpu*.c): its state, NULL when the runtime could not
   * start, and why. */
  struct cudaev__gpu *gpu;
  cudaError_t gpu_error;
};

/* The loop the calling thread is processing, or NULL. */
extern _Thread_local struct cudaev_loop *cudaev__tls_loop;
static inline bool cudaev__on_loop(const struct cudaev_loop *loop) {
  return cudaev__tls_loop == loop;
}

/* Wakes the loop (any thread). */
static inline void cudaev__loop_wake(struct cudaev_loop *loop) { cudaev__waker_wake(loop->waker); }
/* Sends a message to the loop and wakes it (waker.c). Thread: any. */
void cudaev__loop_send(struct cudaev_loop *loop, struct cudaev__msg *m);

/* One pass: drain wakeups and messages, poll the sources, their periodic
 * work, run deferred continuations. Returns true when more work is ready
 * now. */
bool cudaev__loop_process(struct cudaev_loop *loop);
/* Before blocking: lets the sources spin and arm wakeups. Returns the
 * longest the caller may block in ns (UINT64_MAX: until the fd fires; 0:
 * process again now). */
uint64_t cudaev__loop_before_sleep(struct cudaev_loop *loop);
/* The run modes, after their outermost pass, when loop->closing: tears
 * the loop down as cudaev_loop_destroy does (the backend's stop first),
 * calls the close callback and frees the loop. */
void cudaev__loop_close_now(struct cudaev_loop *loop);
/* Process exit, the loop thread stopped or calling exit itself: the
 * sources' abandon (no driver call, no user code). */
void cudaev__loop_abandon(struct cudaev_loop *loop);

#endif
