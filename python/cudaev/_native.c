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
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cudaev.h>

#include "_compat.h"

/* Set once by _setup(): make_error(code) -> an exception instance
 * (cudaev.CudaError, TimeoutError, ...), built in Python so that the class
 * and its message live in one place. */
static PyObject *make_error;
static PyObject *s_set_result, *s_set_exception, *s_cancel, *s_done;
/* Ops alive, for the leak tests (_native.live_ops()). */
static Py_ssize_t live_ops;

/* ---- errors -------------------------------------------------------------- */

static PyObject *error_for(int code) {
  if (make_error == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "cudaev._native used before _setup()");
    return NULL;
  }
  return PyObject_CallFunction(make_error, "i", code);
}

/* Raises the exception for `code` and returns NULL. */
static PyObject *raise_code(int code) {
  PyObject *exc = error_for(code);
  if (exc == NULL) return NULL;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

/* ---- Op: one cudaev future and the asyncio.Future it completes ----------- */

typedef struct Op {
  PyObject_HEAD cudaev_future_t *f; /* our reference; released in dealloc */
  PyObject *fut;                    /* the asyncio.Future; dropped on completion or cancel */
  /* host_func only: the call, then its outcome (value or exception). */
  PyObject *fn, *args, *value, *exc;
  /* host_func only: on the Loop's list of ops whose fn has not run (the
   * list holds a reference, so fn finds its op even after a cancel). */
  struct Op *next, *prev;
  struct Loop *owner;
  int after;             /* host_func without a gate: fn runs in the continuation */
  struct Loop *waits_on; /* wait(): counted in its loop's `waits` until done */
} Op;

typedef struct Loop {
  PyObject_HEAD cudaev_loop_t *l; /* NULL once destroyed */
  PyObject *timer_cb;
  int depth;  /* nesting of process(): destroy inside it must be deferred */
  Op hosts;   /* list head of host_func ops whose fn has not run */
  long waits; /* wait() ops not yet completed */
} Loop;

static PyTypeObject *OpType, *LoopType;

static void op_unlink(Op *op) {
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
  Py_DECREF(op);
}

/* A loop-thread host function: fn(*args) on the asyncio thread, GIL held.
 * Its outcome goes to the awaitable; the stream goes on either way. */
static cudaError_t op_host(void *user) {
  Op *op = user;
  op_call(op);
  if (op->owner != NULL) op_unlink(op);
  Py_DECREF(op); /* the list's reference */
  return cudaSuccess;
}

static Op *op_new(PyObject *fut) {
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
static PyObject *op_watch(Op *op, cudaev_future_t *f) {
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

static PyType_Spec op_spec = {"cudaev._native.Op", sizeof(Op), 0, Py_TPFLAGS_DEFAULT, op_slots};

/* ---- Loop ---------------------------------------------------------------- */

static int loop_check(Loop *lp) {
  if (lp->l != NULL) return 0;
  PyErr_SetString(PyExc_RuntimeError, "this cudaev loop was destroyed (its asyncio loop closed)");
  return -1;
}

static PyObject *loop_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
  if (!PyArg_ParseTuple(args, ":Loop") || (kw != NULL && PyDict_Size(kw) != 0)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Loop() takes no arguments");
    return NULL;
  }
  cudaev_loop_t *l = NULL;
  cudaError_t e = cudaev_loop_new_foreign(&l);
  if (e != cudaSuccess) return raise_code((int)e);
  allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
  Loop *lp = (Loop *)alloc(tp, 0);
  if (lp == NULL) {
    cudaev_loop_destroy(l);
    return NULL;
  }
  lp->l = l;
  lp->timer_cb = NULL;
  lp->depth = 0;
  lp->waits = 0;
  lp->hosts.next = lp->hosts.prev = &lp->hosts;
  return (PyObject *)lp;
}

static void timer_tramp(cudaev_loop_t *l, int64_t ns, void *user) {
  Loop *lp = user;
  if (lp->timer_cb == NULL) return;
  PyObject *r = PyObject_CallFunction(lp->timer_cb, "L", (long long)ns);
  if (r == NULL)
    PyErr_WriteUnraisable(lp->timer_cb);
  else
    Py_DECREF(r);
}

/* After cudaev_loop_destroy no skipped host function will run: their ops
 * leave the list here. */
static void loop_drop_hosts(Loop *lp) {
  while (lp->hosts.next != &lp->hosts) {
    Op *op = lp->hosts.next;
    op_unlink(op);
    Py_CLEAR(op->fn);
    Py_CLEAR(op->args);
    Py_DECREF(op);
  }
}

static void loop_closed_cb(cudaev_loop_t *l, void *user) { loop_drop_hosts(user); }

static PyObject *loop_destroy(PyObject *self, PyObject *unused) {
  Loop *lp = (Loop *)self;
  cudaev_loop_t *l = lp->l;
  if (l == NULL) Py_RETURN_NONE;
  lp->l = NULL;
  cudaev_loop_set_timer_cb(l, NULL, NULL);
  Py_CLEAR(lp->timer_cb);
  if (lp->depth > 0) {
    /* Inside one of its own callbacks: torn down at the end of the
     * outermost process(); the loop object stays alive until then. */
    Py_INCREF(self);
    cudaev_loop_close(l, loop_closed_cb, lp);
  } else {
    cudaev_loop_destroy(l);
    loop_drop_hosts(lp);
  }
  Py_RETURN_NONE;
}

static PyObject *loop_process(PyObject *self, PyObject *unused) {
  Loop *lp = (Loop *)self;
  cudaev_loop_t *l = lp->l;
  if (l == NULL) Py_RETURN_NONE; /* a wake-up that raced a destroy */
  lp->depth++;
  cudaev_loop_process(l);
  if (--lp->depth == 0 && lp->l == NULL) {
    /* destroy() ran inside: the close finished inside cudaev_loop_process
     * (loop_closed_cb), drop the reference destroy() took. */
    Py_DECREF(self);
  }
  Py_RETURN_NONE;
}

static PyObject *loop_fd(PyObject *self, PyObject *unused) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  return PyLong_FromLong(cudaev_loop_fd(lp->l));
}

static PyObject *loop_pending(PyObject *self, PyObject *unused) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  return PyLong_FromSize_t(cudaev_loop_pending(lp->l));
}

