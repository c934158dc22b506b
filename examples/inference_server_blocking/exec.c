/* The twin's devices and executors: one thread per device stream takes a
 * batch off the queue (policy.h decides when), runs it with blocking calls,
 * and hands each row back to the connection thread waiting for it. A
 * failed batch resets its device (every executor of the device waits on the
 * device's rwlock meanwhile) and its rows get 503, as in the service. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "twin.h"

#define MAX_DEVICES 64

const char *twin_error_name(cudaError_t e) {
#ifdef INFER_HAVE_GPU
  return cudaGetErrorName(e);
#else
  return e == cudaErrorIllegalAddress ? "cudaErrorIllegalAddress" : "cudaErrorDevicesUnavailable";
#endif
}

void job_put(struct job *j) {
  if (atomic_fetch_sub(&j->refs, 1) > 1) return;
  sem_destroy(&j->done);
  free(j->in);
  free(j->out);
  free(j);
}

void twin_push(struct twin *t, struct job *j) {
  j->queued_ns = now_ns();
  j->prev = t->tail;
  j->next = NULL;
  if (t->tail)
    t->tail->next = j;
  else
    t->head = j;
  t->tail = j;
  t->len++;
  atomic_fetch_add(&t->metrics.queue_depth, 1);
  pthread_cond_signal(&t->work);
}

void twin_unlink(struct twin *t, struct job *j) {
  if (j->prev)
    j->prev->next = j->next;
  else
    t->head = j->next;
  if (j->next)
    j->next->prev = j->prev;
  else
    t->tail = j->prev;
  j->prev = j->next = NULL;
  t->len--;
  atomic_fetch_sub(&t->metrics.queue_depth, 1);
}

static struct timespec abs_after(double s) {
  uint64_t at = now_ns() + (uint64_t)(s * 1e9);
  return (struct timespec){(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
}

static int open_staging(struct twin *t, struct exec *e) {
  const struct model *m = &t->model;
  int cap = t->cfg.max_batch;
#ifdef INFER_HAVE_GPU
  if (t->gpu) {
    cudaError_t err = gpu_slot_open(&e->slot, &e->dev->g, m, cap);
    if (err != cudaSuccess) {
      fprintf(stderr, "%s: device %d: %s\n", t->cfg.prog, e->dev->ordinal, cudaGetErrorName(err));
      return -1;
    }
    e->in = e->slot.h_in;
    e->out = e->slot.h_out;
    return 0;
  }
#endif
  e->in = malloc(sizeof(float) * (size_t)cap * (size_t)m->dims[0]);
  e->out = malloc(sizeof(float) * (size_t)cap * (size_t)m->dims[m->nlayers]);
  return e->in && e->out ? 0 : -1;
}

static void close_staging(struct twin *t, struct exec *e) {
#ifdef INFER_HAVE_GPU
  if (t->gpu) {
    gpu_slot_close(&e->slot);
    e->in = e->out = NULL;
    return;
  }
#endif
  (void)t;
  free(e->in);
  free(e->out);
  e->in = e->out = NULL;
}

int twin_devices_open(struct twin *t, char *err, size_t errlen) {
  int ordinals[MAX_DEVICES], n;
#ifdef INFER_HAVE_GPU
  if (t->gpu) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count == 0) e = cudaErrorNoDevice;
    if (e != cudaSuccess) {
      snprintf(err, errlen, "no GPU: %s (%s); --backend=cpu serves without one",
               cudaGetErrorName(e), cudaGetErrorString(e));
      return -1;
    }
    n = config_devices(t->cfg.devices, count, ordinals, MAX_DEVICES, err, errlen);
    if (n < 0) return -1;
  } else
#endif
  {
    n = t->cfg.cpu_devices < MAX_DEVICES ? t->cfg.cpu_devices : MAX_DEVICES;
    for (int i = 0; i < n; i++) ordinals[i] = i;
  }
  if (n <= 0) {
    snprintf(err, errlen, "no device");
    return -1;
  }
  t->dev = calloc((size_t)n, sizeof *t->dev);
  t->exec = calloc((size_t)n * (size_t)t->cfg.streams, sizeof *t->exec);
  if (!t->dev || !t->exec) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (int d = 0; d < n; d++) {
    struct tdev *dev = &t->dev[d];
    dev->ordinal = ordinals[d];
    pthread_rwlock_init(&dev->reset_lock, NULL);
#ifdef INFER_HAVE_GPU
    if (t->gpu) {
      cudaError_t e = gpu_dev_open(&dev->g, &t->model, dev->ordinal);
      if (e != cudaSuccess) {
        snprintf(err, errlen, "device %d: %s", dev->ordinal, cudaGetErrorName(e));
        return -1;
      }
    }
#endif
    t->ndev = d + 1;
    for (int i = 0; i < t->cfg.streams; i++) {
      struct exec *e = &t->exec[t->nexec];
      e->t = t;
      e->dev = dev;
      e->scratch = malloc(2 * sizeof(double) * (size_t)model_max_width(&t->model));
      if (e->scratch == NULL || open_staging(t, e) != 0) {
        snprintf(err, errlen, "device %d: cannot make its buffers", dev->ordinal);
        return -1;
      }
      t->nexec++;
    }
#ifdef INFER_HAVE_GPU
    if (t->gpu) {
      char line[512];
      struct exec *first = &t->exec[t->nexec - t->cfg.streams];
      if (gpu_selfcheck(&first->slot, &dev->g, &t->model, line, sizeof line) != 0) {
        snprintf(err, errlen, "%s", line);
        return -1;
      }
      printf("%s; %d streams\n", line, t->cfg.streams);
    }
#endif
    if (!t->gpu)
      printf("device %d: CPU reference MLP, %d executor threads\n", dev->ordinal, t->cfg.streams);
  }
  return 0;
}

/* After a failed batch: reset the device once, whichever of its executors
 * gets here first (the generation tells the others it was done). */
