/* Graph Management on a fake driver: the cudaMemcpy3DParms -> CUDA_MEMCPY3D
 * conversion of memcpy nodes, kinds and their checks, kernel nodes with an
 * unknown function, instantiate parameters with the per-thread stream,
 * destroyed streams and events. */
#include <criterion/criterion.h>

#include "fake_driver.h"

CUDAEV_DECLARE_VARIANT(cudaGraphInstantiateWithParams, _ptsz);

static CUDA_MEMCPY3D seen_copy;
static CUcontext seen_ctx;
static int adds;
static CUresult fake_add_memcpy(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                                const CUDA_MEMCPY3D *p, CUcontext ctx) {
  (void)g;
  (void)deps;
  (void)nd;
  adds++;
  seen_copy = *p;
  seen_ctx = ctx;
  *n = (CUgraphNode)(uintptr_t)0x100900;
  return CUDA_SUCCESS;
}
static CUresult fake_get_memcpy(CUgraphNode n, CUDA_MEMCPY3D *p) {
  (void)n;
  *p = seen_copy;
  return CUDA_SUCCESS;
}

static CUDA_GRAPH_INSTANTIATE_PARAMS seen_inst;
static CUresult fake_instantiate(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  (void)g;
  seen_inst = *p;
  p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  *e = (CUgraphExec)(uintptr_t)0x10000e;
  return CUDA_SUCCESS;
}

static void install(void) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuGraphAddMemcpyNode = fake_add_memcpy;
  fake.cuGraphMemcpyNodeGetParams = fake_get_memcpy;
  fake.cuGraphInstantiateWithParams = fake_instantiate;
  cudaev__driver_install(&fake, 13000);
}

Test(graph, memcpy_1d_node_becomes_a_driver_copy_in_bytes) {
  install();
  char host[64];
  cudaGraphNode_t n;
  cr_assert_eq(cudaGraphAddMemcpyNode1D(&n, (cudaGraph_t)0x100001, NULL, 0, (void *)0xd000, host,
                                        64, cudaMemcpyHostToDevice),
               cudaSuccess);
  cr_expect_eq(seen_copy.srcMemoryType, CU_MEMORYTYPE_HOST);
  cr_expect_eq(seen_copy.srcHost, host);
  cr_expect_eq(seen_copy.dstMemoryType, CU_MEMORYTYPE_DEVICE);
  cr_expect_eq(seen_copy.dstDevice, (CUdeviceptr)0xd000);
  cr_expect_eq(seen_copy.WidthInBytes, 64);
  cr_expect_eq(seen_copy.Height, 1);
  cr_expect_eq(seen_copy.Depth, 1);
  cr_expect_eq(seen_ctx, (CUcontext)(uintptr_t)0x1000);

  /* and back */
  struct cudaMemcpy3DParms p;
  cr_assert_eq(cudaGraphMemcpyNodeGetParams(n, &p), cudaSuccess);
  cr_expect_eq(p.kind, cudaMemcpyHostToDevice);
  cr_expect_eq(p.srcPtr.ptr, host);
  cr_expect_eq(p.dstPtr.ptr, (void *)0xd000);
  cr_expect_eq(p.extent.width, 64);
}

Test(graph, memcpy_3d_pitched_default_kind_is_unified) {
  install();
  struct cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  p.srcPtr = (struct cudaPitchedPtr){(void *)0x1000, 256, 100, 8};
  p.dstPtr = (struct cudaPitchedPtr){(void *)0x2000, 512, 100, 16};
  p.srcPos = (struct cudaPos){3, 2, 1};
  p.dstPos = (struct cudaPos){5, 4, 0};
  p.extent = (struct cudaExtent){100, 8, 2};
  p.kind = cudaMemcpyDefault;
  cudaGraphNode_t n;
  cr_assert_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x100001, NULL, 0, &p), cudaSuccess);
  cr_expect_eq(seen_copy.srcMemoryType, CU_MEMORYTYPE_UNIFIED);
  cr_expect_eq(seen_copy.dstMemoryType, CU_MEMORYTYPE_UNIFIED);
  cr_expect_eq(seen_copy.srcXInBytes, 3);
  cr_expect_eq(seen_copy.srcY, 2);
  cr_expect_eq(seen_copy.srcZ, 1);
  cr_expect_eq(seen_copy.srcPitch, 256);
  cr_expect_eq(seen_copy.srcHeight, 8);
  cr_expect_eq(seen_copy.dstXInBytes, 5);
  cr_expect_eq(seen_copy.dstPitch, 512);
  cr_expect_eq(seen_copy.dstHeight, 16);
  cr_expect_eq(seen_copy.WidthInBytes, 100);
  cr_expect_eq(seen_copy.Height, 8);
  cr_expect_eq(seen_copy.Depth, 2);
}

