/* A deadline callback for the unit tests of push-style foreign mode
 * (cudaev_loop_set_timer_cb): it records how often it was told and the
 * last deadline. Test thread only. */
#ifndef CUDAEV_TESTS_TOLD_DEADLINE_H
#define CUDAEV_TESTS_TOLD_DEADLINE_H

#include <stdint.h>

#include "cudaev.h"

struct told_deadline {
  int calls;
  int64_t ns; /* the last deadline told: ns from then, -1 none */
};

static inline void told_deadline_cb(cudaev_loop_t *loop, int64_t ns, void *u) {
  (void)loop;
  struct told_deadline *t = u;
  t->calls++;
  t->ns = ns;
}

#endif