static void reset_device(struct twin *t, struct tdev *dev, unsigned gen) {
  pthread_rwlock_wrlock(&dev->reset_lock);
  if (dev->generation == gen) {
    fprintf(stderr, "%s: device %d failed: resetting it\n", t->cfg.prog, dev->ordinal);
#ifdef INFER_HAVE_GPU
    if (t->gpu) {
      for (int i = 0; i < t->nexec; i++)
        if (t->exec[i].dev == dev) close_staging(t, &t->exec[i]);
      gpu_dev_close(&dev->g);
      cudaSetDevice(dev->ordinal);
      cudaDeviceReset();
      cudaError_t e = gpu_dev_open(&dev->g, &t->model, dev->ordinal);
      for (int i = 0; e == cudaSuccess && i < t->nexec; i++)
        if (t->exec[i].dev == dev && open_staging(t, &t->exec[i]) != 0) e = cudaErrorUnknown;
      if (e != cudaSuccess)
        fprintf(stderr, "%s: device %d could not be reopened: %s\n", t->cfg.prog, dev->ordinal,
                cudaGetErrorName(e));
    }
#endif
    dev->faulted = 0;
    dev->resets++;
    atomic_fetch_add(&t->metrics.device_resets, 1);
    pthread_mutex_lock(&t->mu);
    dev->generation++;
    pthread_mutex_unlock(&t->mu);
  }
  pthread_rwlock_unlock(&dev->reset_lock);
}

/* Runs n rows (already in e->in) and copies each row's output into its
 * job. Blocks until done. Returns cudaSuccess or the batch's error. */
static cudaError_t run_batch(struct exec *e, struct job **jobs, int n, int fault, uint64_t *ns) {
  struct twin *t = e->t;
  const struct model *m = &t->model;
  size_t nin = (size_t)m->dims[0], nout = (size_t)m->dims[m->nlayers];
  cudaError_t status = cudaSuccess;
  uint64_t t0 = now_ns();
  pthread_rwlock_rdlock(&e->dev->reset_lock);
  if (e->in == NULL) {
    status = cudaErrorDevicesUnavailable; /* its reset failed */
    goto done;
  }
  for (int i = 0; i < n; i++) memcpy(e->in + i * nin, jobs[i]->in, nin * sizeof(float));
#ifdef INFER_HAVE_GPU
  if (t->gpu) {
    status = gpu_enqueue(&e->slot, &e->dev->g, m, n, fault);
    if (status == cudaSuccess) status = cudaStreamSynchronize(e->slot.stream);
    if (status == cudaSuccess) t0 = now_ns() - (uint64_t)(gpu_batch_ms(&e->slot) * 1e6);
    cudaGetLastError();
  }
#endif
  if (!t->gpu) {
    if (t->cfg.cpu_delay_us) {
      struct timespec d = {t->cfg.cpu_delay_us / 1000000,
                           (long)(t->cfg.cpu_delay_us % 1000000) * 1000};
      nanosleep(&d, NULL);
    }
    if (fault) e->dev->faulted = 1;
    if (e->dev->faulted)
      status = cudaErrorIllegalAddress;
    else
      model_forward(m, e->in, e->out, n, e->scratch);
  }
  if (status == cudaSuccess)
    for (int i = 0; i < n; i++) memcpy(jobs[i]->out, e->out + i * nout, nout * sizeof(float));
done:
  pthread_rwlock_unlock(&e->dev->reset_lock);
  *ns = now_ns() - t0;
  return status;
}

