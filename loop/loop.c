/* The loop object (cudaev_loop_*): the wakeup, the message queue, one
 * processing pass, and the three run modes behind const vtables
 * (cudaev__backend_ev, _foreign, _thread). */
#include "loop_internal.h"

#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

uint64_t cudaev__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the wakeup ------------------------------------------------------------ */

/* One eventfd write per drain at most: `pending` says a write is already
 * on its way (libuv's uv_async_send pattern). */
void cudaev__waker_wake(struct cudaev__waker *w) {
  /* seq_cst: the queue push before this load and the loop's clear of
   * `pending` before its queue drain form a store/load pair (Dekker); at
   * least one side must see the other. */
  if (atomic_load_explicit(&w->pending, memory_order_seq_cst) ||
      atomic_exchange_explicit(&w->pending, 1, memory_order_seq_cst))
    return;
  uint64_t one = 1;
  ssize_t r;
  do r = write(w->fd, &one, sizeof one);
  while (r < 0 && errno == EINTR);
}

void cudaev__waker_release(struct cudaev__waker *w) {
  if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1) return;
  close(w->fd);
  cudaev__free(w, sizeof *w);
}

/* Read first, then clear `pending`: clearing first would let a writer's
 * eventfd write be consumed here while its `pending` stays set, and the next
 * writer would then skip its write with its message still queued (a lost
 * wakeup). The fd is read on every pass (nonblocking) so that a write that
 * lands after the clear never leaves it readable for nothing. */
static void waker_drain(struct cudaev__waker *w) {
  uint64_t v;
  ssize_t r;
  do r = read(w->fd, &v, sizeof v);
  while (r < 0 && errno == EINTR);
  atomic_store_explicit(&w->pending, 0, memory_order_seq_cst);
}

void cudaev__loop_send(struct cudaev_loop *loop, struct cudaev__msg *m) {
  cudaev__mpsc_push(&loop->q, m);
  cudaev__loop_wake(loop);
}

/* ---- pending list (loop thread) --------------------------------------- */

bool cudaev__pend_add(struct cudaev_loop *loop, struct cudaev_future *f) {
  if (loop->npend == loop->cap_pend) {
    uint32_t cap = loop->cap_pend ? loop->cap_pend * 2 : 64;
    struct cudaev_future **p = cudaev__alloc(cap * sizeof *p);
    if (p == NULL) return false;
    if (loop->npend) memcpy(p, loop->pend, loop->npend * sizeof *p);
    cudaev__free(loop->pend, loop->cap_pend * sizeof *p);
    loop->pend = p;
    loop->cap_pend = cap;
  }
  f->x.pend_idx = loop->npend;
  loop->pend[loop->npend++] = f;
  return true;
}

void cudaev__pend_del(struct cudaev_loop *loop, struct cudaev_future *f) {
  uint32_t i = f->x.pend_idx;
  if (i == UINT32_MAX || i >= loop->npend || loop->pend[i] != f) return;
  struct cudaev_future *last = loop->pend[--loop->npend];
  loop->pend[i] = last;
  last->x.pend_idx = i;
  f->x.pend_idx = UINT32_MAX;
}

/* ---- one pass ------------------------------------------------------------- */

struct call_msg {
  struct cudaev__msg msg;
  cudaev_loop_fn fn;
  void *user;
};

static void publish_pending(struct cudaev_loop *loop) {
  size_t n = loop->npend + (loop->gpu ? cudaev__gpu_pending(loop) : 0);
  atomic_store_explicit(&loop->npending_pub, n, memory_order_relaxed);
}

bool cudaev__loop_process(struct cudaev_loop *loop) {
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  loop->in_process++;
  bool pushed = loop->gpu ? cudaev__gpu_enter(loop) : false;
  waker_drain(loop->waker);
  bool more = false;
  unsigned n = 0;
  struct cudaev__msg *m;
  while ((m = cudaev__mpsc_pop(&loop->q)) != NULL) {
    switch (m->kind) {
    case CUDAEV__MSG_FUTURE:
    case CUDAEV__MSG_THEN: cudaev__future_msg(loop, m); break;
    case CUDAEV__MSG_CALL: {
      struct call_msg *c = (struct call_msg *)m;
      c->fn(loop, c->user);
      cudaev__free(c, sizeof *c);
      break;
    }
    case CUDAEV__MSG_NOTIFY: cudaev__notify_msg(loop, m); break;
    default: break;
    }
    /* Bounded, so that GPU completions are not starved by a flood. */
    if (++n == 4096) break;
  }
  if (!cudaev__mpsc_empty(&loop->q)) more = true;
  if (loop->gpu) {
    cudaev__gpu_poll(loop);
    cudaev__gpu_watchdog(loop, cudaev__now_ns());
  }
  if (cudaev__run_deferred(loop)) more = true;
  publish_pending(loop);
  if (loop->gpu) cudaev__gpu_leave(loop, pushed);
  loop->in_process--;
  cudaev__tls_loop = prev;
  return more;
}

