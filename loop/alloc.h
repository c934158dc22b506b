/* Loop objects from per-thread free lists (owner: alloc.c; any loop file
 * may call it). */
#ifndef CUDAEV_ALLOC_H
#define CUDAEV_ALLOC_H

#include <stddef.h>

/* Allocation of loop objects from per-thread free lists (plain
 * malloc/free under sanitizers, so they see every object). Returns NULL on
 * out-of-memory. Thread: any. */
void *cudaev__alloc(size_t size);
void cudaev__free(void *p, size_t size);

#endif
