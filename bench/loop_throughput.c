/* Completion throughput of one loop thread, and per-completion cost against
 * the number of futures pending. Protocol: bench/common.h.
 *
 *   loop_completions_per_s          64 streams of empty kernels, one future
 *                                   each (cudaev_launch_cufunc_async), all
 *                                   queued while the streams are held, then
 *                                   released: completions / time from the
 *                                   first to the last continuation, both
 *                                   taken on the loop thread (thread mode)
 *   loop_marker_completions_per_s   the same with stream futures only (no
 *                                   kernels): the loop's side without the
 *                                   GPU's kernel rate
 *   loop_ref_gpu_completions_per_s  reference, no loop: the same kernels
 *                                   with raw cuStreamWriteValue32 markers;
 *                                   the host spins on the 64 last words.
 *                                   When loop_completions_per_s is close to
 *                                   it, the GPU, not the loop, is the limit
 *   loop_completion_cost_1k_pending_us, _100k_pending_us
 *                                   foreign-mode loop: 1,024 GPU futures
 *                                   whose markers the GPU has passed, N
 *                                   pending in all; loop time per
 *                                   completion of those 1,024 (flat in N is
 *                                   the target), both windows started
 *                                   equally cold (see "Cache state")
 *   loop_completion_cost_1k_pending_unswept_us, _100k_pending_unswept_us
 *                                   the same timed right after the set-up
 *                                   (no target)
 *
 * Why it is built this way (the earlier versions hung on the GPU):
 *
 * Holding streams. Work is queued while the streams are held, so that the
 * window measures completions and not the submitting threads' enqueue cost
 * (~2.5 us a launch, ~1 us a marker). A stream held by cuStreamWaitValue32
 * on a host word blocks its whole hardware queue (CUDA_DEVICE_MAX_CONNECTIONS
 * queues, shared by all streams of the context): with 64 streams every
 * queue had a blocked stream at its head, the driver's queue filled, and
 * the submitting thread blocked inside cuLaunchKernel before it could open
 * the gate. Here the gate is a one-thread kernel at the head of each
 * stream (lc_gate, loop_common.h) that ends when the host sets a flag or,
 * whatever the host does, after a GPU-clock limit. A host thread blocked in
 * a full queue is therefore only delayed, never deadlocked; a gate that
 * gave up sets a word, and that window is dropped (and the queue depth
 * halved) instead of reported.
 *
 * Queue depth. What is queued behind a closed gate stays well under the
 * ~1,000 operations after which the driver blocks enqueues: at most
 * OPS_PER_QUEUE operations per hardware queue, counting the streams that
 * share one (64 / connections). CUDA_DEVICE_MAX_CONNECTIONS is set to 32
 * unless the environment sets it (so that 64 streams are 2 per hardware
 * queue, not 8, and the kernels of different streams do not serialize
 * behind each other); the value used is printed.
 *
 * Submitters. Several threads (SUBMITTERS, each its own streams) queue a
 * window, so that filling it takes milliseconds; the loop thread has taken
 * every submission in before the gates open (cudaev_loop_pending), so the
 * window holds only completion work. The loop arms at most one wakeup host
 * function per stream while it waits; those are part of real use and stay.
 *
 * Pending cost. 100,000 GPU operations cannot be queued at once (the
 * driver's queues hold a few thousand per context), so the 100k run keeps
 * pending: the 1,024 measured GPU futures (64 streams, held by gates until
 * the loop has tracked them, then released and synchronized, so that the
 * timed part is only the loop's processing), held GPU futures on 64 more
 * streams behind gates that stay closed during the timed part (as many as
 * the queue budget allows: busy streams the loop scans on each pass, deep
 * FIFOs), and promises with a continuation each for the rest (the pending
 * list). Every kind of pending state the loop keeps is there; only its
 * per-completion cost is timed. The 1k run has the 1,024 measured futures
 * only. The 100k / 1k ratio is the target.
 *
 * Cache state. Setting up the 100k run writes about 15 MB (96k promises,
 * 3k held futures and their driver calls) after the loop took the
 * measured futures in, and the 1k run writes nothing there: timed right
 * after, the 100k run starts with the loop's code and state out of the L2
 * cache and the 1k run with them in it, which is the difference of the
 * two set-ups, not of the number pending (traces: the extra time sits in
 * the first pass's start and each stream's first completion). So both
 * runs write the same EVICT_MIB of scratch memory before the timed part
 * and start equally cold; the runs without it are kept for the record
 * (loop_completion_cost_*_pending_unswept_us, no target).
 *
 * Progress goes to stderr at each phase; a watchdog thread ends the program
 * (exit 3) with the phase and step it was in when one runs past its time
 * limit, also when a thread is stuck inside a driver call, and when the
 * whole run passes 20 s (it should take a few seconds). */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "common.h"
