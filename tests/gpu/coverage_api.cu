// Coverage of the less travelled exports, one group per function, each group
// headed by a "== group" line so a transcript mismatch is easy to locate:
//   graphics  GL/EGL/VDPAU interop without any context, NULL (made-up handles crash both runtimes: not passed)
//             resources (runs first, each call in a fresh child process)
//   streams   cudaStreamBeginCaptureToGraph, cudaStreamUpdateCaptureDependencies
//   graph mem cudaGraphAddMemAllocNode/FreeNode and their getters, the graph
//             memory attributes and trim
//   graph set kernel node attributes, the node setters (kernel, memcpy 3D and
//             1D, memset, host) and cudaGraphExecMemcpyNodeSetParams
//   symbols   memcpy nodes to/from a __device__ array, their setters, exec setters
//   cond      a conditional IF node whose handle a kernel sets
//   device    atomic capabilities, RDMA flush, async notifications, valid
//             devices, peek-at-last-error, NvSciSync attributes
//   external  external memory/semaphores: error paths, and a real opaque fd
//             exported by cuMemCreate (driver entry points) imported back
// Prints codes, last errors, counts and checksums; never pointers.
#include "common.h"

#include <cudaTypedefs.h>
#include <cuda_egl_interop.h>
#include <cuda_gl_interop.h>
#include <cuda_vdpau_interop.h>
#include <fcntl.h>
#include <sys/eventfd.h>

__device__ int sym[64];
static int not_a_symbol[64];

__global__ void add_k(int *p, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += k;
}

__global__ void iota_k(int *p, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = i * k;
}

__global__ void sym_add(int k) {
  int i = threadIdx.x;
  if (i < 64) sym[i] += k;
}

__global__ void set_handle(cudaGraphConditionalHandle h, const int *v) {
  cudaGraphSetConditional(h, (unsigned)*v);
}

static unsigned long long cks(const int *p, int n) {
  unsigned long long h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    h ^= (unsigned)p[i];
    h *= 1099511628211ull;
  }
  return h;
}

static int host_a, host_b;
static void CUDART_CB host_fn_a(void *) { host_a++; }
static void CUDART_CB host_fn_b(void *) { host_b++; }

static size_t graph_nodes(cudaGraph_t g) {
  size_t n = 0;
  CHECK(cudaGraphGetNodes(g, nullptr, &n));
  return n;
}

static size_t graph_edges(cudaGraph_t g) {
  size_t n = 0;
  CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n));
  return n;
}

/* TISO(expr): the call in a fresh child process (forked before this process
 * touched CUDA), printed like TC; "crashed" when the child dies. For calls
 * that need a process with no CUDA state, or that may crash NVIDIA's
 * runtime, whose error code we still want to compare. */
