/* Process exit and fork with running loop threads, as a plain program (no
 * Criterion) so that it also runs under ThreadSanitizer, and so that the
 * children it forks are plain processes whose exit() runs nothing but our
 * handlers. Each scenario runs in a forked child that must exit 0 within
 * CHILD_LIMIT_S seconds (a crash or a hang at exit is the failure).
 * Without a driver the loops serve promises only: what is tested is the
 * threads' lifetime (loop/backend_thread.c, "Exit, fork and dlclose" in
 * docs/design.md); the GPU side of exit is in loop_gpu_fake.c. Exit 0 =
 * pass. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cudaev.h"
#include "../check.h"

/* ThreadSanitizer cannot follow a thread created in a child forked from a
 * multithreaded process (it refuses by default, die_after_fork; allowed, it
 * reports "dup thread with used id" when glibc reuses the dead parent
 * thread's stack). Under TSan such a child only exits. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

enum { CHILD_LIMIT_S = 20 };

/* Runs fn in a forked child; returns its wait status (or -1 after killing
 * it at the time limit). */
static int in_child(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(CHILD_LIMIT_S); /* a hang inside the child dies, not the suite */
    fn();
    _exit(99); /* fn must exit itself */
  }
  if (pid < 0) return -1;
  for (int i = 0; i < CHILD_LIMIT_S * 100; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

static bool exited_zero(int st, const char *what) {
  bool ok = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (!ok)
    fprintf(stderr, "%s: child status %d (exited %d code %d, signalled %d sig %d)\n", what, st,
            st != -1 && WIFEXITED(st), st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1,
            st != -1 && WIFSIGNALED(st), st != -1 && WIFSIGNALED(st) ? WTERMSIG(st) : -1);
  return ok;
}

static atomic_int cb_runs;
static void count_cb(cudaev_future_t *f, cudaError_t s, void *u) { atomic_fetch_add(&cb_runs, 1); }

/* Keeps the loop thread busy: a posted call that re-posts itself. */
static void busy_fn(cudaev_loop_t *loop, void *u) {
  usleep(100);
  cudaev_loop_post(loop, busy_fn, u);
}

/* exit(0) while the default loop (and a thread loop the program forgot to
 * destroy) run, with promises pending and continuations attached. */
static void exit_with_pending(void) {
  cudaev_loop_t *d = cudaev_loop_default();
  cudaev_loop_t *forgotten;
  if (d == NULL || cudaev_loop_new_thread(&forgotten) != cudaSuccess) _exit(2);
  cudaev_future_t *f[64];
  for (int i = 0; i < 64; i++) {
    if (cudaev_promise_new(i % 2 ? d : forgotten, &f[i]) != cudaSuccess) _exit(3);
    cudaev_future_then(f[i], count_cb, NULL);
  }
  /* Half of them complete (their continuations are on their way), the
   * rest stay pending; both loops are mid-work. */
  for (int i = 0; i < 64; i += 2) cudaev_promise_set(f[i], cudaSuccess);
  cudaev_loop_post(d, busy_fn, NULL);
  cudaev_loop_post(forgotten, busy_fn, NULL);
  usleep(2000);
  exit(0);
}

/* exit(0) from a callback on the default loop's thread, while the main
 * thread sleeps: the exit handler must not join the thread it runs on. */
static void exit_cb(cudaev_loop_t *loop, void *u) { exit(0); }
static void exit_from_loop_thread(void) {
  cudaev_loop_t *d = cudaev_loop_default();
  cudaev_loop_t *other;
  if (d == NULL || cudaev_loop_new_thread(&other) != cudaSuccess) _exit(2);
  cudaev_loop_post(other, busy_fn, NULL);
  cudaev_loop_post(d, exit_cb, NULL);
  for (;;) pause();
}

/* A child forked from a process whose default loop runs: the parent's
 * loop thread does not exist here; cudaev_loop_default() gives the child
 * its own loop, which works, and exit does not try to join the parent's. */
static cudaev_loop_t *parent_default;
static void forked_child(void) {
  if (UNDER_TSAN) exit(0);
  cudaev_loop_t *d = cudaev_loop_default();
  if (d == NULL) _exit(2);
  if (d == parent_default) _exit(3);
  cudaev_future_t *f;
  if (cudaev_promise_new(d, &f) != cudaSuccess) _exit(4);
  atomic_store(&cb_runs, 0);
  cudaev_future_then(f, count_cb, NULL);
  cudaev_promise_set(f, cudaSuccess);
  for (int i = 0; i < 5000 && atomic_load(&cb_runs) == 0; i++) usleep(1000);
  if (atomic_load(&cb_runs) != 1) _exit(5);
  cudaev_future_release(f);
  /* Leave one pending for the exit handler. */
  if (cudaev_promise_new(d, &f) != cudaSuccess) _exit(6);
  exit(0);
}

/* The parent's default loop still works after a fork. */
static void check_default_works(void) {
  cudaev_loop_t *d = cudaev_loop_default();
  CHECK(d == parent_default);
  cudaev_future_t *f;
  CHECK(cudaev_promise_new(d, &f) == cudaSuccess);
  atomic_store(&cb_runs, 0);
  cudaev_future_then(f, count_cb, NULL);
  cudaev_promise_set(f, cudaSuccess);
  for (int i = 0; i < 5000 && atomic_load(&cb_runs) == 0; i++) usleep(1000);
  CHECK(atomic_load(&cb_runs) == 1);
  cudaev_future_release(f);
}

int main(void) {
  CHECK(exited_zero(in_child(exit_with_pending), "exit with pending promises"));
  CHECK(exited_zero(in_child(exit_from_loop_thread), "exit from the loop thread"));

  /* This process now gets a default loop, forks, and exits through main's
   * return with the default loop running (the exit handler joins it). */
  parent_default = cudaev_loop_default();
  CHECK(parent_default != NULL);
  check_default_works();
  for (int i = 0; i < 3; i++) CHECK(exited_zero(in_child(forked_child), "forked child"));
  check_default_works();
  cudaev_future_t *pending;
  CHECK(cudaev_promise_new(parent_default, &pending) == cudaSuccess);
  if (failures == 0) printf("loop_exit: ok\n");
  return failures ? 1 : 0;
}