#include "loop_common.h"
#include "ticks.h"

enum {
  NSTREAMS = 64,        /* the rates' streams, and the measured ones of the cost runs */
  NSTREAMS_ALL = 128,   /* + 64 streams of held futures for the 100k run */
  SUBMITTERS = 4,       /* threads that queue a rate window */
  OPS_PER_QUEUE = 256,  /* ops queued behind gates per hardware queue, at most */
  WINDOWS = 6,          /* the first one warms up */
  MAX_TRIES = 12,       /* windows tried per metric, dropped ones included */
  COST_MEASURED = 1024, /* 64 streams x 16 */
  EVICT_MIB = 32,       /* written before a cost window: more than L2, and
                           than what the 100k set-up writes */
};
/* Gates give up after: 0.3 s in a rate window, 2 s in a cost window. */
#define RATE_GATE_NS 300000000ull
#define COST_GATE_NS 2000000000ull
#define RUN_LIMIT_NS 20000000000ull /* the whole program */

static CUstream ss[NSTREAMS_ALL];
static CUcontext ctx;
static int connections;
static volatile uint32_t *host_words; /* [0] gate flag, [1] gave-up word, [64..127] ref words */
static CUdeviceptr dev_words;
static uint32_t round_no;

/* ---- progress and the watchdog ------------------------------------------- */

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static char wd_what[256];
static uint64_t wd_deadline, wd_t0, prog_t0;
static atomic_long count;

/* Names the step now running and the most it may take. */
static void watch(double limit_s, const char *fmt, ...) {
  pthread_mutex_lock(&wd_mu);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(wd_what, sizeof wd_what, fmt, ap);
  va_end(ap);
  wd_t0 = bench_now_ns();
  wd_deadline = wd_t0 + (uint64_t)(limit_s * 1e9);
  pthread_mutex_unlock(&wd_mu);
}

static void progress(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bench-loop-throughput [%6.2f s] ", (double)(bench_now_ns() - prog_t0) / 1e9);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static void *watchdog_main(void *arg) {
  (void)arg;
  for (;;) {
    usleep(100000);
    pthread_mutex_lock(&wd_mu);
    uint64_t now = bench_now_ns();
    if (now - prog_t0 > RUN_LIMIT_NS) {
      fprintf(stderr, "bench-loop-throughput: over the %.0f s run limit in: %s; giving up\n",
              RUN_LIMIT_NS / 1e9, wd_what);
      fflush(stdout);
      _exit(3);
    }
    if (wd_deadline != 0 && now > wd_deadline) {
      fprintf(
          stderr,
          "bench-loop-throughput: STUCK for %.1f s in: %s (completions counted: %ld); giving up\n",
          (double)(now - wd_t0) / 1e9, wd_what, atomic_load(&count));
      fflush(stdout);
      _exit(3);
    }
    pthread_mutex_unlock(&wd_mu);
  }
  return NULL;
}

/* ---- gates ------------------------------------------------------------------
 */

#define GATE_FLAG    (&host_words[0])
#define GATE_GAVE_UP (&host_words[1])
#define REF_WORD(i)  (&host_words[64 + (i)])

/* Holds streams [lo, hi) until the flag reaches `want` (or limit_ns). */
static void gates(int lo, int hi, uint32_t want, unsigned long long limit_ns) {
  CUdeviceptr flag = dev_words, gave_up = dev_words + 4;
  void *args[] = {&flag, &want, &limit_ns, &gave_up};
  for (int i = lo; i < hi; i++)
    LC_CU(d_cuLaunchKernel(lc_gate, 1, 1, 1, 1, 1, 1, 0, ss[i], args, NULL));
}