#define TISO(expr)                                                                                 \
  do {                                                                                             \
    fflush(stdout);                                                                                \
    pid_t i_pid_ = fork();                                                                         \
    if (i_pid_ == 0) {                                                                             \
      cudaError_t i_e_ = (expr);                                                                   \
      cudaError_t i_l_ = cudaGetLastError();                                                       \
      printf("%-60.60s -> %s (last %s)\n", #expr, cudaGetErrorName(i_e_), cudaGetErrorName(i_l_)); \
      fflush(stdout);                                                                              \
      _exit(0);                                                                                    \
    }                                                                                              \
    int i_st_ = 0;                                                                                 \
    waitpid(i_pid_, &i_st_, 0);                                                                    \
    if (!WIFEXITED(i_st_)) {                                                                       \
      const char *i_nc_ = getenv("CUDAEV_TEST_NO_CRASH");                                          \
      printf("%-60.60s -> %s\n", #expr, i_nc_ &&*i_nc_ == '1' ? "CRASHED" : "crashed");            \
    }                                                                                              \
  } while (0)

/* A VdpGetProcAddress that knows no function. */
static VdpStatus no_vdp_proc(VdpDevice, VdpFuncId, void **fp) {
  *fp = nullptr;
  return VDP_STATUS_INVALID_FUNC_ID;
}

// -- graphics: no GL, EGL or VDPAU context exists on the GPU machine. Runs
// before this process initialises CUDA, each call in its own child.
static void group_graphics() {
  printf("== graphics\n");
  cudaGraphicsResource_t res = nullptr;
  /* A made-up resource handle is not passed: the driver dereferences it and
   * both runtimes crash (measured on an H200); undefined, not compared. */
  TISO(cudaGraphicsGLRegisterBuffer(&res, 1, cudaGraphicsRegisterFlagsNone));
  TISO(cudaGraphicsGLRegisterBuffer(&res, 0, cudaGraphicsRegisterFlagsNone));
  TISO(cudaGraphicsGLRegisterBuffer(&res, 1, 0x100));
  TISO(cudaGraphicsGLRegisterImage(&res, 1, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsNone));
  TISO(cudaGraphicsGLRegisterImage(&res, 1, GL_TEXTURE_2D, 0x100));
  TISO(cudaGraphicsGLRegisterImage(&res, 1, 0x1234, cudaGraphicsRegisterFlagsNone));
  TREFUSE(cudaGraphicsGLRegisterBuffer(nullptr, 1, cudaGraphicsRegisterFlagsNone));
  TREFUSE(cudaGraphicsGLRegisterImage(nullptr, 1, GL_TEXTURE_2D, cudaGraphicsRegisterFlagsNone));
  unsigned gl_count = 99;
  int gl_devs[4] = {-1, -1, -1, -1};
  TISO(cudaGLGetDevices(&gl_count, gl_devs, 4, cudaGLDeviceListAll));
  TISO(cudaGLGetDevices(&gl_count, gl_devs, 4, (cudaGLDeviceList)9));
  TREFUSE(cudaGLGetDevices(nullptr, gl_devs, 4, cudaGLDeviceListAll));

  TISO(cudaGraphicsEGLRegisterImage(&res, (EGLImageKHR) nullptr, cudaGraphicsRegisterFlagsNone));
  TREFUSE(
      cudaGraphicsEGLRegisterImage(nullptr, (EGLImageKHR) nullptr, cudaGraphicsRegisterFlagsNone));
  cudaEglFrame frame;
  memset(&frame, 0, sizeof frame);
  TREFUSE(cudaGraphicsResourceGetMappedEglFrame(&frame, nullptr, 0, 0));
  TREFUSE(cudaGraphicsResourceGetMappedEglFrame(nullptr, nullptr, 0, 0));
  cudaEvent_t egl_ev = nullptr;
  TISO(cudaEventCreateFromEGLSync(&egl_ev, (EGLSyncKHR) nullptr, 0));
  TREFUSE(cudaEventCreateFromEGLSync(nullptr, (EGLSyncKHR) nullptr, 0));

  TISO(cudaGraphicsVDPAURegisterVideoSurface(&res, 1, cudaGraphicsRegisterFlagsNone));
  TISO(cudaGraphicsVDPAURegisterOutputSurface(&res, 1, cudaGraphicsRegisterFlagsNone));
  TREFUSE(cudaGraphicsVDPAURegisterVideoSurface(nullptr, 1, cudaGraphicsRegisterFlagsNone));
  TREFUSE(cudaGraphicsVDPAURegisterOutputSurface(nullptr, 1, cudaGraphicsRegisterFlagsNone));
  int vdp_dev = -1;
  TREFUSE(cudaVDPAUGetDevice(&vdp_dev, 1, no_vdp_proc));
  TREFUSE(cudaVDPAUGetDevice(&vdp_dev, 1, nullptr));
  TREFUSE(cudaVDPAUGetDevice(nullptr, 1, no_vdp_proc));

  // Resource calls with no resource registered.
  TISO(cudaGraphicsMapResources(0, nullptr, 0));
  TISO(cudaGraphicsUnmapResources(0, nullptr, 0));
  TREFUSE(cudaGraphicsMapResources(1, nullptr, 0));
  TREFUSE(cudaGraphicsUnmapResources(1, nullptr, 0));
  TREFUSE(cudaGraphicsUnregisterResource(nullptr));
  TREFUSE(cudaGraphicsResourceSetMapFlags(nullptr, cudaGraphicsMapFlagsNone));
  void *mp = nullptr;
  size_t msz = 0;
  TREFUSE(cudaGraphicsResourceGetMappedPointer(&mp, &msz, nullptr));
  TREFUSE(cudaGraphicsResourceGetMappedPointer(nullptr, nullptr, nullptr));
  cudaArray_t arr = nullptr;
  TREFUSE(cudaGraphicsSubResourceGetMappedArray(&arr, nullptr, 0, 0));
  TREFUSE(cudaGraphicsSubResourceGetMappedArray(nullptr, nullptr, 0, 0));
  cudaMipmappedArray_t mip = nullptr;
  TREFUSE(cudaGraphicsResourceGetMappedMipmappedArray(&mip, nullptr));
  TREFUSE(cudaGraphicsResourceGetMappedMipmappedArray(nullptr, nullptr));
}

// -- streams: capture into an existing graph; edit the capture's dependency set.
static void group_streams(cudaStream_t s) {
  printf("== streams\n");
  const int n = 256;
  int *d = nullptr, h[3 * n];
  CHECK(cudaMalloc(&d, 3 * n * sizeof(int)));

  cudaGraph_t g = nullptr, out = nullptr;
  cudaGraphNode_t ms;
  CHECK(cudaGraphCreate(&g, 0));
  cudaMemsetParams mp = {};
  mp.dst = d;
  mp.value = 0;
  mp.elementSize = 4;
  mp.width = n;
  mp.height = 1;
  CHECK(cudaGraphAddMemsetNode(&ms, g, nullptr, 0, &mp));
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  TC(cudaStreamBeginCaptureToGraph(s, nullptr, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
  TC(cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 0, (cudaStreamCaptureMode)7));
  TC(cudaStreamBeginCaptureToGraph(s, g, nullptr, nullptr, 1, cudaStreamCaptureModeGlobal));
  TC(cudaStreamBeginCaptureToGraph(0, g, &ms, nullptr, 1, cudaStreamCaptureModeGlobal));
  T(cudaStreamIsCapturing(s, &st));
  printf("capturing after bad begins: %d\n", (int)st);
  T(cudaStreamBeginCaptureToGraph(s, g, &ms, nullptr, 1, cudaStreamCaptureModeGlobal));
  TC(cudaStreamBeginCaptureToGraph(s, g, &ms, nullptr, 1, cudaStreamCaptureModeGlobal));
  add_k<<<1, n, 0, s>>>(d, n, 5);
  T(cudaGetLastError());
  cudaGraph_t cg = nullptr;
  const cudaGraphNode_t *deps = nullptr;
  size_t ndeps = 99;
  unsigned long long id = 0;
  T(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, nullptr, &ndeps));
  printf("capture to graph: status %d graph is g %d deps %zu\n", (int)st, cg == g, ndeps);
  T(cudaStreamEndCapture(s, &out));
  printf("end capture: graph is g %d nodes %zu edges %zu\n", out == g, graph_nodes(g),
         graph_edges(g));
  cudaGraphExec_t ge = nullptr;
  T(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaMemset(d, 0x7f, n * sizeof(int)));
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
  printf("captured-to-graph result h[0]=%d h[%d]=%d cks %llx\n", h[0], n - 1, h[n - 1], cks(h, n));
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));

  // Three kernels on three segments: A, then B after A, then the
  // dependency set is edited (add an empty node E; set it back to A) so C
  // follows A only.
  CHECK(cudaMemset(d, 0, 3 * n * sizeof(int)));
  cudaGraphNode_t a = nullptr, e = nullptr;
  T(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  add_k<<<1, n, 0, s>>>(d, n, 1);
  T(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, nullptr, &ndeps));
  printf("after A: deps %zu\n", ndeps);
  if (ndeps == 1) a = deps[0];
  add_k<<<1, n, 0, s>>>(d + n, n, 2);
  T(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, nullptr, &ndeps));
  printf("after B: deps %zu is A %d\n", ndeps, ndeps == 1 && deps[0] == a);
  T(cudaGraphAddEmptyNode(&e, cg, nullptr, 0));
  T(cudaStreamUpdateCaptureDependencies(s, &e, nullptr, 1, cudaStreamAddCaptureDependencies));
  T(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, nullptr, &ndeps));
  printf("after add E: deps %zu last is E %d\n", ndeps, ndeps == 2 && deps[1] == e);
  T(cudaStreamUpdateCaptureDependencies(s, &a, nullptr, 1, cudaStreamSetCaptureDependencies));
  T(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, nullptr, &ndeps));
  printf("after set A: deps %zu is A %d\n", ndeps, ndeps == 1 && deps[0] == a);
  T(cudaStreamUpdateCaptureDependencies(s, nullptr, nullptr, 0, cudaStreamSetCaptureDependencies));
  T(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, nullptr, &ndeps));
  printf("after set empty: deps %zu\n", ndeps);
  T(cudaStreamUpdateCaptureDependencies(s, &a, nullptr, 1, cudaStreamSetCaptureDependencies));
  TC(cudaStreamUpdateCaptureDependencies(s, &a, nullptr, 1, 7));
  TC(cudaStreamUpdateCaptureDependencies(s, nullptr, nullptr, 1, cudaStreamAddCaptureDependencies));
  T(cudaStreamIsCapturing(s, &st));
  printf("capturing after bad updates: %d\n", (int)st);
  add_k<<<1, n, 0, s>>>(d + 2 * n, n, 4);
  TC(cudaGetLastError());
  out = nullptr;
  TC(cudaStreamEndCapture(s, &out));
  if (out != nullptr) {
    printf("updated capture: nodes %zu edges %zu\n", graph_nodes(out), graph_edges(out));
    T(cudaGraphInstantiate(&ge, out, 0));
    T(cudaGraphLaunch(ge, s));
    T(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(h, d, 3 * n * sizeof(int), cudaMemcpyDeviceToHost));
    printf("segments %d %d %d cks %llx\n", h[0], h[n], h[2 * n], cks(h, 3 * n));
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(out));
  } else {
    printf("updated capture: no graph\n");
  }
  TC(cudaStreamUpdateCaptureDependencies(s, &a, nullptr, 1, cudaStreamSetCaptureDependencies));
  CHECK(cudaFree(d));
}

