/* The one door to libev. libcudart.so.13 must load wherever NVIDIA's loads,
 * so it never links libev: the ev backend binds, when the first
 * cudaev_loop_new_ev() runs, to the libev that drives the application's
 * struct ev_loop, through this table. Thread mode and foreign mode need no
 * libev at all. ev.h is used for its types and macros only (watcher
 * layouts, ev_io_init and friends), which libev 4 keeps stable. */
#ifndef CUDAEV_LIBEV_H
#define CUDAEV_LIBEV_H

#include <ev.h>

#include "internal.h"

#include "cudaev.h"

struct cudaev__libev {
  void (*io_start)(struct ev_loop *, ev_io *);
  void (*io_stop)(struct ev_loop *, ev_io *);
  void (*prepare_start)(struct ev_loop *, ev_prepare *);
  void (*prepare_stop)(struct ev_loop *, ev_prepare *);
  void (*idle_start)(struct ev_loop *, ev_idle *);
  void (*idle_stop)(struct ev_loop *, ev_idle *);
  void (*timer_start)(struct ev_loop *, ev_timer *);
  void (*timer_stop)(struct ev_loop *, ev_timer *);
  void (*ref)(struct ev_loop *);
  void (*unref)(struct ev_loop *);
};

/* Filled by cudaev__libev_bind(); read-only afterwards. */
extern struct cudaev__libev cudaev__ev;

/* Binds cudaev__ev once per process. Where libev comes from, in order:
 * $CUDAEV_LIBEV if set (a file name or path, loaded with dlopen and nothing
 * else); the libev already in the process's global scope (the application
 * linked it); libev.so.4 already loaded privately (RTLD_NOLOAD); a plain
 * dlopen("libev.so.4"). Returns cudaSuccess, or CUDAEV_ERROR_NO_LIBEV when
 * none has every function (the reason is cudaev__libev_why()). Thread: any. */
cudaError_t cudaev__libev_bind(void);
/* One line saying why the last bind failed (static storage), or "". */
const char *cudaev__libev_why(void);

#endif
