/* The table of destroyed handles (src/handle.h): live, destroyed and reused
 * handles, the special streams, slot collisions, many handles, and the
 * thread-safety the header claims (any thread; a revive never forgets
 * another handle; bury-before-destroy / revive-after-create ordering).
 * No driver is involved: the table is pure bookkeeping. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sched.h>

#include "handle.h"

enum { SLOTS = 1u << CUDAEV_HANDLE_GRAVE_BITS };

/* The first handle value >= from, stepping by 64 (an allocator's
 * alignment), that hashes to `slot`. */
static uintptr_t handle_in_slot(size_t slot, uintptr_t from) {
  for (uintptr_t h = from;; h += 64)
    if (cudaev__handle_slot(h) == slot) return h;
}

/* A cudaXxx-like function that only checks its handle. */
static cudaError_t use(const void *h) {
  CUDAEV_LIVE_OR_RETURN(h);
  return cudaSuccess;
}

/* The same for a type of handle NVIDIA's runtime answers with
 * cudaErrorInvalidValue (graphs, pools...). */
static cudaError_t use_as_value(const void *h) {
  CUDAEV_LIVE_OR_RETURN_ERR(h, cudaErrorInvalidValue);
  return cudaSuccess;
}

Test(handle, a_handle_never_destroyed_is_live) {
  cr_expect_not(cudaev__handle_dead((void *)0x105000));
  cr_expect_eq(use((void *)0x105000), cudaSuccess);
}

Test(handle, destroyed_is_dead_until_created_again) {
  void *h = (void *)0x105000;
  cudaev__handle_bury(h);
  cr_expect(cudaev__handle_dead(h));
  /* The driver hands the address out again to one of our creates. */
  cudaev__handle_revive(h);
  cr_expect_not(cudaev__handle_dead(h));
  /* ... and the reused handle can be destroyed again. */
  cudaev__handle_bury(h);
  cr_expect(cudaev__handle_dead(h));
  /* Reviving twice (a create, then a refused destroy) is harmless. */
  cudaev__handle_revive(h);
  cudaev__handle_revive(h);
  cr_expect_not(cudaev__handle_dead(h));
}

Test(handle, null_legacy_and_per_thread_are_never_dead) {
  const void *special[] = {NULL, cudaStreamLegacy, cudaStreamPerThread};
  for (int i = 0; i < 3; i++) {
    cudaev__handle_bury(special[i]);
    cr_expect_not(cudaev__handle_dead(special[i]), "special stream %d", i);
    cr_expect_eq(use(special[i]), cudaSuccess);
  }
  for (size_t s = 0; s < SLOTS; s++) cr_expect_eq(atomic_load(&cudaev__handle_graves[s]), 0);
}

/* Values where no object of the process can be are dead without a
 * lookup: below 64 KiB (except the special streams) and from the end of
 * user space on; the first and last possible addresses are not. */
Test(handle, values_where_no_object_can_be_are_dead) {
  const uintptr_t dead[] = {
      3, 0x1234, CUDAEV_HANDLE_MIN - 1, CUDAEV_HANDLE_END, CUDAEV_HANDLE_END + 0x1000, UINTPTR_MAX};
  for (size_t i = 0; i < sizeof dead / sizeof dead[0]; i++) {
    cr_expect(cudaev__handle_dead((void *)dead[i]), "%#zx", (size_t)dead[i]);
    cr_expect(cudaev__ptr_impossible((void *)dead[i]), "%#zx", (size_t)dead[i]);
    cr_expect_eq(use((void *)dead[i]), cudaErrorInvalidResourceHandle);
  }
  const uintptr_t live[] = {CUDAEV_HANDLE_MIN, CUDAEV_HANDLE_END - 64, 0x7f0000001000u};
  for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
    cr_expect_not(cudaev__handle_dead((void *)live[i]), "%#zx", (size_t)live[i]);
    cr_expect_not(cudaev__ptr_impossible((void *)live[i]), "%#zx", (size_t)live[i]);
  }
  /* NULL is no pointer at all, which each call answers for itself. */
  cr_expect_not(cudaev__ptr_impossible(NULL));
  /* A function leaves with the code its type of handle calls for. */
  cudaev__thread.last_error = cudaSuccess;
  cr_expect_eq(use_as_value((void *)0x1234), cudaErrorInvalidValue);
  cr_expect_eq(cudaev__thread.last_error, cudaErrorInvalidValue);
  cudaev__thread.last_error = cudaSuccess;
}

