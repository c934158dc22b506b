/* Misuse and messages of the loop layer (owner: debug.c): the fatal
 * message, the log hook's door, CUDAEV_DEBUG's checks of freed futures.
 * Any loop file may call these. */
#ifndef CUDAEV_DEBUG_H
#define CUDAEV_DEBUG_H

#include <stdbool.h>

struct cudaev_future;

/* CUDAEV_DEBUG=1 in the environment (read at load): freed futures are
 * poisoned and quarantined, and the public future calls check them. */
extern bool cudaev__debug;
/* Prints "cudaev: msg" on stderr and aborts. Thread: any. */
_Noreturn void cudaev__die(const char *msg);
/* Hands "cudaev: msg" to the application's log hook (cudaev_log_set), or
 * writes it on stderr when there is none. Thread: any. */
void cudaev__log(int level, const char *msg);
/* CUDAEV_DEBUG: names `call` and the freed future, then aborts. */
_Noreturn void cudaev__future_misuse(const struct cudaev_future *f, const char *call);
/* CUDAEV_DEBUG: poisons a future whose last reference went and keeps it
 * from reuse for a while (the oldest quarantined is freed). */
void cudaev__future_quarantine(struct cudaev_future *f);

#endif
