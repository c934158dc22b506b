/* cudaev._native.Loop: a cudaev foreign-mode loop driven by the thread
 * that calls process(), and the calls that make its futures (stream and
 * event waits, host functions, promises, timers) as Ops. */
#include "_native.h"

#include <errno.h>
#include <sys/timerfd.h>
#include <unistd.h>

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
  /* Events, not words, mark the work a Python loop awaits: a wait here costs
   * tens of microseconds of Python, beside which a cuEventQuery per look is
   * nothing, while a word's system-wide fence delays the GPU work of every
   * stream and process sharing the GPU (cudaev_loop_set_markers). */
  cudaev_loop_set_markers(l, CUDAEV_MARKERS_EVENTS);
  lp->l = l;
  lp->timer_cb = NULL;
  lp->tfd = -1;
  lp->depth = 0;
  lp->waits = 0;
  lp->hold_timer = lp->held = 0;
  lp->held_ns = -1;
  lp->hosts.next = lp->hosts.prev = &lp->hosts;
  return (PyObject *)lp;
}

/* The deadline as the timerfd's expiry: ns from now, 0 for a pass at once
 * (1 ns: the fd is readable on the host loop's next turn), -1 for none. */
static void arm_timer_fd(Loop *lp, long long ns) {
  struct itimerspec its = {{0, 0}, {0, 0}};
  if (ns >= 0) {
    if (ns == 0) ns = 1;
    its.it_value.tv_sec = (time_t)(ns / 1000000000);
    its.it_value.tv_nsec = (long)(ns % 1000000000);
  }
  (void)timerfd_settime(lp->tfd, 0, &its, NULL); /* cannot fail on a valid fd */
}

/* The library's deadline goes to the timerfd once timer_fd() made one
 * (asyncio), else to set_timer_cb's callback (trio). */
static void tell_deadline(Loop *lp, long long ns) {
  if (lp->tfd >= 0) {
    arm_timer_fd(lp, ns);
    return;
  }
  if (lp->timer_cb == NULL) return;
  PyObject *r = PyObject_CallFunction(lp->timer_cb, "L", ns);
  if (r == NULL)
    PyErr_WriteUnraisable(lp->timer_cb);
  else
    Py_DECREF(r);
}

static void timer_tramp(cudaev_loop_t *l, int64_t ns, void *user) {
  Loop *lp = user;
  if (lp->hold_timer) {
    lp->held = 1;
    lp->held_ns = (long long)ns;
    return;
  }
  tell_deadline(lp, (long long)ns);
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
  if (lp->tfd >= 0) {
    close(lp->tfd);
    lp->tfd = -1;
  }
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

/* The host loop's timers cannot carry the library's deadlines: asyncio's
 * selector rounds a timeout up to a millisecond and uvloop rounds a delay
 * to the nearest one (a 200 us call_at runs at once, and a re-arm until the
 * deadline spins). A timerfd the host loop watches fires when asked. */
static PyObject *loop_timer_fd(PyObject *self, PyObject *unused) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  if (lp->tfd < 0) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) return PyErr_SetFromErrno(PyExc_OSError);
    lp->tfd = fd;
    cudaev_loop_set_timer_cb(lp->l, timer_tramp, lp); /* tells the deadline now */
    if (PyErr_Occurred()) return NULL;
  }
  return PyLong_FromLong(lp->tfd);
}

/* The timerfd's reader: clears its expiry, then does everything ready. */
static PyObject *loop_process_timer(PyObject *self, PyObject *unused) {
  Loop *lp = (Loop *)self;
  if (lp->tfd >= 0) {
    uint64_t n;
    if (read(lp->tfd, &n, sizeof n) < 0 && errno == EAGAIN) Py_RETURN_NONE; /* re-armed */
  }
  return loop_process(self, NULL);
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

/* set_markers(kind: int): cudaev_loop_set_markers (0 auto, 1 events). */
static PyObject *loop_set_markers(PyObject *self, PyObject *arg) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  long kind = PyLong_AsLong(arg);
  if (kind == -1 && PyErr_Occurred()) return NULL;
  cudaError_t e = cudaev_loop_set_markers(lp->l, (cudaev_markers_t)kind);
  if (e != cudaSuccess) return raise_code((int)e);
  Py_RETURN_NONE;
}

/* stats() -> dict: cudaev_loop_stats as a dict of ints, the latency
 * histogram as a list (bucket i: [2^i, 2^(i+1)) ns). */