static void print_graph_mem(const char *when) {
  static const char *names[] = {"usedCur", "usedHigh", "reservedCur", "reservedHigh"};
  printf("graph mem %s:", when);
  for (int a = 0; a < 4; a++) {
    unsigned long long v = 12345;
    cudaError_t e = cudaDeviceGetGraphMemAttribute(0, (cudaGraphMemAttributeType)a, &v);
    printf(" %s=%s", names[a], e != cudaSuccess ? cudaGetErrorName(e) : v ? "nonzero" : "zero");
  }
  printf("\n");
}

// -- graph memory: alloc and free nodes, graph memory attributes, trim.
static void group_graph_mem(cudaStream_t s) {
  printf("== graph mem\n");
  const int n = 1024;
  int h[n];
  int *plain = nullptr;
  CHECK(cudaMalloc(&plain, 64));
  print_graph_mem("start");
  // Bad input goes to a scratch graph, so that a call accepted by mistake
  // cannot change what the real graph computes.
  cudaGraph_t g = nullptr, gs = nullptr;
  CHECK(cudaGraphCreate(&g, 0));
  CHECK(cudaGraphCreate(&gs, 0));
  cudaMemAllocNodeParams ap = {};
  ap.poolProps.allocType = cudaMemAllocationTypePinned;
  ap.poolProps.location.type = cudaMemLocationTypeDevice;
  ap.poolProps.location.id = 0;
  ap.bytesize = n * sizeof(int);
  cudaGraphNode_t an = nullptr, kn = nullptr, cn = nullptr, fn = nullptr, bad = nullptr;
  T(cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &ap));
  int *p = (int *)ap.dptr;
  printf("alloc node dptr set %d\n", p != nullptr);
  cudaMemAllocNodeParams bp = ap;
  bp.bytesize = 0;
  TC(cudaGraphAddMemAllocNode(&bad, gs, nullptr, 0, &bp));
  bp = ap;
  bp.poolProps.location.id = 99;
  TC(cudaGraphAddMemAllocNode(&bad, gs, nullptr, 0, &bp));
  bp = ap;
  bp.poolProps.allocType = (cudaMemAllocationType)7;
  TC(cudaGraphAddMemAllocNode(&bad, gs, nullptr, 0, &bp));
  TC(cudaGraphAddMemAllocNode(&bad, gs, nullptr, 0, nullptr));
  TC(cudaGraphAddMemAllocNode(&bad, nullptr, nullptr, 0, &ap));

  int nn = n, k = 3;
  void *args[] = {&p, &nn, &k};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)iota_k;
  kp.gridDim = dim3(n / 256);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  T(cudaGraphAddKernelNode(&kn, g, &an, 1, &kp));
  T(cudaGraphAddMemcpyNode1D(&cn, g, &kn, 1, h, p, n * sizeof(int), cudaMemcpyDeviceToHost));
  T(cudaGraphAddMemFreeNode(&fn, g, &cn, 1, p));
  TC(cudaGraphAddMemFreeNode(&bad, gs, nullptr, 0, nullptr));
  TC(cudaGraphAddMemFreeNode(&bad, gs, nullptr, 0, plain));
  TC(cudaGraphAddMemFreeNode(&bad, nullptr, nullptr, 0, p));

  cudaMemAllocNodeParams got = {};
  T(cudaGraphMemAllocNodeGetParams(an, &got));
  printf("alloc params: bytesize %zu type %d loc %d/%d dptr same %d access %zu\n", got.bytesize,
         (int)got.poolProps.allocType, (int)got.poolProps.location.type, got.poolProps.location.id,
         got.dptr == p, got.accessDescCount);
  TC(cudaGraphMemAllocNodeGetParams(kn, &got));
  TREFUSE(cudaGraphMemAllocNodeGetParams(an, nullptr));
  void *freed = nullptr;
  T(cudaGraphMemFreeNodeGetParams(fn, &freed));
  printf("free params: dptr same %d\n", freed == p);
  TC(cudaGraphMemFreeNodeGetParams(an, &freed));
  TREFUSE(cudaGraphMemFreeNodeGetParams(fn, nullptr));
  cudaGraphNodeType t = cudaGraphNodeTypeCount;
  T(cudaGraphNodeGetType(an, &t));
  printf("alloc node type %d\n", (int)t);
  T(cudaGraphNodeGetType(fn, &t));
  printf("free node type %d\n", (int)t);

  cudaGraphExec_t ge = nullptr;
  T(cudaGraphInstantiate(&ge, g, 0));
  memset(h, 0, sizeof h);
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  printf("alloc graph h[5]=%d cks %llx\n", h[5], cks(h, n));
  print_graph_mem("after launch");
  unsigned long long zero = 0, one = 1;
  T(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
  T(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero));
  print_graph_mem("after reset");
  TC(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &one));
  TC(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &zero));
  TC(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &zero));
  TC(cudaDeviceSetGraphMemAttribute(0, (cudaGraphMemAttributeType)9, &zero));
  TC(cudaDeviceSetGraphMemAttribute(99, cudaGraphMemAttrUsedMemHigh, &zero));
  TC(cudaDeviceSetGraphMemAttribute(-1, cudaGraphMemAttrUsedMemHigh, &zero));
  TREFUSE(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, nullptr));
  unsigned long long v = 0;
  TC(cudaDeviceGetGraphMemAttribute(0, (cudaGraphMemAttributeType)9, &v));
  TC(cudaDeviceGetGraphMemAttribute(99, cudaGraphMemAttrUsedMemCurrent, &v));
  TC(cudaDeviceGetGraphMemAttribute(-1, cudaGraphMemAttrUsedMemCurrent, &v));
  TREFUSE(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, nullptr));
  T(cudaGraphExecDestroy(ge));
  T(cudaDeviceSynchronize());
  T(cudaDeviceGraphMemTrim(0));
  print_graph_mem("after trim");
  TC(cudaDeviceGraphMemTrim(99));
  TC(cudaDeviceGraphMemTrim(-1));
  CHECK(cudaGraphDestroy(gs));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(plain));
}

