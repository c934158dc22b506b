/* Lists of items that share one timeout (deadline_fifo.h). */
#include "deadline_fifo.h"

void deadline_fifo_init(struct deadline_fifo *f, uint64_t timeout_ns) {
  f->head = f->tail = NULL;
  f->timeout_ns = timeout_ns;
  f->len = 0;
}

void deadline_item_remove(struct deadline_item *it) {
  struct deadline_fifo *f = it->on;
  if (f == NULL) return;
  if (it->prev)
    it->prev->next = it->next;
  else
    f->head = it->next;
  if (it->next)
    it->next->prev = it->prev;
  else
    f->tail = it->prev;
  it->prev = it->next = NULL;
  it->on = NULL;
  f->len--;
}

void deadline_fifo_push(struct deadline_fifo *f, struct deadline_item *it, uint64_t now_ns) {
  deadline_item_remove(it);
  it->due_ns = now_ns + f->timeout_ns;
  it->prev = f->tail;
  it->next = NULL;
  if (f->tail)
    f->tail->next = it;
  else
    f->head = it;
  f->tail = it;
  it->on = f;
  f->len++;
}

uint64_t deadline_fifo_next_due(const struct deadline_fifo *f) {
  return f->head ? f->head->due_ns : UINT64_MAX;
}

struct deadline_item *deadline_fifo_pop_due(struct deadline_fifo *f, uint64_t now_ns) {
  struct deadline_item *it = f->head;
  if (it == NULL || it->due_ns > now_ns) return NULL;
  deadline_item_remove(it);
  return it;
}
