/* evdrive.h: a cudaev loop in foreign mode, driven by libev watchers that
 * this program owns, on the thread that runs ev_run.
 *
 * Why foreign mode and not cudaev_loop_new_ev: the service makes one cudaev
 * loop per device (a loop serves one context) and must destroy and remake
 * a device's loop after a device fault, from inside ev_run. An ev-mode loop
 * may only be destroyed outside libev's callbacks; a foreign loop may be
 * destroyed by its driving thread anywhere outside cudaev_loop_process, so
 * a timer callback of ours can do it. All the loops still share the one
 * libev loop and the one thread.
 *
 * The three rules of foreign mode (docs/integrations.md), as watchers:
 *   ev_io      on cudaev_loop_fd()          -> cudaev_loop_process()
 *   ev_prepare (libev is about to block)    -> t = cudaev_loop_prepare();
 *                                              ev_timer in t ms (0: at once)
 *   ev_timer                                -> cudaev_loop_process()
 * After each process the `after` hook runs (the service sends there the
 * answers its continuations made, so that they go out in the same pass).
 *
 * Thread: all functions on the thread running ev_run on `evl`. */
#ifndef INFER_EVDRIVE_H
#define INFER_EVDRIVE_H

#include <cudaev.h>
#include <ev.h>

struct evdrive {
  struct ev_loop *evl;
  cudaev_loop_t *loop;
  ev_io io;
  ev_prepare prepare;
  ev_timer timer;
  void (*after)(void *arg);
  void *arg;
  unsigned long long passes; /* cudaev_loop_process calls, for /metrics (kept across restarts) */
  int active;
};

/* Starts driving `loop` (a foreign-mode loop) on evl. */
void evdrive_start(struct evdrive *d, struct ev_loop *evl, cudaev_loop_t *loop,
                   void (*after)(void *arg), void *arg);
/* Stops the watchers; the loop may then be destroyed. Idempotent. */
void evdrive_stop(struct evdrive *d);

#endif
