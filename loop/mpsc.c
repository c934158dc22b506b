/* The MPSC queue (mpsc.h): Dmitry Vyukov's intrusive non-blocking queue.
 *
 * The queue is a singly linked list from `head` (consumer) to `tail`
 * (producers), always holding at least one node: the stub, when nothing
 * else is. A push exchanges `tail` first and links the previous tail to
 * the new node second; between the two steps the list is cut at that
 * point, and pop reports "empty" there rather than wait. */
#include "mpsc.h"

#include <stddef.h>

void cudaev__mpsc_init(struct cudaev__mpsc *q) {
  atomic_init(&q->stub.next, NULL);
  atomic_init(&q->tail, &q->stub);
  q->head = &q->stub;
}

void cudaev__mpsc_push(struct cudaev__mpsc *q, struct cudaev__mpsc_node *n) {
  atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
  /* seq_cst: the loop's waker pairs this exchange with its own load of
   * `pending` (a store/load pair; see cudaev__waker_wake). */
  struct cudaev__mpsc_node *prev = atomic_exchange_explicit(&q->tail, n, memory_order_seq_cst);
  atomic_store_explicit(&prev->next, n, memory_order_release);
}

struct cudaev__mpsc_node *cudaev__mpsc_pop(struct cudaev__mpsc *q) {
  struct cudaev__mpsc_node *head = q->head;
  struct cudaev__mpsc_node *next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (head == &q->stub) {
    if (next == NULL) return NULL;
    q->head = next;
    head = next;
    next = atomic_load_explicit(&head->next, memory_order_acquire);
  }
  if (next != NULL) {
    q->head = next;
    return head;
  }
  if (head != atomic_load_explicit(&q->tail, memory_order_acquire))
    return NULL; /* push in flight */
  /* head is the last node: put the stub behind it, so that taking head
   * leaves the list non-empty. */
  cudaev__mpsc_push(q, &q->stub);
  next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (next != NULL) {
    q->head = next;
    return head;
  }
  return NULL;
}

bool cudaev__mpsc_empty(struct cudaev__mpsc *q) {
  return q->head == &q->stub && atomic_load_explicit(&q->tail, memory_order_seq_cst) == &q->stub;
}
