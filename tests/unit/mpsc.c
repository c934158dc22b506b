/* The MPSC queue (loop/mpsc.c): order on one thread, the stub's way back
 * into an emptied queue, and many producers against one consumer. */
#include <criterion/criterion.h>

#include "mpsc_stress.h"

Test(mpsc, starts_empty) {
  struct cudaev__mpsc q;
  cudaev__mpsc_init(&q);
  cr_expect(cudaev__mpsc_empty(&q));
  cr_expect_null(cudaev__mpsc_pop(&q));
  cr_expect(cudaev__mpsc_empty(&q), "a pop of an empty queue leaves it empty");
}

Test(mpsc, fifo_on_one_thread) {
  enum { N = 1000 };
  static struct cudaev__mpsc_node n[N];
  struct cudaev__mpsc q;
  cudaev__mpsc_init(&q);
  for (int i = 0; i < N; i++) cudaev__mpsc_push(&q, &n[i]);
  cr_expect_not(cudaev__mpsc_empty(&q));
  for (int i = 0; i < N; i++) {
    struct cudaev__mpsc_node *got = cudaev__mpsc_pop(&q);
    cr_assert_eq(got, &n[i], "pop %d", i);
  }
  cr_expect_null(cudaev__mpsc_pop(&q));
  cr_expect(cudaev__mpsc_empty(&q));
}

/* One node at a time: every pop takes the last node, which puts the stub
 * back behind it; a node popped may be pushed again. */
Test(mpsc, last_node_and_reuse) {
  struct cudaev__mpsc_node a, b;
  struct cudaev__mpsc q;
  cudaev__mpsc_init(&q);
  for (int i = 0; i < 100; i++) {
    struct cudaev__mpsc_node *x = i % 2 ? &a : &b;
    cudaev__mpsc_push(&q, x);
    cr_assert_not(cudaev__mpsc_empty(&q));
    cr_assert_eq(cudaev__mpsc_pop(&q), x, "round %d", i);
    cr_assert(cudaev__mpsc_empty(&q), "round %d", i);
    cr_assert_null(cudaev__mpsc_pop(&q));
  }
  cudaev__mpsc_push(&q, &a);
  cudaev__mpsc_push(&q, &b);
  cr_expect_eq(cudaev__mpsc_pop(&q), &a);
  cudaev__mpsc_push(&q, &a);
  cr_expect_eq(cudaev__mpsc_pop(&q), &b);
  cr_expect_eq(cudaev__mpsc_pop(&q), &a);
  cr_expect(cudaev__mpsc_empty(&q));
}

Test(mpsc, many_producers_one_consumer, .timeout = 120) {
  const char *err = mpsc_stress(8, 500000);
  cr_expect_null(err, "%s", err ? err : "");
}

Test(mpsc, more_producers_than_cores, .timeout = 120) {
  const char *err = mpsc_stress(32, 50000);
  cr_expect_null(err, "%s", err ? err : "");
}
