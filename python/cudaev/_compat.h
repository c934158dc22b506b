/* What the stable ABI of 3.11 leaves out, and the C API names this file
 * is written against. */
#ifndef CUDAEV_PY_COMPAT_H
#define CUDAEV_PY_COMPAT_H

/* Py_XSETREF is not part of the limited API. */
#define SETREF(dst, src)                \
  do {                                  \
    PyObject *old_ = (PyObject *)(dst); \
    (dst) = (src);                      \
    Py_XDECREF(old_);                   \
  } while (0)

/* The C API's new names, mapped to the old ones until the rename lands on
 * this branch. */
#define cudaev_future_new_stream      cudaev_stream_future
#define cudaev_future_new_event       cudaev_event_future
#define cudaev_future_new_timer       cudaev_timer_future
#define cudaev_launch_host_func_async cudaev_host_func

#endif