uint64_t cudaev__loop_before_sleep(struct cudaev_loop *loop) {
  if (loop->def_head != NULL || !cudaev__mpsc_empty(&loop->q)) return 0;
  if (loop->gpu == NULL) return UINT64_MAX;
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  bool pushed = cudaev__gpu_enter(loop);
  uint64_t t = cudaev__gpu_before_sleep(loop);
  cudaev__gpu_leave(loop, pushed);
  cudaev__tls_loop = prev;
  return t;
}

/* ---- backend: libev (the caller's loop, or ours in thread mode) ------------ */

struct ev_state {
  ev_io io;
  ev_prepare prep;
  ev_idle idle;
  ev_timer timer;
};

static void ev_after(struct ev_loop *evl, struct cudaev_loop *loop, bool more) {
  struct ev_state *s = loop->be_state;
  if (more)
    ev_idle_start(evl, &s->idle); /* idle watchers make libev poll without blocking */
  else
    ev_idle_stop(evl, &s->idle);
}

/* Thread mode: a stop request (thread_signal_stop). Every watcher checks
 * it, not only the io one: a pass run from the idle or timer watcher may
 * have read the stop request's eventfd write, and the io watcher would then
 * not fire again. */
static bool ev_stop_seen(struct ev_loop *evl, struct cudaev_loop *loop) {
  if (!atomic_load_explicit(&loop->stopping, memory_order_acquire)) return false;
  ev_break(evl, EVBREAK_ALL);
  return true;
}

static void ev_io_cb(struct ev_loop *evl, ev_io *w, int revents) {
  struct cudaev_loop *loop = w->data;
  if (ev_stop_seen(evl, loop)) return;
  ev_after(evl, loop, cudaev__loop_process(loop));
}

static void ev_idle_cb(struct ev_loop *evl, ev_idle *w, int revents) {
  struct cudaev_loop *loop = w->data;
  if (ev_stop_seen(evl, loop)) return;
  ev_after(evl, loop, cudaev__loop_process(loop));
}

static void ev_timer_cb(struct ev_loop *evl, ev_timer *w, int revents) {
  struct cudaev_loop *loop = w->data;
  if (ev_stop_seen(evl, loop)) return;
  ev_after(evl, loop, cudaev__loop_process(loop));
}

static void ev_prepare_cb(struct ev_loop *evl, ev_prepare *w, int revents) {
  struct cudaev_loop *loop = w->data;
  struct ev_state *s = loop->be_state;
  if (ev_stop_seen(evl, loop)) {
    ev_idle_start(evl, &s->idle); /* do not block before the break is seen */
    return;
  }
  if (ev_is_active(&s->idle)) return; /* not going to block anyway */
  uint64_t t = cudaev__loop_before_sleep(loop);
  ev_timer_stop(evl, &s->timer);
  if (t == 0) {
    ev_idle_start(evl, &s->idle);
  } else if (t != UINT64_MAX) {
    ev_timer_set(&s->timer, (ev_tstamp)t / 1e9, 0.);
    ev_timer_start(evl, &s->timer);
  }
}

static bool ev_start_(struct cudaev_loop *loop) {
  struct ev_state *s = cudaev__alloc(sizeof *s);
  if (s == NULL) return true;
  memset(s, 0, sizeof *s);
  loop->be_state = s;
  ev_io_init(&s->io, ev_io_cb, loop->waker->fd, EV_READ);
  ev_prepare_init(&s->prep, ev_prepare_cb);
  ev_idle_init(&s->idle, ev_idle_cb);
  ev_timer_init(&s->timer, ev_timer_cb, 0., 0.);
  s->io.data = s->prep.data = s->idle.data = s->timer.data = loop;
  ev_io_start(loop->evl, &s->io);
  ev_prepare_start(loop->evl, &s->prep);
  /* Our watchers alone must not keep the caller's ev_run going. */
  ev_unref(loop->evl);
  ev_unref(loop->evl);
  /* Anything submitted before the loop first runs is seen at once. */
  ev_idle_start(loop->evl, &s->idle);
  return false;
}

static void ev_stop_(struct cudaev_loop *loop) {
  struct ev_state *s = loop->be_state;
  if (s == NULL) return;
  ev_ref(loop->evl);
  ev_ref(loop->evl);
  ev_io_stop(loop->evl, &s->io);
  ev_prepare_stop(loop->evl, &s->prep);
  ev_idle_stop(loop->evl, &s->idle);
  ev_timer_stop(loop->evl, &s->timer);
  cudaev__free(s, sizeof *s);
  loop->be_state = NULL;
}

