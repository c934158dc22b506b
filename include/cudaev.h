/* cudaev: the CUDA Runtime API on the driver API, with an event loop.
 *
 * This header is our own asynchronous API (prefix cudaev_, symbol version
 * node CUDAEV_0). The cudart API itself comes from the CUDA toolkit's
 * cuda_runtime_api.h; libcudart.so.13 built by this project implements it.
 *
 * Thread rule: functions are not thread-safe unless their comment says
 * "Thread: any". "Thread: loop" means: only on the loop's thread, i.e.
 * inside a callback the loop runs, or (embedded and foreign modes) the
 * thread that drives the loop while it is not driving it concurrently.
 *
 * Outcomes. Submitting work returns a cudaError_t that says whether the
 * work was enqueued. What happened to the work later is the future's
 * outcome, also a cudaError_t: cudaSuccess, a CUDA error (sticky errors
 * such as cudaErrorIllegalAddress reach every pending future of the
 * context), or one of the CUDAEV_ERROR_* values below (values no CUDA
 * error uses, inside the range of cudaError_t in C++ too).
 *
 * Ownership. Every function that returns a cudaev_future_t * through an
 * `out` parameter gives the caller one reference; drop it with
 * cudaev_future_release(). Callbacks receive a borrowed pointer (valid for
 * the duration of the callback; retain it to keep it).
 *
 * Two libraries carry this API, built from the same sources:
 *  - libcudaev.so.1 (pkg-config cudaev-async, Meson dependency('cudaev-async')):
 *    the API alone, for a process that keeps its own CUDA runtime (NVIDIA's,
 *    shared or static: PyTorch, cuBLAS, CuPy, cuda-python). It exports no
 *    cuda* name. Streams, events and contexts of any runtime are the
 *    driver's, so everything here works beside another runtime, with one
 *    exception: a launch by host stub (cudaev_launch_kernel_async,
 *    cudaev_launch_ex_async given a kernel's address) needs the stub
 *    registered with this runtime, and beside another one it is refused
 *    with cudaErrorInvalidResourceHandle before anything runs; pass the
 *    kernel's cudaKernel_t (cudaGetKernel of the other runtime) or a
 *    CUfunction (cudaev_launch_cufunc_async) instead.
 *  - libcudart.so.13 (pkg-config cudaev), our drop-in runtime, exports the
 *    same API under the same version node.
 * A process may load both: a program's cudaev_* references bind to the one
 * the loader finds first, so they all go to one library; each library's
 * loops and futures are its own and must not be handed to the other
 * (docs/async-beside.md).
 *
 * See docs/design.md for the thread model and how a GPU completion travels
 * to a callback.
 */
#ifndef CUDAEV_H
#define CUDAEV_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDAEV_VERSION_MAJOR 1
#define CUDAEV_VERSION_MINOR 0
#define CUDAEV_VERSION_PATCH 0

/* Names. Every public name is cudaev_<object>_<verb>, as libuv's are
 * uv_<handle>_<verb>: the object a function acts on or makes, then what it
 * does.
 *  - An object is made by cudaev_<object>_new, followed by what it is made
 *    from where there is more than one way: cudaev_loop_new_thread,
 *    cudaev_promise_new, cudaev_future_new_timer, cudaev_future_new_stream,
 *    cudaev_future_new_all, cudaev_future_new_timeout (from a future and a
 *    deadline), cudaev_future_new_work_done.
 *  - A name without a verb answers and changes nothing
 *    (cudaev_future_ready, cudaev_future_result, cudaev_loop_fd,
 *    cudaev_loop_pending); anything that does work has a verb
 *    (cudaev_loop_prepare spins and arms wakeups, cudaev_loop_process).
 *  - Work submitted to the GPU is NVIDIA's cudaXxxAsync in our spelling,
 *    cudaev_<xxx>_async, and gives a future: cudaev_memcpy_async,
 *    cudaev_launch_kernel_async, cudaev_launch_host_func_async.
 * The names of version 0 are kept as deprecated aliases for one major
 * version (the end of this header says which is which); the compiler warns
 * where a program uses one. */

struct ev_loop;   /* libev's loop (ev.h) */
struct CUfunc_st; /* the driver's CUfunction (cuda.h) */

/* ---- outcomes ------------------------------------------------------------ */

/* Our outcomes are CUDAEV_ERROR_BASE (15000) plus 1..99: cudaError_t
 * values that no CUDA error uses, defined behaviour in C and in C++ alike.
 * In C a cudaError_t holds any value of its integer type. In C++ an
 * enumeration without a fixed underlying type, as cudaError is, has only
 * the values of the smallest bit-field that holds all its enumerators;
 * cudaError's largest is cudaErrorApiFailureBase = 10000, so its values
 * are 0..16383, and loading anything outside that from a cudaError_t is
 * undefined behaviour (UBSan's -fsanitize=enum, in g++ and clang++,
 * reports it). The runtime documents cudaErrorApiFailureBase plus a driver
 * error code (0..999) for unhandled driver errors, so 10000..10999 may
 * occur too. Ours lie above all of those, and below 16384. The assertions
 * below stop the build if a toolkit moves either bound, and a unit test
 * reads every enumerator of the toolkit's cudaError and fails on a
 * collision. Our cudaGetErrorName / cudaGetErrorString name them too
 * (NVIDIA's say "unrecognized error code"). */
#define CUDAEV_ERROR_BASE           15000
/* The future was cancelled (cudaev_future_cancel) before it completed. The
 * GPU work itself was not stopped. */
#define CUDAEV_ERROR_CANCELLED      ((cudaError_t)(CUDAEV_ERROR_BASE + 1))
/* The loop was destroyed while the future was pending. */
#define CUDAEV_ERROR_LOOP_DESTROYED ((cudaError_t)(CUDAEV_ERROR_BASE + 2))
/* cudaev_loop_new_ev could not bind to libev: the library never links it,
 * and looks for the application's at run time (cudaev_loop_new_ev says
 * where). cudaev_error_string() says why. */
#define CUDAEV_ERROR_NO_LIBEV       ((cudaError_t)(CUDAEV_ERROR_BASE + 3))
/* A deadline passed: that of cudaev_future_new_timeout before its input
 * completed, or cudaev_future_wait's before the future completed. */