static PyObject *loop_closed(PyObject *self, void *closure) {
  return PyBool_FromLong(((Loop *)self)->l == NULL);
}

static PyObject *loop_set_timer_cb(PyObject *self, PyObject *cb) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  if (cb != Py_None && !PyCallable_Check(cb)) {
    PyErr_SetString(PyExc_TypeError, "set_timer_cb needs a callable or None");
    return NULL;
  }
  SETREF(lp->timer_cb, cb == Py_None ? NULL : Py_NewRef(cb));
  cudaev_loop_set_timer_cb(lp->l, lp->timer_cb != NULL ? timer_tramp : NULL, lp);
  if (PyErr_Occurred()) return NULL;
  Py_RETURN_NONE;
}

static PyObject *loop_set_spin(PyObject *self, PyObject *arg) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  unsigned long us = PyLong_AsUnsignedLong(arg);
  if (us == (unsigned long)-1 && PyErr_Occurred()) return NULL;
  cudaev_loop_set_spin(lp->l, us > 1000000 ? 1000000u : (unsigned)us);
  Py_RETURN_NONE;
}

/* stream(handle, fut) / event(handle, fut): handle is the integer value of
 * a CUstream / CUevent (cudaStream_t / cudaEvent_t). */
static PyObject *loop_gpu(Loop *lp, PyObject *args, int event) {
  PyObject *h, *fut;
  if (!PyArg_ParseTuple(args, event ? "OO:event" : "OO:stream", &h, &fut)) return NULL;
  if (loop_check(lp)) return NULL;
  void *p = PyLong_AsVoidPtr(h);
  if (p == NULL && PyErr_Occurred()) return NULL;
  cudaev_future_t *f = NULL;
  cudaError_t e = event ? cudaev_future_new_event(lp->l, (cudaEvent_t)p, &f)
                        : cudaev_future_new_stream(lp->l, (cudaStream_t)p, &f);
  if (e != cudaSuccess) return raise_code((int)e);
  Op *op = op_new(fut);
  if (op == NULL) {
    cudaev_future_cancel(f);
    cudaev_future_release(f);
    return NULL;
  }
  PyObject *r = op_watch(op, f);
  if (r == NULL) {
    Py_DECREF(op);
    return NULL;
  }
  if (!cudaev_future_ready(f)) {
    op->waits_on = (Loop *)Py_NewRef((PyObject *)lp);
    lp->waits++;
  }
  /* One pass now, on this thread (the loop's: the asyncio thread), instead
   * of on the next wake-up of the asyncio loop: the pass takes the future
   * in, and the loop's adaptive spin (only while the GPU is expected to
   * finish within its window, cudaev_loop_set_spin) may complete it before
   * this returns, so that `await` finds it done without a trip through the
   * event loop. Only when it is this loop's one wait in flight (the
   * latency case): with others outstanding, a spin here would hold back the
   * tasks that enqueue the next work, and their completions wake the loop
   * anyway. Not inside a pass already (a continuation calling wait). */
  if (lp->depth == 0 && lp->waits == 1) {
    PyObject *none = loop_process((PyObject *)lp, NULL);
    Py_XDECREF(none);
  }
  return r;
}