const struct cudaev__backend cudaev__backend_ev = {"ev", ev_start_, ev_stop_};

/* ---- backend: own thread ---------------------------------------------------- */

/* Every thread-mode loop of the process (the default one included) is on a
 * registry, so that process exit can stop the threads before the driver's
 * own exit handlers tear the driver down under them (docs/design.md, "Exit,
 * fork and dlclose"). */
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

static void *thread_main(void *arg) {
  struct cudaev_loop *loop = arg;
  /* Keep the loop's watchers referenced: in thread mode they are the loop. */
  ev_ref(loop->evl);
  ev_ref(loop->evl);
  ev_run(loop->evl, 0);
  ev_unref(loop->evl);
  ev_unref(loop->evl);
  return NULL;
}

/* Asks the loop thread to leave ev_run: the io watcher sees `stopping`.
 * Forces a write even if one is pending (the pending one may have been
 * read already). Any thread. */
static void thread_signal_stop(struct cudaev_loop *loop) {
  atomic_store_explicit(&loop->stopping, 1, memory_order_release);
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
      if (t->loop->gpu) cudaev__gpu_open_gates(t->loop);
      continue;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + EXIT_JOIN_NS;
    dl.tv_sec += (time_t)(ns / 1000000000u);
    dl.tv_nsec = (long)(ns % 1000000000u);
    if (pthread_timedjoin_np(t->th, NULL, &dl) == 0) {
      t->gone = true;
      if (t->loop->gpu) cudaev__gpu_open_gates(t->loop);
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
  atomic_store_explicit(&default_loop, NULL, memory_order_relaxed);
  pthread_mutex_unlock(&reg_mu);
  pthread_mutex_unlock(&default_mu);
}

static bool thread_start(struct cudaev_loop *loop) {
  struct thread_state *t = cudaev__alloc(sizeof *t);
  if (t == NULL) return true;
  memset(t, 0, sizeof *t);
  loop->evl = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
  if (loop->evl == NULL || ev_start_(loop)) {
    if (loop->evl != NULL) ev_loop_destroy(loop->evl);
    loop->evl = NULL;
    cudaev__free(t, sizeof *t);
    return true;
  }

  /* Signals belong to the application's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t th;
  int r = pthread_create(&th, NULL, thread_main, loop);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (r != 0) {
    ev_stop_(loop);
    ev_loop_destroy(loop->evl);
    loop->evl = NULL;
    cudaev__free(t, sizeof *t);
    return true;
  }
  t->th = th;
  t->loop = loop;
  loop->thread_state = t;
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
  struct thread_state *t = loop->thread_state;
  /* Under reg_mu: an exit handler joining this thread right now finishes
   * first, and then says so in `gone`. */
  pthread_mutex_lock(&reg_mu);
  reg_unlink(t);
  bool gone = t->gone;
  pthread_mutex_unlock(&reg_mu);
  if (!gone && !pthread_equal(t->th, pthread_self())) {
    thread_signal_stop(loop);
    pthread_join(t->th, NULL);
  }
  loop->thread_state = NULL;
  cudaev__free(t, sizeof *t);
  ev_stop_(loop);
  ev_loop_destroy(loop->evl);
  loop->evl = NULL;
}

const struct cudaev__backend cudaev__backend_thread = {"thread", thread_start, thread_stop};

/* ---- backend: foreign loop ---------------------------------------------------- */

static bool foreign_start(struct cudaev_loop *loop) {
  /* Anything submitted before the first process call is seen then. */
  cudaev__loop_wake(loop);
  return false;
}
static void foreign_stop(struct cudaev_loop *loop) {}

const struct cudaev__backend cudaev__backend_foreign = {"foreign", foreign_start, foreign_stop};

/* ---- public ---------------------------------------------------------------------- */

static cudaError_t loop_new(const struct cudaev__backend *be, struct ev_loop *evl,
                            cudaev_loop_t **out) {
  if (out != NULL) *out = NULL;
  if (out == NULL || (be == &cudaev__backend_ev && evl == NULL)) return cudaErrorInvalidValue;
  struct cudaev_loop *loop = cudaev__alloc(sizeof *loop);
  struct cudaev__waker *w = cudaev__alloc(sizeof *w);
  if (loop == NULL || w == NULL) {
    cudaev__free(loop, sizeof *loop);
    cudaev__free(w, sizeof *w);
    return cudaErrorMemoryAllocation;
  }
  memset(loop, 0, sizeof *loop);
  w->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (w->fd < 0) {
    cudaev__free(loop, sizeof *loop);
    cudaev__free(w, sizeof *w);
    return cudaErrorOperatingSystem;
  }
  atomic_init(&w->refs, 1);
  atomic_init(&w->pending, 0);
  loop->waker = w;
  cudaev__mpsc_init(&loop->q);
  loop->be = be;
  loop->evl = evl;
  atomic_init(&loop->spin_max_us, 50);
  atomic_init(&loop->npending_pub, 0);
  atomic_init(&loop->stopping, 0);
  loop->gpu_error = cudaev__gpu_init(loop);
  if (be->start(loop)) {
    if (loop->gpu) cudaev__gpu_fini(loop);
    cudaev__waker_release(w);
    cudaev__free(loop, sizeof *loop);
    return be == &cudaev__backend_ev ? cudaErrorMemoryAllocation : cudaErrorOperatingSystem;
  }
  *out = loop;
  return cudaSuccess;
}

CUDAEV_EXPORT cudaError_t cudaev_loop_new_ev(struct ev_loop *evl, cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_ev, evl, out);
}
CUDAEV_EXPORT cudaError_t cudaev_loop_new_foreign(cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_foreign, NULL, out);
}
CUDAEV_EXPORT cudaError_t cudaev_loop_new_thread(cudaev_loop_t **out) {
  return loop_new(&cudaev__backend_thread, NULL, out);
}