Test(handle, live_or_return_refuses_and_records_the_error) {
  void *h = (void *)0x107040;
  cudaev__thread.last_error = cudaSuccess;
  cudaev__handle_bury(h);
  cr_expect_eq(use(h), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaev__thread.last_error, cudaErrorInvalidResourceHandle);
  cudaev__thread.last_error = cudaSuccess;
  cudaev__handle_revive(h);
  cr_expect_eq(use(h), cudaSuccess);
  cr_expect_eq(cudaev__thread.last_error, cudaSuccess, "a live handle records nothing");
}

/* Two handles in one slot: the later destroy forgets the earlier one (the
 * documented limit), and reviving the earlier one leaves the later alone. */
Test(handle, a_slot_remembers_the_last_destroy_only) {
  uintptr_t a = handle_in_slot(17, 0x10000);
  uintptr_t b = handle_in_slot(17, a + 64);
  cr_assert_neq(a, b);
  cudaev__handle_bury((void *)a);
  cudaev__handle_bury((void *)b);
  cr_expect_not(cudaev__handle_dead((void *)a));
  cr_expect(cudaev__handle_dead((void *)b));
  cudaev__handle_revive((void *)a);
  cr_expect(cudaev__handle_dead((void *)b), "a revive never clears another handle");
  cudaev__handle_revive((void *)b);
  cr_expect_not(cudaev__handle_dead((void *)b));
}

/* Many handles at an allocator's spacing fill every slot, and exactly the
 * last one buried in each slot reads as dead. */
Test(handle, many_handles) {
  enum { N = 100000 };
  static uintptr_t last[SLOTS];
  uintptr_t base = 0x7f0000000000u;
  for (uintptr_t i = 0; i < N; i++) {
    uintptr_t h = base + i * 64;
    cudaev__handle_bury((void *)h);
    last[cudaev__handle_slot(h)] = h;
  }
  size_t used = 0;
  for (size_t s = 0; s < SLOTS; s++) used += last[s] != 0;
  cr_expect_eq(used, SLOTS, "%zu of %u slots used", used, (unsigned)SLOTS);
  size_t dead = 0, wrong = 0;
  for (uintptr_t i = 0; i < N; i++) {
    uintptr_t h = base + i * 64;
    bool d = cudaev__handle_dead((void *)h);
    dead += d;
    wrong += d != (last[cudaev__handle_slot(h)] == h);
  }
  cr_expect_eq(wrong, 0);
  cr_expect_eq(dead, used);
  for (uintptr_t i = 0; i < N; i++) cudaev__handle_revive((void *)(base + i * 64));
  for (size_t s = 0; s < SLOTS; s++) cr_expect_eq(atomic_load(&cudaev__handle_graves[s]), 0);
}

/* ---- threads -------------------------------------------------------------- */

enum { THREADS = 4, ROUNDS = 200000 };

struct worker {
  pthread_t t;
  uintptr_t h[8];
  int n;
  int errors;
};

/* Each thread destroys and re-creates its own handles, whose slots no
 * other thread uses: every bury must read dead, every revive live. */
static void *own_slots(void *arg) {
  struct worker *w = arg;
  for (int r = 0; r < ROUNDS; r++) {
    uintptr_t h = w->h[r % w->n];
    cudaev__handle_bury((void *)h);
    if (!cudaev__handle_dead((void *)h)) w->errors++;
    cudaev__handle_revive((void *)h);
    if (cudaev__handle_dead((void *)h)) w->errors++;
  }
  return NULL;
}

Test(handle, threads_with_their_own_slots) {
  static struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i].n = 8;
    for (int j = 0; j < 8; j++) w[i].h[j] = handle_in_slot((size_t)(i * 8 + j), 0x20000);
  }
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&w[i].t, NULL, own_slots, &w[i]), 0);
  for (int i = 0; i < THREADS; i++) {
    pthread_join(w[i].t, NULL);
    cr_expect_eq(w[i].errors, 0, "thread %d", i);
  }
}