static PyObject *loop_stream(PyObject *self, PyObject *args) {
  return loop_gpu((Loop *)self, args, 0);
}

static PyObject *loop_event(PyObject *self, PyObject *args) {
  return loop_gpu((Loop *)self, args, 1);
}

/* The arguments of host_func / host_after (stream, fn, args tuple, future)
 * as an op holding fn and args; *stream gets the handle. NULL with the
 * exception set. */
static Op *host_op(Loop *lp, PyObject *args, const char *format, void **stream) {
  PyObject *h, *fn, *fargs, *fut;
  if (!PyArg_ParseTuple(args, format, &h, &fn, &PyTuple_Type, &fargs, &fut)) return NULL;
  if (loop_check(lp)) return NULL;
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "host_func needs a callable");
    return NULL;
  }
  *stream = PyLong_AsVoidPtr(h);
  if (*stream == NULL && PyErr_Occurred()) return NULL;
  Op *op = op_new(fut);
  if (op == NULL) return NULL;
  op->fn = Py_NewRef(fn);
  op->args = Py_NewRef(fargs);
  return op;
}

static PyObject *loop_host_func(PyObject *self, PyObject *args) {
  Loop *lp = (Loop *)self;
  void *p;
  Op *op = host_op(lp, args, "OOO!O:host_func", &p);
  if (op == NULL) return NULL;
  cudaev_future_t *f = NULL;
  cudaError_t e = cudaev_launch_host_func_async(lp->l, (cudaStream_t)p, op_host, op, &f);
  if (e != cudaSuccess) {
    Py_DECREF(op);
    return raise_code((int)e);
  }
  /* fn is on the stream: the list keeps op alive until it ran or the loop
   * is destroyed. */
  Py_INCREF((PyObject *)op);
  op->owner = lp;
  op->next = &lp->hosts;
  op->prev = lp->hosts.prev;
  lp->hosts.prev->next = op;
  lp->hosts.prev = op;
  PyObject *r = op_watch(op, f);
  if (r == NULL) Py_DECREF(op);
  return r;
}

/* host_func without a gate: a stream future whose continuation calls fn,
 * so the stream never waits for Python (nor for this loop). */
static PyObject *loop_host_after(PyObject *self, PyObject *args) {
  Loop *lp = (Loop *)self;
  void *p;
  Op *op = host_op(lp, args, "OOO!O:host_after", &p);
  if (op == NULL) return NULL;
  op->after = 1;
  cudaev_future_t *f = NULL;
  cudaError_t e = cudaev_future_new_stream(lp->l, (cudaStream_t)p, &f);
  if (e != cudaSuccess) {
    Py_DECREF(op);
    return raise_code((int)e);
  }
  PyObject *r = op_watch(op, f);
  if (r == NULL) Py_DECREF(op);
  return r;
}

static PyObject *loop_promise(PyObject *self, PyObject *fut) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  cudaev_future_t *f = NULL;
  cudaError_t e = cudaev_promise_new(lp->l, &f);
  if (e != cudaSuccess) return raise_code((int)e);
  Op *op = op_new(fut);
  if (op == NULL) {
    cudaev_future_release(f);
    return NULL;
  }
  PyObject *r = op_watch(op, f);
  if (r == NULL) Py_DECREF(op);
  return r;
}