#define CUDAEV_ERROR_TIMEOUT        ((cudaError_t)(CUDAEV_ERROR_BASE + 4))

#if defined(__cplusplus) && __cplusplus >= 201103L
static_assert(CUDAEV_ERROR_BASE > cudaErrorApiFailureBase + 999 && CUDAEV_ERROR_BASE + 99 < 16384,
              "CUDAEV_ERROR_* must lie above every cudaError_t and inside cudaError's range");
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(CUDAEV_ERROR_BASE > cudaErrorApiFailureBase + 999 && CUDAEV_ERROR_BASE + 99 < 16384,
               "CUDAEV_ERROR_* must lie above every cudaError_t and inside cudaError's range");
#endif

/* The name of an outcome: "cudaErrorInvalidValue" and so on for CUDA
 * errors, "CUDAEV_ERROR_CANCELLED" and so on for ours (our
 * cudaGetErrorName answers the same). Static storage. Thread: any. */
const char *cudaev_error_name(cudaError_t e);
/* One line describing an outcome: cudaGetErrorString's (ours knows our
 * outcomes too); for CUDAEV_ERROR_NO_LIBEV, why libev could not be bound
 * (the loader's message). Static storage. Thread: any. */
const char *cudaev_error_string(cudaError_t e);

/* ---- types --------------------------------------------------------------- */

typedef struct cudaev_loop cudaev_loop_t;
typedef struct cudaev_future cudaev_future_t;
typedef struct cudaev_notify cudaev_notify_t;

/* A continuation: runs once on the loop thread with the future's outcome. */
typedef void (*cudaev_future_cb)(cudaev_future_t *f, cudaError_t status, void *user);
/* A chained continuation (cudaev_future_then_chain): runs once on the loop
 * thread with the future's outcome and returns the next future (with a
 * reference it hands over), or NULL to end the chain with `status`. */
typedef cudaev_future_t *(*cudaev_chain_fn)(cudaev_future_t *f, cudaError_t status, void *user);
/* Destructor of user data. */
typedef void (*cudaev_dtor)(void *user);
/* A loop-thread host function (cudaev_launch_host_func_async). May call CUDA. */
typedef cudaError_t (*cudaev_host_fn)(void *user);
/* A function posted to the loop (cudaev_loop_post). */
typedef void (*cudaev_loop_fn)(cudaev_loop_t *loop, void *user);
/* A device notification (cudaev_notify_register). `info` is the driver's
 * CUasyncNotificationInfo, copied; valid during the call. */
typedef void (*cudaev_notify_cb)(cudaev_notify_t *n, const void *info, void *user);

/* ---- loops --------------------------------------------------------------- */

/* A loop delivers completions to callbacks on one thread. Three ways to run
 * one (they differ only in who waits for the wakeup fd):
 *
 *  cudaev_loop_new_ev:      attached to the caller's libev loop; runs while
 *                           the caller runs ev_run() on it.
 *  cudaev_loop_new_foreign: driven by any loop (epoll, libuv, io_uring):
 *                           watch cudaev_loop_fd() for readability, block no
 *                           longer than cudaev_loop_prepare(), and call
 *                           cudaev_loop_process() when the fd is readable or
 *                           the timeout expired.
 *  cudaev_loop_new_thread:  the library waits on its own thread (ppoll on
 *                           the wakeup fd; no libev needed).
 *
 * A loop serves every CUDA context of the process, on every device: one
 * loop thread is enough for a server with several GPUs. It starts with the
 * context current on the creating thread (a device's primary context is
 * made current as the runtime does when none is), the loop's context, and
 * takes on another context the first time work of it is submitted (see the
 * GPU completion sources below; at most 64 contexts per loop). If the
 * runtime cannot start (no driver, no device), the loop still works for
 * promises and combinators, and GPU sources return that error.
 *
 * libev: libcudart.so.13 does not link libev (it loads wherever NVIDIA's
 * loads). cudaev_loop_new_ev binds, once per process, to the libev that
 * runs `evl`: the one in the process's global scope (the application linked
 * libev), else libev.so.4 already loaded privately, else libev.so.4 loaded
 * now. $CUDAEV_LIBEV, if set, names the only file to try instead. The other
 * two modes never load libev.
 *
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL out or evl),
 * cudaErrorMemoryAllocation, cudaErrorOperatingSystem (eventfd/thread), or
 * CUDAEV_ERROR_NO_LIBEV (cudaev_loop_new_ev only; cudaev_error_string()
 * says why).
 * Ownership: the caller owns the loop; free it with cudaev_loop_destroy().
 * Thread: any. */
cudaError_t cudaev_loop_new_ev(struct ev_loop *evl, cudaev_loop_t **out);
cudaError_t cudaev_loop_new_foreign(cudaev_loop_t **out);
cudaError_t cudaev_loop_new_thread(cudaev_loop_t **out);

/* The process-wide embedded loop (thread mode), created on first use.
 * Returns NULL if it could not be created (a later call tries again). Never
 * destroy it; it lives until the process exits, when its thread (like that
 * of every thread-mode loop not destroyed) is stopped and joined before the
 * driver's exit handlers run; futures still pending then never complete.
 * In a child made by fork(), returns a new loop of the child's own (the
 * parent's loops must not be used there). Thread: any. */
cudaev_loop_t *cudaev_loop_default(void);

/* Destroys a loop, blocking the calling thread until it is torn down. A
 * thread that must not stall there (a server's, at shutdown) closes the
 * loop instead: cudaev_loop_close inside one of the loop's callbacks (a
 * function given to cudaev_loop_post, from any thread, is one) returns at
 * once, the loop is torn down after that pass on the thread that runs it,
 * and the close callback says when it is done.
 *
 * What blocks: when GPU futures are still pending, a context
 * synchronisation (cuCtxSynchronize) of each context they belong to, which
 * waits for all of that context's work, the application's other streams
 * included, so that the GPU has finished writing the loop's completion
 * words; in thread mode, the join of the loop's thread (a callback it is
 * running finishes first); and the continuations below.
 *
 * Every future still pending completes with CUDAEV_ERROR_LOOP_DESTROYED
 * and its continuations run on the calling thread, inside this call (the
 * one exception to "never inside the call"). Loop-thread host functions not
 * yet run are skipped (their streams are released). Futures the
 * application still holds stay valid for
 * cudaev_future_ready/_result/_user/_release, nothing else.
 * Thread: ev mode: the thread running the libev loop, not inside one of its
 * callbacks (or when ev_run is not running); foreign mode: the driving
 * thread, outside cudaev_loop_process; thread mode: any thread but the
 * loop's own. Not for cudaev_loop_default(). Called inside a callback of
 * the same loop (a continuation, a posted function, a host function), it
 * prints "cudaev: cudaev_loop_destroy inside a callback of the same loop;
 * use cudaev_loop_close" on stderr (or the cudaev_log_set hook) and
 * aborts: the pass that runs the callback still uses the loop. */
