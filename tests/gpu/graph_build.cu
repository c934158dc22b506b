// Graphs built node by node: kernel, memset, memcpy (1D and 3D), host,
// empty, event record/wait, child graph nodes; dependencies and edges,
// clone, exec updates, enable/disable, user objects, generic
// cudaGraphAddNode, bad input.
#include "common.h"

__global__ void scale(int *p, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= k;
}

static int host_calls, destroyed;
static void CUDART_CB count_host(void *) { host_calls++; }
static void CUDART_CB on_destroy(void *) { destroyed++; }

int main() {
  const int n = 256;
  int *d = nullptr, *d2 = nullptr, h[n];
  cudaStream_t s;
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMalloc(&d2, n * sizeof(int)));
  for (int i = 0; i < n; i++) h[i] = i;

  cudaGraph_t g = nullptr;
  T(cudaGraphCreate(&g, 0));
  TC(cudaGraphCreate(&g, 1));
  TC(cudaGraphCreate(nullptr, 0));

  cudaGraphNode_t cpy_in, ms, k, cpy_out, host, empty;
  T(cudaGraphAddMemcpyNode1D(&cpy_in, g, nullptr, 0, d, h, n * sizeof(int),
                             cudaMemcpyHostToDevice));
  cudaMemsetParams mp = {};
  mp.dst = d2;
  mp.value = 7;
  mp.elementSize = 4;
  mp.width = n;
  mp.height = 1;
  mp.pitch = 0;
  T(cudaGraphAddMemsetNode(&ms, g, nullptr, 0, &mp));
  cudaMemsetParams mp_bad = mp;
  mp_bad.elementSize = 3;
  cudaGraphNode_t bad;
  TC(cudaGraphAddMemsetNode(&bad, g, nullptr, 0, &mp_bad));

  int factor = 3, nn = n;
  void *args[] = {&d, &nn, &factor};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)scale;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(n);
  kp.kernelParams = args;
  cudaGraphNode_t kdeps[] = {cpy_in, ms};
  T(cudaGraphAddKernelNode(&k, g, kdeps, 2, &kp));
  cudaKernelNodeParams kp_bad = kp;
  kp_bad.func = (void *)main;
  TC(cudaGraphAddKernelNode(&bad, g, nullptr, 0, &kp_bad));
  cudaKernelNodeParams kout = {};
  T(cudaGraphKernelNodeGetParams(k, &kout));
  printf("kernel params: func is stub %d grid %u block %u args same %d\n",
         kout.func == (void *)scale, kout.gridDim.x, kout.blockDim.x, kout.kernelParams == args);

  struct cudaMemcpy3DParms p3 = {};
  p3.srcPtr = make_cudaPitchedPtr(d, n * sizeof(int), n, 1);
  p3.dstPtr = make_cudaPitchedPtr(h, n * sizeof(int), n, 1);
  p3.extent = make_cudaExtent(n * sizeof(int), 1, 1);
  p3.kind = cudaMemcpyDeviceToHost;
  T(cudaGraphAddMemcpyNode(&cpy_out, g, &k, 1, &p3));
  struct cudaMemcpy3DParms p3out = {};
  T(cudaGraphMemcpyNodeGetParams(cpy_out, &p3out));
  printf("memcpy params: kind %d width %zu src same %d dst same %d\n", (int)p3out.kind,
         p3out.extent.width, p3out.srcPtr.ptr == d, p3out.dstPtr.ptr == h);
  struct cudaMemcpy3DParms p3bad = p3;
  p3bad.kind = (cudaMemcpyKind)9;
  TC(cudaGraphAddMemcpyNode(&bad, g, nullptr, 0, &p3bad));

  cudaHostNodeParams hp = {count_host, nullptr};
  T(cudaGraphAddHostNode(&host, g, &cpy_out, 1, &hp));
  cudaHostNodeParams hout = {};
  T(cudaGraphHostNodeGetParams(host, &hout));
  printf("host params same %d\n", hout.fn == count_host);
  T(cudaGraphAddEmptyNode(&empty, g, nullptr, 0));
  T(cudaGraphAddDependencies(g, &host, &empty, nullptr, 1));
  TC(cudaGraphAddDependencies(g, &host, &empty, nullptr, 1));
  size_t ne = 0, nr = 0, nodes = 0;
  T(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne));
  T(cudaGraphGetRootNodes(g, nullptr, &nr));
  T(cudaGraphGetNodes(g, nullptr, &nodes));
  printf("nodes %zu edges %zu roots %zu\n", nodes, ne, nr);
  T(cudaGraphRemoveDependencies(g, &host, &empty, nullptr, 1));
  TC(cudaGraphRemoveDependencies(g, &host, &empty, nullptr, 1));
  T(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne));
  printf("edges after remove %zu\n", ne);

  cudaMemsetParams msout = {};
  T(cudaGraphMemsetNodeGetParams(ms, &msout));
  printf("memset params value %u elem %u width %zu\n", msout.value, msout.elementSize, msout.width);

  cudaGraphExec_t ge = nullptr;
  T(cudaGraphInstantiate(&ge, g, 0));
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  printf("h[5] = %d host calls %d\n", h[5], host_calls);

  // exec updates
  factor = 2;
  for (int i = 0; i < n; i++) h[i] = i;
  T(cudaGraphExecKernelNodeSetParams(ge, k, &kp));
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  printf("after kernel update h[5] = %d\n", h[5]);
  T(cudaGraphNodeSetEnabled(ge, k, 0));
  unsigned en = 9;
  T(cudaGraphNodeGetEnabled(ge, k, &en));
  printf("enabled %u\n", en);
  for (int i = 0; i < n; i++) h[i] = i;
  T(cudaGraphLaunch(ge, s));
  T(cudaStreamSynchronize(s));
  printf("disabled kernel h[5] = %d\n", h[5]);
  T(cudaGraphNodeSetEnabled(ge, k, 1));
  T(cudaGraphExecMemcpyNodeSetParams1D(ge, cpy_in, d, h, n * sizeof(int), cudaMemcpyHostToDevice));
  mp.value = 1;
  T(cudaGraphExecMemsetNodeSetParams(ge, ms, &mp));
  T(cudaGraphExecHostNodeSetParams(ge, host, &hp));
  cudaGraphExecUpdateResultInfo ri = {};
  T(cudaGraphExecUpdate(ge, g, &ri));
  printf("update result %d\n", (int)ri.result);

  // clone
  cudaGraph_t cl = nullptr;
  cudaGraphNode_t kc = nullptr;
  T(cudaGraphClone(&cl, g));
  T(cudaGraphNodeFindInClone(&kc, k, cl));
  cudaGraphNodeType t;
  T(cudaGraphNodeGetType(kc, &t));
  printf("clone kernel type %d\n", (int)t);
  TC(cudaGraphNodeFindInClone(&kc, k, g));

  // child graph, events
  cudaGraph_t outer = nullptr, child = nullptr;
  cudaGraphNode_t cn, rec, wait;
  cudaEvent_t ev, ev2, evout;
  CHECK(cudaEventCreate(&ev));
  CHECK(cudaEventCreate(&ev2));
  T(cudaGraphCreate(&outer, 0));
  T(cudaGraphAddChildGraphNode(&cn, outer, nullptr, 0, cl));
  T(cudaGraphChildGraphNodeGetGraph(cn, &child));
  T(cudaGraphAddEventRecordNode(&rec, outer, &cn, 1, ev));
  T(cudaGraphAddEventWaitNode(&wait, outer, &rec, 1, ev));
  T(cudaGraphEventRecordNodeGetEvent(rec, &evout));
  printf("record event same %d\n", evout == ev);
  T(cudaGraphEventRecordNodeSetEvent(rec, ev2));
  T(cudaGraphEventWaitNodeSetEvent(wait, ev2));
  T(cudaGraphEventWaitNodeGetEvent(wait, &evout));
  printf("wait event same %d\n", evout == ev2);
  cudaGraphExec_t oe = nullptr;
  T(cudaGraphInstantiateWithFlags(&oe, outer, 0));
  T(cudaGraphExecEventRecordNodeSetEvent(oe, rec, ev));
  T(cudaGraphExecEventWaitNodeSetEvent(oe, wait, ev));
  T(cudaGraphExecChildGraphNodeSetParams(oe, cn, cl));
  T(cudaGraphLaunch(oe, s));
  T(cudaStreamSynchronize(s));
  T(cudaEventQuery(ev));

  // generic node parameters
  cudaGraph_t gg = nullptr;
  cudaGraphNode_t gn[3];
  T(cudaGraphCreate(&gg, 0));
  cudaGraphNodeParams np = {};
  np.type = cudaGraphNodeTypeMemset;
  np.memset.dst = d2;
  np.memset.value = 5;
  np.memset.elementSize = 4;
  np.memset.width = n;
  np.memset.height = 1;
  T(cudaGraphAddNode(&gn[0], gg, nullptr, nullptr, 0, &np));
  cudaGraphNodeParams kn = {};
  kn.type = cudaGraphNodeTypeKernel;
  kn.kernel.func = (void *)scale;
  kn.kernel.gridDim = dim3(1);
  kn.kernel.blockDim = dim3(n);
  void *args2[] = {&d2, &nn, &factor};
  kn.kernel.kernelParams = args2;
  T(cudaGraphAddNode(&gn[1], gg, &gn[0], nullptr, 1, &kn));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeMemcpy;
  cp.memcpy.copyParams.srcPtr = make_cudaPitchedPtr(d2, n * sizeof(int), n, 1);
  cp.memcpy.copyParams.dstPtr = make_cudaPitchedPtr(h, n * sizeof(int), n, 1);
  cp.memcpy.copyParams.extent = make_cudaExtent(n * sizeof(int), 1, 1);
  cp.memcpy.copyParams.kind = cudaMemcpyDefault;
  T(cudaGraphAddNode(&gn[2], gg, &gn[1], nullptr, 1, &cp));
  cudaGraphNodeParams badp = {};
  badp.type = (cudaGraphNodeType)200;
  TC(cudaGraphAddNode(&bad, gg, nullptr, nullptr, 0, &badp));
  TC(cudaGraphAddNode(&bad, gg, nullptr, nullptr, 0, nullptr));
  cudaGraphExec_t gge = nullptr;
  T(cudaGraphInstantiate(&gge, gg, 0));
  T(cudaGraphLaunch(gge, s));
  T(cudaStreamSynchronize(s));
  printf("generic graph h[0] = %d\n", h[0]);
  np.memset.value = 6;
  T(cudaGraphExecNodeSetParams(gge, gn[0], &np));
  T(cudaGraphLaunch(gge, s));
  T(cudaStreamSynchronize(s));
  printf("after exec set h[0] = %d\n", h[0]);
  np.memset.value = 8;
  T(cudaGraphNodeSetParams(gn[0], &np));

  // user objects
  cudaUserObject_t uo = nullptr;
  T(cudaUserObjectCreate(&uo, nullptr, on_destroy, 1, cudaUserObjectNoDestructorSync));
  TC(cudaUserObjectCreate(&uo, nullptr, on_destroy, 1, 0));
  T(cudaUserObjectRetain(uo, 2));
  T(cudaGraphRetainUserObject(gg, uo, 1, cudaGraphUserObjectMove));
  T(cudaUserObjectRelease(uo, 2));
  printf("destroyed before graph destroy %d\n", destroyed);
  T(cudaGraphReleaseUserObject(gg, uo, 1));

  T(cudaGraphExecDestroy(gge));
  T(cudaGraphDestroy(gg));
  T(cudaGraphExecDestroy(oe));
  T(cudaGraphDestroy(outer));
  T(cudaGraphDestroy(cl));
  T(cudaGraphExecDestroy(ge));
  T(cudaGraphDestroyNode(empty));
  T(cudaGraphDestroy(g));
  T(cudaDeviceSynchronize());
  printf("destroyed %d\n", destroyed);
  CHECK(cudaFree(d));
  CHECK(cudaFree(d2));
  TC(cudaGetLastError());
  return 0;
}