static void gates_open(uint32_t upto) { __atomic_store_n(GATE_FLAG, upto, __ATOMIC_RELEASE); }

static int gates_gave_up(void) { return __atomic_load_n(GATE_GAVE_UP, __ATOMIC_ACQUIRE) != 0; }

/* Streams that share one hardware queue when n streams are in use. */
static int per_queue(int n) { return (n + connections - 1) / connections; }

/* ---- continuations (loop thread) ---------------------------------------- */

static long target;              /* completions expected in this window */
static uint64_t t_first, t_last; /* loop-thread clock of the first and last one */

/* BENCH_LOOP_TRACE=FILE: the cost windows' completions, one line each
 * (window, order, stream, TSC ticks since the one before), to see where
 * the 100k case's extra time goes: spread evenly, at stream starts, or in
 * a few long stalls. */
static FILE *trace;
static uint64_t trace_tsc[COST_MEASURED + 1];
static uint16_t trace_stream[COST_MEASURED];

static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  (void)f;
  if (s != cudaSuccess) DIE("future failed: %s", cudaev_error_name(s));
  long c = atomic_load_explicit(&count, memory_order_relaxed) + 1;
  if (trace != NULL && c <= COST_MEASURED) {
    trace_tsc[c] = bench_ticks();
    trace_stream[c - 1] = (uint16_t)(uintptr_t)u;
  }
  if (c == 1) t_first = bench_now_ns();
  if (c == target) t_last = bench_now_ns();
  atomic_store_explicit(&count, c, memory_order_release); /* only the loop thread writes */
}

static atomic_long held_count;

static void held_cb(cudaev_future_t *f, cudaError_t s, void *u) {
  (void)f;
  (void)u;
  if (s != cudaSuccess) DIE("held future failed: %s", cudaev_error_name(s));
  atomic_store_explicit(&held_count, atomic_load_explicit(&held_count, memory_order_relaxed) + 1,
                        memory_order_release);
}

/* ---- rate windows -----------------------------------------------------------
 */

/* M_REF*: no loop, raw driver calls, the host spins on each stream's last
 * word. They say what the GPU retires per second with each kind of marker:
 *   M_REF        kernel + cuStreamWriteValue32 (flags 0: with its fence),
 *                what the loop enqueues for a kernel future
 *   M_REF_EVENT  kernel + cuEventRecord (a DISABLE_TIMING event each)
 *   M_REF_MK     kernel + a one-thread marker kernel (fence.sc.sys, store)
 *   M_REF_MKR    kernel + a one-thread marker kernel (st.release.sys)
 *   M_REF_KONLY  kernels only, one marker per stream after the last
 *   M_REF_MARK   cuStreamWriteValue32 only (flags 0)
 *   M_REF_EVONLY cuEventRecord only
 *   M_REF_MKONLY marker kernels only (fence.sc.sys, store)
 *   M_REF_MIXED  kernel + what the loop enqueues on a backlogged stream:
 *                an event, but cuStreamWriteValue32 every 16th (or
 *                CUDAEV_LOOP_WORD_EVERY-th) */
enum mode {
  M_KERNEL,
  M_KERNEL_POLL, /* M_KERNEL on a foreign-mode loop that a thread polls
                    without ever sleeping: the loop's side without its
                    wakeups (armed host functions) */
  M_MARKER,
  M_REF,
  M_REF_EVENT,
  M_REF_MK,
  M_REF_MKR,
  M_REF_KONLY,
  M_REF_MARK,
  M_REF_EVONLY,
  M_REF_MKONLY,
  M_REF_MIXED
};

static CUevent ref_events[64][128];

struct submitter {
  pthread_t th;
  cudaev_loop_t *loop;
  enum mode mode;
  int lo, hi;
  long per;
};