/* All threads' handles share one slot. Only a handle's owner buries it, so
 * after its own revive it must read live whatever the others did (a revive
 * never clears another handle, a bury overwrites whole words); the slot
 * only ever holds 0 or one of the handles, and ends empty: the last bury's
 * owner revives after it. */
static uintptr_t shared[THREADS];
static atomic_int foreign_values;

static void *same_slot(void *arg) {
  struct worker *w = arg;
  uintptr_t h = w->h[0];
  size_t slot = cudaev__handle_slot(h);
  for (int r = 0; r < ROUNDS; r++) {
    cudaev__handle_bury((void *)h);
    uintptr_t v = atomic_load(&cudaev__handle_graves[slot]);
    bool known = v == 0;
    for (int i = 0; i < THREADS; i++) known |= v == shared[i];
    if (!known) atomic_fetch_add(&foreign_values, 1);
    cudaev__handle_revive((void *)h);
    if (cudaev__handle_dead((void *)h)) w->errors++;
  }
  return NULL;
}

Test(handle, threads_sharing_one_slot) {
  static struct worker w[THREADS];
  uintptr_t from = 0x30000;
  for (int i = 0; i < THREADS; i++) {
    shared[i] = handle_in_slot(5, from);
    from = shared[i] + 64;
    w[i].h[0] = shared[i];
    w[i].n = 1;
  }
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&w[i].t, NULL, same_slot, &w[i]), 0);
  for (int i = 0; i < THREADS; i++) {
    pthread_join(w[i].t, NULL);
    cr_expect_eq(w[i].errors, 0, "thread %d", i);
  }
  cr_expect_eq(atomic_load(&foreign_values), 0);
  cr_expect_eq(atomic_load(&cudaev__handle_graves[5]), 0);
}

/* The ordering the header prescribes: the destroying thread buries before
 * the driver frees the address, so a create on another thread that receives
 * the address revives it after the bury, and the new handle is live. */
static atomic_bool freed;
static void *destroyer(void *arg) {
  cudaev__handle_bury(arg);
  atomic_store_explicit(&freed, true, memory_order_release); /* the driver's free */
  return NULL;
}

Test(handle, a_create_on_another_thread_after_a_destroy_is_live) {
  void *h = (void *)0x40040;
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, destroyer, h), 0);
  while (!atomic_load_explicit(&freed, memory_order_acquire)) sched_yield();
  cudaev__handle_revive(h); /* the create that got the freed address */
  pthread_join(t, NULL);
  cr_expect_not(cudaev__handle_dead(h));
}

/* A grave keeps its kind: a destroyed handle of one kind condemns that
 * kind only; one of any kind (void *) matches every kind, both ways. */
Test(handle, a_grave_condemns_its_own_kind_only) {
  cudaEvent_t ev = (cudaEvent_t)(uintptr_t)0x109040;
  cudaGraph_t graph = (cudaGraph_t)(uintptr_t)0x109040;
  cudaStream_t st = (cudaStream_t)(uintptr_t)0x109040;
  CUevent drv_ev = (CUevent)(uintptr_t)0x109040;
  cudaev__handle_bury(ev);
  cr_expect(cudaev__handle_dead(ev));
  cr_expect(cudaev__handle_dead(drv_ev), "the driver's name of the same kind");
  cr_expect_not(cudaev__handle_dead(graph));
  cr_expect_not(cudaev__handle_dead(st));
  cr_expect(cudaev__handle_dead((const void *)ev), "a check of any kind");
  /* A create of another kind at the address leaves the event's grave. */
  cudaev__handle_revive(graph);
  cr_expect(cudaev__handle_dead(ev));
  cudaev__handle_revive(drv_ev);
  cr_expect_not(cudaev__handle_dead(ev));
  /* A grave of any kind condemns every kind, and any revive clears it. */
  cudaev__handle_bury((const void *)ev);
  cr_expect(cudaev__handle_dead(graph));
  cr_expect(cudaev__handle_dead(st));
  cudaev__handle_revive(st);
  cr_expect_not(cudaev__handle_dead(graph));
  /* Impossible values are dead as every kind. */
  cr_expect(cudaev__handle_dead((cudaGraph_t)(uintptr_t)0x1234));
}