// -- kernel node attributes and the node setters.
static void group_graph_set(cudaStream_t s) {
  printf("== graph set\n");
  const int n = 256;
  int *d = nullptr, *d2 = nullptr, h[n], h2[n], hin[n], hin2[n];
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMalloc(&d2, n * sizeof(int)));
  for (int i = 0; i < n; i++) {
    hin[i] = i;
    hin2[i] = 1000 + i;
    h[i] = h2[i] = -1;
  }
  cudaGraph_t g = nullptr;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t cin, ms, k, k2, cout, host;
  CHECK(cudaGraphAddMemcpyNode1D(&cin, g, nullptr, 0, d, hin, n * sizeof(int),
                                 cudaMemcpyHostToDevice));
  cudaMemsetParams mp = {};
  mp.dst = d2;
  mp.value = 7;
  mp.elementSize = 4;
  mp.width = n;
  mp.height = 1;
  CHECK(cudaGraphAddMemsetNode(&ms, g, nullptr, 0, &mp));
  int nn = n, kf = 2, kf2 = 10;
  void *args[] = {&d, &nn, &kf};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)add_k;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(n);
  kp.kernelParams = args;
  cudaGraphNode_t kdeps[] = {cin, ms};
  CHECK(cudaGraphAddKernelNode(&k, g, kdeps, 2, &kp));
  void *args2[] = {&d2, &nn, &kf2};
  cudaKernelNodeParams kp2 = kp;
  kp2.kernelParams = args2;
  CHECK(cudaGraphAddKernelNode(&k2, g, &k, 1, &kp2));
  cudaMemcpy3DParms p3 = {};
  p3.srcPtr = make_cudaPitchedPtr(d, n * sizeof(int), n, 1);
  p3.dstPtr = make_cudaPitchedPtr(h, n * sizeof(int), n, 1);
  p3.extent = make_cudaExtent(n * sizeof(int), 1, 1);
  p3.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaGraphAddMemcpyNode(&cout, g, &k2, 1, &p3));
  cudaHostNodeParams hp = {host_fn_a, nullptr};
  CHECK(cudaGraphAddHostNode(&host, g, &cout, 1, &hp));

  // attributes
  int lo = 0, hi = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaKernelNodeAttrValue av, ov;
  memset(&av, 0, sizeof av);
  memset(&ov, 0, sizeof ov);
  ov.priority = 12345;
  T(cudaGraphKernelNodeGetAttribute(k, cudaLaunchAttributePriority, &ov));
  printf("priority default %d\n", ov.priority);
  av.priority = hi;
  T(cudaGraphKernelNodeSetAttribute(k, cudaLaunchAttributePriority, &av));
  T(cudaGraphKernelNodeGetAttribute(k, cudaLaunchAttributePriority, &ov));
  printf("priority is greatest %d\n", ov.priority == hi);
  memset(&av, 0, sizeof av);
  av.cooperative = 1;
  T(cudaGraphKernelNodeSetAttribute(k, cudaLaunchAttributeCooperative, &av));
  memset(&ov, 0, sizeof ov);
  T(cudaGraphKernelNodeGetAttribute(k, cudaLaunchAttributeCooperative, &ov));
  printf("cooperative %d\n", ov.cooperative);
  T(cudaGraphKernelNodeCopyAttributes(k2, k));
  memset(&ov, 0, sizeof ov);
  T(cudaGraphKernelNodeGetAttribute(k2, cudaLaunchAttributePriority, &ov));
  printf("copied priority is greatest %d\n", ov.priority == hi);
  memset(&ov, 0, sizeof ov);
  T(cudaGraphKernelNodeGetAttribute(k2, cudaLaunchAttributeCooperative, &ov));
  printf("copied cooperative %d\n", ov.cooperative);
  TC(cudaGraphKernelNodeGetAttribute(k, (cudaLaunchAttributeID)999, &ov));
  TC(cudaGraphKernelNodeSetAttribute(k, (cudaLaunchAttributeID)999, &av));
  TC(cudaGraphKernelNodeGetAttribute(ms, cudaLaunchAttributePriority, &ov));
  TC(cudaGraphKernelNodeSetAttribute(ms, cudaLaunchAttributePriority, &av));
  TC(cudaGraphKernelNodeCopyAttributes(ms, k));
  TC(cudaGraphKernelNodeCopyAttributes(k, ms));
  TREFUSE(cudaGraphKernelNodeGetAttribute(k, cudaLaunchAttributePriority, nullptr));
  TREFUSE(cudaGraphKernelNodeSetAttribute(k, cudaLaunchAttributePriority, nullptr));
  TREFUSE(cudaGraphKernelNodeCopyAttributes(nullptr, k));
  memset(&av, 0, sizeof av);
  av.cooperative = 0;
  T(cudaGraphKernelNodeSetAttribute(k, cudaLaunchAttributeCooperative, &av));

  cudaGraphExec_t ge = nullptr;
  T(cudaGraphInstantiate(&ge, g, 0));
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(h2, d2, sizeof h2, cudaMemcpyDeviceToHost));
  printf("first run: h[3]=%d d2[3]=%d host_a %d cks %llx\n", h[3], h2[3], host_a, cks(h, n));

  // setters on the graph (the instantiated exec keeps the old parameters)
  // (bad input first: the good call after it sets the parameters either way)
  kf = 5;
  cudaKernelNodeParams kbad = kp;
  kbad.func = nullptr;
  TC(cudaGraphKernelNodeSetParams(k, &kbad));
  kbad = kp;
  kbad.blockDim = dim3(4096);
  TC(cudaGraphKernelNodeSetParams(k, &kbad));
  TC(cudaGraphKernelNodeSetParams(ms, &kp));
  TREFUSE(cudaGraphKernelNodeSetParams(k, nullptr));
  T(cudaGraphKernelNodeSetParams(k, &kp));
  cudaKernelNodeParams kout = {};
  T(cudaGraphKernelNodeGetParams(k, &kout));
  printf("kernel params after set: args same %d\n", kout.kernelParams == args);

  TC(cudaGraphMemcpyNodeSetParams1D(cin, d, hin2, n * sizeof(int), (cudaMemcpyKind)9));
  TC(cudaGraphMemcpyNodeSetParams1D(k, d, hin2, n * sizeof(int), cudaMemcpyHostToDevice));
  TC(cudaGraphMemcpyNodeSetParams1D(cin, nullptr, hin2, n * sizeof(int), cudaMemcpyHostToDevice));
  T(cudaGraphMemcpyNodeSetParams1D(cin, d, hin2, n * sizeof(int), cudaMemcpyHostToDevice));
  cudaMemcpy3DParms p3b = p3;
  p3b.dstPtr = make_cudaPitchedPtr(h2, n * sizeof(int), n, 1);
  cudaMemcpy3DParms p3x = p3b;
  p3x.kind = (cudaMemcpyKind)9;
  TC(cudaGraphMemcpyNodeSetParams(cout, &p3x));
  TC(cudaGraphMemcpyNodeSetParams(ms, &p3b));
  TREFUSE(cudaGraphMemcpyNodeSetParams(cout, nullptr));
  T(cudaGraphMemcpyNodeSetParams(cout, &p3b));
  cudaMemcpy3DParms p3o = {};
  T(cudaGraphMemcpyNodeGetParams(cout, &p3o));
  printf("memcpy params after set: dst is h2 %d\n", p3o.dstPtr.ptr == h2);

  cudaMemsetParams mp2 = mp;
  mp2.value = 9;
  cudaMemsetParams mpx = mp2;
  mpx.elementSize = 3;
  TC(cudaGraphMemsetNodeSetParams(ms, &mpx));
  TC(cudaGraphMemsetNodeSetParams(k, &mp2));
  TREFUSE(cudaGraphMemsetNodeSetParams(ms, nullptr));
  T(cudaGraphMemsetNodeSetParams(ms, &mp2));
  cudaMemsetParams mpo = {};
  T(cudaGraphMemsetNodeGetParams(ms, &mpo));
  printf("memset params after set: value %u\n", mpo.value);

  cudaHostNodeParams hp2 = {host_fn_b, nullptr};
  cudaHostNodeParams hpx = {nullptr, nullptr};
  TC(cudaGraphHostNodeSetParams(host, &hpx));
  TC(cudaGraphHostNodeSetParams(k, &hp2));
  TREFUSE(cudaGraphHostNodeSetParams(host, nullptr));
  T(cudaGraphHostNodeSetParams(host, &hp2));

  // the old exec is unchanged
  for (int i = 0; i < n; i++) h[i] = h2[i] = -1;
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  printf("old exec: h[3]=%d h2[3]=%d host_a %d host_b %d\n", h[3], h2[3], host_a, host_b);

  cudaGraphExec_t ge2 = nullptr;
  T(cudaGraphInstantiate(&ge2, g, 0));
  for (int i = 0; i < n; i++) h[i] = h2[i] = -1;
  T(cudaGraphLaunch(ge2, s));
  T(cudaStreamSynchronize(s));
  int dd2[n];
  CHECK(cudaMemcpy(dd2, d2, sizeof dd2, cudaMemcpyDeviceToHost));
  printf("new exec: h[3]=%d h2[3]=%d d2[3]=%d host_a %d host_b %d cks %llx\n", h[3], h2[3], dd2[3],
         host_a, host_b, cks(h2, n));

  // exec memcpy setter: back to h
  TC(cudaGraphExecMemcpyNodeSetParams(ge2, cout, &p3x));
  TC(cudaGraphExecMemcpyNodeSetParams(ge2, k, &p3));
  TREFUSE(cudaGraphExecMemcpyNodeSetParams(ge2, cout, nullptr));
  TREFUSE(cudaGraphExecMemcpyNodeSetParams(nullptr, cout, &p3));
  T(cudaGraphExecMemcpyNodeSetParams(ge2, cout, &p3));
  for (int i = 0; i < n; i++) h[i] = h2[i] = -1;
  T(cudaGraphLaunch(ge2, s));
  T(cudaStreamSynchronize(s));
  printf("exec memcpy set: h[3]=%d h2[3]=%d cks %llx\n", h[3], h2[3], cks(h, n));

  CHECK(cudaGraphExecDestroy(ge2));
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(d));
  CHECK(cudaFree(d2));
}

