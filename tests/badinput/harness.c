/* badinput: calls every export of libcudart.so.13 with bad arguments and
 * prints one line per case, "name|variant|code|status", for compare.py to
 * set NVIDIA's runtime against ours.
 *
 *   badinput [-e EXPECTED_LIBCUDART] [-j JOBS] [-t SECONDS] [-T SECONDS] [-b BATCH]
 *            [-f FILTER] [-m warm|cold|both] [-l]
 *
 * The library is dlopen()ed by its soname, so LD_LIBRARY_PATH picks it; the
 * run proves which file that was (dladdr of cudaGetDeviceCount) and, with
 * -e, refuses to run on any other. The parent never calls the library: it
 * forks a child per batch of cases (whole functions, about BATCH cases),
 * which starts by initialising the runtime (cudaGetDeviceCount: "warm"
 * cases), and reports each case as it finishes; every case also runs
 * "cold", as the first call of a process of its own (with a device, only
 * the cases that make no objects). A batch child that dies or stops making
 * progress for SECONDS is killed; its current case is run again alone (the
 * result of that run counts) and the rest of the batch in a new child. Status is
 * "ok", "crash:SIGNAL", "exit:N" (the child left early), "hang", or
 * "batchcrash:SIGNAL" (the case crashed in its batch but not alone: an
 * earlier case of the batch broke something).
 * A batch child whose device holds a sticky error after a case (the
 * synchronisation that follows each warm case tells) hands the rest of its
 * batch to a new child, as after a crash, so no case answers for an
 * earlier one's fault.
 *
 * A run stopped early (-T, the whole run's budget, or SIGTERM/SIGINT) kills
 * its children and prints the runs that finished, under "# partial": a
 * capped run on a slow machine still reports, and compare.py compares the
 * runs both sides have.
 *
 * With a device, cases get live objects (streams, events, graphs, arrays,
 * pools, a PTX library...) and destroyed ones; without one no setup call is
 * made, live objects are NULL and "destroyed" cases are reported as SKIP. */
#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *lib;
static int have_device;

static void *sym(const char *name) {
  void *p = dlsym(lib, name);
  if (p == NULL) {
    fprintf(stderr, "badinput: %s not in the loaded libcudart\n", name);
    _exit(3);
  }
  return p;
}
/* Setup calls go to the library under test, like the cases. */
#define CU(name) ((__typeof__(&name))sym(#name))

/* ---- what the cases are made of ----------------------------------------- */

const char bi_ptx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    ".visible .global .align 4 .b32 g;\n"
    ".visible .entry k()\n"
    "{\n"
    "  ret;\n"
    "}\n";

void bi_host_fn(void *user) { (void)user; }
void bi_stream_cb(cudaStream_t s, cudaError_t e, void *user) { (void)s, (void)e, (void)user; }
void bi_async_cb(cudaAsyncNotificationInfo_t *info, void *user, cudaAsyncCallbackHandle_t h) {
  (void)info, (void)user, (void)h;
}
void bi_logs_cb(void *data, cudaLogLevel level, char *message, size_t length) {
  (void)data, (void)level, (void)message, (void)length;
}
/* A host function's address: never registered as a kernel or symbol. */
void bi_not_a_kernel(void) {}
static void uobj_destroy(void *p) { (void)p; }

#define SCRATCH_PARAMS 16
#define SCRATCH_BYTES  16384
static _Alignas(4096) unsigned char scratch[SCRATCH_PARAMS][SCRATCH_BYTES];
static _Alignas(4096) unsigned char host_devbuf[65536];

void *bi_scratch(struct bi_run *r, int param, bi_fill_fn *fill) {
  void *p = scratch[param];
  if (fill != NULL) fill(r, p);
  return p;
}

void bi_fill_chan(struct bi_run *r, void *p) {
  (void)r;
  struct cudaChannelFormatDesc d = {32, 0, 0, 0, cudaChannelFormatKindFloat};
  memcpy(p, &d, sizeof d);
}

void bi_fill_pool_props(struct bi_run *r, void *p) {
  (void)r;
  struct cudaMemPoolProps *pp = p;
  pp->allocType = cudaMemAllocationTypePinned;
  pp->location.type = cudaMemLocationTypeDevice;
  pp->location.id = 0;
}

