/* Messages to a loop, on its MPSC queue (mpsc.h). The kinds and the
 * header every message starts with; loop.c dispatches them by kind.
 * Senders: future.c (futures, continuations), loop.c (cudaev_loop_post),
 * notify.c (its own CUDAEV__MSG_RUN), through cudaev__loop_send (waker.h). */
#ifndef CUDAEV_MSG_H
#define CUDAEV_MSG_H

#include "mpsc.h"

#include <stdint.h>

struct cudaev_loop;

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

#endif