Test(graph, memcpy_node_argument_errors) {
  install();
  struct cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  cudaGraphNode_t n;
  p.srcPtr.ptr = (void *)0x1000;
  p.dstPtr.ptr = (void *)0x2000;
  p.extent = (struct cudaExtent){1, 1, 1};
  p.kind = (enum cudaMemcpyKind)7;
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x100001, NULL, 0, &p),
               cudaErrorInvalidMemcpyDirection);
  p.kind = cudaMemcpyDeviceToDevice;
  p.srcArray = (cudaArray_t)0x103000; /* both an array and a pointer */
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x100001, NULL, 0, &p),
               cudaErrorInvalidValue);
  p.srcArray = NULL;
  p.dstPtr.ptr = NULL; /* neither */
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x100001, NULL, 0, &p),
               cudaErrorInvalidValue);
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x100001, NULL, 0, NULL),
               cudaErrorInvalidValue);
  cr_expect_eq(adds, 0);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

static void not_a_kernel(void) {}

/* The driver knows one CUkernel, 0x4e0 (a kernel of a library loaded
 * through the driver API); every other handle is invalid. */
#define FOREIGN_KERNEL ((CUkernel)(uintptr_t)0x1004e0)
static CUresult fake_kernel_get_library(CUlibrary *lib, CUkernel k) {
  if (k != FOREIGN_KERNEL) return CUDA_ERROR_INVALID_HANDLE;
  *lib = (CUlibrary)(uintptr_t)0x10011b;
  return CUDA_SUCCESS;
}
static CUDA_KERNEL_NODE_PARAMS seen_kernel;
static CUresult fake_add_kernel(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                                const CUDA_KERNEL_NODE_PARAMS *p) {
  (void)g;
  (void)deps;
  (void)nd;
  adds++;
  seen_kernel = *p;
  *n = (CUgraphNode)(uintptr_t)0x100901;
  return CUDA_SUCCESS;
}

/* As NVIDIA's runtime: a pointer the registry does not know is taken for a
 * CUkernel and the driver decides (a host function ->
 * cudaErrorInvalidResourceHandle, as measured on NVIDIA's); NULL is
 * cudaErrorInvalidDeviceFunction. Nothing reaches cuGraphAddKernelNode
 * unless the driver knows the kernel. */
Test(graph, kernel_node_with_an_unregistered_function) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuKernelGetLibrary = fake_kernel_get_library;
  fake.cuGraphAddKernelNode = fake_add_kernel;
  cudaev__driver_install(&fake, 13000);
  struct cudaKernelNodeParams k;
  memset(&k, 0, sizeof k);
  k.func = (void *)not_a_kernel;
  k.gridDim = (dim3){1, 1, 1};
  k.blockDim = (dim3){1, 1, 1};
  cudaGraphNode_t n;
  cr_expect_eq(cudaGraphAddKernelNode(&n, (cudaGraph_t)0x100001, NULL, 0, &k),
               cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  k.func = NULL;
  cr_expect_eq(cudaGraphAddKernelNode(&n, (cudaGraph_t)0x100001, NULL, 0, &k),
               cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGraphAddKernelNode(&n, (cudaGraph_t)0x100001, NULL, 0, NULL),
               cudaErrorInvalidValue);
  cr_expect_eq(adds, 0);

  k.func = (void *)FOREIGN_KERNEL;
  cr_expect_eq(cudaGraphAddKernelNode(&n, (cudaGraph_t)0x100001, NULL, 0, &k), cudaSuccess);
  cr_expect_eq(adds, 1);
  cr_expect_eq(seen_kernel.kern, FOREIGN_KERNEL);
  cr_expect_eq(seen_kernel.func, NULL);
}