static void *submit_main(void *arg) {
  struct submitter *s = arg;
  LC_CU(d_cuCtxSetCurrent(ctx));
  for (long k = 0; k < s->per; k++)
    for (int i = s->lo; i < s->hi; i++) {
      cudaev_future_t *f = NULL;
      switch (s->mode) {
      case M_KERNEL:
      case M_KERNEL_POLL:
        LC_RT(cudaev_launch_cufunc_async(s->loop, lc_empty, lc_dim(1), lc_dim(1), NULL, 0,
                                         (cudaStream_t)ss[i], &f));
        break;
      case M_MARKER: LC_RT(cudaev_future_new_stream(s->loop, (cudaStream_t)ss[i], &f)); break;
      default: {
        int last = k == s->per - 1, m = s->mode;
        CUdeviceptr w = dev_words + (CUdeviceptr)(64 + i) * 4u;
        cuuint32_t v = (cuuint32_t)(k + 1);
        int every = getenv("CUDAEV_LOOP_WORD_EVERY") ? atoi(getenv("CUDAEV_LOOP_WORD_EVERY")) : 16;
        if (m == M_REF_MIXED) m = k % (every > 0 ? every : 16) == 0 ? M_REF : M_REF_EVENT;
        if (m == M_REF || m == M_REF_EVENT || m == M_REF_MK || m == M_REF_MKR || m == M_REF_KONLY)
          LC_CU(d_cuLaunchKernel(lc_empty, 1, 1, 1, 1, 1, 1, 0, ss[i], NULL, NULL));
        if (m == M_REF_EVENT || m == M_REF_EVONLY) LC_CU(d_cuEventRecord(ref_events[i][k], ss[i]));
        if (m == M_REF_MK || m == M_REF_MKR || m == M_REF_MKONLY) {
          void *args[] = {&w, &v};
          LC_CU(d_cuLaunchKernel(m == M_REF_MKR ? lc_mark_rel : lc_mark, 1, 1, 1, 1, 1, 1, 0, ss[i],
                                 args, NULL));
        } else if (last || m == M_REF || m == M_REF_MARK) {
          LC_CU(d_cuStreamWriteValue32(ss[i], w, v, 0));
        }
        break;
      }
      }
      if (f != NULL) {
        LC_RT(cudaev_future_then(f, count_cb, NULL));
        cudaev_future_release(f);
      }
    }
  return NULL;
}

/* Futures per stream in a rate window: what fits in the queue budget. */
static long rate_depth(enum mode m) {
  long ops = OPS_PER_QUEUE / per_queue(NSTREAMS) - 3; /* the gate, up to 2 armed wakeups */
  long per =
      m == M_MARKER || m == M_REF_MARK || m == M_REF_KONLY || m == M_REF_EVONLY || m == M_REF_MKONLY
          ? ops
          : ops / 2;
  if (per > 128) per = 128;
  return per < 2 ? 2 : per;
}

static atomic_int poll_stop;
static void *poll_main(void *arg) {
  LC_CU(d_cuCtxSetCurrent(ctx));
  while (!atomic_load_explicit(&poll_stop, memory_order_relaxed)) cudaev_loop_process(arg);
  return NULL;
}

