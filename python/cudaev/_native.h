/* What the files of cudaev._native share: the Op and Loop objects, the
 * error helpers and the module's interned names. Everything here is used on
 * the thread that drives the loop, with the GIL held (see _native.c). */
#ifndef CUDAEV_PY_NATIVE_H
#define CUDAEV_PY_NATIVE_H

#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cudaev.h>

#include "_compat.h"

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
  int tfd;    /* timer_fd(): the deadline as a timerfd (-1: told to timer_cb) */
  int depth;  /* nesting of process(): destroy inside it must be deferred */
  Op hosts;   /* list head of host_func ops whose fn has not run */
  long waits; /* wait() ops not yet completed */
  /* While wait() runs its own passes, the deadlines the library tells are
   * kept here and only the last reaches timer_cb or the timerfd. */
  int hold_timer, held;
  long long held_ns;
} Loop;

/* _native.c: the module's state, set at import. */
extern PyTypeObject *OpType, *LoopType;
extern PyObject *s_set_result, *s_set_exception, *s_cancel, *s_done;
extern Py_ssize_t live_ops; /* Ops alive, for the leak tests (_native.live_ops()) */
/* The exception for a cudaError_t code (NULL with an exception set if
 * _setup() has not run); raise_code raises it and returns NULL. */
PyObject *error_for(int code);
PyObject *raise_code(int code);

/* _op.c */
extern PyType_Spec cudaevpy_op_spec;
/* A new Op completing `fut` (a strong reference is taken). */
Op *op_new(PyObject *fut);
/* Takes over the reference `f` and adds the continuation; on failure
 * returns NULL with the exception set, and op is freed by its caller. */
PyObject *op_watch(Op *op, cudaev_future_t *f);
/* Gives op's future the outcome `status` now (work found done when it was
 * submitted); op keeps no cudaev future. */
void op_complete_now(Op *op, cudaError_t status);
/* The loop-thread host function of Loop.host_func (user: the Op). */
cudaError_t op_host(void *user);
/* Takes op off its Loop's list of pending host functions. */
void op_unlink(Op *op);

/* _loop.c */
extern PyType_Spec cudaevpy_loop_spec;

#endif
