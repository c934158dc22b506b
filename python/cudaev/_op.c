/* cudaev._native.Op: one cudaev future and the asyncio.Future (or any
 * object with set_result / set_exception / cancel / done) it completes, and
 * the continuation that completes it inside Loop.process. */
#include "_native.h"

void op_unlink(Op *op) {
  op->prev->next = op->next;
  op->next->prev = op->prev;
  op->next = op->prev = NULL;
  op->owner = NULL;
}

/* Calls fut.<name>(arg). A future that is already done (cancelled by its
 * task in the same pass, or its loop closed) refuses; that is not an error
 * of the caller's, so it is dropped; anything else is reported. */
static void settle(PyObject *fut, PyObject *name, PyObject *arg) {
  PyObject *r = PyObject_CallMethodObjArgs(fut, name, arg, NULL);
  if (r != NULL) {
    Py_DECREF(r);
    return;
  }
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyObject *d = PyObject_CallMethodObjArgs(fut, s_done, NULL);
  int done = d != NULL && PyObject_IsTrue(d) == 1;
  Py_XDECREF(d);
  PyErr_Clear();
  if (done) {
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    return;
  }
  PyErr_Restore(t, v, tb);
  PyErr_WriteUnraisable(fut);
}

/* fn(*args) into op->value or op->exc; drops fn and args. GIL held. */
static void op_call(Op *op) {
  PyObject *r = PyObject_Call(op->fn, op->args, NULL);
  if (r != NULL) {
    op->value = r;
  } else {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb != NULL && v != NULL) PyException_SetTraceback(v, tb);
    op->exc = v;
    Py_XDECREF(t);
    Py_XDECREF(tb);
  }
  Py_CLEAR(op->fn);
  Py_CLEAR(op->args);
}

/* Gives fut (NULL: nobody awaits any more) the outcome: op's value or
 * exception (host functions) on success, else CancelledError or the
 * CUDA error; then drops fut and op's outcome. */
static void settle_status(Op *op, PyObject *fut, cudaError_t status) {
  if (fut != NULL) {
    if (status == cudaSuccess && op->exc != NULL) {
      settle(fut, s_set_exception, op->exc);
    } else if (status == cudaSuccess) {
      settle(fut, s_set_result, op->value != NULL ? op->value : Py_None);
    } else if (status == CUDAEV_ERROR_CANCELLED) {
      settle(fut, s_cancel, NULL);
    } else {
      PyObject *exc = error_for((int)status);
      if (exc != NULL) {
        settle(fut, s_set_exception, exc);
        Py_DECREF(exc);
      } else {
        PyErr_WriteUnraisable(fut);
      }
    }
    Py_DECREF(fut);
  }
  Py_CLEAR(op->value);
  Py_CLEAR(op->exc);
}

/* The continuation: runs once, on the loop thread inside
 * cudaev_loop_process (or cudaev_loop_destroy), with the GIL held. It
 * holds one reference to op, taken when it was added. */
static void op_done(cudaev_future_t *f, cudaError_t status, void *user) {
  Op *op = user;
  PyObject *fut = op->fut;
  op->fut = NULL;
  /* host_func without a gate: the stream got here; fn runs now, unless the
   * wait failed or was cancelled first. */
  if (op->after && op->fn != NULL) {
    if (fut != NULL && status == cudaSuccess) op_call(op);
    Py_CLEAR(op->fn);
    Py_CLEAR(op->args);
  }
  if (op->waits_on != NULL) {
    op->waits_on->waits--;
    Py_CLEAR(op->waits_on);
  }
  settle_status(op, fut, status);
  Py_DECREF(op);
}

void op_complete_now(Op *op, cudaError_t status) {
  PyObject *fut = op->fut;
  op->fut = NULL;
  settle_status(op, fut, status);
}

/* A loop-thread host function: fn(*args) on the asyncio thread, GIL held.
 * Its outcome goes to the awaitable; the stream goes on either way. */
cudaError_t op_host(void *user) {
  Op *op = user;
  op_call(op);
  if (op->owner != NULL) op_unlink(op);
  Py_DECREF(op); /* the list's reference */
  return cudaSuccess;
}

Op *op_new(PyObject *fut) {
  Op *op = PyObject_New(Op, OpType);
  if (op == NULL) return NULL;
  op->f = NULL;
  op->fut = Py_NewRef(fut);
  op->fn = op->args = op->value = op->exc = NULL;
  op->next = op->prev = NULL;
  op->owner = NULL;
  op->after = 0;
  op->waits_on = NULL;
  live_ops++;
  return op;
}

/* Takes over the reference `f` and adds the continuation; on failure
 * returns NULL with the exception set, and op is freed by its caller. */
PyObject *op_watch(Op *op, cudaev_future_t *f) {
  op->f = f;
  Py_INCREF((PyObject *)op); /* the continuation's */
  cudaError_t e = cudaev_future_then(f, op_done, op);
  if (e != cudaSuccess) {
    Py_DECREF(op);
    cudaev_future_cancel(f);
    return raise_code((int)e);
  }
  return (PyObject *)op;
}

static void op_dealloc(PyObject *self) {
  Op *op = (Op *)self;
  PyTypeObject *tp = Py_TYPE(self);
  cudaev_future_release(op->f);
  Py_XDECREF(op->fut);
  Py_XDECREF(op->fn);
  Py_XDECREF(op->args);
  Py_XDECREF(op->value);
  Py_XDECREF(op->exc);
  live_ops--;
  PyObject_Free(self);
  Py_DECREF(tp);
}

static PyObject *op_cancel(PyObject *self, PyObject *unused) {
  Op *op = (Op *)self;
  /* The asyncio side is settled by whoever cancels; drop it at once so that
   * nothing of Python waits for the GPU (or for a promise never set). */
  Py_CLEAR(op->fut);
  return PyBool_FromLong(op->f != NULL && cudaev_future_cancel(op->f));
}

static PyObject *op_set(PyObject *self, PyObject *arg) {
  Op *op = (Op *)self;
  int code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return NULL;
  cudaError_t e = cudaev_promise_set(op->f, (cudaError_t)code);
  if (e == cudaErrorIllegalState) Py_RETURN_FALSE;
  if (e != cudaSuccess) return raise_code((int)e);
  Py_RETURN_TRUE;
}

static PyObject *op_ready(PyObject *self, void *closure) {
  Op *op = (Op *)self;
  return PyBool_FromLong(op->f != NULL && cudaev_future_ready(op->f));
}

static PyMethodDef op_methods[] = {
    {"cancel", op_cancel, METH_NOARGS,
     "cancel() -> bool\n\nCancels the cudaev future (the GPU work itself goes on) and drops the "
     "asyncio.Future. True if this call cancelled it."},
    {"set", op_set, METH_O,
     "set(code: int) -> bool\n\nCompletes a promise with a cudaError_t code (0: success). False "
     "if it was already complete."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef op_getset[] = {
    {"ready", op_ready, NULL, "True once the cudaev future has an outcome.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot op_slots[] = {
    {Py_tp_dealloc, op_dealloc},
    {Py_tp_methods, op_methods},
    {Py_tp_getset, op_getset},
    {Py_tp_doc, "One pending cudaev future and the asyncio.Future it completes."},
    {0, NULL}};

PyType_Spec cudaevpy_op_spec = {"cudaev._native.Op", sizeof(Op), 0, Py_TPFLAGS_DEFAULT, op_slots};
