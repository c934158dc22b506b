/* twin.h: the blocking twin of examples/inference_server. The same model,
 * flags, batching policy (policy.h), bodies (parse.c) and metrics, built the
 * classic way: libmicrohttpd gives every connection a thread
 * (MHD_USE_THREAD_PER_CONNECTION), which parses its request, queues it and
 * sleeps on its job's semaphore; one executor thread per device stream takes
 * batches off the queue and runs them with blocking cudart calls
 * (gpu_enqueue, then cudaStreamSynchronize). What the benchmark measures
 * between the two is the design: one loop thread with its own HTTP on an
 * epoll set (the service first used libmicrohttpd too, and a thread per
 * connection is how that library blocks).
 *
 * No cudaev_* call: the twin runs on NVIDIA's libcudart.so.13 and on ours,
 * whichever LD_LIBRARY_PATH names (it links the library by name, with the
 * toolkit's directory as a DT_RUNPATH, which LD_LIBRARY_PATH overrides).
 *
 * Thread: everything shared (the queue, jobs' states, devices' generation)
 * is guarded by twin.mu; a device's reset takes its rwlock exclusively
 * while its executors hold it shared around each batch. */
#ifndef INFER_TWIN_H
#define INFER_TWIN_H

#include <cuda_runtime_api.h> /* cudaError_t (no library needed for the type) */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "metrics.h"
#include "model.h"
#include "policy.h"
#ifdef INFER_HAVE_GPU
#include "gpu.h"
#endif

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_ABANDONED };

/* A request's model step, shared between its connection's thread and an
 * executor. QUEUED -> RUNNING happens under twin.mu (an executor takes it
 * off the queue); RUNNING -> DONE (the executor, then `done` is posted) and
 * RUNNING -> ABANDONED (the connection gave up) race through one CAS, so a
 * finished batch wakes its 64 connection threads without the global lock.
 * Refcounted (the connection's, the queue's that becomes the executor's);
 * the last job_put frees it. */
/* What a job's executor hands back. */
struct answer {
  unsigned status; /* 200, or 503 with `reason` */
  char reason[160];
  unsigned long long batch_id;
  int batch_size, row, device;
};

struct job {
  atomic_int state; /* enum job_state */
  atomic_int refs;
  sem_t done;
  int fault;
  uint64_t queued_ns;
  float *in, *out;
  struct answer ans; /* written by the executor before `done` is posted */
  struct job *prev, *next;
};

struct tdev {
  int ordinal;
  pthread_rwlock_t reset_lock;
  unsigned generation; /* bumped by each reset (under twin.mu) */
  atomic_int faulted;  /* CPU backend: the stand-in's sticky error */
  atomic_ullong resets;
#ifdef INFER_HAVE_GPU
  struct gpu_dev g;
#endif
};

struct exec {
  struct twin *t;
  struct tdev *dev;
  pthread_t thread;
  int started;
  float *in, *out; /* staging: pinned (GPU) or malloc'd (CPU) */
  double *scratch;
#ifdef INFER_HAVE_GPU
  struct gpu_slot slot;
#endif
};

struct twin {
  struct config cfg;
  struct model model;
  struct metrics metrics;
  struct policy policy;
  int gpu;
  size_t max_body;
  pthread_mutex_t mu;
  pthread_cond_t work; /* executors wait for batches */
  struct job *head, *tail;
  size_t len;
  atomic_uint waiting;           /* connection threads whose job is queued or running */
  atomic_uint nconn;             /* open connections (MHD's notifications) */
  atomic_int draining, stopping; /* set under mu, read anywhere */
  unsigned long long next_batch_id;
  struct tdev *dev;
  int ndev;
  struct exec *exec;
  int nexec;
};

/* exec.c */
int twin_devices_open(struct twin *t, char *err, size_t errlen);
int twin_executors_start(struct twin *t, char *err, size_t errlen);
/* Stops the executors (after the drain) and closes the devices. */
void twin_devices_close(struct twin *t);
/* Queues a job (twin.mu held) and wakes an executor. */
void twin_push(struct twin *t, struct job *j);
/* Unlinks a queued job (twin.mu held). */
void twin_unlink(struct twin *t, struct job *j);
/* Drops one reference; frees the job at zero. Thread: any. */
void job_put(struct job *j);
/* cudaGetErrorName where the twin has a GPU build, its own names where not
 * (the CPU-only twin links no libcudart). */
const char *twin_error_name(cudaError_t e);

#endif
