/* Backend thread: the loop runs on a thread of its own (cudaev_loop_new_thread
 * and the process's default loop). Every such loop is on a registry, so
 * that process exit and fork can deal with the threads (docs/design.md,
 * "Exit, fork and dlclose"). */
#include "loop_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Process exit must stop the threads before the driver's own exit handlers
 * tear the driver down under them. */
struct thread_state {
  pthread_t th;
  struct cudaev_loop *loop;
  struct thread_state *next, **pprev; /* registry; pprev is NULL once out */
  bool gone;                          /* the thread no longer runs: joined at exit, or not in this
                process (a fork child) */
};

/* reg_mu guards the registry and every thread_state's links and `gone`.
 * Lock order: default_mu, then reg_mu. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct thread_state *reg_head;
static pid_t reg_pid;   /* the process the registered threads run in */
static bool reg_hooked; /* the exit and fork handlers are registered */
static pthread_mutex_t default_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct cudaev_loop *) default_loop;

/* How long process exit waits for one loop thread (a callback that never
 * returns, or a second thread inside exit(), must not hang the exit). */
#define EXIT_JOIN_NS 2000000000ull

/* The thread's own wait: ppoll on the wakeup fd, for as long as the GPU side
 * allows (cudaev__loop_before_sleep spins and arms first). No libev: a
 * program that only uses thread-mode loops never loads it. */
static void *thread_main(void *arg) {
  struct cudaev_loop *loop = arg;
  struct pollfd pfd = {.fd = loop->waker->fd, .events = POLLIN};
  /* Its driver calls (polls, markers, the submissions it was handed) are
   * no part of any capture on the application's threads (driver.h). */
  (void)cudaev__capture_relax();
  for (;;) {
    if (atomic_load_explicit(&loop->stopping, memory_order_acquire)) break;
    bool more = cudaev__loop_process(loop);
    if (loop->closing) {
      /* cudaev_loop_close from a callback: this thread tears the loop
       * down and leaves (thread_stop detaches it). */
      cudaev__loop_close_now(loop);
      return NULL;
    }
    if (more) continue;
    if (atomic_load_explicit(&loop->stopping, memory_order_acquire)) break;
    uint64_t t = cudaev__loop_before_sleep(loop);
    if (t == 0) continue;
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
    ppoll(&pfd, 1, t == UINT64_MAX ? NULL : &ts, NULL);
  }
  return NULL;
}

/* Asks the loop thread to leave thread_main, which checks `stopping` after
 * every pass and every wakeup.
 * Forces a write even if one is pending (the pending one may have been
 * read already). Any thread. */
static void thread_signal_stop(struct cudaev_loop *loop) {
  atomic_store_explicit(&loop->stopping, 1, memory_order_release);
  /* So that the next drain reads this write (it reads only when set). */
  atomic_store_explicit(&loop->waker->pending, 1, memory_order_seq_cst);
  uint64_t one = 1;
  ssize_t r;
  do r = write(loop->waker->fd, &one, sizeof one);
  while (r < 0 && errno == EINTR);
}

static void reg_unlink(struct thread_state *t) {
  if (t->pprev == NULL) return;
  *t->pprev = t->next;
  if (t->next != NULL) t->next->pprev = t->pprev;
  t->next = NULL;
  t->pprev = NULL;
}

/* Process exit (atexit, so it runs before the exit handlers the driver
 * registered at cuInit, which happened inside the first loop's creation),
 * and dlclose of the library (glibc runs a library's atexit handlers in
 * dlclose). Stops every thread-mode loop and joins its thread (bounded),
 * then opens the gates of loop-thread host functions the loop will never
 * run, so that no stream, and no driver thread, stays blocked on them while
 * the driver tears down. Runs no user code and no driver call. A loop
 * thread that calls exit() itself (from a callback) is only told to stop:
 * it cannot join itself, and it will not return to its loop. */