CUDAEV_EXPORT cudaev_loop_t *cudaev_loop_default(void) {
  struct cudaev_loop *l = atomic_load_explicit(&default_loop, memory_order_acquire);
  if (CUDAEV_LIKELY(l != NULL)) return l;
  pthread_mutex_lock(&default_mu);
  l = atomic_load_explicit(&default_loop, memory_order_relaxed);
  if (l == NULL && cudaev_loop_new_thread(&l) == cudaSuccess)
    atomic_store_explicit(&default_loop, l, memory_order_release);
  pthread_mutex_unlock(&default_mu);
  return l;
}

CUDAEV_EXPORT void cudaev_loop_destroy(cudaev_loop_t *loop) {
  if (loop == NULL || loop == atomic_load_explicit(&default_loop, memory_order_acquire)) return;
  loop->be->stop(loop);
  /* From here the calling thread is the loop thread. */
  cudaev__loop_process(loop);
  struct cudaev_loop *prev = cudaev__tls_loop;
  cudaev__tls_loop = loop;
  loop->in_process++;
  /* Fail what is pending; each completion takes itself off the list. */
  while (loop->npend > 0) {
    struct cudaev_future *f = loop->pend[loop->npend - 1];
    if (!cudaev__future_try_complete(f, CUDAEV_ERROR_LOOP_DESTROYED)) {
      /* Completed but not fired yet: its FIRE is queued; fire it here. */
      cudaev__future_fire(f);
    }
  }
  if (loop->gpu) cudaev__gpu_fini(loop);
  loop->in_process--;
  cudaev__tls_loop = prev;
  while (cudaev__loop_process(loop) || !cudaev__mpsc_empty(&loop->q)) {
  }
  cudaev__free(loop->pend, loop->cap_pend * sizeof *loop->pend);
  cudaev__waker_release(loop->waker);
  cudaev__free(loop, sizeof *loop);
}

CUDAEV_EXPORT int cudaev_loop_fd(cudaev_loop_t *loop) {
  if (loop == NULL || loop->be != &cudaev__backend_foreign) return -1;
  return loop->waker->fd;
}

CUDAEV_EXPORT int cudaev_loop_timeout(cudaev_loop_t *loop) {
  if (loop == NULL) return -1;
  uint64_t t = cudaev__loop_before_sleep(loop);
  if (t == UINT64_MAX) return -1;
  uint64_t ms = (t + 999999) / 1000000;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

CUDAEV_EXPORT void cudaev_loop_process(cudaev_loop_t *loop) {
  if (loop == NULL) return;
  /* More work ready: make the fd readable so the driving loop returns. */
  if (cudaev__loop_process(loop)) cudaev__loop_wake(loop);
}

CUDAEV_EXPORT void cudaev_loop_set_spin(cudaev_loop_t *loop, unsigned max_us) {
  if (loop != NULL) atomic_store_explicit(&loop->spin_max_us, max_us, memory_order_relaxed);
}

CUDAEV_EXPORT cudaError_t cudaev_loop_post(cudaev_loop_t *loop, cudaev_loop_fn fn, void *user) {
  if (loop == NULL || fn == NULL) return cudaErrorInvalidValue;
  struct call_msg *c = cudaev__alloc(sizeof *c);
  if (c == NULL) return cudaErrorMemoryAllocation;
  c->msg.kind = CUDAEV__MSG_CALL;
  c->fn = fn;
  c->user = user;
  cudaev__loop_send(loop, &c->msg);
  return cudaSuccess;
}

CUDAEV_EXPORT size_t cudaev_loop_pending(cudaev_loop_t *loop) {
  if (loop == NULL) return 0;
  if (cudaev__on_loop(loop)) publish_pending(loop);
  return atomic_load_explicit(&loop->npending_pub, memory_order_relaxed);
}