void cudaev_loop_destroy(cudaev_loop_t *loop);

/* Called by cudaev_loop_close once the loop is torn down, right before
 * its memory is freed: `loop` identifies it, nothing more may be called
 * on it. */
typedef void (*cudaev_close_cb)(cudaev_loop_t *loop, void *user);

/* Closes a loop, like cudaev_loop_destroy (every pending future completes
 * with CUDAEV_ERROR_LOOP_DESTROYED exactly once, its continuations run,
 * the GPU's writes are waited for), but legal anywhere, inside the loop's
 * own callbacks included (libuv's uv_close). Inside a callback of the loop
 * the close is deferred: the pass that runs the callback finishes (other
 * callbacks of that pass still run), then the run mode tears the loop down
 * on the loop thread: ev mode inside the libev callback of our watcher,
 * thread mode on the loop's thread (which then exits), foreign mode at the
 * end of the outermost cudaev_loop_process, which the application must
 * treat as the loop's last call. Outside the loop's callbacks the close
 * happens inside this call, on the calling thread (thread mode: after
 * joining the loop's thread). Then cb(loop, user) runs (may be NULL) on
 * that thread, and the loop is freed. Futures held by the application stay
 * valid as after cudaev_loop_destroy.
 *
 * The shutdown that does not block the caller: call it inside a callback
 * of the loop, e.g. from a function posted with cudaev_loop_post, and wait
 * for cb instead of for the call. In thread mode the teardown, context
 * synchronisation included, then runs on the library's thread; in ev and
 * foreign modes on the thread that runs the loop, after the pass: there,
 * let the pending GPU futures finish first (cancel those no longer
 * wanted; cudaev_future_new_work_done says when the GPU is done with one), so that
 * the close has little or nothing to wait for. Called outside the loop's
 * callbacks it blocks as cudaev_loop_destroy does.
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL loop, or the default
 * loop, which is never closed) or cudaErrorIllegalState (already closing).
 * Thread: as cudaev_loop_destroy, plus the loop's own callbacks. */
cudaError_t cudaev_loop_close(cudaev_loop_t *loop, cudaev_close_cb cb, void *user);

/* Keep-alive. In ev mode, a loop with pending futures (GPU work, promises,
 * combinators) holds one reference on its libev loop (ev_ref), as libuv's
 * active handles do, so ev_run does not return while work is pending; it
 * drops it (ev_unref) after the pass in which the last one completed. Its
 * watchers alone do not keep ev_run alive. cudaev_loop_ref adds a
 * reference of the application's (the loop keeps ev_run alive while any is
 * held, pending futures or not); cudaev_loop_unref drops one (an unmatched
 * unref is ignored). The count of pending futures is taken at the end of
 * each pass, so work submitted before ev_run starts counts from its first
 * iteration. In thread mode the loop's thread runs regardless, and in
 * foreign mode the application decides how long it drives the loop: there
 * both only count. Thread: loop (ev mode: the ev_run thread). */
void cudaev_loop_ref(cudaev_loop_t *loop);
void cudaev_loop_unref(cudaev_loop_t *loop);

/* Foreign mode: the fd to watch for readability (an eventfd). Owned by the
 * loop. Returns -1 for other modes. Thread: any. */
int cudaev_loop_fd(cudaev_loop_t *loop);

/* Foreign mode: call right before blocking. Returns how long the caller may
 * block, in milliseconds (-1: until the fd is readable; 0: call
 * cudaev_loop_process() now). It may spin for a few microseconds when GPU
 * work is about to finish (see cudaev_loop_set_spin) and arms the wakeups
 * that make the fd readable when the GPU finishes. Thread: loop. */
int cudaev_loop_prepare(cudaev_loop_t *loop);

/* Foreign mode: cudaev_loop_prepare in nanoseconds (-1: until the fd is
 * readable; 0: call cudaev_loop_process now), for loops whose timers are
 * finer than a millisecond. Same spin and arming. Thread: loop. */
int64_t cudaev_loop_prepare_ns(cudaev_loop_t *loop);

/* Foreign mode, for loops without a hook right before they block (curl's
 * CURLMOPT_TIMERFUNCTION pattern): cb(loop, timeout_ns, user) is called
 * whenever the deadline the application must honour changes: once now
 * (inside this call), then at the end of a cudaev_loop_process call after
 * which the deadline moved. timeout_ns is how long from now the
 * application may wait before calling cudaev_loop_process (0: at once;
 * -1: no deadline, wait for the fd). Replace the previous deadline with
 * it. The callback may not call cudaev_loop_process itself (schedule it).
 * Calling cudaev_loop_process early or spuriously is harmless: nothing
 * completes before its time. A NULL cb stops the calls. The deadline
 * includes the loop's timers, its GPU wakeups and watchdog, and "more work
 * ready" (0). Thread: loop (cb runs on the thread calling this or
 * cudaev_loop_process). */
void cudaev_loop_set_timer_cb(cudaev_loop_t *loop,
                              void (*cb)(cudaev_loop_t *loop, int64_t timeout_ns, void *user),
                              void *user);

/* Foreign mode: does everything that is ready (drains the fd, submitted
 * work, GPU completions, continuations, the error watchdog). Never blocks
 * (except inside user callbacks). With a deadline callback
 * (cudaev_loop_set_timer_cb), when a pass ran no continuation and the spin
 * before sleeping then saw the GPU finish, the pass that completes it runs
 * within the same call (up to three passes), rather than after another
 * turn of the application's loop. A call with nothing ready (a spurious
 * wakeup, a timer that fired early) does nothing and is harmless.
 * Thread: loop (one thread at a time: a second thread calling it while
 * another is inside prints "cudaev: two threads drive one loop at once"
 * and aborts; a call from a callback on the driving thread is allowed). */
