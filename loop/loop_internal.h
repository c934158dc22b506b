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

/* ---- messages to the loop (on the MPSC queue, mpsc.h) ------------------- */

enum cudaev__msg_kind {
  CUDAEV__MSG_FUTURE = 1, /* a future with msg_bits set */
  CUDAEV__MSG_THEN,       /* a continuation added off the loop thread */
  CUDAEV__MSG_CALL,       /* cudaev_loop_post */
  CUDAEV__MSG_NOTIFY,     /* a device notification */
};

struct cudaev__msg {
  struct cudaev__mpsc_node node; /* first: a popped node is its message */
  uint32_t kind;
  uint32_t seq; /* GPU futures: place in their stream's order (gpu.c) */
};

static inline struct cudaev__msg *cudaev__msg_of(struct cudaev__mpsc_node *n) {
  return (struct cudaev__msg *)(void *)n;
}

/* ---- futures ------------------------------------------------------------ */

enum cudaev__fstate {
  CUDAEV__PENDING = 0,
  CUDAEV__CLAIMED = 1, /* one completer won; outcome being written */
  CUDAEV__DONE = 2,    /* outcome published */
  CUDAEV__STATE_MASK = 3,
  CUDAEV__WAITERS = 1u << 31, /* a thread sleeps on the futex */
};