static void rate(const char *metric, enum mode mode) {
  cudaev_loop_t *loop = NULL;
  pthread_t poller;
  int ref = mode != M_KERNEL && mode != M_MARKER && mode != M_KERNEL_POLL;
  if (mode == M_KERNEL_POLL) {
    LC_RT(cudaev_loop_new_foreign(&loop));
    atomic_store(&poll_stop, 0);
    if (pthread_create(&poller, NULL, poll_main, loop) != 0) DIE("no poller thread");
  } else if (!ref) {
    LC_RT(cudaev_loop_new_thread(&loop));
  }
  bench_unit(metric, "per_s");
  long per = rate_depth(mode);
  int good = 0;
  for (int w = 0; w < MAX_TRIES && good < WINDOWS; w++) {
    long total = per * NSTREAMS;
    uint32_t r = ++round_no;
    atomic_store(&count, 0);
    target = total;
    t_first = t_last = 0;
    *GATE_GAVE_UP = 0;
    for (int i = 0; i < NSTREAMS; i++) *REF_WORD(i) = 0;
    watch(5, "%s window %d: queueing %ld per stream on %d streams from %d threads", metric, w, per,
          NSTREAMS, SUBMITTERS);
    uint64_t tq = bench_now_ns();
    gates(0, NSTREAMS, r, RATE_GATE_NS);
    struct submitter sub[SUBMITTERS];
    for (int t = 0; t < SUBMITTERS; t++) {
      sub[t] = (struct submitter){.loop = loop,
                                  .mode = mode,
                                  .per = per,
                                  .lo = t * NSTREAMS / SUBMITTERS,
                                  .hi = (t + 1) * NSTREAMS / SUBMITTERS};
      if (pthread_create(&sub[t].th, NULL, submit_main, &sub[t]) != 0) DIE("no submitter thread");
    }
    for (int t = 0; t < SUBMITTERS; t++) pthread_join(sub[t].th, NULL);
    if (loop != NULL) {
      watch(5, "%s window %d: loop taking in %ld submissions", metric, w, total);
      while (cudaev_loop_pending(loop) < (size_t)total && !gates_gave_up()) usleep(100);
    }
    double queue_ms = (double)(bench_now_ns() - tq) / 1e6;
    watch(5, "%s window %d: gates open, waiting for %ld completions", metric, w, total);
    uint64_t t0 = bench_now_ns();
    gates_open(r);
    double rate_v;
    if (ref) {
      for (int i = 0; i < NSTREAMS; i++)
        while (__atomic_load_n(REF_WORD(i), __ATOMIC_ACQUIRE) != (uint32_t)per)
          __builtin_ia32_pause();
      rate_v = (double)total / ((double)(bench_now_ns() - t0) / 1e9);
    } else {
      while (atomic_load_explicit(&count, memory_order_acquire) < total) __builtin_ia32_pause();
      /* From the gates' opening, as for the references: the span between
       * the first and the last callback alone reads the loop's speed
       * (millions a second) whenever the loop thread happened to wake
       * after the GPU had finished most of the window. */
      rate_v = (double)total / ((double)(t_last - t0) / 1e9);
    }
    if (gates_gave_up()) {
      /* Queueing outlived the gate: the GPU ran while work was still being
       * queued, so the window measured enqueue cost. Drop it, queue less. */
      progress(
          "%s window %d: DROPPED, a gate gave up after %.0f ms (queueing took %.1f ms); "
          "per-stream depth %ld -> %ld",
          metric, w, RATE_GATE_NS / 1e6, queue_ms, per, per > 2 ? per / 2 : 2);
      per = per > 2 ? per / 2 : 2;
      continue;
    }
    if (w > 0) {
      bench_sample(metric, rate_v);
      good++;
    }
    progress("%s window %d: %.0f completions/s (%ld on %d streams, queued in %.1f ms)", metric, w,
             rate_v, total, NSTREAMS, queue_ms);
  }
  if (good == 0) DIE("%s: no window completed with its gates closed until opened", metric);
  if (mode == M_KERNEL_POLL) {
    atomic_store(&poll_stop, 1);
    pthread_join(poller, NULL);
  }
  if (loop != NULL) {
    watch(10, "%s: cudaev_loop_destroy", metric);
    cudaev_loop_destroy(loop);
  }
  for (int i = 0; i < NSTREAMS; i++) LC_CU(d_cuStreamSynchronize(ss[i]));
}

/* ---- pending cost ---------------------------------------------------------
 */

/* The same cache state for every cost window: EVICT_MIB written, line by
 * line, with a value the compiler cannot know. */
static unsigned char *evict_buf;
static void evict_caches(void) {
  const size_t n = (size_t)EVICT_MIB << 20;
  unsigned char v = (unsigned char)bench_ticks();
  for (size_t i = 0; i < n; i += 64) evict_buf[i] = v;
}