void cudaev_loop_process(cudaev_loop_t *loop);

/* The longest the loop spins on GPU completion words before it sleeps, in
 * microseconds (default 50; 0 never spins). The spin is adaptive: it only
 * happens when the oldest pending work is expected to complete within that
 * window, judged from recent completion times. Work expected later is slept
 * for, and the loop's deadline is then half a window before it is due, so
 * that the loop spins into it (hybrid polling) rather than hear of it only
 * through the host function it armed, which comes late in a VM: about one
 * extra wakeup and at most one window's spin per completion. Work that comes
 * later than that is looked for again after half a window, then at doubling
 * intervals up to 250 us (or an eighth of its usual time), a wakeup with no
 * spin each, while it is overdue by less than its usual time. With 0 the loop
 * only sleeps. Thread: any. */
void cudaev_loop_set_spin(cudaev_loop_t *loop, unsigned max_us);

/* How the loop learns that awaited GPU work is done: the marker it enqueues
 * behind the work of each submission made after this call.
 *  - CUDAEV_MARKERS_AUTO (the default): a submission onto a stream with none
 *    of the loop's futures outstanding gets a word (cuStreamWriteValue32 into
 *    pinned host memory, read by the loop for free, so that a spin sees the
 *    GPU done at once); one queued behind outstanding futures gets a pooled
 *    event, and every 16th a word again.
 *  - CUDAEV_MARKERS_EVENTS: always a pooled event (CU_EVENT_DISABLE_TIMING),
 *    which costs the loop a cuEventQuery each time it looks (about a
 *    microsecond) and the GPU nothing. A word carries a system-wide memory
 *    fence: where other work keeps the GPU busy meanwhile (more streams,
 *    more processes on one GPU), the fence delays that work. Four Python
 *    workers on one GPU each awaiting its batches (bench/RESULTS.md): a
 *    batch took 302-313 us on the GPU with words, 254-258 us with events or
 *    with no marker at all. The Python package's loops use events.
 * Where the context has no stream memory operations (or with
 * CUDAEV_LOOP_EVENTS=1) every marker is an event whatever this says.
 * Returns cudaErrorInvalidValue for a NULL loop or another value.
 * Thread: any (submissions already made keep their markers). */
typedef enum cudaev_markers { CUDAEV_MARKERS_AUTO = 0, CUDAEV_MARKERS_EVENTS = 1 } cudaev_markers_t;
cudaError_t cudaev_loop_set_markers(cudaev_loop_t *loop, cudaev_markers_t markers);

/* Runs fn(loop, user) once on the loop thread, never inside this call.
 * Returns cudaSuccess or cudaErrorMemoryAllocation. Thread: any. */
cudaError_t cudaev_loop_post(cudaev_loop_t *loop, cudaev_loop_fn fn, void *user);

/* The number of futures the loop is tracking: GPU work, promises,
 * combinators and timers. A future counts from the moment the call that
 * made it returns, on any thread, until the pass of the loop that runs its
 * continuations (GPU work, cancelled too: or, if later, the pass that sees
 * the GPU pass its marker). So `while (cudaev_loop_pending(loop))
 * drive(loop);` on the driving thread ends only once everything made
 * before it completed and its continuations ran. Off the loop thread,
 * while a pass runs, the count may still include futures that pass
 * completes; it never misses one made before the call and still pending.
 * Thread: any. */
size_t cudaev_loop_pending(cudaev_loop_t *loop);

/* Buckets of cudaev_loop_stats' latency histogram. */
#define CUDAEV_LOOP_LATENCY_BUCKETS 32

/* Counters of a loop, for dashboards and debugging. Each counts from the
 * loop's creation and only grows. The gpu_ counters count the
 * application's GPU futures (host functions' included), never the
 * markers the loop enqueues for itself. New members are only ever added
 * at the end. */
struct cudaev_loop_stats {
  size_t size;           /* bytes cudaev_loop_stats filled in */
  uint64_t passes;       /* processing passes */
  uint64_t wakeups;      /* passes that found the wakeup fd written */
  uint64_t completions;  /* futures whose continuations ran (fired) */
  uint64_t timers_fired; /* timers that completed at their deadline */
  /* GPU futures whose marker the loop saw the GPU pass (cancelled ones
   * included; those a waiter completed first too: the loop still sees
   * their marker) ... */
  uint64_t gpu_completions;
  uint64_t gpu_word_markers;  /* ... of which marked by a completion word */
  uint64_t gpu_event_markers; /* ... of which by a pooled event (cuEventQuery) */
  uint64_t gpu_failed;        /* GPU futures failed by a sticky error or destroy */
  uint64_t gpu_wakeups_armed; /* host functions the loop enqueued to wake itself */
  uint64_t spin_ns;           /* time spent spinning on GPU completions before sleeping */
  uint64_t watchdog_checks;   /* sticky-error watchdog queries (while GPU work is pending) */
  uint64_t watchdog_errors;   /* of those, the ones that found a sticky error */
  /* Latency of each of the gpu_completions, from the submission (right
   * after its marker was enqueued) to the pass that saw the marker passed
   * and ran its continuations: bucket i counts latencies in [2^i, 2^(i+1))
   * ns, bucket 0 those under 2 ns, the last those of 2^31 ns (2.1 s) or
   * more. It includes the GPU's own time, and the buckets add up to
   * gpu_completions. */
  uint64_t gpu_latency_log2_ns[CUDAEV_LOOP_LATENCY_BUCKETS];
};

/* Copies the loop's counters into *out: the first min(size, sizeof(struct
 * cudaev_loop_stats)) bytes, so that a program built against an older,
 * shorter struct keeps working when the struct grows (pass sizeof *out);
 * out->size says how many bytes were filled. Returns cudaSuccess, or
 * cudaErrorInvalidValue (NULL loop or out, size < sizeof(size_t)).
 * Ownership: *out is the caller's; the loop keeps nothing of it.
 * Thread: any (each counter is exact on the loop thread, recent
 * elsewhere; counters read off the loop thread may be from slightly
 * different moments, e.g. the histogram a completion behind
 * gpu_completions). */
