/* cudaev._native: the C side of the Python package. It owns one thing, the
 * crossing between a cudaev foreign-mode loop and Python objects: a Loop
 * wraps a cudaev_loop_t, an Op wraps one cudaev future and the
 * asyncio.Future it completes. Everything here runs on the thread of the
 * asyncio loop that drives the cudaev loop, with the GIL held: cudaev runs
 * continuations and loop-thread host functions inside cudaev_loop_process,
 * which only Loop.process calls, so no callback ever needs to take the GIL
 * and Python never runs on a thread the library owns.
 *
 * Built against the stable ABI (Py_LIMITED_API 3.11): one binary serves
 * every CPython from 3.11 on, and a completion costs a few C calls
 * (fut.set_result and a decref) rather than a foreign-function trampoline.
 *
 * Files: this one is the module (its functions, the error helpers, init);
 * _op.c the Op type, _loop.c the Loop type, _native.h what they share.
 */
#include "_native.h"

/* Set once by _setup(): make_error(code) -> an exception instance
 * (cudaev.CudaError, TimeoutError, ...), built in Python so that the class
 * and its message live in one place. */
static PyObject *make_error;
PyObject *s_set_result, *s_set_exception, *s_cancel, *s_done;
PyTypeObject *OpType, *LoopType;
Py_ssize_t live_ops;

/* ---- errors -------------------------------------------------------------- */

PyObject *error_for(int code) {
  if (make_error == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "cudaev._native used before _setup()");
    return NULL;
  }
  return PyObject_CallFunction(make_error, "i", code);
}

/* Raises the exception for `code` and returns NULL. */
PyObject *raise_code(int code) {
  PyObject *exc = error_for(code);
  if (exc == NULL) return NULL;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

/* ---- module -------------------------------------------------------------- */

static PyObject *mod_setup(PyObject *m, PyObject *fn) {
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "_setup needs a callable make_error(code)");
    return NULL;
  }
  SETREF(make_error, Py_NewRef(fn));
  Py_RETURN_NONE;
}

static PyObject *mod_error_name(PyObject *m, PyObject *arg) {
  int code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(cudaev_error_name((cudaError_t)code));
}

static PyObject *mod_error_string(PyObject *m, PyObject *arg) {
  int code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(cudaev_error_string((cudaError_t)code));
}

static PyObject *mod_live_ops(PyObject *m, PyObject *unused) {
  return PyLong_FromSsize_t(live_ops);
}

static PyMethodDef mod_methods[] = {
    {"_setup", mod_setup, METH_O, "_setup(make_error) -> None (cudaev/__init__.py calls it)."},
    {"error_name", mod_error_name, METH_O, "error_name(code: int) -> str"},
    {"error_string", mod_error_string, METH_O, "error_string(code: int) -> str"},
    {"live_ops", mod_live_ops, METH_NOARGS, "live_ops() -> int: Op objects alive (leak tests)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "cudaev._native",
    "The C side of cudaev: a foreign-mode cudaev loop and its futures as asyncio.Futures.\n"
    "Private: use the cudaev package.",
    -1, mod_methods};

PyMODINIT_FUNC PyInit__native(void) {
  PyObject *m = PyModule_Create(&mod_def);
  if (m == NULL) return NULL;
  s_set_result = PyUnicode_InternFromString("set_result");
  s_set_exception = PyUnicode_InternFromString("set_exception");
  s_cancel = PyUnicode_InternFromString("cancel");
  s_done = PyUnicode_InternFromString("done");
  OpType = (PyTypeObject *)PyType_FromSpec(&cudaevpy_op_spec);
  LoopType = (PyTypeObject *)PyType_FromSpec(&cudaevpy_loop_spec);
  if (!s_set_result || !s_set_exception || !s_cancel || !s_done || !OpType || !LoopType ||
      PyModule_AddObject(m, "Op", Py_NewRef((PyObject *)OpType)) < 0 ||
      PyModule_AddObject(m, "Loop", Py_NewRef((PyObject *)LoopType)) < 0 ||
      PyModule_AddIntConstant(m, "ERROR_CANCELLED", CUDAEV_ERROR_CANCELLED) < 0 ||
      PyModule_AddIntConstant(m, "ERROR_LOOP_DESTROYED", CUDAEV_ERROR_LOOP_DESTROYED) < 0 ||
      PyModule_AddIntConstant(m, "ERROR_TIMEOUT", CUDAEV_ERROR_TIMEOUT) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
