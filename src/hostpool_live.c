/* The pinned pool's live table: every pointer handed out and not yet
 * freed (contract: hostpool_internal.h).
 * Calls no other pool file. */
#include "hostpool_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* Open addressing with linear probing and backward-shift deletion, in
 * shards so that threads freeing different pointers rarely meet. */
#define LIVE_SHARDS 16

struct live_shard {
  pthread_mutex_t mu;
  struct live_entry *t;
  size_t cap, n; /* cap: 0 or a power of two */
} __attribute__((aligned(64)));

static struct live_shard live[LIVE_SHARDS] = {
    [0 ... LIVE_SHARDS - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER}};

static inline uint64_t live_hash(uintptr_t p) {
  return (uint64_t)(p >> 12) * UINT64_C(0x9e3779b97f4a7c15);
}
static inline struct live_shard *live_shard_of(uint64_t h) { return &live[h >> 60]; }
static inline size_t live_home(uint64_t h, size_t cap) { return (size_t)(h >> 20) & (cap - 1); }

/* Places e in t (which has room), replacing an entry with the same p. */
static void live_place(struct live_entry *t, size_t cap, const struct live_entry *e, size_t *n) {
  size_t i = live_home(live_hash(e->p), cap);
  while (t[i].p != 0 && t[i].p != e->p) i = (i + 1) & (cap - 1);
  if (t[i].p == 0) (*n)++;
  t[i] = *e;
}

bool cudaev__hostpool_live_put(uintptr_t p, struct pool_arena *pa, unsigned gen) {
  struct live_entry e = {p, pa, gen};
  struct live_shard *s = live_shard_of(live_hash(p));
  bool ok = true;
  pthread_mutex_lock(&s->mu);
  if ((s->n + 1) * 4 > s->cap * 3) {
    size_t cap = s->cap ? s->cap * 2 : 64, n = 0;
    struct live_entry *t = calloc(cap, sizeof *t);
    if (t == NULL) {
      ok = false;
      goto done;
    }
    for (size_t i = 0; i < s->cap; i++)
      if (s->t[i].p != 0) live_place(t, cap, &s->t[i], &n);
    free(s->t);
    s->t = t;
    s->cap = cap;
    s->n = n;
  }
  live_place(s->t, s->cap, &e, &s->n);
done:
  pthread_mutex_unlock(&s->mu);
  return ok;
}

bool cudaev__hostpool_live_take(uintptr_t p, struct live_entry *out) {
  uint64_t h = live_hash(p);
  struct live_shard *s = live_shard_of(h);
  bool found = false;
  pthread_mutex_lock(&s->mu);
  if (s->cap == 0) goto done;
  size_t mask = s->cap - 1, i = live_home(h, s->cap);
  while (s->t[i].p != 0 && s->t[i].p != p) i = (i + 1) & mask;
  if (s->t[i].p == 0) goto done;
  *out = s->t[i];
  found = true;
  s->n--;
  /* Backward shift: pull later entries of the probe run into the hole
   * unless their home lies cyclically in (hole, their slot]. */
  for (;;) {
    s->t[i].p = 0;
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (s->t[j].p == 0) goto done;
      size_t k = live_home(live_hash(s->t[j].p), s->cap);
      bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (!stays) break;
    }
    s->t[i] = s->t[j];
    i = j;
  }
done:
  pthread_mutex_unlock(&s->mu);
  return found;
}

void cudaev__hostpool_live_fork_lock(void) {
  for (int i = 0; i < LIVE_SHARDS; i++) pthread_mutex_lock(&live[i].mu);
}
void cudaev__hostpool_live_fork_unlock(void) {
  for (int i = LIVE_SHARDS - 1; i >= 0; i--) pthread_mutex_unlock(&live[i].mu);
}
void cudaev__hostpool_live_fork_reinit(void) {
  for (int i = 0; i < LIVE_SHARDS; i++) pthread_mutex_init(&live[i].mu, NULL);
}