cudaError_t cudaev_loop_stats(cudaev_loop_t *loop, struct cudaev_loop_stats *out, size_t size);

/* Log levels of cudaev_log_set. */
#define CUDAEV_LOG_ERROR 0 /* a misuse the library aborts on right after */
#define CUDAEV_LOG_WARN  1 /* something wrong the library survived */
/* A log hook: level, the message (one line, "cudaev: ...", no newline;
 * valid during the call), the user pointer given to cudaev_log_set. */
typedef void (*cudaev_log_fn)(int level, const char *msg, void *user);

/* Sends the library's rare messages to fn instead of stderr (NULL: back to
 * stderr). The fatal misuse messages (cudaev_loop_destroy inside a
 * callback, two threads driving one loop, CUDAEV_DEBUG's freed futures)
 * go there too, right before the abort. fn may run on any thread,
 * concurrently, and must not call into cudaev. Calls racing a change may
 * still reach the previous hook. Thread: any. */
void cudaev_log_set(cudaev_log_fn fn, void *user);

/* ---- futures ------------------------------------------------------------- */

/* Adds a continuation. It runs exactly once, on the loop thread, with the
 * outcome: after the future completes, never inside this call, in the
 * order continuations were added. The future is kept alive until it ran.
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL f or cb) or
 * cudaErrorMemoryAllocation. Thread: any. */
cudaError_t cudaev_future_then(cudaev_future_t *f, cudaev_future_cb cb, void *user);

/* Chains a continuation that returns a future, flattening the result (as
 * a JavaScript promise's then does): when f completes, fn(f, status, user)
 * runs once on the loop thread (as cudaev_future_then's cb). If it returns
 * NULL, *out completes with `status`; if it returns a future, *out
 * completes with that future's outcome when it completes (a future of any
 * loop; fn hands over one reference to it, e.g. the `out` of a cudaev_*
 * submission made inside fn). Chains nest: fn may return the *out of
 * another then_chain. *out belongs to f's loop and only the library
 * completes it (cudaev_promise_set refuses it); destroying the loop first
 * completes it with CUDAEV_ERROR_LOOP_DESTROYED.
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL f, fn or out) or
 * cudaErrorMemoryAllocation (*out = NULL; fn will not run). If the
 * continuation cannot be added to the returned future (out of memory),
 * *out completes with cudaErrorMemoryAllocation.
 * Ownership: the caller gets one reference to *out; f stays the caller's.
 * Thread: any. */
cudaError_t cudaev_future_then_chain(cudaev_future_t *f, cudaev_chain_fn fn, void *user,
                                     cudaev_future_t **out);

/* 1 when the future has completed (its outcome is known), else 0. Never
 * blocks, drives nothing. Thread: any. */
int cudaev_future_ready(const cudaev_future_t *f);

/* The outcome, or cudaErrorNotReady while pending. Thread: any. */
cudaError_t cudaev_future_result(const cudaev_future_t *f);

/* Blocks until the future completes or timeout_ns passes (negative: no
 * limit; 0: only looks). Returns the outcome, or CUDAEV_ERROR_TIMEOUT when
 * timeout_ns passed first (the future stays pending; the same answer as
 * cudaev_future_new_timeout's; cudaev_future_ready tells it from a future
 * whose outcome is CUDAEV_ERROR_TIMEOUT).
 * A GPU future is also completed by the waiting thread itself when it sees
 * the GPU's completion word, so waiting works even while no thread drives
 * the loop; continuations still run on the loop thread.
 * Returns cudaErrorNotPermitted when called on the loop thread inside a
 * callback (it would deadlock). A wait on any future may race
 * cudaev_loop_destroy / _close on another thread: it returns
 * CUDAEV_ERROR_LOOP_DESTROYED and never reads the freed loop (a GPU
 * future's waiter that is reading its completion word or querying its
 * event holds destroy back until that read returns).
 * Thread: any other than the loop thread. */
cudaError_t cudaev_future_wait(cudaev_future_t *f, int64_t timeout_ns);

/* Cancels a pending future: it completes now with CUDAEV_ERROR_CANCELLED
 * (waiters wake; continuations run on the loop thread with that status).
 * The GPU work is not stopped; its later completion is ignored. Returns 1
 * if this call cancelled it, 0 if it had already completed. To learn when
 * the GPU is done with the work's memory, use cudaev_future_new_work_done.
 * Thread: any. */
int cudaev_future_cancel(cudaev_future_t *f);

/* A future that completes when f's underlying work has really finished,
 * whether or not f was cancelled: for a GPU future, once the GPU has
 * passed f's marker (everything enqueued on its stream before it is done,
 * so memory that work uses may be freed in a continuation of *out); for
 * other futures, when f completes. Call it before or after cancelling,
 * before or after f completes.
 *
 * *out's outcome: for a GPU future, cudaSuccess when the GPU passed the
 * marker (f's own outcome instead when f was not cancelled and has one,
 * e.g. a loop-thread host function's return value), or the context's
 * sticky error (the context is dead: the GPU writes nothing more); when
 * the loop is destroyed first, *out completes inside cudaev_loop_destroy,
 * after its context synchronisation, with that synchronisation's outcome.
 * For other futures, f's outcome. *out belongs to f's loop and only the
 * library completes it (cudaev_promise_set refuses it).
 *
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL f or out) or
 * cudaErrorMemoryAllocation (*out = NULL).
 * Ownership: the caller gets one reference to *out (release it with
 * cudaev_future_release); f stays owned by the caller (the request holds
 * a reference of its own until *out completes). Thread: any. */
cudaError_t cudaev_future_new_work_done(cudaev_future_t *f, cudaev_future_t **out);

/* Adds a reference; returns f. Thread: any. */
cudaev_future_t *cudaev_future_retain(cudaev_future_t *f);

/* Drops a reference. The future is freed (and its user data destructor
 * called, on the releasing thread) when the last reference goes; pending
 * work and continuations hold references of their own, so releasing a
 * pending future does not cancel it. NULL is ignored.
 * Debugging: with CUDAEV_DEBUG=1 in the environment (read when the library
 * loads), a freed future is poisoned and kept from reuse for a while (the
 * last 4096), and a release too many, or any cudaev_future_* or
 * cudaev_promise_set call on a freed future, prints "cudaev:
 * <function> on a future already freed" and aborts. Thread: any. */