static PyObject *loop_stats(PyObject *self, PyObject *unused) {
  Loop *lp = (Loop *)self;
  if (loop_check(lp)) return NULL;
  struct cudaev_loop_stats st;
  cudaError_t e = cudaev_loop_stats(lp->l, &st, sizeof st);
  if (e != cudaSuccess) return raise_code((int)e);
  PyObject *hist = PyList_New(CUDAEV_LOOP_LATENCY_BUCKETS);
  if (hist == NULL) return NULL;
  for (int i = 0; i < CUDAEV_LOOP_LATENCY_BUCKETS; i++) {
    PyObject *v = PyLong_FromUnsignedLongLong(st.gpu_latency_log2_ns[i]);
    if (v == NULL || PyList_SetItem(hist, i, v) < 0) {
      Py_DECREF(hist);
      return NULL;
    }
  }
  return Py_BuildValue(
      "{sKsKsKsKsKsKsKsKsKsKsKsKsN}", "passes", (unsigned long long)st.passes, "wakeups",
      (unsigned long long)st.wakeups, "completions", (unsigned long long)st.completions,
      "timers_fired", (unsigned long long)st.timers_fired, "gpu_completions",
      (unsigned long long)st.gpu_completions, "gpu_word_markers",
      (unsigned long long)st.gpu_word_markers, "gpu_event_markers",
      (unsigned long long)st.gpu_event_markers, "gpu_failed", (unsigned long long)st.gpu_failed,
      "gpu_wakeups_armed", (unsigned long long)st.gpu_wakeups_armed, "spin_ns",
      (unsigned long long)st.spin_ns, "watchdog_checks", (unsigned long long)st.watchdog_checks,
      "watchdog_errors", (unsigned long long)st.watchdog_errors, "gpu_latency_log2_ns", hist);
}

/* wait()'s own pass: it takes f in and may spin; when the spin saw the
 * GPU done, the library's next pass, inside the same process() call,
 * completes f here rather than on the next turn of the asyncio loop. The
 * deadline is held during the call and told once after it. */
static void inline_pass(Loop *lp) {
  lp->hold_timer = 1;
  lp->held = 0;
  PyObject *none = loop_process((PyObject *)lp, NULL);
  Py_XDECREF(none);
  lp->hold_timer = 0;
  if (lp->held && lp->l != NULL) tell_deadline(lp, lp->held_ns);
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
  if (cudaev_future_ready(f)) {
    /* Done when submitted (an event whose work had finished): the outcome
     * goes to fut now, so that `await` does not suspend, and the loop has
     * nothing to do for it. */
    cudaError_t st = cudaev_future_result(f);
    cudaev_future_release(f);
    Op *op = op_new(fut);
    if (op != NULL) op_complete_now(op, st);
    return (PyObject *)op;
  }
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
  op->waits_on = (Loop *)Py_NewRef((PyObject *)lp);
  lp->waits++;
  /* One pass now, on this thread (the loop's: the asyncio thread), instead
   * of on the next wake-up of the asyncio loop: the pass takes the future
   * in, and the loop's adaptive spin (only while the GPU is expected to
   * finish within its window, cudaev_loop_set_spin) may complete it before
   * this returns, so that `await` finds it done without a trip through the
   * event loop. Only when it is this loop's one wait in flight (the
   * latency case): with others outstanding, a spin here would hold back the
   * tasks that enqueue the next work, and their completions wake the loop
   * anyway. Not inside a pass already (a continuation calling wait). */
  if (lp->depth == 0 && lp->waits == 1) inline_pass(lp);
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
    {"timer_fd", loop_timer_fd, METH_NOARGS,
     "timer_fd() -> int\n\nA timerfd that expires at the loop's deadline (from now on the "
     "deadline goes there, not to set_timer_cb's cb); watch it with process_timer. Owned by "
     "the loop: closed by destroy()."},
    {"process_timer", loop_process_timer, METH_NOARGS,
     "process_timer() -> None\n\ntimer_fd()'s reader: clears the expiry, then process()."},
    {"set_timer_cb", loop_set_timer_cb, METH_O,
     "set_timer_cb(cb: Callable[[int], None] | None) -> None\n\ncb(ns) hears the deadline "
     "(ns from now; 0: process soon; -1: none) whenever it moves."},
    {"set_spin", loop_set_spin, METH_O,
     "set_spin(us: int) -> None\n\nLongest spin on GPU completion words before sleeping."},
    {"set_markers", loop_set_markers, METH_O,
     "set_markers(kind: int) -> None\n\nThe loop's completion markers (cudaev_loop_set_markers): "
     "0 auto (words where lone), 1 events (the package's default)."},
    {"stats", loop_stats, METH_NOARGS,
     "stats() -> dict\n\nThe loop's counters (cudaev_loop_stats): passes, wakeups, completions, "
     "timers_fired, gpu_completions, gpu_word_markers, gpu_event_markers, gpu_failed, "
     "gpu_wakeups_armed, spin_ns, watchdog_checks, watchdog_errors, and gpu_latency_log2_ns "
     "(32 buckets: bucket i counts GPU completions [2^i, 2^(i+1)) ns after submission)."},
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

PyType_Spec cudaevpy_loop_spec = {"cudaev._native.Loop", sizeof(Loop), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, loop_slots};
