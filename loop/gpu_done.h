/* cudaev_future_new_work_done of a GPU future (owner: gpu_done.c): the
 * watches on markers not passed yet (struct cudaev__watch, opaque: the
 * list hangs off struct cudaev__gpu). Callers: gpu.c (the table, destroy),
 * gpu_poll.c (a watched future passed). */
#ifndef CUDAEV_GPU_DONE_H
#define CUDAEV_GPU_DONE_H

#include "gpu_ctx.h"

/* gpu_done.c. The source's done (any thread). Loop thread: done_fire
 * completes the watch on f (popped, its marker passed, outcome st);
 * done_fini (destroy, after the context's synchronisation) completes every
 * watch left with st and frees the list. */
cudaError_t cudaev__gpu_done(struct cudaev_future *f, struct cudaev_future *g);
void cudaev__gpu_done_fire(struct cudaev__gpu *s, struct cudaev_future *f, cudaError_t st);
void cudaev__gpu_done_fini(struct cudaev__gpu *s, cudaError_t st);

#endif