static void loops_at_exit(void) {
  pthread_mutex_lock(&reg_mu);
  struct thread_state *list = reg_pid == getpid() ? reg_head : NULL;
  reg_head = NULL;
  for (struct thread_state *t = list; t != NULL; t = t->next) thread_signal_stop(t->loop);
  pthread_t self = pthread_self();
  struct thread_state *next;
  for (struct thread_state *t = list; t != NULL; t = next) {
    next = t->next;
    t->next = NULL;
    t->pprev = NULL;
    if (pthread_equal(t->th, self)) {
      /* Inside one of this loop's callbacks: its state is consistent (a
       * callback runs between steps), and nobody else touches it. */
      cudaev__loop_abandon(t->loop);
      continue;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + EXIT_JOIN_NS;
    dl.tv_sec += (time_t)(ns / 1000000000u);
    dl.tv_nsec = (long)(ns % 1000000000u);
    if (pthread_timedjoin_np(t->th, NULL, &dl) == 0) {
      t->gone = true;
      cudaev__loop_abandon(t->loop);
    }
    /* Else the thread is stuck in a callback: leave it (and its state). */
  }
  pthread_mutex_unlock(&reg_mu);
}

/* Backstop for the case atexit() could not register the handler: an ELF
 * destructor runs at exit (after every atexit handler, so usually with
 * nothing left to do) and at dlclose. */
__attribute__((destructor)) static void loops_fini(void) { loops_at_exit(); }

/* fork(): the registry and the default loop are held across it, so that
 * the child starts from consistent state. The child has none of the
 * parent's loop threads: their loops are abandoned there (never joined),
 * and cudaev_loop_default() makes the child its own. */
static void fork_prepare(void) {
  pthread_mutex_lock(&default_mu);
  pthread_mutex_lock(&reg_mu);
}
static void fork_parent(void) {
  pthread_mutex_unlock(&reg_mu);
  pthread_mutex_unlock(&default_mu);
}
static void fork_child(void) {
  struct thread_state *next;
  for (struct thread_state *t = reg_head; t != NULL; t = next) {
    next = t->next;
    t->next = NULL;
    t->pprev = NULL;
    t->gone = true;
  }
  reg_head = NULL;
  /* The parent's default loop is an ordinary abandoned loop here. */
  struct cudaev_loop *l = atomic_load_explicit(&default_loop, memory_order_relaxed);
  if (l != NULL) l->is_default = false;
  atomic_store_explicit(&default_loop, NULL, memory_order_relaxed);
  pthread_mutex_unlock(&reg_mu);
  pthread_mutex_unlock(&default_mu);
}

static bool thread_start(struct cudaev_loop *loop) {
  struct thread_state *t = cudaev__alloc(sizeof *t);
  if (t == NULL) return true;
  memset(t, 0, sizeof *t);
  /* Anything submitted before the thread first waits is seen at once. */
  cudaev__loop_wake(loop);

  /* Signals belong to the application's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t th;
  int r = pthread_create(&th, NULL, thread_main, loop);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r != 0) {
    cudaev__free(t, sizeof *t);
    return true;
  }
  t->th = th;
  t->loop = loop;
  loop->be_state = t;
  pthread_mutex_lock(&reg_mu);
  if (!reg_hooked) {
    /* Registered after loop_new's cuInit, so that ours run first. A failed
     * atexit leaves the destructor. */
    reg_hooked = true;
    atexit(loops_at_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
  }
  reg_pid = getpid();
  t->next = reg_head;
  if (reg_head != NULL) reg_head->pprev = &t->next;
  t->pprev = &reg_head;
  reg_head = t;
  pthread_mutex_unlock(&reg_mu);
  return false;
}

static void thread_stop(struct cudaev_loop *loop) {
  struct thread_state *t = loop->be_state;
  /* Under reg_mu: an exit handler joining this thread right now finishes
   * first, and then says so in `gone`. */
  pthread_mutex_lock(&reg_mu);
  bool taken_by_us = t->pprev != NULL;
  reg_unlink(t);
  bool gone = t->gone;
  pthread_mutex_unlock(&reg_mu);
  bool self = pthread_equal(t->th, pthread_self());
  if (!gone && !self) {
    thread_signal_stop(loop);
    pthread_join(t->th, NULL);
  }
  /* Closing from its own callback (cudaev_loop_close): nobody will join
   * it, unless an exit handler took it off the registry first (pprev
   * already NULL: then that handler joins it). */
  if (self && !gone && taken_by_us) pthread_detach(t->th);
  loop->be_state = NULL;
  cudaev__free(t, sizeof *t);
}

const struct cudaev__backend cudaev__backend_thread = {thread_start, thread_stop, NULL};

CUDAEV_EXPORT cudaev_loop_t *cudaev_loop_default(void) {
  struct cudaev_loop *l = atomic_load_explicit(&default_loop, memory_order_acquire);
  if (CUDAEV_LIKELY(l != NULL)) return l;
  pthread_mutex_lock(&default_mu);
  l = atomic_load_explicit(&default_loop, memory_order_relaxed);
  if (l == NULL && cudaev_loop_new_thread(&l) == cudaSuccess) {
    l->is_default = true; /* before any other thread can have it */
    atomic_store_explicit(&default_loop, l, memory_order_release);
  }
  pthread_mutex_unlock(&default_mu);
  return l;
}