// -- memcpy nodes to and from a __device__ array.
static void group_symbols(cudaStream_t s) {
  printf("== symbols\n");
  int in[64], in2[64], out[64], out2[64];
  for (int i = 0; i < 64; i++) {
    in[i] = i;
    in2[i] = 1000 + i;
    out[i] = out2[i] = -1;
  }
  const size_t all = sizeof in, half = sizeof in / 2;
  cudaGraph_t g = nullptr, gs = nullptr;  // gs: a scratch graph for bad input
  CHECK(cudaGraphCreate(&g, 0));
  CHECK(cudaGraphCreate(&gs, 0));
  cudaGraphNode_t to, kn, from, bad;
  T(cudaGraphAddMemcpyNodeToSymbol(&to, g, nullptr, 0, sym, in, all, 0, cudaMemcpyHostToDevice));
  TC(cudaGraphAddMemcpyNodeToSymbol(&bad, gs, nullptr, 0, not_a_symbol, in, all, 0,
                                    cudaMemcpyHostToDevice));
  TC(cudaGraphAddMemcpyNodeToSymbol(&bad, gs, nullptr, 0, sym, in, all, 4, cudaMemcpyHostToDevice));
  TC(cudaGraphAddMemcpyNodeToSymbol(&bad, gs, nullptr, 0, sym, in, all, 0, cudaMemcpyDeviceToHost));
  TC(cudaGraphAddMemcpyNodeToSymbol(&bad, gs, nullptr, 0, sym, in, all, 0, (cudaMemcpyKind)9));
  cudaKernelNodeParams kp = {};
  int k = 10;
  void *args[] = {&k};
  kp.func = (void *)sym_add;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(64);
  kp.kernelParams = args;
  CHECK(cudaGraphAddKernelNode(&kn, g, &to, 1, &kp));
  T(cudaGraphAddMemcpyNodeFromSymbol(&from, g, &kn, 1, out, sym, all, 0, cudaMemcpyDeviceToHost));
  TC(cudaGraphAddMemcpyNodeFromSymbol(&bad, gs, nullptr, 0, out, not_a_symbol, all, 0,
                                      cudaMemcpyDeviceToHost));
  TC(cudaGraphAddMemcpyNodeFromSymbol(&bad, gs, nullptr, 0, out, sym, all + 4, 0,
                                      cudaMemcpyDeviceToHost));
  TC(cudaGraphAddMemcpyNodeFromSymbol(&bad, gs, nullptr, 0, out, sym, all, 0,
                                      cudaMemcpyHostToDevice));
  cudaMemcpy3DParms p3 = {};
  T(cudaGraphMemcpyNodeGetParams(to, &p3));
  printf("to-symbol node: kind %d width %zu src is in %d\n", (int)p3.kind, p3.extent.width,
         p3.srcPtr.ptr == in);

  cudaGraphExec_t ge = nullptr;
  T(cudaGraphInstantiate(&ge, g, 0));
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  printf("symbol graph: out[0]=%d out[63]=%d cks %llx\n", out[0], out[63], cks(out, 64));

  // Node setters: the second half of sym from in2, read back into out2.
  // (bad input first: the good call after it sets the parameters either way)
  TC(cudaGraphMemcpyNodeSetParamsToSymbol(to, not_a_symbol, in2, half, 0, cudaMemcpyHostToDevice));
  TC(cudaGraphMemcpyNodeSetParamsToSymbol(to, sym, in2, all, half, cudaMemcpyHostToDevice));
  TC(cudaGraphMemcpyNodeSetParamsToSymbol(kn, sym, in2, half, 0, cudaMemcpyHostToDevice));
  T(cudaGraphMemcpyNodeSetParamsToSymbol(to, sym, in2 + 32, half, half, cudaMemcpyHostToDevice));
  TC(cudaGraphMemcpyNodeSetParamsFromSymbol(from, out2, not_a_symbol, all, 0,
                                            cudaMemcpyDeviceToHost));
  TC(cudaGraphMemcpyNodeSetParamsFromSymbol(from, out2, sym, all, 4, cudaMemcpyDeviceToHost));
  TC(cudaGraphMemcpyNodeSetParamsFromSymbol(kn, out2, sym, all, 0, cudaMemcpyDeviceToHost));
  T(cudaGraphMemcpyNodeSetParamsFromSymbol(from, out2, sym, all, 0, cudaMemcpyDeviceToHost));
  cudaGraphExec_t ge2 = nullptr;
  T(cudaGraphInstantiate(&ge2, g, 0));
  T(cudaGraphLaunch(ge2, s));
  T(cudaStreamSynchronize(s));
  printf("after node setters: out2[0]=%d out2[63]=%d out[0]=%d cks %llx\n", out2[0], out2[63],
         out[0], cks(out2, 64));

  // Exec setters on the second exec: whole array from in, back into out.
  for (int i = 0; i < 64; i++) out[i] = out2[i] = -1;
  TC(cudaGraphExecMemcpyNodeSetParamsToSymbol(ge2, to, not_a_symbol, in, all, 0,
                                              cudaMemcpyHostToDevice));
  TC(cudaGraphExecMemcpyNodeSetParamsToSymbol(ge2, to, sym, in, all, 4, cudaMemcpyHostToDevice));
  TC(cudaGraphExecMemcpyNodeSetParamsToSymbol(ge2, kn, sym, in, all, 0, cudaMemcpyHostToDevice));
  T(cudaGraphExecMemcpyNodeSetParamsToSymbol(ge2, to, sym, in, all, 0, cudaMemcpyHostToDevice));
  TC(cudaGraphExecMemcpyNodeSetParamsFromSymbol(ge2, from, out, not_a_symbol, all, 0,
                                                cudaMemcpyDeviceToHost));
  TC(cudaGraphExecMemcpyNodeSetParamsFromSymbol(ge2, from, out, sym, all, 4,
                                                cudaMemcpyDeviceToHost));
  TC(cudaGraphExecMemcpyNodeSetParamsFromSymbol(ge2, kn, out, sym, all, 0, cudaMemcpyDeviceToHost));
  T(cudaGraphExecMemcpyNodeSetParamsFromSymbol(ge2, from, out, sym, all, 0,
                                               cudaMemcpyDeviceToHost));
  T(cudaGraphLaunch(ge2, s));
  T(cudaStreamSynchronize(s));
  printf("after exec setters: out[0]=%d out[63]=%d out2[0]=%d cks %llx\n", out[0], out[63], out2[0],
         cks(out, 64));
  CHECK(cudaGraphExecDestroy(ge2));
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(gs));
  CHECK(cudaGraphDestroy(g));
}

