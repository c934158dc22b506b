/* deadline_fifo.h: items that share one timeout, kept in the order they
 * were pushed. An item falls due the list's timeout after its push, so
 * that order is also the order they fall due, and one timer for the
 * oldest item serves the whole list: pushing and removing cost a few
 * pointer writes. The service keeps its clients' header and body
 * deadlines in such lists (conn.c), where a heap timer per request would
 * cost a heap operation per request.
 *
 * Times are CLOCK_MONOTONIC nanoseconds (now_ns); callers pass times that
 * never go back. Pure; no locking: one thread owns a list and its items. */
#ifndef INFER_DEADLINE_FIFO_H
#define INFER_DEADLINE_FIFO_H

#include <stddef.h>
#include <stdint.h>

struct deadline_fifo;

/* Embedded in what is waited for; zeroed, it is in no list. */
struct deadline_item {
  struct deadline_item *prev, *next;
  struct deadline_fifo *on; /* the list it is in, or NULL (read only) */
  uint64_t due_ns;          /* when it falls due, while in a list (read only) */
};

struct deadline_fifo {
  struct deadline_item *head, *tail; /* oldest first */
  uint64_t timeout_ns;
  size_t len;
};

/* An empty list whose items fall due timeout_ns after their push. */
void deadline_fifo_init(struct deadline_fifo *f, uint64_t timeout_ns);
/* Appends `it`, due at now_ns + the timeout; an item already in a list
 * (this one or another) leaves it first. */
void deadline_fifo_push(struct deadline_fifo *f, struct deadline_item *it, uint64_t now_ns);
/* Takes `it` out of the list it is in; nothing if it is in none. */
void deadline_item_remove(struct deadline_item *it);
/* When the oldest item falls due; UINT64_MAX when the list is empty. */
uint64_t deadline_fifo_next_due(const struct deadline_fifo *f);
/* Takes out and returns the oldest item if it is due at now_ns (due_ns <=
 * now_ns), else NULL: call it until NULL to collect everything due. */
struct deadline_item *deadline_fifo_pop_due(struct deadline_fifo *f, uint64_t now_ns);

#endif
