/* The CPU backend: the reference MLP (model.c) on one worker thread per
 * stand-in device, each batch a promise the worker completes. It is the
 * GPU step with the GPU taken out, so that the whole service (HTTP,
 * batching, deadlines, drain, fault and reset) runs in CI: each stand-in
 * device has its own foreign-mode cudaev loop, as a GPU has; --cpu-delay-us
 * adds a GPU's latency; a batch with a fault request "faults" the device:
 * it and every later batch on it fail with cudaErrorIllegalAddress until the
 * device is reset, as a sticky error does on a GPU.
 *
 * Thread: the worker only takes jobs from its queue (under its mutex),
 * computes into the slot, and calls cudaev_promise_set (Thread: any). It is
 * joined before the loop is destroyed: afterwards a promise may no longer
 * be set. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service.h"

struct cpu_job {
  struct slot *slot;
  cudaev_future_t *f; /* the worker's reference */
  uint64_t ns;        /* compute time, the "device time" */
  struct cpu_job *next;
};

struct cpu_dev {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct cpu_job *head, *tail;
  int stop, faulted;
  const struct model *model;
  unsigned delay_us;
  double *scratch;
  struct cpu_job *jobs; /* one per slot */
};

/* A sticky fault that outlives the reset: only a new process clears it. */
static atomic_int unrecoverable;

/* The stand-in for the GPU's time: a wait that closing interrupts.
 * Returns -1 when the device is closing. */
static int stand_in_delay(struct cpu_dev *c, uint64_t until_ns) {
  struct timespec until = {(time_t)(until_ns / 1000000000u), (long)(until_ns % 1000000000u)};
  int stop;
  pthread_mutex_lock(&c->mu);
  while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &until) == 0) {
  }
  stop = c->stop;
  pthread_mutex_unlock(&c->mu);
  return stop ? -1 : 0;
}

static void *worker(void *arg) {
  struct cpu_dev *c = arg;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->stop && c->head == NULL) pthread_cond_wait(&c->cv, &c->mu);
    if (c->stop) break;
    struct cpu_job *j = c->head;
    c->head = j->next;
    if (c->head == NULL) c->tail = NULL;
    pthread_mutex_unlock(&c->mu);

    struct slot *slot = j->slot;
    uint64_t t0 = now_ns();
    cudaError_t status = cudaSuccess;
    if (c->delay_us && stand_in_delay(c, t0 + c->delay_us * 1000ull) != 0) {
      pthread_mutex_lock(&c->mu);
      break; /* closing: the loop's destruction ends this batch */
    }
    if (slot->fault & FAULT_STICKY) atomic_store(&unrecoverable, 1);
    if (slot->fault) c->faulted = 1;
    if (c->faulted)
      status = cudaErrorIllegalAddress;
    else
      model_forward(c->model, slot->in, slot->out, slot->n, c->scratch);
    j->ns = now_ns() - t0;
    cudaev_future_t *f = j->f;
    j->f = NULL;
    cudaev_promise_set(f, status);
    cudaev_future_release(f);

    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static int cpu_list(struct server *s, int *ordinals, int max, char *err, size_t errlen) {
  (void)err, (void)errlen;
  int n = s->cfg->cpu_devices < max ? s->cfg->cpu_devices : max;
  for (int i = 0; i < n; i++) ordinals[i] = i;
  return n;
}

static void cpu_free(struct device *dev) {
  struct cpu_dev *c = dev->priv;
  for (int i = 0; i < dev->nslots; i++) {
    free(dev->slots[i].in);
    free(dev->slots[i].out);
    dev->slots[i].in = dev->slots[i].out = NULL;
  }
  if (c) {
    free(c->scratch);
    free(c->jobs);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
  }
  dev->priv = NULL;
}

static int cpu_open(struct device *dev, int cap, char *err, size_t errlen) {
  const struct model *m = &dev->srv->model;
  if (atomic_load(&unrecoverable)) {
    snprintf(err, errlen, "cudaErrorDevicesUnavailable (stand-in: the fault outlived the reset)");
    return -1;
  }
  struct cpu_dev *c = calloc(1, sizeof *c);
  dev->priv = c;
  if (c == NULL) goto oom;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* now_ns()'s clock */
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);
  c->model = m;
  c->delay_us = dev->srv->cfg->cpu_delay_us;
  c->scratch = malloc(2 * sizeof(double) * (size_t)model_max_width(m));
  c->jobs = calloc((size_t)dev->nslots, sizeof *c->jobs);
  if (c->scratch == NULL || c->jobs == NULL) goto oom;
  for (int i = 0; i < dev->nslots; i++) {
    struct slot *slot = &dev->slots[i];
    slot->in = malloc(sizeof(float) * (size_t)cap * (size_t)m->dims[0]);
    slot->out = malloc(sizeof(float) * (size_t)cap * (size_t)m->dims[m->nlayers]);
    if (slot->in == NULL || slot->out == NULL) goto oom;
    c->jobs[i].slot = slot;
    slot->priv = &c->jobs[i];
  }
  /* No context is needed for promises: without a GPU the loop is
   * promise-only, which is all this backend asks of it. */
  cudaError_t e = cudaev_loop_new_foreign(&dev->loop);
  if (e != cudaSuccess) {
    snprintf(err, errlen, "cudaev_loop_new_foreign: %s", cudaev_error_string(e));
    cpu_free(dev);
    return -1;
  }
  if (pthread_create(&c->thread, NULL, worker, c) != 0) {
    snprintf(err, errlen, "cannot start the worker thread");
    cudaev_loop_destroy(dev->loop);
    cpu_free(dev);
    return -1;
  }
  printf("device %d: CPU reference MLP on a worker thread (stand-in device%s)\n", dev->ordinal,
         c->delay_us ? ", with the configured delay per batch" : "");
  return 0;
oom:
  snprintf(err, errlen, "out of memory");
  cpu_free(dev);
  return -1;
}

static cudaError_t cpu_submit(struct slot *slot, cudaev_future_t **out) {
  struct cpu_dev *c = slot->dev->priv;
  struct cpu_job *j = slot->priv;
  cudaev_future_t *f;
  cudaError_t e = cudaev_promise_new(slot->dev->loop, &f);
  if (e != cudaSuccess) return e;
  j->f = cudaev_future_retain(f);
  j->next = NULL;
  pthread_mutex_lock(&c->mu);
  if (c->tail)
    c->tail->next = j;
  else
    c->head = j;
  c->tail = j;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  *out = f;
  return cudaSuccess;
}

static uint64_t cpu_batch_ns(struct slot *slot) { return ((struct cpu_job *)slot->priv)->ns; }

static void cpu_close(struct device *dev, int reset) {
  struct cpu_dev *c = dev->priv;
  (void)reset; /* a fresh cpu_dev on reopen is the reset */
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  /* The worker is gone: no promise is set any more. Destroying the loop
   * completes the unfinished batches' futures (continuations run here). */
  cudaev_loop_destroy(dev->loop);
  for (int i = 0; i < dev->nslots; i++) {
    cudaev_future_release(c->jobs[i].f);
    c->jobs[i].f = NULL;
  }
  cpu_free(dev);
}

const struct backend_ops backend_cpu = {
    .name = "cpu",
    .list = cpu_list,
    .open = cpu_open,
    .submit = cpu_submit,
    .batch_ns = cpu_batch_ns,
    .close = cpu_close,
};