// -- a conditional IF node whose condition a kernel sets from device memory.
static void group_conditional(cudaStream_t s) {
  printf("== conditional\n");
  const int n = 128;
  int *d = nullptr, *flag = nullptr, h[n];
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMemset(d, 0, n * sizeof(int)));
  cudaGraph_t g = nullptr;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle hnd = 0, hbad = 0;
  T(cudaGraphConditionalHandleCreate(&hnd, g, 0, 0));
  TC(cudaGraphConditionalHandleCreate(&hbad, nullptr, 0, 0));
  TC(cudaGraphConditionalHandleCreate(&hbad, g, 0, 0x10));
  TREFUSE(cudaGraphConditionalHandleCreate(nullptr, g, 0, 0));
  cudaGraphConditionalHandle hdef = 0;
  T(cudaGraphConditionalHandleCreate(&hdef, g, 1, cudaGraphCondAssignDefault));

  cudaGraphNode_t setter = nullptr, cond = nullptr, body = nullptr, bad = nullptr;
  void *sargs[] = {&hnd, &flag};
  cudaGraphNodeParams kp = {};
  kp.type = cudaGraphNodeTypeKernel;
  kp.kernel.func = (void *)set_handle;
  kp.kernel.gridDim = dim3(1);
  kp.kernel.blockDim = dim3(1);
  kp.kernel.kernelParams = sargs;
  T(cudaGraphAddNode(&setter, g, nullptr, nullptr, 0, &kp));

  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = hnd;
  cp.conditional.type = cudaGraphCondTypeIf;
  cp.conditional.size = 3;
  TC(cudaGraphAddNode(&bad, g, &setter, nullptr, 1, &cp));
  cp.conditional.size = 1;
  cp.conditional.type = (cudaGraphConditionalNodeType)9;
  TC(cudaGraphAddNode(&bad, g, &setter, nullptr, 1, &cp));
  cp.conditional.type = cudaGraphCondTypeIf;
  T(cudaGraphAddNode(&cond, g, &setter, nullptr, 1, &cp));
  cudaGraph_t bg = cp.conditional.phGraph_out ? cp.conditional.phGraph_out[0] : nullptr;
  printf("conditional body graph %s\n", bg ? "set" : "NULL");
  cudaGraphNodeType t = cudaGraphNodeTypeCount;
  T(cudaGraphNodeGetType(cond, &t));
  printf("conditional node type %d\n", (int)t);

  int nn = n, k = 1;
  void *bargs[] = {&d, &nn, &k};
  cudaGraphNodeParams bp = {};
  bp.type = cudaGraphNodeTypeKernel;
  bp.kernel.func = (void *)add_k;
  bp.kernel.gridDim = dim3(1);
  bp.kernel.blockDim = dim3(n);
  bp.kernel.kernelParams = bargs;
  if (bg) T(cudaGraphAddNode(&body, bg, nullptr, nullptr, 0, &bp));
  // A host node is not allowed in a conditional body.
  cudaGraphNodeParams hp = {};
  hp.type = cudaGraphNodeTypeHost;
  hp.host.fn = host_fn_a;
  if (bg) TC(cudaGraphAddNode(&bad, bg, nullptr, nullptr, 0, &hp));

  cudaGraphExec_t ge = nullptr;
  T(cudaGraphInstantiate(&ge, g, 0));
  static const int conds[] = {1, 0, 1, 7};
  for (int c : conds) {
    CHECK(cudaMemcpy(flag, &c, sizeof c, cudaMemcpyHostToDevice));
    T(cudaGraphLaunch(ge, s));
    T(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    printf("condition %d: d[0]=%d d[%d]=%d\n", c, h[0], n - 1, h[n - 1]);
  }
  T(cudaGraphExecDestroy(ge));
  T(cudaGraphDestroy(g));

  // The same with the default value applied at launch and no setter.
  CHECK(cudaGraphCreate(&g, 0));
  T(cudaGraphConditionalHandleCreate(&hdef, g, 1, cudaGraphCondAssignDefault));
  cp.conditional.handle = hdef;
  cp.conditional.phGraph_out = nullptr;
  T(cudaGraphAddNode(&cond, g, nullptr, nullptr, 0, &cp));
  bg = cp.conditional.phGraph_out ? cp.conditional.phGraph_out[0] : nullptr;
  k = 100;
  if (bg) T(cudaGraphAddNode(&body, bg, nullptr, nullptr, 0, &bp));
  T(cudaGraphInstantiate(&ge, g, 0));
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  printf("default 1: d[0]=%d cks %llx\n", h[0], cks(h, n));
  T(cudaGraphExecDestroy(ge));
  T(cudaGraphDestroy(g));
  CHECK(cudaFree(d));
  CHECK(cudaFree(flag));
}

static void CUDART_CB on_notify(cudaAsyncNotificationInfo_t *, void *, cudaAsyncCallbackHandle_t) {}

