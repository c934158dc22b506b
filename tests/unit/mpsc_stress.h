/* The MPSC queue's concurrent check, shared by tests/unit/mpsc.c
 * (Criterion) and tests/unit/mpsc_threads.c (plain, so that it also runs
 * under ThreadSanitizer). Several producers push numbered nodes while one
 * consumer pops; every node must come out exactly once, each producer's in
 * the order it pushed them, and the queue must be empty at the end. */
#ifndef CUDAEV_TEST_MPSC_STRESS_H
#define CUDAEV_TEST_MPSC_STRESS_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpsc.h"

struct mpsc_item {
  struct cudaev__mpsc_node node; /* first: a popped node is its item */
  int producer;
  long seq;
  int seen; /* consumer only */
};

struct mpsc_producer {
  struct cudaev__mpsc *q;
  struct mpsc_item *items;
  long n;
  atomic_int *go;
};

static void *mpsc_produce(void *arg) {
  struct mpsc_producer *p = arg;
  while (!atomic_load_explicit(p->go, memory_order_acquire)) sched_yield();
  for (long i = 0; i < p->n; i++) {
    cudaev__mpsc_push(p->q, &p->items[i].node);
    /* Now and then let the consumer drain the queue to empty, so that the
     * path that puts the stub back runs often too. */
    if ((i & 1023) == 0) sched_yield();
  }
  return NULL;
}

/* Runs the check with `producers` threads pushing `per_producer` nodes
 * each. Returns NULL on success, else what went wrong (static storage). */
static const char *mpsc_stress(int producers, long per_producer) {
  static char why[256];
  struct cudaev__mpsc q;
  cudaev__mpsc_init(&q);
  atomic_int go;
  atomic_init(&go, 0);
  struct mpsc_producer *ps = calloc((size_t)producers, sizeof *ps);
  pthread_t *th = calloc((size_t)producers, sizeof *th);
  long *next = calloc((size_t)producers, sizeof *next);
  const char *err = NULL;
  if (ps == NULL || th == NULL || next == NULL) return "out of memory";
  for (int i = 0; i < producers; i++) {
    ps[i].q = &q;
    ps[i].n = per_producer;
    ps[i].go = &go;
    ps[i].items = calloc((size_t)per_producer, sizeof *ps[i].items);
    if (ps[i].items == NULL) return "out of memory";
    for (long k = 0; k < per_producer; k++) {
      ps[i].items[k].producer = i;
      ps[i].items[k].seq = k;
    }
  }
  for (int i = 0; i < producers; i++)
    if (pthread_create(&th[i], NULL, mpsc_produce, &ps[i]) != 0) abort();
  atomic_store_explicit(&go, 1, memory_order_release);
  long total = (long)producers * per_producer, got = 0;
  while (got < total && err == NULL) {
    struct cudaev__mpsc_node *n = cudaev__mpsc_pop(&q);
    if (n == NULL) {
      sched_yield(); /* empty, or a push between its two steps */
      continue;
    }
    struct mpsc_item *it = (struct mpsc_item *)(void *)n;
    if (it->producer < 0 || it->producer >= producers) {
      err = "a node that was never pushed";
    } else if (it->seen++) {
      snprintf(why, sizeof why, "producer %d's node %ld came out twice", it->producer, it->seq);
      err = why;
    } else if (it->seq != next[it->producer]) {
      snprintf(why, sizeof why, "producer %d: node %ld came out where %ld was due", it->producer,
               it->seq, next[it->producer]);
      err = why;
    } else {
      next[it->producer]++;
      got++;
    }
  }
  for (int i = 0; i < producers; i++) pthread_join(th[i], NULL);
  if (err == NULL && cudaev__mpsc_pop(&q) != NULL) err = "a node more than was pushed";
  if (err == NULL && !cudaev__mpsc_empty(&q)) err = "not empty after every node came out";
  for (int i = 0; i < producers; i++) free(ps[i].items);
  free(ps);
  free(th);
  free(next);
  return err;
}

#endif
