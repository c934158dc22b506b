/* The future (owner: future.c, the future core): its layout, states,
 * kinds and message bits, and the calls through which sources and the
 * loop complete, submit and fire futures. Who writes which field is said
 * at each: the core owns state, refs, msg_bits, result and the
 * continuations; a future's source owns the fields of its kind (the GPU
 * source: word, tag, gate, track, the marker bits; timers: deadline,
 * pend_idx). Thread: as each function says. */
#ifndef CUDAEV_FUTURE_INTERNAL_H
#define CUDAEV_FUTURE_INTERNAL_H

#include "debug.h"
#include "msg.h"

#include "cudaev.h"
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

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

struct cudaev__track; /* gpu_stream.h */
struct cudaev__hgate; /* hostfn.h */
struct cudaev_loop;   /* loop_internal.h */

struct cudaev_future {
  struct cudaev__msg msg; /* 16: queue link (MSG_FUTURE) */
  _Atomic uint32_t refs;
  _Atomic uint32_t state;    /* cudaev__fstate | WAITERS */
  _Atomic uint32_t msg_bits; /* CUDAEV__MB_* waiting in the queue, CUDAEV__C0_* */
  cudaError_t result;        /* valid once DONE */
  uint8_t kind;              /* cudaev__fkind */
  uint8_t fired : 1;         /* loop only (or at creation, done): continuations ran */
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
/* A future of `kind` already complete with `status`, from any thread,
 * without a message to the loop (future.c says why). */
struct cudaev_future *cudaev__future_new_done(struct cudaev_loop *loop, int kind,
                                              cudaError_t status);

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

#endif