static CUresult fake_graph_launch(CUgraphExec e, CUstream s) {
  (void)e;
  (void)s;
  adds++;
  return CUDA_SUCCESS;
}
static CUresult fake_stream_create(CUstream *s, unsigned flags) {
  (void)flags;
  *s = (CUstream)(uintptr_t)0x105000;
  return CUDA_SUCCESS;
}
static CUresult fake_stream_destroy(CUstream s) {
  (void)s;
  return CUDA_SUCCESS;
}
static CUresult fake_event_destroy(CUevent e) {
  (void)e;
  return CUDA_SUCCESS;
}
static CUresult fake_add_event_node(CUgraphNode *n, CUgraph g, const CUgraphNode *deps, size_t nd,
                                    CUevent e) {
  (void)g;
  (void)deps;
  (void)nd;
  (void)e;
  adds++;
  *n = (CUgraphNode)(uintptr_t)0x100902;
  return CUDA_SUCCESS;
}

/* Graph calls naming a stream or event destroyed through the runtime are
 * refused before the driver, which would crash on them. */
Test(graph, destroyed_streams_and_events_are_refused) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuGraphLaunch = fake_graph_launch;
  fake.cuStreamCreate = fake_stream_create;
  fake.cuStreamDestroy = fake_stream_destroy;
  fake.cuEventDestroy = fake_event_destroy;
  fake.cuGraphAddEventRecordNode = fake_add_event_node;
  fake.cuGraphAddEventWaitNode = fake_add_event_node;
  cudaev__driver_install(&fake, 13000);
  cudaStream_t s;
  cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
  cr_expect_eq(cudaGraphLaunch((cudaGraphExec_t)0x10000e, s), cudaSuccess);
  cr_assert_eq(cudaStreamDestroy(s), cudaSuccess);
  cr_expect_eq(cudaGraphLaunch((cudaGraphExec_t)0x10000e, s), cudaErrorInvalidResourceHandle);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  cr_expect_eq(adds, 1);
  cudaEvent_t e = (cudaEvent_t)(uintptr_t)0x100e00;
  cudaGraphNode_t n;
  cr_expect_eq(cudaGraphAddEventRecordNode(&n, (cudaGraph_t)0x100001, NULL, 0, e), cudaSuccess);
  cr_assert_eq(cudaEventDestroy(e), cudaSuccess);
  /* an event node only stores its event: NVIDIA's runtime adds one with a
   * destroyed event (cudaSuccess), and so does ours */
  cr_expect_eq(cudaGraphAddEventRecordNode(&n, (cudaGraph_t)0x100001, NULL, 0, e), cudaSuccess);
  cr_expect_eq(cudaGraphAddEventWaitNode(&n, (cudaGraph_t)0x100001, NULL, 0, e), cudaSuccess);
  cr_expect_eq(adds, 4);
  /* a graph where no graph can be never reaches the driver */
  cr_expect_eq(cudaGraphAddEventWaitNode(&n, (cudaGraph_t)0x1234, NULL, 0, e),
               cudaErrorInvalidValue);
  cr_expect_eq(adds, 4);
}

