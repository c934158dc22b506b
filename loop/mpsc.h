/* An intrusive multi-producer, single-consumer queue (Dmitry Vyukov's
 * non-blocking MPSC queue). The loop's messages travel on it
 * (struct cudaev__msg in loop_internal.h embeds a node): any thread pushes,
 * only the loop thread pops.
 *
 * A push is one exchange and one store and never blocks or fails; a pop
 * touches only the consumer's state. Nodes are owned by the caller: the
 * queue never allocates or frees. Each producer's nodes come out in the
 * order it pushed them. */
#ifndef CUDAEV_MPSC_H
#define CUDAEV_MPSC_H

#include <stdatomic.h>
#include <stdbool.h>

struct cudaev__mpsc_node {
  _Atomic(struct cudaev__mpsc_node *) next;
};

struct cudaev__mpsc {
  _Atomic(struct cudaev__mpsc_node *) tail; /* producers exchange here */
  /* The consumer's head on a line of its own: producers hammer `tail`. */
  char pad_[64 - sizeof(void *)];
  struct cudaev__mpsc_node *head; /* consumer only */
  struct cudaev__mpsc_node stub;
};

/* Makes q empty. Not concurrent with anything else on q. */
void cudaev__mpsc_init(struct cudaev__mpsc *q);
/* Appends n, which must not be in any queue. Thread: any. */
void cudaev__mpsc_push(struct cudaev__mpsc *q, struct cudaev__mpsc_node *n);
/* Takes the oldest node. NULL when empty, or when a producer is between
 * its two steps (the consumer retries later; in the loop, on the wakeup
 * that producer sends next). Thread: the one consumer. */
struct cudaev__mpsc_node *cudaev__mpsc_pop(struct cudaev__mpsc *q);
/* Whether nothing is queued or being pushed. Thread: the one consumer. */
bool cudaev__mpsc_empty(struct cudaev__mpsc *q);

#endif