void bi_fill_resdesc(struct bi_run *r, void *p) {
  struct cudaResourceDesc *d = p;
  d->resType = cudaResourceTypeArray;
  d->res.array.array = (cudaArray_t)bi_obj(r, BI_ARRAY, BI_LIVE);
}

void bi_fill_nodes(struct bi_run *r, void *p) {
  *(cudaGraphNode_t *)p = (cudaGraphNode_t)bi_obj(r, BI_NODE, BI_LIVE);
}

void *bi_devbuf(struct bi_run *r) {
  if (!have_device) return host_devbuf;
  if (r->devbuf == NULL && CU(cudaMalloc)(&r->devbuf, 65536) != cudaSuccess) r->devbuf = NULL;
  return r->devbuf;
}

void bi_release(enum bi_release how, void *p) {
  if (p == NULL) return;
  switch (how) {
  case BI_FREE_DEV: CU(cudaFree)(*(void **)p); break;
  case BI_FREE_PITCHED: CU(cudaFree)(((struct cudaPitchedPtr *)p)->ptr); break;
  case BI_FREE_HOST: CU(cudaFreeHost)(*(void **)p); break;
  case BI_FREE_ARRAY: CU(cudaFreeArray)(*(cudaArray_t *)p); break;
  case BI_FREE_MIPMAP: CU(cudaFreeMipmappedArray)(*(cudaMipmappedArray_t *)p); break;
  case BI_UNREGISTER: CU(cudaHostUnregister)(p); break;
  }
  CU(cudaGetLastError)();
}

/* Makes a new object of kind k; false if it cannot be made here. */
static bool make(struct bi_run *r, enum bi_kind k, uintptr_t *out) {
  struct cudaChannelFormatDesc chan = {32, 0, 0, 0, cudaChannelFormatKindFloat};
  cudaError_t e = cudaErrorUnknown;
  if (!have_device) return false;
  switch (k) {
  case BI_STREAM: {
    cudaStream_t s = NULL;
    e = CU(cudaStreamCreateWithFlags)(&s, cudaStreamNonBlocking);
    *out = (uintptr_t)s;
    break;
  }
  case BI_EVENT: {
    cudaEvent_t ev = NULL;
    e = CU(cudaEventCreate)(&ev);
    *out = (uintptr_t)ev;
    break;
  }
  case BI_GRAPH: {
    cudaGraph_t g = NULL;
    e = CU(cudaGraphCreate)(&g, 0);
    *out = (uintptr_t)g;
    break;
  }
  case BI_NODE: {
    cudaGraph_t g = (cudaGraph_t)bi_obj(r, BI_GRAPH, BI_LIVE);
    cudaGraphNode_t n = NULL;
    e = g != NULL ? CU(cudaGraphAddEmptyNode)(&n, g, NULL, 0) : cudaErrorUnknown;
    *out = (uintptr_t)n;
    break;
  }
  case BI_EXEC: {
    cudaGraph_t g = (cudaGraph_t)bi_obj(r, BI_GRAPH, BI_LIVE);
    cudaGraphExec_t x = NULL;
    e = g != NULL ? CU(cudaGraphInstantiate)(&x, g, 0) : cudaErrorUnknown;
    *out = (uintptr_t)x;
    break;
  }
  case BI_ARRAY: {
    cudaArray_t a = NULL;
    e = CU(cudaMallocArray)(&a, &chan, 16, 16, cudaArraySurfaceLoadStore);
    *out = (uintptr_t)a;
    break;
  }
  case BI_MIPMAP: {
    cudaMipmappedArray_t m = NULL;
    e = CU(cudaMallocMipmappedArray)(&m, &chan, make_cudaExtent(16, 16, 0), 2, 0);
    *out = (uintptr_t)m;
    break;
  }
  case BI_POOL: {
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    bi_fill_pool_props(r, &props);
    cudaMemPool_t p = NULL;
    e = CU(cudaMemPoolCreate)(&p, &props);
    *out = (uintptr_t)p;
    break;
  }
  case BI_UOBJ: {
    cudaUserObject_t o = NULL;
    e = CU(cudaUserObjectCreate)(&o, NULL, uobj_destroy, 1, cudaUserObjectNoDestructorSync);
    *out = (uintptr_t)o;
    break;
  }
  case BI_LIBRARY: {
    cudaLibrary_t l = NULL;
    e = CU(cudaLibraryLoadData)(&l, bi_ptx, NULL, NULL, 0, NULL, NULL, 0);
    *out = (uintptr_t)l;
    break;
  }
  case BI_KERNEL: {
    cudaLibrary_t l = (cudaLibrary_t)bi_obj(r, BI_LIBRARY, BI_LIVE);
    cudaKernel_t kn = NULL;
    e = l != NULL ? CU(cudaLibraryGetKernel)(&kn, l, "k") : cudaErrorUnknown;
    *out = (uintptr_t)kn;
    break;
  }
  case BI_TEX:
  case BI_SURF: {
    struct cudaResourceDesc rd;
    memset(&rd, 0, sizeof rd);
    bi_fill_resdesc(r, &rd);
    if (rd.res.array.array == NULL) break;
    if (k == BI_TEX) {
      struct cudaTextureDesc td;
      memset(&td, 0, sizeof td);
      cudaTextureObject_t t = 0;
      e = CU(cudaCreateTextureObject)(&t, &rd, &td, NULL);
      *out = (uintptr_t)t;
    } else {
      cudaSurfaceObject_t s = 0;
      e = CU(cudaCreateSurfaceObject)(&s, &rd);
      *out = (uintptr_t)s;
    }
    break;
  }
  case BI_ASYNCCB: {
    cudaAsyncCallbackHandle_t h = NULL;
    e = CU(cudaDeviceRegisterAsyncNotification)(0, bi_async_cb, NULL, &h);
    *out = (uintptr_t)h;
    break;
  }
  case BI_LOGSCB: {
    cudaLogsCallbackHandle h = NULL;
    e = CU(cudaLogsRegisterCallback)(bi_logs_cb, NULL, &h);
    *out = (uintptr_t)h;
    break;
  }
  case BI_NKINDS: break;
  }
  return e == cudaSuccess;
}

