// Stream capture -> graph -> instantiate -> launch, the path PyTorch's CUDA
// graphs take: capture status and info (with edge data) during capture,
// nodes and dependencies of the captured graph, launch results, and the
// errors of capture misuse.
#include "common.h"

__global__ void add_one(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

static int host_calls;
static void CUDART_CB count_host(void *) { host_calls++; }

static const char *type_name(cudaGraphNodeType t) {
  switch (t) {
  case cudaGraphNodeTypeKernel: return "kernel";
  case cudaGraphNodeTypeMemcpy: return "memcpy";
  case cudaGraphNodeTypeMemset: return "memset";
  case cudaGraphNodeTypeHost: return "host";
  case cudaGraphNodeTypeEmpty: return "empty";
  case cudaGraphNodeTypeWaitEvent: return "wait";
  case cudaGraphNodeTypeEventRecord: return "record";
  default: return "other";
  }
}

int main() {
  const int n = 1000;
  int *d = nullptr, h[n];
  cudaStream_t s, s2;
  cudaEvent_t fork, join;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMemset(d, 0, n * sizeof(int)));

  cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
  T(cudaThreadExchangeStreamCaptureMode(&mode));
  T(cudaThreadExchangeStreamCaptureMode(&mode));

  T(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  TC(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus st;
  T(cudaStreamIsCapturing(s, &st));
  printf("capturing: %d\n", (int)st);
  add_one<<<(n + 255) / 256, 256, 0, s>>>(d, n);
  T(cudaGetLastError());
  unsigned long long id = 0;
  cudaGraph_t cg = nullptr;
  const cudaGraphNode_t *deps = nullptr;
  const cudaGraphEdgeData *edges = nullptr;
  size_t ndeps = 99;
  T(cudaStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &edges, &ndeps));
  printf("info: status %d id>0 %d graph %d deps %zu edge type %d\n", (int)st, id > 0, cg != nullptr,
         ndeps, ndeps > 0 && edges ? (int)edges[0].type : -1);
  // fork/join onto a second stream
  T(cudaEventRecord(fork, s));
  T(cudaStreamWaitEvent(s2, fork, 0));
  T(cudaStreamIsCapturing(s2, &st));
  printf("s2 capturing: %d\n", (int)st);
  add_one<<<(n + 255) / 256, 256, 0, s2>>>(d, n);
  T(cudaEventRecord(join, s2));
  T(cudaStreamWaitEvent(s, join, 0));
  T(cudaLaunchHostFunc(s, count_host, nullptr));
  T(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  // Illegal during global capture: synchronous work on the legacy stream.
  TC(cudaStreamQuery(s));
  cudaGraph_t g = nullptr;
  T(cudaStreamEndCapture(s, &g));
  TC(cudaStreamEndCapture(s, &g));

  // The invalidated capture above (cudaStreamQuery) leaves no graph; run
  // it again cleanly.
  if (g != nullptr) CHECK(cudaGraphDestroy(g));
  g = nullptr;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  add_one<<<(n + 255) / 256, 256, 0, s>>>(d, n);
  CHECK(cudaEventRecord(fork, s));
  CHECK(cudaStreamWaitEvent(s2, fork, 0));
  add_one<<<(n + 255) / 256, 256, 0, s2>>>(d, n);
  CHECK(cudaEventRecord(join, s2));
  CHECK(cudaStreamWaitEvent(s, join, 0));
  CHECK(cudaLaunchHostFunc(s, count_host, nullptr));
  CHECK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  T(cudaStreamEndCapture(s, &g));
  T(cudaStreamIsCapturing(s, &st));
  printf("capturing after end: %d\n", (int)st);

  size_t nn = 0;
  T(cudaGraphGetNodes(g, nullptr, &nn));
  printf("nodes: %zu\n", nn);
  cudaGraphNode_t nodes[16];
  nn = 16;
  T(cudaGraphGetNodes(g, nodes, &nn));
  for (size_t i = 0; i < nn; i++) {
    cudaGraphNodeType t;
    size_t nd = 0;
    CHECK(cudaGraphNodeGetType(nodes[i], &t));
    CHECK(cudaGraphNodeGetDependencies(nodes[i], nullptr, nullptr, &nd));
    cudaGraphNode_t dn[8];
    cudaGraphEdgeData ed[8];
    size_t nd2 = 8;
    CHECK(cudaGraphNodeGetDependencies(nodes[i], dn, ed, &nd2));
    size_t nout = 0;
    CHECK(cudaGraphNodeGetDependentNodes(nodes[i], nullptr, nullptr, &nout));
    printf("node %zu: %s deps %zu/%zu dependents %zu\n", i, type_name(t), nd, nd2, nout);
  }
  size_t nroots = 0, nedges = 0;
  T(cudaGraphGetRootNodes(g, nullptr, &nroots));
  T(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &nedges));
  printf("roots %zu edges %zu\n", nroots, nedges);
  TC(cudaGraphGetNodes(g, nullptr, nullptr));
  TC(cudaGraphNodeGetDependencies(nullptr, nullptr, nullptr, &nn));
  T(cudaGraphDebugDotPrint(g, "/tmp/cudaev_graph_capture.dot", cudaGraphDebugDotFlagsVerbose));
  TC(cudaGraphDebugDotPrint(g, nullptr, 0));

  cudaGraphExec_t ge = nullptr;
  T(cudaGraphInstantiateWithFlags(&ge, g, 0));
  TC(cudaGraphInstantiateWithFlags(&ge, nullptr, 0));
  unsigned long long f = 99;
  T(cudaGraphExecGetFlags(ge, &f));
  printf("exec flags %llu\n", f);
  CHECK(cudaMemset(d, 0, n * sizeof(int)));
  for (int it = 0; it < 3; it++) T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  int ok = 1;
  for (int i = 0; i < n; i++) ok &= h[i] == 6;
  printf("after 3 launches: all six %d, host calls %d\n", ok, host_calls);
  T(cudaGraphUpload(ge, s));
  T(cudaGraphLaunch(ge, nullptr));
  T(cudaGraphLaunch(ge, cudaStreamPerThread));
  T(cudaDeviceSynchronize());
  printf("h[0] = %d host calls %d\n", h[0], host_calls);

  cudaGraphExec_t ge2 = nullptr;
  T(cudaGraphInstantiate(&ge2, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  cudaGraphInstantiateParams ip = {};
  ip.flags = cudaGraphInstantiateFlagUpload;
  ip.uploadStream = s;
  cudaGraphExec_t ge3 = nullptr;
  T(cudaGraphInstantiateWithParams(&ge3, g, &ip));
  printf("instantiate result %d\n", (int)ip.result_out);
  TC(cudaGraphInstantiateWithParams(&ge3, g, nullptr));

  T(cudaGraphExecDestroy(ge));
  T(cudaGraphExecDestroy(ge2));
  T(cudaGraphExecDestroy(ge3));
  TC(cudaGraphExecDestroy(nullptr));
  T(cudaGraphDestroy(g));
  TC(cudaGraphDestroy(nullptr));
  TC(cudaGraphLaunch(nullptr, s));
  CHECK(cudaFree(d));
  TC(cudaGetLastError());
  return 0;
}
