/* Graph Management on a fake driver: the cudaMemcpy3DParms -> CUDA_MEMCPY3D
 * conversion of memcpy nodes, kinds and their checks, kernel nodes with an
 * unknown function, instantiate parameters with the per-thread stream. */
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
  *n = (CUgraphNode)(uintptr_t)0x900;
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
  *e = (CUgraphExec)(uintptr_t)0xe;
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
  cr_assert_eq(cudaGraphAddMemcpyNode1D(&n, (cudaGraph_t)0x1, NULL, 0, (void *)0xd000, host, 64,
                                        cudaMemcpyHostToDevice),
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
  cr_assert_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x1, NULL, 0, &p), cudaSuccess);
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
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x1, NULL, 0, &p),
               cudaErrorInvalidMemcpyDirection);
  p.kind = cudaMemcpyDeviceToDevice;
  p.srcArray = (cudaArray_t)0x3000; /* both an array and a pointer */
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x1, NULL, 0, &p), cudaErrorInvalidValue);
  p.srcArray = NULL;
  p.dstPtr.ptr = NULL; /* neither */
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x1, NULL, 0, &p), cudaErrorInvalidValue);
  cr_expect_eq(cudaGraphAddMemcpyNode(&n, (cudaGraph_t)0x1, NULL, 0, NULL), cudaErrorInvalidValue);
  cr_expect_eq(adds, 0);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

static void not_a_kernel(void) {}

Test(graph, kernel_node_with_an_unregistered_function) {
  install();
  struct cudaKernelNodeParams k;
  memset(&k, 0, sizeof k);
  k.func = (void *)not_a_kernel;
  k.gridDim = (dim3){1, 1, 1};
  k.blockDim = (dim3){1, 1, 1};
  cudaGraphNode_t n;
  cr_expect_eq(cudaGraphAddKernelNode(&n, (cudaGraph_t)0x1, NULL, 0, &k),
               cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cr_expect_eq(cudaGraphAddKernelNode(&n, (cudaGraph_t)0x1, NULL, 0, NULL), cudaErrorInvalidValue);
}

Test(graph, instantiate_with_params_ptsz_maps_the_upload_stream) {
  install();
  cudaGraphInstantiateParams ip;
  memset(&ip, 0, sizeof ip);
  ip.flags = cudaGraphInstantiateFlagUpload;
  ip.result_out = cudaGraphInstantiateError;
  cudaGraphExec_t e;
  cr_assert_eq(cudaGraphInstantiateWithParams_ptsz(&e, (cudaGraph_t)0x1, &ip), cudaSuccess);
  cr_expect_eq(seen_inst.hUploadStream, CU_STREAM_PER_THREAD);
  cr_expect_eq(seen_inst.flags, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
  cr_expect_eq(ip.result_out, cudaGraphInstantiateSuccess);
  cr_assert_eq(cudaGraphInstantiateWithParams(&e, (cudaGraph_t)0x1, &ip), cudaSuccess);
  cr_expect_eq(seen_inst.hUploadStream, NULL);
  cr_expect_eq(cudaGraphInstantiateWithParams(&e, (cudaGraph_t)0x1, NULL), cudaErrorInvalidValue);
}