/* Destroys what make() made (the kernel: its own library). */
static bool destroy(enum bi_kind k, uintptr_t o, uintptr_t extra) {
  cudaError_t e = cudaErrorUnknown;
  switch (k) {
  case BI_STREAM: e = CU(cudaStreamDestroy)((cudaStream_t)o); break;
  case BI_EVENT: e = CU(cudaEventDestroy)((cudaEvent_t)o); break;
  case BI_GRAPH: e = CU(cudaGraphDestroy)((cudaGraph_t)o); break;
  case BI_NODE: e = CU(cudaGraphDestroyNode)((cudaGraphNode_t)o); break;
  case BI_EXEC: e = CU(cudaGraphExecDestroy)((cudaGraphExec_t)o); break;
  case BI_ARRAY: e = CU(cudaFreeArray)((cudaArray_t)o); break;
  case BI_MIPMAP: e = CU(cudaFreeMipmappedArray)((cudaMipmappedArray_t)o); break;
  case BI_POOL: e = CU(cudaMemPoolDestroy)((cudaMemPool_t)o); break;
  case BI_UOBJ: e = CU(cudaUserObjectRelease)((cudaUserObject_t)o, 1); break;
  case BI_LIBRARY: e = CU(cudaLibraryUnload)((cudaLibrary_t)o); break;
  case BI_KERNEL: e = CU(cudaLibraryUnload)((cudaLibrary_t)extra); break;
  case BI_TEX: e = CU(cudaDestroyTextureObject)((cudaTextureObject_t)o); break;
  case BI_SURF: e = CU(cudaDestroySurfaceObject)((cudaSurfaceObject_t)o); break;
  case BI_ASYNCCB:
    e = CU(cudaDeviceUnregisterAsyncNotification)(0, (cudaAsyncCallbackHandle_t)o);
    break;
  case BI_LOGSCB: e = CU(cudaLogsUnregisterCallback)((cudaLogsCallbackHandle)o); break;
  case BI_NKINDS: break;
  }
  return e == cudaSuccess;
}

