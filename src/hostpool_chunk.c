/* The pinned pool's chunk registry: every chunk jemalloc holds, by
 * address (contract: hostpool_internal.h).
 * Calls no other pool file. */
#include "hostpool_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Sorted by addr. Touched on chunk allocation and release (each a driver
 * call anyway) and when cudaFreeHost is given a pointer that is not live. */
static struct {
  pthread_mutex_t mu;
  struct chunk *v;
  size_t n, cap;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Index of the last chunk whose addr <= a, or (size_t)-1. reg.mu held. */
static size_t reg_floor(uintptr_t a) {
  size_t lo = 0, hi = reg.n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (reg.v[mid].addr <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

bool cudaev__hostpool_chunk_insert(const struct chunk *c) {
  bool ok = true;
  pthread_mutex_lock(&reg.mu);
  if (reg.n == reg.cap) {
    size_t cap = reg.cap ? reg.cap * 2 : 64;
    struct chunk *v = realloc(reg.v, cap * sizeof *v);
    if (v == NULL) {
      ok = false;
      goto done;
    }
    reg.v = v;
    reg.cap = cap;
  }
  size_t i = reg_floor(c->addr) + 1;
  memmove(&reg.v[i + 1], &reg.v[i], (reg.n - i) * sizeof *reg.v);
  reg.v[i] = *c;
  reg.n++;
done:
  pthread_mutex_unlock(&reg.mu);
  return ok;
}

bool cudaev__hostpool_chunk_take(uintptr_t addr, struct chunk *out) {
  bool found = false;
  pthread_mutex_lock(&reg.mu);
  size_t i = reg_floor(addr);
  if (i != (size_t)-1 && reg.v[i].addr == addr) {
    *out = reg.v[i];
    memmove(&reg.v[i], &reg.v[i + 1], (reg.n - i - 1) * sizeof *reg.v);
    reg.n--;
    found = true;
  }
  pthread_mutex_unlock(&reg.mu);
  return found;
}

bool cudaev__hostpool_chunk_contains(uintptr_t a) {
  pthread_mutex_lock(&reg.mu);
  size_t i = reg_floor(a);
  bool in = i != (size_t)-1 && a - reg.v[i].addr < reg.v[i].size;
  pthread_mutex_unlock(&reg.mu);
  return in;
}

bool cudaev__hostpool_chunk_flags(uintptr_t a, unsigned *flags) {
  pthread_mutex_lock(&reg.mu);
  size_t i = reg_floor(a);
  bool in = i != (size_t)-1 && a - reg.v[i].addr < reg.v[i].size;
  if (in) *flags = reg.v[i].flags;
  pthread_mutex_unlock(&reg.mu);
  return in;
}

void cudaev__hostpool_chunk_fork_lock(void) { pthread_mutex_lock(&reg.mu); }
void cudaev__hostpool_chunk_fork_unlock(void) { pthread_mutex_unlock(&reg.mu); }
void cudaev__hostpool_chunk_fork_reinit(void) { pthread_mutex_init(&reg.mu, NULL); }