enum cudaev__fkind {
  CUDAEV__K_PROMISE = 1,
  CUDAEV__K_ALL,
  CUDAEV__K_ANY,
  CUDAEV__K_GPU,    /* completion word (or pooled event) on a stream */
  CUDAEV__K_HOSTFN, /* internal: the loop-thread host function trigger */
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

struct cudaev__track;
struct cudaev__hgate; /* loop/gpu.c */

struct cudaev_future {
  struct cudaev__msg msg; /* 16: queue link (MSG_FUTURE) */
  _Atomic uint32_t refs;
  _Atomic uint32_t state;    /* cudaev__fstate | WAITERS */
  _Atomic uint32_t msg_bits; /* CUDAEV__MB_* waiting in the queue, CUDAEV__C0_* */
  cudaError_t result;        /* valid once DONE */
  uint8_t kind;              /* cudaev__fkind */
  uint8_t fired;             /* loop only: continuations ran */
  uint8_t use_event : 1;     /* GPU: pooled event instead of a word;
                                      HOSTFN: event path (gate in aux.hg) */
  uint8_t counted : 1;       /* GPU: counted in its stream's backlog slot */
  uint8_t flush : 1;         /* GPU: the loop's own tail marker (no user) */
  uint8_t solo : 1;          /* GPU/HOSTFN: its marker was enqueued while
                                another submission to the stream was, so
                                its place in stream order is unknown */
  uint8_t has_gate;          /* GPU: completes a host function (its
                                      outcome is aux.hostfn_result); word
                                      path: owns the gate word `gate` */
  union {
    uint32_t pend_idx; /* PROMISE/ALL/ANY: index in loop->pend */
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
        CUevent ev;     /* GPU, event path */
        uint64_t left;  /* ALL: inputs still pending */
        uint64_t index; /* ANY: winning input */
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

/* Allocates a future of `kind` with refs = 1 (the caller's). */
struct cudaev_future *cudaev__future_new(struct cudaev_loop *loop, int kind);

/* Claims the right to complete f (exactly one caller ever gets true). */
bool cudaev__future_claim(struct cudaev_future *f);
/* After a successful claim: publishes the outcome (waiters wake) and runs
 * the continuations now if on the loop thread, else sends them there. */
void cudaev__future_complete(struct cudaev_future *f, cudaError_t status);
/* claim + complete; false if someone else completed it first. */
bool cudaev__future_try_complete(struct cudaev_future *f, cudaError_t status);

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

/* ---- the loop ----------------------------------------------------------- */

/* The wakeup: an eventfd shared by the loop and by the driver's host
 * functions that wake it. Refcounted because a host function may still be
 * queued on a stream when the loop is destroyed. */
struct cudaev__waker {
  _Atomic uint32_t refs;
  _Atomic uint32_t pending; /* 1 once written since the loop last drained */
  int fd;
};
void cudaev__waker_wake(struct cudaev__waker *w);
void cudaev__waker_release(struct cudaev__waker *w);

/* A run mode: who waits for the wakeup fd and the timer (const vtable,
 * chosen at creation). */
struct cudaev__backend {
  /* Starts watching (io on the fd, timer, prepare hook). true on error. */
  bool (*start)(struct cudaev_loop *loop);
  /* Stops and frees the backend's state; from the destroying thread. */
  void (*stop)(struct cudaev_loop *loop);
};

extern const struct cudaev__backend cudaev__backend_ev;
extern const struct cudaev__backend cudaev__backend_foreign;
extern const struct cudaev__backend cudaev__backend_thread;

struct cudaev__gpu; /* loop/gpu.c */

struct cudaev_loop {
  struct cudaev__mpsc q;
  struct cudaev__waker *waker;
  const struct cudaev__backend *be;
  void *be_state;      /* the backend's: ev mode's watchers, thread mode's thread */
  struct ev_loop *evl; /* ev mode: the application's libev loop */
  _Atomic uint32_t spin_max_us;
  _Atomic size_t npending_pub; /* published count for cudaev_loop_pending */
  _Atomic uint32_t stopping;
  /* loop thread only: */
  struct cudaev_future **pend; /* promises and combinators not yet fired */
  uint32_t npend, cap_pend;
  struct cudaev__cont *def_head, *def_tail; /* continuations of fired futures */
  struct cudaev__gpu *gpu;                  /* NULL when the runtime could not start */
  cudaError_t gpu_error;                    /* why gpu is NULL */
};

/* The loop the calling thread is processing, or NULL. */
extern _Thread_local struct cudaev_loop *cudaev__tls_loop;
static inline bool cudaev__on_loop(const struct cudaev_loop *loop) {
  return cudaev__tls_loop == loop;
}

/* Wakes the loop (any thread). */
static inline void cudaev__loop_wake(struct cudaev_loop *loop) { cudaev__waker_wake(loop->waker); }
/* Sends a message to the loop (any thread) and wakes it. */
void cudaev__loop_send(struct cudaev_loop *loop, struct cudaev__msg *m);

/* One pass: drain wakeups and messages, poll GPU sources, run deferred
 * continuations, the watchdog. Returns true when more work is ready now. */
bool cudaev__loop_process(struct cudaev_loop *loop);
/* Before blocking: spins adaptively and arms GPU wakeups. Returns the
 * longest the caller may block in ns (UINT64_MAX: until the fd fires; 0:
 * process again now). */
uint64_t cudaev__loop_before_sleep(struct cudaev_loop *loop);

/* pending-list maintenance (loop thread) */
bool cudaev__pend_add(struct cudaev_loop *loop, struct cudaev_future *f);
void cudaev__pend_del(struct cudaev_loop *loop, struct cudaev_future *f);

/* Whether `loop` is the process's default loop (backend_thread.c), which
 * cudaev_loop_destroy leaves alone. Thread: any. */
bool cudaev__loop_is_default(const struct cudaev_loop *loop);

/* ---- GPU sources (loop/gpu.c) ------------------------------------------- */

/* Binds the loop to the calling thread's context and creates the GPU
 * resources. Returns the error that makes GPU sources unavailable. */
cudaError_t cudaev__gpu_init(struct cudaev_loop *loop);
/* Loop thread: adds a submitted GPU future to its stream's FIFO. */
void cudaev__gpu_track(struct cudaev_loop *loop, struct cudaev_future *f);
/* Loop thread: polls completion words; true if anything completed. */
bool cudaev__gpu_poll(struct cudaev_loop *loop);
/* Loop thread: the watchdog (sticky errors); runs when due. */
void cudaev__gpu_watchdog(struct cudaev_loop *loop, uint64_t now);
/* Loop thread: spin + arm before sleeping; returns ns the loop may block. */
uint64_t cudaev__gpu_before_sleep(struct cudaev_loop *loop);
/* Number of GPU futures tracked. */
size_t cudaev__gpu_pending(struct cudaev_loop *loop);
/* For wait() off the loop thread: where the GPU is with a plain GPU future
 * (word or event), without the loop: cudaErrorNotReady, else its outcome. */
cudaError_t cudaev__gpu_self_state(struct cudaev_future *f);
/* Destroy: fail pending GPU futures, release gates, sync, free. */
void cudaev__gpu_fini(struct cudaev_loop *loop);
/* Enter/leave the loop's context on the processing thread: pushes it when
 * another (or none) is current; returns whether it pushed. */
bool cudaev__gpu_enter(struct cudaev_loop *loop);
void cudaev__gpu_leave(struct cudaev_loop *loop, bool pushed);
/* Stream records alive (tracked streams plus at most IDLE_MAX idle ones);
 * for tests. Thread: any (a relaxed snapshot). */
size_t cudaev__gpu_tracks(struct cudaev_loop *loop);
/* Process exit, with the loop thread stopped (or calling exit itself):
 * opens the gates of the loop-thread host functions in the stream FIFOs
 * without running them, so that neither the GPU nor a driver thread stays
 * blocked on a loop that will not run again. No driver call, no user code. */
void cudaev__gpu_open_gates(struct cudaev_loop *loop);
/* Handles a MSG_NOTIFY. */
void cudaev__notify_msg(struct cudaev_loop *loop, struct cudaev__msg *m);

#endif