uintptr_t bi_obj(struct bi_run *r, enum bi_kind k, enum bi_how how) {
  if (how == BI_LIVE) {
    if (!r->made[k]) {
      r->made[k] = 1;
      if (!make(r, k, &r->live[k])) r->live[k] = 0;
    }
    return r->live[k];
  }
  /* A destroyed kernel is one of a library unloaded since. */
  uintptr_t o = 0, extra = 0;
  bool ok;
  if (k == BI_KERNEL) {
    struct bi_run own;
    memset(&own, 0, sizeof own);
    ok = make(&own, BI_KERNEL, &o);
    extra = own.live[BI_LIBRARY];
  } else {
    ok = make(r, k, &o);
  }
  if (!ok || !destroy(k, o, extra)) {
    r->skip = 1;
    return 0;
  }
  return o;
}

/* ---- running the cases ----------------------------------------------------- */

static void format_result(const struct bi_case *c, const struct bi_run *r, char *out, size_t size) {
  if (r->skip) {
    snprintf(out, size, "SKIP");
    return;
  }
  switch (c->ret) {
  case BI_RET_ERR:
    for (const struct bi_errname *n = bi_errnames; n->name != NULL; n++)
      if (n->code == (int)r->err) {
        snprintf(out, size, "%s", n->name);
        return;
      }
    snprintf(out, size, "cudaError(%d)", (int)r->err);
    return;
  case BI_RET_STR: {
    if (r->str == NULL) {
      snprintf(out, size, "str:(null)");
      return;
    }
    size_t n = (size_t)snprintf(out, size, "str:%.200s", r->str);
    for (size_t i = 4; i < n && i < size; i++)
      if (out[i] == '|' || out[i] < 32 || out[i] > 126) out[i] = '?';
    return;
  }
  case BI_RET_CHAN:
    snprintf(out, size, "chan(%d,%d,%d,%d,%d)", r->chan.x, r->chan.y, r->chan.z, r->chan.w,
             (int)r->chan.f);
    return;
  }
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(4);
    p += w, n -= (size_t)w;
  }
}

/* Runs: index i < bi_ncases is case i warm (the runtime initialised
 * first), i >= bi_ncases case i - bi_ncases cold (the case is the
 * process's first call into the library). */
static const struct bi_case *run_case(int i) { return &bi_cases[i % bi_ncases]; }
static int run_cold(int i) { return i >= bi_ncases; }

/* The exit status of a child whose context holds a sticky error. */
#define POISONED 4

static bool sticky(cudaError_t e) {
  switch (e) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorMisalignedAddress:
  case cudaErrorIllegalInstruction:
  case cudaErrorHardwareStackError:
  case cudaErrorInvalidPc:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorAssert:
  case cudaErrorECCUncorrectable: return true;
  default: return false;
  }
}

/* A capture a case began on the legacy or per-thread stream and left open
 * would decide the next cases' answers, differently on a runtime whose
 * child crashed in between: it is ended (optional functions, as above). */
static void end_captures(void) {
  cudaError_t (*is)(cudaStream_t, enum cudaStreamCaptureStatus *) = (cudaError_t(*)(
      cudaStream_t, enum cudaStreamCaptureStatus *))dlsym(lib, "cudaStreamIsCapturing");
  cudaError_t (*end)(cudaStream_t, cudaGraph_t *) =
      (cudaError_t(*)(cudaStream_t, cudaGraph_t *))dlsym(lib, "cudaStreamEndCapture");
  cudaError_t (*graph_destroy)(cudaGraph_t) =
      (cudaError_t(*)(cudaGraph_t))dlsym(lib, "cudaGraphDestroy");
  cudaError_t (*clear)(void) = (cudaError_t(*)(void))dlsym(lib, "cudaGetLastError");
  if (is == NULL || end == NULL || graph_destroy == NULL || clear == NULL) return;
  cudaStream_t streams[] = {cudaStreamLegacy, cudaStreamPerThread};
  for (int k = 0; k < 2; k++) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (is(streams[k], &cs) != cudaSuccess || cs == cudaStreamCaptureStatusNone) continue;
    cudaGraph_t g = NULL;
    if (end(streams[k], &g) == cudaSuccess && g != NULL) graph_destroy(g);
  }
  clear();
}

