/* The pinned host memory pool's private contract, shared by its files
 * (the pool's public contract: hostpool.h).
 *
 *   hostpool.c        the runtime's entry points (cudaev__hostpool_*), the
 *                     pool's initialisation, fork and unload handlers
 *   hostpool_arena.c  the jemalloc side: the arenas, one per (device, flag
 *                     set), created on first use and published with one
 *                     atomic store; their extent hooks, which get chunks from
 *                     cuMemHostAlloc and give them back with cuMemFreeHost;
 *                     the devices' reset generations; purges and resets
 *   hostpool_chunk.c  the chunk registry: every chunk jemalloc holds, by
 *                     address, with the real base the driver returned, the
 *                     context it belongs to and the device's reset
 *                     generation when it was made
 *   hostpool_live.c   the live table: every pointer handed out and not yet
 *                     freed, so that cudaFreeHost never passes jemalloc a
 *                     pointer it did not hand out
 *   hostpool_held.c   frees held while a capture may be in progress
 *   hostpool_reaper.c the reaper thread: decay while freed memory is
 *                     cached, a purge once the pool is idle
 *
 * Calls go one way: hostpool.c -> hostpool_reaper.c -> hostpool_held.c ->
 * hostpool_arena.c -> hostpool_chunk.c, and hostpool.c -> hostpool_live.c.
 * Each file owns its state; the others reach it through the functions below.
 *
 * The registry's mutex (one), the live table's (a mutex per shard), the held
 * list's and the reaper's are never held with another or across a driver
 * call. Two more locks are held across jemalloc calls, and so across the
 * driver calls of the hooks those run (both hostpool_arena.c's):
 *  - je_lock, a reader-writer lock every jemalloc call is made under (as a
 *    reader: calls never exclude each other through it) and that fork takes
 *    as the writer, so that no thread is inside jemalloc when the process
 *    forks. jemalloc's own fork handlers take its arena locks, but not every
 *    lock it has: the lock of its address map (rtree init_lock), taken when
 *    a chunk lands in a new region of the address space, is not, and a
 *    child forked while another thread held it deadlocked in jemalloc.
 *  - purge_mu, which serialises the reaper's purges with cudaDeviceReset's
 *    arena destruction; nothing on an allocation or free path takes it.
 *
 * Fork: hostpool.c's prepare handler takes every lock of the pool through
 * the *_fork_lock functions, in this order: purge_mu, je_lock (arena), the
 * reaper's, the held list's, the registry's, the live table's; the parent
 * releases them in the reverse order (*_fork_unlock) and the child makes them
 * afresh (*_fork_reinit).
 *
 * Thread: every function here may be called from any thread, unless it says
 * otherwise.
 */
#ifndef CUDAEV_HOSTPOOL_INTERNAL_H
#define CUDAEV_HOSTPOOL_INTERNAL_H

#include "hostpool.h"

#include "cudaev_jemalloc.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined:
 * every combination is a flag set, and an index. */
#define FLAG_SETS 8

/* ---- arenas (hostpool_arena.c) ------------------------------------------- */

/* An arena's slot. device and flags are set at creation and never change;
 * ind belongs to hostpool_arena.c (cudaev__hostpool_arena_ind). */
struct pool_arena {
  extent_hooks_t hooks; /* first: a hook's extent_hooks argument points here */
  _Atomic unsigned ind; /* jemalloc arena index; 0 = none (0 is jemalloc's own arena) */
  int device;
  unsigned flags;
};

/* jemalloc's page size and dirty decay time (decay_ms). Returns false when
 * jemalloc refuses either; the pool then stays off. */
bool cudaev__hostpool_arena_setup(long decay_ms);

/* The slots of n devices' arenas and their reset generations (none made
 * yet). Returns false when out of memory; the pool then stays off. Called
 * once, before the pool is switched on. */
bool cudaev__hostpool_arenas_create(int n);

/* The number of devices the pool serves (0 before cudaev__hostpool_arenas_create). */
int cudaev__hostpool_ndevices(void);

/* The slot of (device, flags); device < ndevices, flags < FLAG_SETS. */
struct pool_arena *cudaev__hostpool_arena_at(int device, unsigned flags);

/* The arena of pa, created on first use; 0 when jemalloc cannot make one
 * (the caller then asks the driver directly). */
unsigned cudaev__hostpool_arena_ind(struct pool_arena *pa);

/* The reset generation of device (bumped by each cudaev__hostpool_arenas_reset). */
unsigned cudaev__hostpool_gen(int device);

/* A page-aligned allocation of size from arena ind. NULL when jemalloc gave
 * up; *err is then the driver's error that made a hook fail, or
 * CUDA_ERROR_OUT_OF_MEMORY. */
