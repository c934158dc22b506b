/* Binding to libev at run time (see libev.h for why the library never
 * links it). */
#include "libev.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cudaev__libev cudaev__ev;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static cudaError_t bind_result = CUDAEV_ERROR_NO_LIBEV;
static char bind_why[256];

/* The symbols, in the order of struct cudaev__libev's members. */
static const char *const names[] = {
    "ev_io_start",  "ev_io_stop",     "ev_prepare_start", "ev_prepare_stop", "ev_idle_start",
    "ev_idle_stop", "ev_timer_start", "ev_timer_stop",    "ev_ref",          "ev_unref",
};
_Static_assert(sizeof(struct cudaev__libev) ==
                   sizeof names / sizeof names[0] * sizeof(void (*)(void)),
               "one name per member of struct cudaev__libev");

/* Fills `out` from `handle` (RTLD_DEFAULT included). false if one is missing. */
static bool fill(void *handle, struct cudaev__libev *out) {
  void (**slot)(void) = (void (**)(void))out;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *p = dlsym(handle, names[i]);
    if (p == NULL) return false;
    memcpy(&slot[i], &p, sizeof p);
  }
  return true;
}

static void bind_libev(void) {
  struct cudaev__libev t;
  const char *name = getenv("CUDAEV_LIBEV");
  if (name != NULL && name[0] != '\0') {
    /* An explicit choice: only that file. */
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      snprintf(bind_why, sizeof bind_why, "CUDAEV_LIBEV=%s: %s", name, dlerror());
      return;
    }
    if (!fill(h, &t)) {
      snprintf(bind_why, sizeof bind_why, "CUDAEV_LIBEV=%s lacks ev_io_start and friends", name);
      dlclose(h);
      return;
    }
  } else if (!fill(RTLD_DEFAULT, &t)) {
    /* Not in the global scope: the application's libev may be loaded
     * privately (a plugin), else load it ourselves. Either handle is kept
     * for the life of the process. */
    void *h = dlopen("libev.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == NULL) h = dlopen("libev.so.4", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      snprintf(bind_why, sizeof bind_why, "libev.so.4 could not be loaded: %s", dlerror());
      return;
    }
    if (!fill(h, &t)) {
      snprintf(bind_why, sizeof bind_why, "libev.so.4 lacks ev_io_start and friends");
      dlclose(h);
      return;
    }
  }
  cudaev__ev = t;
  bind_result = cudaSuccess;
}

cudaError_t cudaev__libev_bind(void) {
  pthread_once(&bind_once, bind_libev);
  return bind_result;
}

const char *cudaev__libev_why(void) {
  cudaev__libev_bind();
  return bind_why;
}
