/* The runtime's settings from the environment (CUDAEV_HOST_POOL,
 * CUDAEV_STAGING, CUDAEV_BLOCKING_SPIN_US, ...), read the same way
 * everywhere: a switch is off only when set to "0", a number counts only
 * when the whole value is a decimal integer inside its range.
 *
 * Thread: any (getenv: the application must not change the environment
 * from another thread meanwhile, as with every getenv). */
#ifndef CUDAEV_ENV_H
#define CUDAEV_ENV_H

#include <stdbool.h>

/* True when `name` is set to "0". */
bool cudaev__env_off(const char *name);

/* The value of `name` when it is a decimal integer in [min, max];
 * `fallback` when it is unset, empty, malformed or out of range. */
long long cudaev__env_num(const char *name, long long min, long long max, long long fallback);

#endif