// -- device: atomics, RDMA flush, async notifications, valid devices, last error.
static void group_device() {
  printf("== device\n");
  int ndev = 0;
  CHECK(cudaGetDeviceCount(&ndev));
  static const cudaAtomicOperation ops[] = {cudaAtomicOperationIntegerAdd, cudaAtomicOperationCAS,
                                            cudaAtomicOperationFloatAdd,
                                            cudaAtomicOperationExchange};
  unsigned caps[4];
  memset(caps, 0xff, sizeof caps);
  T(cudaDeviceGetHostAtomicCapabilities(caps, ops, 4, 0));
  printf("host atomic caps %x %x %x %x\n", caps[0], caps[1], caps[2], caps[3]);
  TC(cudaDeviceGetHostAtomicCapabilities(caps, ops, 4, ndev));
  TC(cudaDeviceGetHostAtomicCapabilities(caps, ops, 0, 0));
  cudaAtomicOperation badop[] = {(cudaAtomicOperation)99};
  TC(cudaDeviceGetHostAtomicCapabilities(caps, badop, 1, 0));
  TREFUSE(cudaDeviceGetHostAtomicCapabilities(nullptr, ops, 4, 0));
  TREFUSE(cudaDeviceGetHostAtomicCapabilities(caps, nullptr, 4, 0));
  memset(caps, 0xff, sizeof caps);
  cudaError_t pe = cudaDeviceGetP2PAtomicCapabilities(caps, ops, 4, 0, 0);
  cudaError_t pl = cudaGetLastError();
  printf("p2p atomic caps 0->0 -> %s (last %s)", cudaGetErrorName(pe), cudaGetErrorName(pl));
  if (pe == cudaSuccess) printf(" %x %x %x %x", caps[0], caps[1], caps[2], caps[3]);
  printf("\n");
  TC(cudaDeviceGetP2PAtomicCapabilities(caps, ops, 4, 0, ndev));
  TC(cudaDeviceGetP2PAtomicCapabilities(caps, ops, 4, -1, 0));
  TC(cudaDeviceGetP2PAtomicCapabilities(caps, badop, 1, 0, 0));
  TREFUSE(cudaDeviceGetP2PAtomicCapabilities(nullptr, ops, 4, 0, 0));

  T(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                       cudaFlushGPUDirectRDMAWritesToOwner));
  TC(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                        cudaFlushGPUDirectRDMAWritesToAllDevices));
  TC(cudaDeviceFlushGPUDirectRDMAWrites((cudaFlushGPUDirectRDMAWritesTarget)5,
                                        cudaFlushGPUDirectRDMAWritesToOwner));
  TC(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                        (cudaFlushGPUDirectRDMAWritesScope)500));

  cudaAsyncCallbackHandle_t cb = nullptr, cb2 = nullptr;
  T(cudaDeviceRegisterAsyncNotification(0, on_notify, nullptr, &cb));
  printf("notification handle %s\n", cb ? "set" : "NULL");
  T(cudaDeviceRegisterAsyncNotification(0, on_notify, &cb, &cb2));
  TC(cudaDeviceRegisterAsyncNotification(ndev, on_notify, nullptr, &cb2));
  TC(cudaDeviceRegisterAsyncNotification(-1, on_notify, nullptr, &cb2));
  TC(cudaDeviceRegisterAsyncNotification(0, nullptr, nullptr, &cb2));
  TREFUSE(cudaDeviceRegisterAsyncNotification(0, on_notify, nullptr, nullptr));
  T(cudaDeviceUnregisterAsyncNotification(0, cb2));
  TC(cudaDeviceUnregisterAsyncNotification(ndev, cb));
  T(cudaDeviceUnregisterAsyncNotification(0, cb));
  /* Unregistering twice crashes the driver under both runtimes (measured on
   * an H200): undefined, not compared. */
  TREFUSE(cudaDeviceUnregisterAsyncNotification(0, nullptr));

  int valid[] = {0};
  int badlist[] = {ndev};
  int duplist[] = {0, 0};
  T(cudaSetValidDevices(valid, 1));
  TC(cudaSetValidDevices(badlist, 1));
  TC(cudaSetValidDevices(duplist, 2));
  TC(cudaSetValidDevices(nullptr, 1));
  TREFUSE(cudaSetValidDevices(valid, -1));
  T(cudaSetValidDevices(nullptr, 0));
  int cur = -1;
  T(cudaGetDevice(&cur));
  printf("device after valid list %d\n", cur);

  TC(cudaGetLastError());
  cudaError_t e = cudaSetDevice(ndev + 5);
  printf("set bad device -> %s\n", cudaGetErrorName(e));
  printf("peek %s\n", cudaGetErrorName(cudaPeekAtLastError()));
  printf("peek again %s\n", cudaGetErrorName(cudaPeekAtLastError()));
  printf("get %s\n", cudaGetErrorName(cudaGetLastError()));
  printf("peek after get %s\n", cudaGetErrorName(cudaPeekAtLastError()));
  printf("get after get %s\n", cudaGetErrorName(cudaGetLastError()));

  // No NvSci libraries on this machine.
  unsigned char attrs[64];
  memset(attrs, 0, sizeof attrs);
  TC(cudaDeviceGetNvSciSyncAttributes(attrs, 0, cudaNvSciSyncAttrSignal));
  TC(cudaDeviceGetNvSciSyncAttributes(attrs, 0, cudaNvSciSyncAttrWait));
  TC(cudaDeviceGetNvSciSyncAttributes(attrs, 0, 0x10));
  TC(cudaDeviceGetNvSciSyncAttributes(attrs, ndev, cudaNvSciSyncAttrSignal));
  TC(cudaDeviceGetNvSciSyncAttributes(nullptr, 0, cudaNvSciSyncAttrSignal));
  CHECK(cudaSetDevice(0));
}