static PyObject *loop_timer(PyObject *self, PyObject *args) {
  Loop *lp = (Loop *)self;
  unsigned long long ns;
  PyObject *fut;
  if (!PyArg_ParseTuple(args, "KO:timer", &ns, &fut)) return NULL;
  if (loop_check(lp)) return NULL;
  cudaev_future_t *f = NULL;
  cudaError_t e = cudaev_future_new_timer(lp->l, ns, &f);
  if (e != cudaSuccess) return raise_code((int)e);
  Op *op = op_new(fut);
  if (op == NULL) {
    cudaev_future_cancel(f);
    cudaev_future_release(f);
    return NULL;
  }
  PyObject *r = op_watch(op, f);
  if (r == NULL) Py_DECREF(op);
  return r;
}

static int loop_traverse(PyObject *self, visitproc visit, void *arg) {
  Loop *lp = (Loop *)self;
  Py_VISIT(lp->timer_cb);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int loop_clear(PyObject *self) {
  Loop *lp = (Loop *)self;
  if (lp->l != NULL) cudaev_loop_set_timer_cb(lp->l, NULL, NULL);
  Py_CLEAR(lp->timer_cb);
  return 0;
}

static void loop_dealloc(PyObject *self) {
  Loop *lp = (Loop *)self;
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (lp->l != NULL) {
    PyObject *r = loop_destroy(self, NULL);
    Py_XDECREF(r);
  }
  Py_CLEAR(lp->timer_cb);
  freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  tp_free(self);
  Py_DECREF(tp);
}

static PyMethodDef loop_methods[] = {
    {"fd", loop_fd, METH_NOARGS, "fd() -> int\n\nThe eventfd to watch for readability."},
    {"process", loop_process, METH_NOARGS,
     "process() -> None\n\nDoes everything ready: completions, continuations, host functions."},
    {"pending", loop_pending, METH_NOARGS, "pending() -> int\n\nFutures the loop tracks."},
    {"set_timer_cb", loop_set_timer_cb, METH_O,
     "set_timer_cb(cb: Callable[[int], None] | None) -> None\n\ncb(ns) hears the deadline "
     "(ns from now; 0: process soon; -1: none) whenever it moves."},
    {"set_spin", loop_set_spin, METH_O,
     "set_spin(us: int) -> None\n\nLongest spin on GPU completion words before sleeping."},
    {"destroy", loop_destroy, METH_NOARGS,
     "destroy() -> None\n\nTears the loop down; pending futures fail with "
     "CUDAEV_ERROR_LOOP_DESTROYED. Idempotent."},
    {"stream", loop_stream, METH_VARARGS,
     "stream(handle: int, fut: asyncio.Future) -> Op\n\nfut completes when everything enqueued "
     "on the stream so far has finished."},
    {"event", loop_event, METH_VARARGS,
     "event(handle: int, fut: asyncio.Future) -> Op\n\nfut completes with the event's most "
     "recent record."},
    {"host_after", loop_host_after, METH_VARARGS,
     "host_after(stream: int, fn, args: tuple, fut: asyncio.Future) -> Op\n\nfn(*args) runs on "
     "this thread, inside process(), once the stream got here; the stream does not wait for "
     "it; fut gets its result."},
    {"host_func", loop_host_func, METH_VARARGS,
     "host_func(stream: int, fn, args: tuple, fut: asyncio.Future) -> Op\n\nfn(*args) runs on "
     "this thread, inside process(), when the stream gets there; fut gets its result."},
    {"promise", loop_promise, METH_O,
     "promise(fut: asyncio.Future) -> Op\n\nA promise (Op.set completes it)."},
    {"timer", loop_timer, METH_VARARGS,
     "timer(ns: int, fut: asyncio.Future) -> Op\n\nfut completes ns nanoseconds from now."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef loop_getset[] = {{"closed", loop_closed, NULL, "True once destroyed.", NULL},
                                    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot loop_slots[] = {
    {Py_tp_new, loop_new},
    {Py_tp_dealloc, loop_dealloc},
    {Py_tp_traverse, loop_traverse},
    {Py_tp_clear, loop_clear},
    {Py_tp_methods, loop_methods},
    {Py_tp_getset, loop_getset},
    {Py_tp_doc,
     "Loop()\n\nA cudaev foreign-mode loop, driven by the thread that calls "
     "process(). All methods: that thread only."},
    {0, NULL}};

static PyType_Spec loop_spec = {"cudaev._native.Loop", sizeof(Loop), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, loop_slots};

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
  OpType = (PyTypeObject *)PyType_FromSpec(&op_spec);
  LoopType = (PyTypeObject *)PyType_FromSpec(&loop_spec);
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