static void cost(const char *metric, long n, cudaev_future_t **promises, bool evict) {
  cudaev_loop_t *loop;
  LC_RT(cudaev_loop_new_foreign(&loop));
  bench_unit(metric, "us");
  const long per_m = COST_MEASURED / NSTREAMS;
  long per_h = 0, nprom = 0;
  if (n > COST_MEASURED) {
    /* Held GPU futures: what the queue budget leaves after the measured. */
    int q = per_queue(NSTREAMS); /* measured streams per queue; as many held */
    per_h = (OPS_PER_QUEUE - q * (per_m + 1)) / q - 1;
    if (per_h > 48) per_h = 48;
    if (per_h < 1) per_h = 1;
    nprom = n - COST_MEASURED - per_h * NSTREAMS;
  }
  int good = 0;
  for (int w = 0; w < MAX_TRIES && good < WINDOWS; w++) {
    uint32_t r1 = ++round_no, r2 = ++round_no;
    atomic_store(&count, 0);
    atomic_store(&held_count, 0);
    target = COST_MEASURED;
    *GATE_GAVE_UP = 0;
    watch(10, "%s window %d: queueing %d measured + %ld held GPU futures + %ld promises", metric, w,
          COST_MEASURED, per_h * NSTREAMS, nprom);
    /* Measured first: in every hardware queue they come before the held
     * streams' gates, so those never stand in front of them. */
    gates(0, NSTREAMS, r1, COST_GATE_NS);
    for (long k = 0; k < per_m; k++)
      for (int i = 0; i < NSTREAMS; i++) {
        cudaev_future_t *f;
        LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)ss[i], &f));
        LC_RT(cudaev_future_then(f, count_cb, (void *)(uintptr_t)i));
        cudaev_future_release(f);
      }
    /* The loop takes the measured ones in (and may put a marker of its
     * own behind each stream's tail) before the held streams' gates are
     * queued: in every hardware queue all of it comes first, so that
     * nothing of the measured streams waits behind a held gate. */
    watch(10, "%s window %d: loop taking in %d measured", metric, w, COST_MEASURED);
    while (cudaev_loop_pending(loop) < (size_t)COST_MEASURED && !gates_gave_up())
      cudaev_loop_process(loop);
    cudaev_loop_process(loop);
    if (per_h > 0) gates(NSTREAMS, NSTREAMS_ALL, r2, COST_GATE_NS);
    for (long k = 0; k < per_h; k++)
      for (int i = NSTREAMS; i < NSTREAMS_ALL; i++) {
        cudaev_future_t *f;
        LC_RT(cudaev_future_new_stream(loop, (cudaStream_t)ss[i], &f));
        LC_RT(cudaev_future_then(f, held_cb, NULL));
        cudaev_future_release(f);
      }
    for (long k = 0; k < nprom; k++) {
      LC_RT(cudaev_promise_new(loop, &promises[k]));
      LC_RT(cudaev_future_then(promises[k], held_cb, NULL));
    }
    long total = COST_MEASURED + per_h * NSTREAMS + nprom;
    watch(10, "%s window %d: loop taking in %ld submissions", metric, w, total);
    while (cudaev_loop_pending(loop) < (size_t)total && !gates_gave_up()) cudaev_loop_process(loop);
    watch(10, "%s window %d: measured gates open, synchronizing %d streams", metric, w, NSTREAMS);
    gates_open(r1);
    for (int i = 0; i < NSTREAMS; i++) LC_CU(d_cuStreamSynchronize(ss[i]));
    int valid = !gates_gave_up() && atomic_load(&count) == 0;
    watch(10, "%s window %d: completing %d futures, %ld pending", metric, w, COST_MEASURED, total);
    /* The trace's own stores: to lines written just now, or each 8th
     * completion's would miss in the 100k case only (evicted by then). */
    if (trace != NULL) {
      memset(trace_tsc, 0, sizeof trace_tsc);
      memset(trace_stream, 0, sizeof trace_stream);
    }
    if (evict) evict_caches();
    uint64_t t0 = bench_now_ns();
    trace_tsc[0] = bench_ticks();
    while (atomic_load_explicit(&count, memory_order_relaxed) < COST_MEASURED)
      cudaev_loop_process(loop);
    double us = bench_us(t0, bench_now_ns()) / (double)COST_MEASURED;
    if (trace != NULL)
      for (int c = 1; c <= COST_MEASURED; c++)
        fprintf(trace, "%s %d %d %u %llu\n", metric, w, c - 1, trace_stream[c - 1],
                (unsigned long long)(trace_tsc[c] - trace_tsc[c - 1]));
    valid = valid && !gates_gave_up();
    watch(10, "%s window %d: completing the %ld held futures", metric, w, total - COST_MEASURED);
    gates_open(r2);
    for (long k = 0; k < nprom; k++) {
      LC_RT(cudaev_promise_set(promises[k], cudaSuccess));
      cudaev_future_release(promises[k]);
    }
    while (atomic_load(&held_count) < total - COST_MEASURED) cudaev_loop_process(loop);
    if (!valid) {
      progress("%s window %d: DROPPED, a gate gave up before it was opened", metric, w);
      continue;
    }
    if (w > 0) {
      bench_sample(metric, us);
      good++;
    }
    progress("%s window %d: %.3f us per completion, %ld pending", metric, w, us, total);
  }
  if (good == 0) DIE("%s: no window completed with its gates closed until opened", metric);
  watch(10, "%s: cudaev_loop_destroy", metric);
  for (int i = NSTREAMS; i < NSTREAMS_ALL; i++) LC_CU(d_cuStreamSynchronize(ss[i]));
  cudaev_loop_destroy(loop);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  prog_t0 = bench_now_ns();
  /* Before the context exists: the driver reads it at context creation. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  const char *trace_path = getenv("BENCH_LOOP_TRACE");
  if (trace_path != NULL && (trace = fopen(trace_path, "w")) == NULL)
    DIE("BENCH_LOOP_TRACE: cannot write %s", trace_path);
  connections = atoi(getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
  if (connections < 1) connections = 8;
  if (connections > 32) connections = 32;
  pthread_t wd;
  watch(30, "start: cudaev_loop_new_foreign, lc_init, %d streams", NSTREAMS_ALL);
  if (pthread_create(&wd, NULL, watchdog_main, NULL) != 0) DIE("no watchdog thread");
  progress("start: CUDA_DEVICE_MAX_CONNECTIONS=%d (%d streams per hardware queue)", connections,
           per_queue(NSTREAMS));
  cudaev_loop_t *boot;
  LC_RT(cudaev_loop_new_foreign(&boot)); /* makes the primary context current */
  lc_init();
  LC_CU(d_cuCtxGetCurrent(&ctx));
  for (int i = 0; i < NSTREAMS_ALL; i++) LC_CU(d_cuStreamCreate(&ss[i], CU_STREAM_NON_BLOCKING));
  LC_CU(d_cuMemHostAlloc((void **)&host_words, 128 * 4,
                         CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  LC_CU(d_cuMemHostGetDevicePointer(&dev_words, (void *)host_words, 0));
  for (int i = 0; i < 128; i++) host_words[i] = 0;
  if (bench_begin("loop_completions")) {
    progress("loop_completions: begin, %ld kernels per stream", rate_depth(M_KERNEL));
    rate("loop_completions_per_s", M_KERNEL);
    bench_end();
  }
  if (bench_begin("loop_completions_polled")) {
    progress("loop_completions_polled: begin, %ld kernels per stream", rate_depth(M_KERNEL));
    rate("loop_completions_polled_per_s", M_KERNEL_POLL);
    bench_end();
  }
  if (bench_begin("loop_marker_completions")) {
    progress("loop_marker_completions: begin, %ld markers per stream", rate_depth(M_MARKER));
    rate("loop_marker_completions_per_s", M_MARKER);
    bench_end();
  }
  if (bench_begin("loop_ref_gpu_completions")) {
    progress("loop_ref_gpu_completions: begin (no loop)");
    rate("loop_ref_gpu_completions_per_s", M_REF);
    bench_end();
  }
  static const struct {
    const char *name;
    enum mode mode;
  } refs[] = {
      {"loop_ref_gpu_event_completions_per_s", M_REF_EVENT},
      {"loop_ref_gpu_mixed_completions_per_s", M_REF_MIXED},
      {"loop_ref_gpu_mk_completions_per_s", M_REF_MK},
      {"loop_ref_gpu_mkr_completions_per_s", M_REF_MKR},
      {"loop_ref_gpu_kernels_per_s", M_REF_KONLY},
      {"loop_ref_gpu_markers_per_s", M_REF_MARK},
      {"loop_ref_gpu_events_per_s", M_REF_EVONLY},
      {"loop_ref_gpu_mkonly_per_s", M_REF_MKONLY},
  };
  for (size_t j = 0; j < sizeof refs / sizeof refs[0]; j++) {
    char bname[64];
    snprintf(bname, sizeof bname, "%.*s", (int)(strlen(refs[j].name) - 6), refs[j].name);
    if (!bench_begin(bname)) continue;
    if ((refs[j].mode == M_REF_EVENT || refs[j].mode == M_REF_EVONLY ||
         refs[j].mode == M_REF_MIXED) &&
        ref_events[0][0] == NULL)
      for (int i = 0; i < 64; i++)
        for (int k = 0; k < 128; k++)
          LC_CU(d_cuEventCreate(&ref_events[i][k], CU_EVENT_DISABLE_TIMING));
    progress("%s: begin (no loop)", bname);
    rate(refs[j].name, refs[j].mode);
    bench_end();
  }
  if (bench_begin("loop_ref_event_query")) {
    /* The host's side of the event path: cuEventQuery of a passed event. */
    CUevent ev;
    LC_CU(d_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    LC_CU(d_cuEventRecord(ev, ss[0]));
    LC_CU(d_cuStreamSynchronize(ss[0]));
    bench_unit("loop_ref_event_query_us", "us");
    for (int r = 0; r < 20; r++) {
      uint64_t t0 = bench_now_ns();
      for (int k = 0; k < 1000; k++) LC_CU(d_cuEventQuery(ev));
      bench_sample("loop_ref_event_query_us", bench_us(t0, bench_now_ns()) / 1000.0);
    }
    /* ... and of one the stream has not reached (behind a gate). */
    uint32_t r = ++round_no;
    *GATE_GAVE_UP = 0;
    gates(0, 1, r, RATE_GATE_NS);
    LC_CU(d_cuEventRecord(ev, ss[0]));
    bench_unit("loop_ref_event_query_pending_us", "us");
    for (int rr = 0; rr < 20; rr++) {
      uint64_t t0 = bench_now_ns();
      for (int k = 0; k < 100; k++)
        if (d_cuEventQuery(ev) != CUDA_ERROR_NOT_READY) DIE("event passed a closed gate");
      bench_sample("loop_ref_event_query_pending_us", bench_us(t0, bench_now_ns()) / 100.0);
    }
    gates_open(r);
    LC_CU(d_cuStreamSynchronize(ss[0]));
    LC_CU(d_cuEventDestroy(ev));
    bench_end();
  }
  if (bench_begin("loop_completion_cost")) {
    progress("loop_completion_cost: begin");
    enum { NPEND_MAX = 100352 };
    cudaev_future_t **promises = malloc(NPEND_MAX * sizeof *promises);
    if (promises == NULL) DIE("out of memory");
    /* Out of the heap (mmap), so that it moves none of the loop's objects. */
    evict_buf = malloc((size_t)EVICT_MIB << 20);
    if (evict_buf == NULL) DIE("out of memory");
    cost("loop_completion_cost_1k_pending_us", COST_MEASURED, promises, true);
    cost("loop_completion_cost_100k_pending_us", NPEND_MAX, promises, true);
    cost("loop_completion_cost_1k_pending_unswept_us", COST_MEASURED, promises, false);
    cost("loop_completion_cost_100k_pending_unswept_us", NPEND_MAX, promises, false);
    free(evict_buf);
    free(promises);
    bench_end();
  }
  watch(30, "teardown");
  for (int i = 0; i < NSTREAMS_ALL; i++) LC_CU(d_cuStreamDestroy(ss[i]));
  LC_CU(d_cuMemFreeHost((void *)host_words));
  cudaev_loop_destroy(boot);
  progress("done");
  if (trace != NULL) fclose(trace);
  fflush(stdout);
  return 0;
}