// -- external memory and semaphores.
static void group_external(cudaStream_t s) {
  printf("== external\n");
  cudaExternalMemory_t em = nullptr;
  cudaExternalMemoryHandleDesc md;
  memset(&md, 0, sizeof md);
  int efd = eventfd(0, EFD_CLOEXEC);
  int nfd = open("/dev/null", O_RDWR | O_CLOEXEC);
  printf("fds open %d\n", efd >= 0 && nfd >= 0);
  md.type = cudaExternalMemoryHandleTypeOpaqueFd;
  md.handle.fd = efd;
  md.size = 1 << 21;
  TC(cudaImportExternalMemory(&em, &md));
  md.handle.fd = nfd;
  TC(cudaImportExternalMemory(&em, &md));
  md.handle.fd = -1;
  TC(cudaImportExternalMemory(&em, &md));
  md.handle.fd = efd;
  md.size = 0;
  TC(cudaImportExternalMemory(&em, &md));
  md.size = 1 << 21;
  md.flags = 0x10;
  TC(cudaImportExternalMemory(&em, &md));
  md.flags = 0;
  md.type = cudaExternalMemoryHandleTypeOpaqueWin32;
  md.handle.win32.handle = (void *)(uintptr_t)0x10;
  TC(cudaImportExternalMemory(&em, &md));
  md.type = cudaExternalMemoryHandleTypeD3D12Heap;
  TC(cudaImportExternalMemory(&em, &md));
  md.type = cudaExternalMemoryHandleTypeNvSciBuf;
  md.handle.nvSciBufObject = nullptr;
  TC(cudaImportExternalMemory(&em, &md));
  md.type = (cudaExternalMemoryHandleType)99;
  TC(cudaImportExternalMemory(&em, &md));
  md.type = cudaExternalMemoryHandleTypeOpaqueFd;
  md.handle.fd = efd;
  TREFUSE(cudaImportExternalMemory(&em, nullptr));
  TREFUSE(cudaImportExternalMemory(nullptr, &md));
  void *bp = nullptr;
  cudaExternalMemoryBufferDesc bd;
  memset(&bd, 0, sizeof bd);
  bd.size = 4096;
  TREFUSE(cudaExternalMemoryGetMappedBuffer(&bp, nullptr, &bd));
  cudaMipmappedArray_t mip = nullptr;
  cudaExternalMemoryMipmappedArrayDesc ad;
  memset(&ad, 0, sizeof ad);
  ad.formatDesc = cudaCreateChannelDesc<float>();
  ad.extent = make_cudaExtent(64, 64, 0);
  ad.numLevels = 1;
  TREFUSE(cudaExternalMemoryGetMappedMipmappedArray(&mip, nullptr, &ad));
  TREFUSE(cudaDestroyExternalMemory(nullptr));

  cudaExternalSemaphore_t es = nullptr;
  cudaExternalSemaphoreHandleDesc sd;
  memset(&sd, 0, sizeof sd);
  sd.type = cudaExternalSemaphoreHandleTypeOpaqueFd;
  sd.handle.fd = efd;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.handle.fd = nfd;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.handle.fd = -1;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.type = cudaExternalSemaphoreHandleTypeTimelineSemaphoreFd;
  sd.handle.fd = efd;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.type = cudaExternalSemaphoreHandleTypeOpaqueWin32;
  sd.handle.win32.handle = (void *)(uintptr_t)0x10;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.type = cudaExternalSemaphoreHandleTypeD3D12Fence;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.type = (cudaExternalSemaphoreHandleType)99;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.type = cudaExternalSemaphoreHandleTypeOpaqueFd;
  sd.handle.fd = efd;
  sd.flags = 0x10;
  TC(cudaImportExternalSemaphore(&es, &sd));
  sd.flags = 0;
  TREFUSE(cudaImportExternalSemaphore(&es, nullptr));
  TREFUSE(cudaImportExternalSemaphore(nullptr, &sd));
  cudaExternalSemaphoreSignalParams sp;
  cudaExternalSemaphoreWaitParams wp;
  memset(&sp, 0, sizeof sp);
  memset(&wp, 0, sizeof wp);
  TC(cudaSignalExternalSemaphoresAsync(nullptr, nullptr, 0, s));
  TC(cudaWaitExternalSemaphoresAsync(nullptr, nullptr, 0, s));
  TREFUSE(cudaSignalExternalSemaphoresAsync(nullptr, &sp, 1, s));
  TREFUSE(cudaWaitExternalSemaphoresAsync(nullptr, &wp, 1, s));
  cudaExternalSemaphore_t nulls[1] = {nullptr};
  TREFUSE(cudaSignalExternalSemaphoresAsync(nulls, &sp, 1, s));
  TREFUSE(cudaWaitExternalSemaphoresAsync(nulls, &wp, 1, s));
  TREFUSE(cudaSignalExternalSemaphoresAsync(nulls, nullptr, 1, s));
  TREFUSE(cudaDestroyExternalSemaphore(nullptr));
  // efd and nfd stay open: had a failed import closed one, its number may
  // now belong to the driver.

  // A real opaque fd: VMM memory exported by the driver, imported back.
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 mem_export = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_gran = nullptr;
  cudaDriverEntryPointQueryResult q1, q2, q3, q4;
  T(cudaGetDriverEntryPointByVersion("cuMemCreate", (void **)&mem_create, 12000, cudaEnableDefault,
                                     &q1));
  T(cudaGetDriverEntryPointByVersion("cuMemRelease", (void **)&mem_release, 12000,
                                     cudaEnableDefault, &q2));
  T(cudaGetDriverEntryPointByVersion("cuMemExportToShareableHandle", (void **)&mem_export, 12000,
                                     cudaEnableDefault, &q3));
  T(cudaGetDriverEntryPointByVersion("cuMemGetAllocationGranularity", (void **)&mem_gran, 12000,
                                     cudaEnableDefault, &q4));
  if (!mem_create || !mem_release || !mem_export || !mem_gran) {
    printf("driver VMM entry points missing: %d %d %d %d\n", (int)q1, (int)q2, (int)q3, (int)q4);
    return;
  }
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CUresult r = mem_gran(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  size_t size = 2 * gran;
  CUmemGenericAllocationHandle mh = 0;
  if (r == CUDA_SUCCESS) r = mem_create(&mh, size, &prop, 0);
  int fd = -1;
  if (r == CUDA_SUCCESS) r = mem_export(&fd, mh, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  printf("driver export: result %d fd %s\n", (int)r, fd >= 0 ? "valid" : "invalid");
  if (r != CUDA_SUCCESS) {
    if (mh) mem_release(mh);
    return;
  }
  memset(&md, 0, sizeof md);
  md.type = cudaExternalMemoryHandleTypeOpaqueFd;
  md.handle.fd = fd;
  md.size = size;
  cudaError_t ie = cudaImportExternalMemory(&em, &md);
  cudaError_t il = cudaGetLastError();
  printf("import opaque fd -> %s (last %s)\n", cudaGetErrorName(ie), cudaGetErrorName(il));
  if (ie != cudaSuccess) {
    close(fd);  // a failed import leaves the fd with us
    mem_release(mh);
    return;
  }
  const int n = (int)(gran / sizeof(int));
  int *p0 = nullptr, *p1 = nullptr;
  memset(&bd, 0, sizeof bd);
  bd.offset = 0;
  bd.size = size;
  T(cudaExternalMemoryGetMappedBuffer((void **)&p0, em, &bd));
  bd.offset = gran;
  bd.size = gran;
  T(cudaExternalMemoryGetMappedBuffer((void **)&p1, em, &bd));
  bd.offset = gran;
  bd.size = size;
  TC(cudaExternalMemoryGetMappedBuffer(&bp, em, &bd));
  bd.offset = 0;
  bd.size = 0;
  TC(cudaExternalMemoryGetMappedBuffer(&bp, em, &bd));
  bd.size = gran;
  bd.flags = 1;
  TC(cudaExternalMemoryGetMappedBuffer(&bp, em, &bd));
  bd.flags = 0;
  TREFUSE(cudaExternalMemoryGetMappedBuffer(&bp, em, nullptr));
  TREFUSE(cudaExternalMemoryGetMappedBuffer(nullptr, em, &bd));
  if (p0 != nullptr && p1 != nullptr) {
    iota_k<<<(2 * n + 255) / 256, 256, 0, s>>>(p0, 2 * n, 3);
    T(cudaStreamSynchronize(s));
    int *hbuf = (int *)malloc(gran);
    CHECK(cudaMemcpy(hbuf, p1, gran, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= hbuf[i] == (n + i) * 3;
    printf("second mapping sees the first: %d cks %llx\n", ok, cks(hbuf, n));
    free(hbuf);
    T(cudaFree(p1));
    T(cudaFree(p0));
  }
  T(cudaExternalMemoryGetMappedMipmappedArray(&mip, em, &ad));
  if (mip != nullptr) {
    cudaArray_t lvl = nullptr;
    T(cudaGetMipmappedArrayLevel(&lvl, mip, 0));
    cudaExtent ext = {};
    unsigned aflags = 99;
    cudaChannelFormatDesc fd2 = {};
    T(cudaArrayGetInfo(&fd2, &ext, &aflags, lvl));
    printf("mapped mipmap level 0: %zux%zu f%d x%d\n", ext.width, ext.height, (int)fd2.f, fd2.x);
    T(cudaFreeMipmappedArray(mip));
  }
  cudaExternalMemoryMipmappedArrayDesc adx = ad;
  adx.numLevels = 0; /* aborts NVIDIA's runtime (driver assert) */
  TREFUSE(cudaExternalMemoryGetMappedMipmappedArray(&mip, em, &adx));
  adx = ad;
  adx.offset = size;
  TC(cudaExternalMemoryGetMappedMipmappedArray(&mip, em, &adx));
  TREFUSE(cudaExternalMemoryGetMappedMipmappedArray(&mip, em, nullptr));
  T(cudaDestroyExternalMemory(em));
  TREFUSE(cudaDestroyExternalMemory(em));
  printf("release -> %d\n", (int)mem_release(mh));
}

int main() {
  // First, while this process has no CUDA state: each graphics call runs
  // in a fresh child.
  group_graphics();

  cudaStream_t s;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  group_streams(s);
  group_graph_mem(s);
  group_graph_set(s);
  group_symbols(s);
  group_conditional(s);
  group_device();
  group_external(s);
  printf("== end\n");
  T(cudaStreamDestroy(s));
  T(cudaDeviceSynchronize());
  TC(cudaGetLastError());
  return 0;
}
