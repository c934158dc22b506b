/* What the stable ABI of 3.11 leaves out. */
#ifndef CUDAEV_PY_COMPAT_H
#define CUDAEV_PY_COMPAT_H

/* Py_XSETREF is not part of the limited API. */
#define SETREF(dst, src)                \
  do {                                  \
    PyObject *old_ = (PyObject *)(dst); \
    (dst) = (src);                      \
    Py_XDECREF(old_);                   \
  } while (0)

#endif