void cudaev_future_release(cudaev_future_t *f);

/* Attaches user data; dtor (may be NULL) runs when the future is freed.
 * Replacing data does not call the old destructor. Thread: any, but not
 * concurrently with another set_user on the same future. */
void cudaev_future_set_user(cudaev_future_t *f, void *user, cudaev_dtor dtor);
void *cudaev_future_user(const cudaev_future_t *f);

/* The loop a future belongs to. Thread: any. */
cudaev_loop_t *cudaev_future_loop(const cudaev_future_t *f);

/* ---- promises: futures the application completes ------------------------- */

/* A future the application completes with cudaev_promise_set: a promise.
 * Only futures made here are promises. Returns cudaSuccess,
 * cudaErrorInvalidValue, cudaErrorMemoryAllocation. Thread: any. */
cudaError_t cudaev_promise_new(cudaev_loop_t *loop, cudaev_future_t **out);

/* Completes a promise with `status`. Returns cudaSuccess if this call
 * completed it, cudaErrorIllegalState if it was already completed (or
 * cancelled), cudaErrorInvalidValue if f is NULL or not a promise of
 * cudaev_promise_new: every other future (GPU work, timers, combinators,
 * cudaev_future_new_timeout's, cudaev_future_then_chain's and
 * cudaev_future_new_work_done's *out, a staged copy's) is completed by the library
 * alone, and is left untouched. Thread: any. */
cudaError_t cudaev_promise_set(cudaev_future_t *f, cudaError_t status);

/* ---- combinators ----------------------------------------------------------- */

/* A future that completes when all n futures completed; its outcome is the
 * first non-success outcome in completion order, else cudaSuccess. n == 0
 * completes at once (still on the loop thread). The inputs stay owned by the
 * caller (the combinator holds references of its own). All inputs must
 * belong to `loop`. Returns cudaSuccess, cudaErrorInvalidValue,
 * cudaErrorMemoryAllocation. Thread: any. */
cudaError_t cudaev_future_new_all(cudaev_loop_t *loop, cudaev_future_t *const *fs, size_t n,
                                  cudaev_future_t **out);

/* A future that completes with the outcome of the first of the n futures
 * to complete; cudaev_future_any_index() then says which. n must be > 0. */
cudaError_t cudaev_future_new_any(cudaev_loop_t *loop, cudaev_future_t *const *fs, size_t n,
                                  cudaev_future_t **out);
/* The index of the input that completed a when_any future; (size_t)-1
 * while pending or for other futures. Thread: any. */
size_t cudaev_future_any_index(const cudaev_future_t *f);

/* ---- timers and deadlines -------------------------------------------------- */

/* A future that completes with cudaSuccess once `ns` nanoseconds (of
 * CLOCK_MONOTONIC) have passed, on the loop thread (never earlier; later by
 * however long the loop takes to get there). The loop sleeps no longer
 * than its nearest deadline in every mode (thread mode's ppoll, ev mode's
 * ev_timer, foreign mode's cudaev_loop_prepare). cudaev_future_cancel
 * completes it at once with CUDAEV_ERROR_CANCELLED and takes it off the
 * loop's timers. A pending timer counts in cudaev_loop_pending (and keeps
 * ev_run alive in ev mode). If the loop is destroyed first it completes
 * with CUDAEV_ERROR_LOOP_DESTROYED.
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL loop or out) or
 * cudaErrorMemoryAllocation. Ownership: *out is the caller's reference
 * (cudaev_future_release). Thread: any. */
cudaError_t cudaev_future_new_timer(cudaev_loop_t *loop, uint64_t ns, cudaev_future_t **out);

/* A future that completes with f's outcome if f completes within `ns`
 * nanoseconds, else with CUDAEV_ERROR_TIMEOUT when they pass. f is not
 * cancelled (cancel it yourself if the work is no longer wanted) and stays
 * owned by the caller; the new future holds what it needs. Not for host
 * function futures' internals (any future an API returned is fine).
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL f or out) or
 * cudaErrorMemoryAllocation. Ownership: *out is the caller's reference.
 * Thread: any. */
cudaError_t cudaev_future_new_timeout(cudaev_future_t *f, uint64_t ns, cudaev_future_t **out);

/* ---- GPU completion sources ---------------------------------------------- */
/* Each enqueues its work on `stream`, then a completion marker, and returns
 * a future for the marker: it completes when everything enqueued on the
 * stream before it has finished. The stream must not be destroyed while
 * its futures are pending.
 *
 * Contexts: the work goes to the stream's own context; for the NULL stream
 * (and cudaStreamLegacy, cudaStreamPerThread) to the context current on
 * the calling thread, or the loop's context when none is. That context is
 * current during the call (the async variants enqueue in it) and when the
 * future's continuations run, as it is for a loop-thread host function;
 * other continuations (promises, combinators) run with the loop's context
 * current. The first submission of a context costs that context a stream
 * and a chunk of pinned memory, kept until the loop is destroyed. A context
 * error (e.g. a kernel faulting) completes every pending GPU future of that
 * context with that error within about 250 ms. When submission fails no
 * future is returned (*out = NULL) and the error is returned (and recorded
 * as cudart's last error, as the corresponding cudaXxx would). A
 * submission made while the loop is being destroyed (by a continuation
 * that cudaev_loop_destroy runs) returns CUDAEV_ERROR_LOOP_DESTROYED; one
 * from another thread must not overlap cudaev_loop_destroy at all (the
 * loop is freed under it).
 *
 * The marker is a completion word (cuStreamWriteValue32) when the stream has
 * none of the loop's futures outstanding, else a pooled event, with a word
 * every 16th (environment CUDAEV_LOOP_WORD_EVERY=1..1024 changes the 16):
 * words are read for free but cost the GPU about 1.4 us each, events cost
 * the GPU nothing. While futures are pending on a stream the loop thread
 * may itself enqueue on it one host function (its wakeup) and one word
 * (behind a run of events); a cudaStreamSynchronize of the stream also
 * waits for these (never on cudaStreamPerThread, whose futures bring their
 * own wakeup). docs/design.md has the details.
 * Thread: any. */

