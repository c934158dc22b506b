/* The names of version 0 of the API, kept for one major version: each
 * calls the function that replaced it (include/cudaev.h, "Names"). They
 * stay in version node CUDAEV_0, where programs built against version 0
 * look for them; the new names are in CUDAEV_1. Delete this file with the
 * next major version. */
#include "loop_internal.h"

CUDAEV_EXPORT cudaError_t cudaev_timer_future(cudaev_loop_t *loop, uint64_t ns,
                                              cudaev_future_t **out) {
  return cudaev_future_new_timer(loop, ns, out);
}

CUDAEV_EXPORT cudaError_t cudaev_stream_future(cudaev_loop_t *loop, cudaStream_t stream,
                                               cudaev_future_t **out) {
  return cudaev_future_new_stream(loop, stream, out);
}

CUDAEV_EXPORT cudaError_t cudaev_event_future(cudaev_loop_t *loop, cudaEvent_t event,
                                              cudaev_future_t **out) {
  return cudaev_future_new_event(loop, event, out);
}

CUDAEV_EXPORT cudaError_t cudaev_when_all(cudaev_loop_t *loop, cudaev_future_t *const *fs, size_t n,
                                          cudaev_future_t **out) {
  return cudaev_future_new_all(loop, fs, n, out);
}

CUDAEV_EXPORT cudaError_t cudaev_when_any(cudaev_loop_t *loop, cudaev_future_t *const *fs, size_t n,
                                          cudaev_future_t **out) {
  return cudaev_future_new_any(loop, fs, n, out);
}

CUDAEV_EXPORT size_t cudaev_when_any_index(const cudaev_future_t *f) {
  return cudaev_future_any_index(f);
}

CUDAEV_EXPORT cudaError_t cudaev_future_timeout(cudaev_future_t *f, uint64_t ns,
                                                cudaev_future_t **out) {
  return cudaev_future_new_timeout(f, ns, out);
}

CUDAEV_EXPORT cudaError_t cudaev_future_done(cudaev_future_t *f, cudaev_future_t **out) {
  return cudaev_future_new_work_done(f, out);
}

CUDAEV_EXPORT int cudaev_loop_timeout(cudaev_loop_t *loop) { return cudaev_loop_prepare(loop); }

CUDAEV_EXPORT int64_t cudaev_loop_timeout_ns(cudaev_loop_t *loop) {
  return cudaev_loop_prepare_ns(loop);
}

CUDAEV_EXPORT void cudaev_set_log(cudaev_log_fn fn, void *user) { cudaev_log_set(fn, user); }

CUDAEV_EXPORT cudaError_t cudaev_host_func(cudaev_loop_t *loop, cudaStream_t stream,
                                           cudaev_host_fn fn, void *user, cudaev_future_t **out) {
  return cudaev_launch_host_func_async(loop, stream, fn, user, out);
}