/* The child: runs [first, end), one result line each on fd. */
static void child(int first, int end, int fd, int quiet) {
  if (quiet) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
  }
  if (!run_cold(first)) {
    int n = 0;
    CU(cudaGetDeviceCount)(&n);
  }
  /* Optional: a stand-in library (the selftest's mock) may lack it. */
  cudaError_t (*sync)(void) = (cudaError_t(*)(void))dlsym(lib, "cudaDeviceSynchronize");
  for (int i = first; i < end; i++) {
    const struct bi_case *c = run_case(i);
    char line[512], res[300];
    if (bi_fn[c->fn] == NULL) {
      snprintf(res, sizeof res, "NOSYM");
    } else {
      struct bi_run r;
      memset(&r, 0, sizeof r);
      memset(scratch, 0, sizeof scratch);
      if (!run_cold(i)) CU(cudaGetLastError)();
      c->run(&r);
      format_result(c, &r, res, sizeof res);
    }
    int len = snprintf(line, sizeof line, "%d %s\n", i, res);
    write_all(fd, line, (size_t)len);
    /* A case accepted by both runtimes may still fault the device later
     * (a memset of SIZE_MAX bytes, say): the rest of the batch would then
     * answer that sticky error, or not, depending on whether an earlier
     * case happened to crash the child. The rest goes to a fresh child. */
    if (have_device && !run_cold(i) && i + 1 < end) {
      if (sync != NULL && sticky(sync())) _exit(POISONED);
      end_captures();
    }
  }
  _exit(0);
}

/* Whether the library sees a device, asked in a child: the parent must
 * not initialise the runtime (its children could not use it). */
static int probe_device(void) {
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    _exit(CU(cudaGetDeviceCount)(&n) == cudaSuccess && n > 0 ? 1 : 0);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st)) {
    fprintf(stderr, "badinput: the device probe died (status %d)\n", st);
    exit(2);
  }
  return WEXITSTATUS(st) == 1;
}

struct job {
  int first, end, single;
};

struct slot {
  pid_t pid;
  int fd;
  struct job job;
  int next; /* first case without a result */
  double deadline;
  char buf[8192];
  size_t len;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char **results;   /* per case: the code */
static char **statuses;  /* per case: ok, crash:..., hang, ... */
static char **batchnote; /* per case: why it was re-run alone */

static struct job *queue;
static int qhead, qtail, qcap;

/* Queues a job at the back, or at the front (re-runs go first). */
static void push(struct job j, int front) {
  if (front && qhead > 0) {
    queue[--qhead] = j;
    return;
  }
  if (qtail == qcap) {
    qcap = qcap ? 2 * qcap : 256;
    queue = realloc(queue, (size_t)qcap * sizeof *queue);
    if (queue == NULL) {
      perror("badinput");
      exit(2);
    }
  }
  if (front) {
    memmove(queue + 1, queue, (size_t)qtail * sizeof *queue);
    queue[0] = j;
    qtail++;
  } else {
    queue[qtail++] = j;
  }
}

static void take_lines(struct slot *s) {
  char *start = s->buf, *nl;
  while ((nl = memchr(start, '\n', s->len - (size_t)(start - s->buf))) != NULL) {
    *nl = 0;
    char *code = strchr(start, ' ');
    int idx = atoi(start);
    if (code != NULL && idx >= s->job.first && idx < s->job.end) {
      free(results[idx]);
      results[idx] = strdup(code + 1);
      s->next = idx + 1;
    }
    start = nl + 1;
  }
  s->len -= (size_t)(start - s->buf);
  memmove(s->buf, start, s->len);
}

static const char *signame(int sig) {
  static char b[32];
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGABRT: return "SIGABRT";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGTRAP: return "SIGTRAP";
  case SIGKILL: return "SIGKILL";
  default: snprintf(b, sizeof b, "SIG%d", sig); return b;
  }
}