/* Everything enqueued on `stream` so far. */
cudaError_t cudaev_future_new_stream(cudaev_loop_t *loop, cudaStream_t stream,
                                     cudaev_future_t **out);

/* The work captured by the most recent cudaEventRecord of `event` (at the
 * time of this call). Uses an internal stream of the context current on
 * the calling thread (the loop's when none is). When that work has
 * finished already (cuEventQuery says so), the future comes back complete,
 * and nothing is enqueued. */
cudaError_t cudaev_future_new_event(cudaev_loop_t *loop, cudaEvent_t event, cudaev_future_t **out);

/* cudaMemcpyAsync (kind must be a valid cudaMemcpyKind; addresses are
 * resolved through unified addressing) + completion.
 *
 * Pageable host memory (neither pinned, registered, managed nor device
 * memory) never makes this call, or the loop thread, wait for the GPU
 * (the driver would make such a copy synchronous): the copy goes through a
 * pinned staging buffer (from the pinned pool, cudaHostAlloc Portable).
 * Host to device: `src` is copied into the buffer inside this call (so it
 * may be reused as soon as the call returns), then copied to the device
 * asynchronously. Device to host: the device copies into the buffer; on
 * the loop thread, once the GPU has passed it, the buffer is copied into
 * `dst` and only then does the future complete, so `dst` holds the data
 * when continuations run and waiters wake (so such a future completes only
 * while the loop runs: a waiter does not complete it by itself). Cancelling
 * such a future before
 * it completes means `dst` is never written. The buffer is freed once the
 * GPU is done with it (also after a cancel). Pageable memory is detected
 * with cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE), once per
 * side per call; host-to-host and device-to-device copies are unchanged. */
cudaError_t cudaev_memcpy_async(cudaev_loop_t *loop, void *dst, const void *src, size_t count,
                                enum cudaMemcpyKind kind, cudaStream_t stream,
                                cudaev_future_t **out);

/* cudaMemsetAsync + completion. */
cudaError_t cudaev_memset_async(cudaev_loop_t *loop, void *dev, int value, size_t count,
                                cudaStream_t stream, cudaev_future_t **out);

/* cudaMallocAsync: *dev_ptr is valid for stream-ordered use at once; the
 * future says when the allocation itself has happened on the stream. */
cudaError_t cudaev_malloc_async(cudaev_loop_t *loop, void **dev_ptr, size_t size,
                                cudaStream_t stream, cudaev_future_t **out);

/* cudaLaunchKernel (func: a registered host stub or a cudaKernel_t) +
 * completion. Beside another runtime a host stub is registered with that
 * runtime, not ours: it is refused with cudaErrorInvalidResourceHandle;
 * a cudaKernel_t from any runtime works. */
cudaError_t cudaev_launch_kernel_async(cudaev_loop_t *loop, const void *func, dim3 grid, dim3 block,
                                       void **args, size_t shmem, cudaStream_t stream,
                                       cudaev_future_t **out);

/* cudaLaunchKernelExC (func: a registered host stub or a cudaKernel_t;
 * cfg: grid, block, dynamic shared memory, stream and launch attributes,
 * e.g. cluster dimensions, priority, cooperative) + completion on
 * cfg->stream. cfg and its attributes are read during the call only.
 * Returns cudaErrorInvalidValue for a NULL cfg, else as
 * cudaLaunchKernelExC. */
cudaError_t cudaev_launch_ex_async(cudaev_loop_t *loop, const cudaLaunchConfig_t *cfg,
                                   const void *func, void **args, cudaev_future_t **out);

/* cuLaunchKernel of a driver CUfunction + completion. */
cudaError_t cudaev_launch_cufunc_async(cudaev_loop_t *loop, struct CUfunc_st *func, dim3 grid,
                                       dim3 block, void **args, size_t shmem, cudaStream_t stream,
                                       cudaev_future_t **out);

/* cudaGraphLaunch + completion: the future completes once the stream has
 * passed the whole graph launch. Errors as cudaGraphLaunch's. Thread: any. */
cudaError_t cudaev_graph_launch_async(cudaev_loop_t *loop, cudaGraphExec_t exec,
                                      cudaStream_t stream, cudaev_future_t **out);