void *cudaev__hostpool_je_alloc(unsigned ind, size_t size, CUresult *err);

/* Gives p, an allocation of cudaev__hostpool_je_alloc, back to its arena. */
void cudaev__hostpool_je_free(void *p);

/* all: purge everything cached; else let decay purge what has been cached
 * longer than the decay time. */
void cudaev__hostpool_purge(bool all);

/* Bumps device's reset generation and destroys its arenas (their chunks
 * are released without a driver call). */
void cudaev__hostpool_arenas_reset(int device);

/* For tests: the index of (device, flags)'s arena, 0 when none is made
 * yet (cudaev__hostpool_arena). */
unsigned cudaev__hostpool_arena_made(int device, unsigned flags);

/* dlclose: deletes jemalloc's thread-state key (no key destructor may point
 * into an unloaded library). */
void cudaev__hostpool_arena_unload(void);

void cudaev__hostpool_arena_fork_lock(void);
void cudaev__hostpool_arena_fork_unlock(void);
void cudaev__hostpool_arena_fork_reinit(void);

/* ---- the chunk registry (hostpool_chunk.c) ------------------------------- */

struct chunk {
  uintptr_t addr; /* what jemalloc got: base aligned as it asked */
  size_t size;
  void *base; /* what the driver returned */
  CUcontext ctx;
  int device;
  unsigned gen;
  unsigned flags; /* the cudaHostAlloc flags of its arena */
};

/* Records c; false when out of memory. */
bool cudaev__hostpool_chunk_insert(const struct chunk *c);

/* Takes the chunk at addr out of the registry into *out; false when none. */
bool cudaev__hostpool_chunk_take(uintptr_t addr, struct chunk *out);

/* Whether a chunk holds a. */
bool cudaev__hostpool_chunk_contains(uintptr_t a);

/* The arena flags of the chunk holding `a`, or false when none does. */
bool cudaev__hostpool_chunk_flags(uintptr_t a, unsigned *flags);

void cudaev__hostpool_chunk_fork_lock(void);
void cudaev__hostpool_chunk_fork_unlock(void);
void cudaev__hostpool_chunk_fork_reinit(void);

/* ---- the live table (hostpool_live.c) ------------------------------------ */

struct live_entry {
  uintptr_t p; /* 0 = empty */
  struct pool_arena *pa;
  unsigned gen; /* the device's reset generation at allocation */
};

/* Records p, allocated from pa in generation gen; false when out of memory. */
bool cudaev__hostpool_live_put(uintptr_t p, struct pool_arena *pa, unsigned gen);

/* Takes p's entry out of the table into *out; false when p is not live. */
bool cudaev__hostpool_live_take(uintptr_t p, struct live_entry *out);

void cudaev__hostpool_live_fork_lock(void);
void cudaev__hostpool_live_fork_unlock(void);
void cudaev__hostpool_live_fork_reinit(void);

/* ---- frees during a capture (hostpool_held.c) ---------------------------- */

struct held_free {
  void *p;
  int device;
  unsigned gen;
};

/* Holds the free of p (device, gen) until cudaev__hostpool_release_held;
 * false when out of memory. */
bool cudaev__hostpool_hold(void *p, int device, unsigned gen);

/* Gives the held frees to jemalloc once no capture may be in progress. */
void cudaev__hostpool_release_held(void);

/* How many frees are held. */
size_t cudaev__hostpool_nheld(void);

/* hostpool_arena.c's half of cudaev__hostpool_release_held: under je_lock,
 * gives jemalloc the entries v[i..n) of device d whose generation is still
 * the device's. */
void cudaev__hostpool_arena_free_held(int d, const struct held_free *v, size_t i, size_t n);

void cudaev__hostpool_held_fork_lock(void);
void cudaev__hostpool_held_fork_unlock(void);
void cudaev__hostpool_held_fork_reinit(void);

/* ---- the reaper (hostpool_reaper.c) -------------------------------------- */

/* Before the pool is switched on: the decay time the reaper works to. */
void cudaev__hostpool_reaper_init(long decay_ms);

/* A pooled allocation: the pool is not idle. */
void cudaev__hostpool_note_alloc(void);

/* A pooled free: freed memory may be cached; starts the reaper if needed. */
void cudaev__hostpool_note_free(void);

/* Process exit and dlclose: stops the reaper and joins it. */
void cudaev__hostpool_reaper_stop(void);

void cudaev__hostpool_reaper_fork_lock(void);
void cudaev__hostpool_reaper_fork_unlock(void);
void cudaev__hostpool_reaper_fork_reinit(void);

#endif