/* The child of slot s is gone (status st) or was killed for a hang. */
static void finished(struct slot *s, int st, int hung) {
  int clean = !hung && WIFEXITED(st) && WEXITSTATUS(st) == 0 && s->next == s->job.end;
  if (clean) return;
  /* A fault of the device after its last reported case: no case to blame,
   * the rest of the batch starts anew. */
  if (!hung && WIFEXITED(st) && WEXITSTATUS(st) == POISONED && !s->job.single) {
    if (s->next < s->job.end) push((struct job){s->next, s->job.end, 0}, 1);
    return;
  }
  char why[64];
  if (hung)
    snprintf(why, sizeof why, "hang");
  else if (WIFSIGNALED(st))
    snprintf(why, sizeof why, "crash:%s", signame(WTERMSIG(st)));
  else
    snprintf(why, sizeof why, "exit:%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  if (s->next >= s->job.end) return; /* died after its last case: nothing to blame */
  if (s->job.single) {
    free(results[s->next]);
    results[s->next] = strdup("-");
    statuses[s->next] = strdup(why);
    return;
  }
  /* The case alone, to tell its own crash from the aftermath of an
   * earlier case; the rest of the batch in a new child. */
  batchnote[s->next] = strdup(why);
  if (s->next + 1 < s->job.end) push((struct job){s->next + 1, s->job.end, 0}, 1);
  push((struct job){s->next, s->next + 1, 1}, 1);
}

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

int main(int argc, char **argv) {
  const char *expect = NULL, *filter = NULL;
  const char *mode = "both";
  int jobs = (int)sysconf(_SC_NPROCESSORS_ONLN), batch = 64, list = 0, verbose = 0;
  double timeout = 5, budget = 0;
  int opt;
  while ((opt = getopt(argc, argv, "e:j:t:T:b:f:m:lv")) != -1) {
    switch (opt) {
    case 'e': expect = optarg; break;
    case 'j': jobs = atoi(optarg); break;
    case 't': timeout = atof(optarg); break;
    case 'T': budget = atof(optarg); break;
    case 'b': batch = atoi(optarg); break;
    case 'f': filter = optarg; break;
    case 'm': mode = optarg; break;
    case 'l': list = 1; break;
    case 'v': verbose = 1; break;
    default:
      fprintf(stderr,
              "usage: %s [-e LIB] [-j JOBS] [-t SECONDS] [-T SECONDS] [-b BATCH] [-f FILTER] "
              "[-m warm|cold|both] [-l] [-v]\n",
              argv[0]);
      return 2;
    }
  }
  if (jobs < 1) jobs = 1;
  if (jobs > 64) jobs = 64;
  if (batch < 1) batch = 1;
  if (list) {
    for (int i = 0; i < bi_ncases; i++)
      printf("%s|%s%s\n", bi_exports[bi_cases[i].fn], bi_cases[i].variant,
             bi_cases[i].setup ? " (setup)" : "");
    return 0;
  }

  lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "badinput: cannot load libcudart.so.13: %s\n", dlerror());
    return 2;
  }
  Dl_info info;
  char real[4096], want[4096];
  if (!dladdr(sym("cudaGetDeviceCount"), &info) || info.dli_fname == NULL ||
      realpath(info.dli_fname, real) == NULL) {
    fprintf(stderr, "badinput: cannot tell which libcudart was loaded\n");
    return 2;
  }
  if (expect != NULL && (realpath(expect, want) == NULL || strcmp(want, real) != 0)) {
    fprintf(stderr, "badinput: loaded %s, not %s: refusing to run\n", real, expect);
    return 3;
  }
  for (int f = 0; f < bi_nexports; f++) bi_fn[f] = dlsym(lib, bi_exports[f]);

  have_device = probe_device();
  int nruns = 2 * bi_ncases;
  results = calloc((size_t)nruns, sizeof *results);
  statuses = calloc((size_t)nruns, sizeof *statuses);
  batchnote = calloc((size_t)nruns, sizeof *batchnote);
  /* Warm runs in batches of whole functions; cold runs one per process,
   * and with a device only those that make no objects. */
  int warm = strcmp(mode, "cold") != 0, cold = strcmp(mode, "warm") != 0;
  for (int i = 0; warm && i < bi_ncases;) {
    if (filter != NULL && !strstr(bi_exports[bi_cases[i].fn], filter)) {
      i++;
      continue;
    }
    int end = i + 1;
    while (end < bi_ncases && (end - i < batch || bi_cases[end].fn == bi_cases[end - 1].fn) &&
           (filter == NULL || strstr(bi_exports[bi_cases[end].fn], filter)))
      end++;
    push((struct job){i, end, 0}, 0);
    i = end;
  }
  for (int i = 0; cold && i < bi_ncases; i++)
    if ((filter == NULL || strstr(bi_exports[bi_cases[i].fn], filter)) &&
        !(have_device && bi_cases[i].setup))
      push((struct job){bi_ncases + i, bi_ncases + i + 1, 1}, 0);

  fflush(stdout);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  double t_start = now();
  int partial = 0;
  struct slot *slots = calloc((size_t)jobs, sizeof *slots);
  struct pollfd *pfd = calloc((size_t)jobs, sizeof *pfd);
  int active = 0;
  for (;;) {
    if (stop_signal || (budget > 0 && now() - t_start > budget)) {
      /* Whatever is still running is neither a result nor a hang. */
      for (int k = 0; k < jobs; k++)
        if (slots[k].pid != 0) {
          kill(slots[k].pid, SIGKILL);
          while (waitpid(slots[k].pid, NULL, 0) < 0 && errno == EINTR) {
          }
          close(slots[k].fd);
          slots[k].pid = 0;
        }
      partial = 1;
      break;
    }
    for (int k = 0; k < jobs && qhead < qtail; k++) {
      if (slots[k].pid != 0) continue;
      struct job j = queue[qhead++];
      int p[2];
      if (pipe(p) != 0) {
        perror("pipe");
        return 2;
      }
      pid_t pid = fork();
      if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        close(p[0]);
        child(j.first, j.end, p[1], !verbose);
      }
      close(p[1]);
      slots[k] = (struct slot){
          .pid = pid, .fd = p[0], .job = j, .next = j.first, .deadline = now() + timeout};
      active++;
    }
    if (active == 0) break;
    int n = 0, map[64];
    for (int k = 0; k < jobs; k++)
      if (slots[k].pid != 0 && n < 64) {
        pfd[n] = (struct pollfd){.fd = slots[k].fd, .events = POLLIN};
        map[n++] = k;
      }
    double soonest = 1e300;
    for (int k = 0; k < jobs; k++)
      if (slots[k].pid != 0 && slots[k].deadline < soonest) soonest = slots[k].deadline;
    double wait = soonest - now();
    int ms = wait <= 0 ? 0 : (int)(wait * 1000) + 1;
    if (budget > 0 && ms > 1000) ms = 1000;
    if (poll(pfd, (nfds_t)n, ms) < 0 && errno != EINTR) {
      perror("poll");
      return 2;
    }
    for (int i = 0; i < n; i++) {
      struct slot *s = &slots[map[i]];
      int gone = 0, hung = 0, st = 0;
      if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t got = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
        if (got > 0) {
          s->len += (size_t)got;
          take_lines(s);
          s->deadline = now() + timeout;
        } else if (got == 0 || errno != EINTR) {
          gone = 1;
        }
      }
      if (!gone && now() > s->deadline) {
        kill(s->pid, SIGKILL);
        gone = hung = 1;
      }
      if (gone) {
        while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {
        }
        close(s->fd);
        finished(s, st, hung);
        s->pid = 0;
        active--;
      }
    }
  }

  int ran = 0;
  printf("# cudart %s\n# device %s\n", real, have_device ? "yes" : "no");
  if (partial)
    printf("# partial: stopped after %.0f s (%s)\n", now() - t_start,
           stop_signal ? "signal" : "-T budget");
  for (int i = 0; i < nruns; i++) {
    if (results[i] == NULL) continue;
    ran++;
    const char *status = statuses[i] ? statuses[i] : "ok";
    char note[80] = "";
    if (statuses[i] == NULL && batchnote[i] != NULL)
      snprintf(note, sizeof note, "batch%s", batchnote[i]);
    printf("%s|%s:%s|%s|%s\n", bi_exports[run_case(i)->fn], run_cold(i) ? "cold" : "warm",
           run_case(i)->variant, results[i], note[0] ? note : status);
  }
  fprintf(stderr, "badinput: %d cases on %s\n", ran, real);
  return 0;
}