/* Loop-thread host function. When the stream reaches this point, fn(user)
 * runs on the loop thread, with the stream's context current. Work enqueued on
 * `stream` after this call starts only after fn returned. The future
 * completes once the stream has passed that point; its outcome is fn's
 * return value (or a context error, or CUDAEV_ERROR_LOOP_DESTROYED if the
 * loop was destroyed before fn ran, in which case fn does not run).
 *
 * The stream is held on the GPU until fn returns, and until the loop thread
 * gets to fn at all. Everything below follows from that; it is the
 * contract, not an implementation detail.
 *
 * fn MAY call CUDA (unlike cudaLaunchHostFunc), as long as the call does not
 * wait for the GPU:
 *  - enqueue work: kernel launches, cudaMemcpyAsync / cudaMemsetAsync
 *    between device memory and pinned host memory, event records, stream
 *    waits, cudaMallocAsync / cudaFreeAsync, graph launches, cudaev_*
 *    submissions, on any stream, including `stream` itself (that work runs
 *    after fn returns);
 *  - queries: cudaStreamQuery, cudaEventQuery, cudaGetLastError, device and
 *    pointer attributes, cudaev_future_ready / _result;
 *  - anything else that does not wait for work already on the GPU.
 * These DEADLOCK inside fn (the GPU waits for fn, fn waits for the GPU):
 *  - synchronous copies and memsets (cudaMemcpy, cudaMemset, cudaMemcpy2D,
 *    ..., and the *Async forms where NVIDIA's "API synchronization
 *    behavior" makes them synchronous, e.g. to or from pageable host
 *    memory);
 *  - cudaDeviceSynchronize; cudaStreamSynchronize / cudaEventSynchronize
 *    of `stream`, of any stream or event with work behind a pending
 *    loop-thread host function, and of any stream of the context that has
 *    work enqueued after this host function (it may share a hardware queue
 *    with `stream`, see docs/design.md);
 *  - calls NVIDIA lists as possibly synchronizing the device: cudaMalloc,
 *    cudaFree, cudaMallocHost / cudaHostAlloc, cudaFreeHost, cudaHostRegister
 *    / Unregister, cudaMallocManaged, cudaMallocPitch / cudaMallocArray and
 *    their frees, cudaGraphicsMap/Unmap, module loads and unloads,
 *    cudaDeviceReset, cudaDeviceSetLimit and cudaCtxResetPersistingL2Cache
 *    and anything else documented as "may synchronize";
 *  - the first launch of a kernel whose module is not loaded yet: under
 *    CUDA's lazy loading (CUDA_MODULE_LOADING=LAZY, the default) that
 *    launch loads it, which may synchronize the context (NVIDIA's "Lazy
 *    Loading" notes); launch each kernel fn uses once before, or load
 *    eagerly;
 *  - waiting for a GPU future: cudaev_future_wait on a future of this
 *    loop returns cudaErrorNotPermitted instead of hanging; on a future
 *    of another loop it may hang;
 *  - an enqueue while the driver's queue for `stream`'s hardware queue is
 *    full (about a thousand operations): keep the work queued behind
 *    pending host functions bounded. The same holds for continuations,
 *    which also run on the loop thread.
 *
 * Other threads: while a host function is pending, every call that waits
 * for the GPU (the list above, from any thread) waits until the loop has
 * run it. In particular, a thread that calls cudaMalloc, cudaMallocHost or
 * cudaDeviceSynchronize while host functions are queued and no thread is
 * driving the loop (ev mode before ev_run, a foreign loop not yet
 * processing, or the driving thread itself) hangs. Allocate before
 * submitting, or drive the loop on another thread (cudaev_loop_new_thread).
 * Such a hang is reported, not prevented: once the GPU has waited at a
 * host function's gate for CUDAEV_HOSTFN_STALL_MS (default 1000; 0: off)
 * without a pass of its loop, the log hook (cudaev_log_set, else stderr)
 * gets one CUDAEV_LOG_WARN message per stall, from a monitor thread of the
 * library's, naming the stream and how long the loop has not run a pass.
 *
 * Without stream memory operations (the pooled-event fallback, or
 * CUDAEV_LOOP_EVENTS=1) a driver host function holds the stream until fn
 * has run; the driver may then hold back other host functions of the
 * context meanwhile (cudaLaunchHostFunc callbacks, the loop's wakeups), so
 * fn must not wait for any of them either.
 *
 * Returns cudaSuccess, cudaErrorInvalidValue (NULL loop, fn or out), or
 * the error of the enqueue. Thread: any. */
cudaError_t cudaev_launch_host_func_async(cudaev_loop_t *loop, cudaStream_t stream,
                                          cudaev_host_fn fn, void *user, cudaev_future_t **out);

/* ---- device notifications ------------------------------------------------ */

/* Registers cb for the device's asynchronous notifications
 * (cuDeviceRegisterAsyncNotification, e.g. over-budget), delivered on the
 * loop thread. Returns cudaSuccess, cudaErrorInvalidDevice, the driver's
 * error (cudaErrorNotSupported where the driver has none), or
 * cudaErrorMemoryAllocation. Ownership: unregister with
 * cudaev_notify_unregister before destroying the loop. Thread: any. */
cudaError_t cudaev_notify_register(cudaev_loop_t *loop, int device, cudaev_notify_cb cb, void *user,
                                   cudaev_notify_t **out);

/* Unregisters; after it returns no new callback is queued (one already
 * queued is dropped). Thread: any. */
cudaError_t cudaev_notify_unregister(cudaev_notify_t *n);

/* ---- deprecated names ------------------------------------------------------ */

/* The names of version 0, kept for one major version. Each is the function
 * its message names, unchanged (the library exports both; a program built
 * against version 0 runs unchanged). */
#if defined(__cplusplus) && __cplusplus >= 201402L
#define CUDAEV_DEPRECATED(use) [[deprecated("use " use)]]
#elif defined(__GNUC__) || defined(__clang__)
#define CUDAEV_DEPRECATED(use) __attribute__((deprecated("use " use)))
#else
#define CUDAEV_DEPRECATED(use)
#endif

/* Deprecated: cudaev_future_new_timer under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_new_timer")
cudaError_t cudaev_timer_future(cudaev_loop_t *loop, uint64_t ns, cudaev_future_t **out);
/* Deprecated: cudaev_future_new_stream under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_new_stream")
cudaError_t cudaev_stream_future(cudaev_loop_t *loop, cudaStream_t stream, cudaev_future_t **out);
/* Deprecated: cudaev_future_new_event under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_new_event")
cudaError_t cudaev_event_future(cudaev_loop_t *loop, cudaEvent_t event, cudaev_future_t **out);
/* Deprecated: cudaev_future_new_all under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_new_all")
cudaError_t cudaev_when_all(cudaev_loop_t *loop, cudaev_future_t *const *fs, size_t n,
                            cudaev_future_t **out);
/* Deprecated: cudaev_future_new_any under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_new_any")
cudaError_t cudaev_when_any(cudaev_loop_t *loop, cudaev_future_t *const *fs, size_t n,
                            cudaev_future_t **out);
/* Deprecated: cudaev_future_any_index under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_any_index")
size_t cudaev_when_any_index(const cudaev_future_t *f);
/* Deprecated: cudaev_future_new_timeout under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_new_timeout")
cudaError_t cudaev_future_timeout(cudaev_future_t *f, uint64_t ns, cudaev_future_t **out);
/* Deprecated: cudaev_future_new_work_done under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_future_new_work_done")
cudaError_t cudaev_future_done(cudaev_future_t *f, cudaev_future_t **out);
/* Deprecated: cudaev_loop_prepare under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_loop_prepare")
int cudaev_loop_timeout(cudaev_loop_t *loop);
/* Deprecated: cudaev_loop_prepare_ns under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_loop_prepare_ns")
int64_t cudaev_loop_timeout_ns(cudaev_loop_t *loop);
/* Deprecated: cudaev_log_set under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_log_set")
void cudaev_set_log(cudaev_log_fn fn, void *user);
/* Deprecated: cudaev_launch_host_func_async under its version 0 name. */
CUDAEV_DEPRECATED("cudaev_launch_host_func_async")
cudaError_t cudaev_host_func(cudaev_loop_t *loop, cudaStream_t stream, cudaev_host_fn fn,
                             void *user, cudaev_future_t **out);

#ifdef __cplusplus
}
#endif

#endif
