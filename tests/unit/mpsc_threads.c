/* The MPSC queue's multi-producer check (mpsc_stress.h) as a plain program,
 * so that it also runs under ThreadSanitizer, where Criterion cannot start
 * (docs/design.md, Tests). Exit 0 = pass. CUDAEV_TEST_MPSC sets the nodes
 * per producer (default 200k; 20k under TSan, set by the build). */
#include <stdio.h>
#include <stdlib.h>

#include "mpsc_stress.h"

int main(void) {
  const char *e = getenv("CUDAEV_TEST_MPSC");
  long n = e != NULL && atol(e) > 0 ? atol(e) : 200000;
  const char *err = mpsc_stress(8, n);
  if (err != NULL) {
    fprintf(stderr, "mpsc_threads: %s\n", err);
    return 1;
  }
  printf("mpsc_threads: 8 producers x %ld nodes, each once and in order\n", n);
  return 0;
}
