/* The runtime's settings from the environment (src/env.h). */
#include "env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool cudaev__env_off(const char *name) {
  const char *v = getenv(name);
  return v != NULL && strcmp(v, "0") == 0;
}

long long cudaev__env_num(const char *name, long long min, long long max, long long fallback) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') return fallback;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  return *end == '\0' && errno == 0 && n >= min && n <= max ? n : fallback;
}