Test(graph, instantiate_with_params_ptsz_maps_the_upload_stream) {
  install();
  cudaGraphInstantiateParams ip;
  memset(&ip, 0, sizeof ip);
  ip.flags = cudaGraphInstantiateFlagUpload;
  ip.result_out = cudaGraphInstantiateError;
  cudaGraphExec_t e;
  cr_assert_eq(cudaGraphInstantiateWithParams_ptsz(&e, (cudaGraph_t)0x100001, &ip), cudaSuccess);
  cr_expect_eq(seen_inst.hUploadStream, CU_STREAM_PER_THREAD);
  cr_expect_eq(seen_inst.flags, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
  cr_expect_eq(ip.result_out, cudaGraphInstantiateSuccess);
  cr_assert_eq(cudaGraphInstantiateWithParams(&e, (cudaGraph_t)0x100001, &ip), cudaSuccess);
  cr_expect_eq(seen_inst.hUploadStream, NULL);
  cr_expect_eq(cudaGraphInstantiateWithParams(&e, (cudaGraph_t)0x100001, NULL),
               cudaErrorInvalidValue);
}

/* The driver takes every kind of object from one heap: a graph a capture
 * makes may land at the address of an event or stream destroyed before.
 * That graph is live (PyTorch's capture_end met cudaErrorInvalidValue from
 * cudaGraphGetNodes / cudaGraphInstantiate when it did), while the
 * destroyed event stays refused as an event. */
static uintptr_t reused; /* the address the driver hands out again */
static CUresult fake_end_capture(CUstream s, CUgraph *g) {
  (void)s;
  *g = (CUgraph)reused;
  return CUDA_SUCCESS;
}
static CUresult fake_get_nodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
  (void)g;
  (void)nodes;
  *n = 3;
  return CUDA_SUCCESS;
}
static CUresult fake_instantiate_flags(CUgraphExec *e, CUgraph g, unsigned long long flags) {
  (void)g;
  (void)flags;
  *e = (CUgraphExec)reused;
  return CUDA_SUCCESS;
}
static CUresult fake_node_type(CUgraphNode n, CUgraphNodeType *t) {
  (void)n;
  *t = CU_GRAPH_NODE_TYPE_EMPTY;
  return CUDA_SUCCESS;
}
static CUresult fake_event_query(CUevent e) {
  (void)e;
  return CUDA_SUCCESS;
}

Test(graph, a_capture_graph_at_a_destroyed_events_address_is_live) {
  static struct cudaev_driver fake;
  fake_driver_base(&fake);
  fake.cuStreamCreate = fake_stream_create;
  fake.cuStreamDestroy = fake_stream_destroy;
  fake.cuEventDestroy = fake_event_destroy;
  fake.cuEventQuery = fake_event_query;
  fake.cuStreamEndCapture = fake_end_capture;
  fake.cuGraphGetNodes = fake_get_nodes;
  fake.cuGraphInstantiateWithFlags = fake_instantiate_flags;
  fake.cuGraphLaunch = fake_graph_launch;
  fake.cuGraphNodeGetType = fake_node_type;
  cudaev__driver_install(&fake, 13000);
  cudaStream_t s;
  cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
  reused = 0x100e40;
  cudaEvent_t e = (cudaEvent_t)reused;
  cr_assert_eq(cudaEventDestroy(e), cudaSuccess);
  cr_expect_eq(cudaEventQuery(e), cudaErrorInvalidResourceHandle, "the event stays destroyed");
  cudaGraph_t g = NULL;
  cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
  cr_assert_eq((uintptr_t)g, reused);
  size_t n = 0;
  cr_expect_eq(cudaGraphGetNodes(g, NULL, &n), cudaSuccess, "a graph is no destroyed event");
  cr_expect_eq(n, 3);
  cudaGraphExec_t x = NULL;
  cr_expect_eq(cudaGraphInstantiateWithFlags(&x, g, 0), cudaSuccess);
  /* The executable graph lands there too, and launches. */
  cr_expect_eq(cudaGraphLaunch(x, s), cudaSuccess);
  /* A stream destroyed at an address, then a node made there: the same. */
  cr_assert_eq(cudaStreamDestroy(s), cudaSuccess);
  enum cudaGraphNodeType type = cudaGraphNodeTypeCount;
  cr_expect_eq(cudaGraphNodeGetType((cudaGraphNode_t)s, &type), cudaSuccess,
               "a node is no destroyed stream");
  cr_expect_eq(type, cudaGraphNodeTypeEmpty);
  cr_expect_eq(cudaStreamQuery(s), cudaErrorInvalidResourceHandle, "the stream stays destroyed");
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}