static void *executor(void *arg) {
  struct exec *e = arg;
  struct twin *t = e->t;
  struct job **jobs = calloc((size_t)t->cfg.max_batch, sizeof *jobs);
  if (jobs == NULL) return NULL;
  pthread_mutex_lock(&t->mu);
  while (!t->stopping) {
    double wait_s;
    double age = t->head ? (double)(now_ns() - t->head->queued_ns) * 1e-9 : 0;
    /* Every connection has its job queued or running: none can send. */
    int none_to_come = atomic_load_explicit(&t->waiting, memory_order_relaxed) >=
                       atomic_load_explicit(&t->nconn, memory_order_relaxed);
    int n = policy_take(&t->policy, t->len, age, t->draining, none_to_come, &wait_s);
    if (n == 0) {
      if (t->len) {
        struct timespec until = abs_after(wait_s);
        pthread_cond_timedwait(&t->work, &t->mu, &until);
      } else {
        pthread_cond_wait(&t->work, &t->mu);
      }
      continue;
    }
    int fault = 0;
    unsigned long long id = ++t->next_batch_id;
    for (int i = 0; i < n; i++) {
      jobs[i] = t->head;
      twin_unlink(t, jobs[i]);
      atomic_store(&jobs[i]->state, JOB_RUNNING);
      fault |= jobs[i]->fault;
    }
    if (t->len) pthread_cond_signal(&t->work); /* more for another executor */
    unsigned gen = e->dev->generation;
    atomic_fetch_add(&t->metrics.inflight_batches, 1);
    pthread_mutex_unlock(&t->mu);

    uint64_t ns;
    cudaError_t status = run_batch(e, jobs, n, fault, &ns);
    if (status != cudaSuccess)
      reset_device(t, e->dev, gen);
    else
      metrics_batch(&t->metrics, n, ns);

    atomic_fetch_sub(&t->metrics.inflight_batches, 1);
    for (int i = 0; i < n; i++) {
      struct job *j = jobs[i];
      j->ans.status = status == cudaSuccess ? 200 : 503;
      if (status != cudaSuccess)
        snprintf(j->ans.reason, sizeof j->ans.reason, "device %d failed: %s", e->dev->ordinal,
                 twin_error_name(status));
      j->ans.batch_id = id;
      j->ans.batch_size = n;
      j->ans.row = i;
      j->ans.device = e->dev->ordinal;
      int running = JOB_RUNNING;
      if (atomic_compare_exchange_strong(&j->state, &running, JOB_DONE)) sem_post(&j->done);
      job_put(j);
    }
    pthread_mutex_lock(&t->mu);
  }
  pthread_mutex_unlock(&t->mu);
  free(jobs);
  return NULL;
}

int twin_executors_start(struct twin *t, char *err, size_t errlen) {
  for (int i = 0; i < t->nexec; i++) {
    if (pthread_create(&t->exec[i].thread, NULL, executor, &t->exec[i]) != 0) {
      snprintf(err, errlen, "cannot start executor threads");
      return -1;
    }
    t->exec[i].started = 1;
  }
  return 0;
}

void twin_devices_close(struct twin *t) {
  pthread_mutex_lock(&t->mu);
  t->stopping = 1;
  pthread_cond_broadcast(&t->work);
  pthread_mutex_unlock(&t->mu);
  for (int i = 0; i < t->nexec; i++) {
    if (t->exec[i].started) pthread_join(t->exec[i].thread, NULL);
    close_staging(t, &t->exec[i]);
    free(t->exec[i].scratch);
  }
  for (int d = 0; d < t->ndev; d++) {
#ifdef INFER_HAVE_GPU
    if (t->gpu) gpu_dev_close(&t->dev[d].g);
#endif
    pthread_rwlock_destroy(&t->dev[d].reset_lock);
  }
  free(t->exec);
  free(t->dev);
  t->exec = NULL;
  t->dev = NULL;
  t->nexec = t->ndev = 0;
}
