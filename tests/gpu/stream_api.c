/* Stream Management against NVIDIA's runtime: create/destroy with flags and
 * priorities, getters on real, NULL, legacy and per-thread streams,
 * attributes, capture queries on idle streams, bad input. */
#include "common.h"

int main(void) {
  cudaStream_t s = NULL, nb = NULL, hi = NULL, lo = NULL, dead = NULL;
  unsigned flags = 99;
  int prio = 99, least = 0, greatest = 0, dev = -1;
  unsigned long long id = 0, id2 = 0;

  CHECK(cudaSetDevice(0));
  T(cudaStreamCreate(&s));
  TC(cudaStreamCreate(NULL));
  T(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  TC(cudaStreamCreateWithFlags(&dead, 2));
  TC(cudaStreamCreateWithFlags(&dead, 0xff));
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  /* Out-of-range priorities are clamped. */
  T(cudaStreamCreateWithPriority(&hi, cudaStreamDefault, greatest - 100));
  T(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, least + 100));
  T(cudaStreamGetPriority(hi, &prio));
  printf("high clamped to greatest: %d\n", prio == greatest);
  T(cudaStreamGetPriority(lo, &prio));
  printf("low clamped to least: %d\n", prio == least);
  TC(cudaStreamGetPriority(hi, NULL));

  T(cudaStreamGetFlags(s, &flags));
  printf("flags(s) = %u\n", flags);
  T(cudaStreamGetFlags(nb, &flags));
  printf("flags(nb) = %u\n", flags);
  T(cudaStreamGetFlags(lo, &flags));
  printf("flags(lo) = %u\n", flags);
  flags = 99;
  T(cudaStreamGetFlags(NULL, &flags));
  printf("flags(NULL) = %u\n", flags);
  flags = 99;
  T(cudaStreamGetFlags(cudaStreamLegacy, &flags));
  printf("flags(legacy) = %u\n", flags);
  flags = 99;
  T(cudaStreamGetFlags(cudaStreamPerThread, &flags));
  printf("flags(per-thread) = %u\n", flags);
  TC(cudaStreamGetFlags(s, NULL));
  prio = 99;
  T(cudaStreamGetPriority(NULL, &prio));
  printf("prio(NULL) = %d\n", prio);

  T(cudaStreamGetId(s, &id));
  T(cudaStreamGetId(nb, &id2));
  printf("ids differ: %d\n", id != id2);
  T(cudaStreamGetId(NULL, &id));
  T(cudaStreamGetId(cudaStreamPerThread, &id2));
  printf("legacy and per-thread ids differ: %d\n", id != id2);
  TC(cudaStreamGetId(s, NULL));
  T(cudaStreamGetDevice(s, &dev));
  printf("device(s) = %d\n", dev);
  T(cudaStreamGetDevice(NULL, &dev));
  printf("device(NULL) = %d\n", dev);
  /* NVIDIA's runtime crashes on a NULL device (driver 580). */
  TREFUSE(cudaStreamGetDevice(s, NULL));

  T(cudaStreamQuery(s));
  T(cudaStreamQuery(NULL));
  T(cudaStreamQuery(cudaStreamLegacy));
  T(cudaStreamQuery(cudaStreamPerThread));
  T(cudaStreamSynchronize(s));
  T(cudaStreamSynchronize(NULL));
  T(cudaStreamSynchronize(cudaStreamPerThread));

  /* attributes */
  cudaStreamAttrValue v, out;
  memset(&v, 0, sizeof v);
  memset(&out, 0, sizeof out);
  v.syncPolicy = cudaSyncPolicyYield;
  T(cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &v));
  T(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &out));
  printf("syncPolicy = %d\n", (int)out.syncPolicy);
  void *buf = NULL;
  CHECK(cudaMalloc(&buf, 1 << 20));
  memset(&v, 0, sizeof v);
  v.accessPolicyWindow.base_ptr = buf;
  v.accessPolicyWindow.num_bytes = 1 << 20;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  T(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
  memset(&out, 0, sizeof out);
  T(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &out));
  printf("apw: same base %d bytes %zu hit %.2f props %d %d\n",
         out.accessPolicyWindow.base_ptr == buf, out.accessPolicyWindow.num_bytes,
         out.accessPolicyWindow.hitRatio, (int)out.accessPolicyWindow.hitProp,
         (int)out.accessPolicyWindow.missProp);
  T(cudaStreamGetAttribute(hi, cudaLaunchAttributePriority, &out));
  printf("priority attr is greatest: %d\n", out.priority == greatest);
  T(cudaStreamGetAttribute(s, cudaLaunchAttributeMemSyncDomain, &out));
  printf("mem sync domain = %d\n", (int)out.memSyncDomain);
  TC(cudaStreamGetAttribute(s, cudaLaunchAttributeCooperative, &out));
  TC(cudaStreamGetAttribute(s, (cudaStreamAttrID)1000, &out));
  /* NULL values crash NVIDIA's runtime (measured on an H200). */
  TREFUSE(cudaStreamGetAttribute(s, cudaStreamAttributeSynchronizationPolicy, NULL));
  TREFUSE(cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, NULL));
  T(cudaStreamCopyAttributes(nb, s));
  memset(&out, 0, sizeof out);
  T(cudaStreamGetAttribute(nb, cudaStreamAttributeSynchronizationPolicy, &out));
  printf("copied syncPolicy = %d\n", (int)out.syncPolicy);
  T(cudaCtxResetPersistingL2Cache());

  /* capture queries on idle streams */
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
  T(cudaStreamIsCapturing(s, &st));
  printf("capturing(s) = %d\n", (int)st);
  st = cudaStreamCaptureStatusActive;
  T(cudaStreamIsCapturing(NULL, &st));
  printf("capturing(NULL) = %d\n", (int)st);
  TREFUSE(cudaStreamIsCapturing(s, NULL));
  st = cudaStreamCaptureStatusActive;
  T(cudaStreamGetCaptureInfo(s, &st, NULL, NULL, NULL, NULL, NULL));
  printf("capture info(s) = %d\n", (int)st);
  TREFUSE(cudaStreamGetCaptureInfo(s, NULL, NULL, NULL, NULL, NULL, NULL));
  TC(cudaStreamBeginCapture(NULL, cudaStreamCaptureModeGlobal));
  TC(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal));
  TC(cudaStreamBeginCapture(s, (enum cudaStreamCaptureMode)7));
  cudaGraph_t g = NULL;
  TC(cudaStreamEndCapture(s, &g));
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  T(cudaThreadExchangeStreamCaptureMode(&mode));
  printf("previous mode = %d\n", (int)mode);
  T(cudaThreadExchangeStreamCaptureMode(&mode));
  printf("restored from = %d\n", (int)mode);
  /* The driver dereferences a NULL mode. */
  TREFUSE(cudaThreadExchangeStreamCaptureMode(NULL));

  /* managed memory attach */
  void *m = NULL;
  CHECK(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
  T(cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachSingle));
  T(cudaStreamSynchronize(s));
  T(cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachGlobal));
  TC(cudaStreamAttachMemAsync(s, m, 0, 0x10));
  T(cudaStreamSynchronize(s));
  CHECK(cudaFree(m));

  /* destroyed and invalid handles */
  T(cudaStreamCreate(&dead));
  T(cudaStreamDestroy(dead));
  TC(cudaStreamDestroy(NULL));
  TC(cudaStreamDestroy(cudaStreamLegacy));
  TC(cudaStreamDestroy(cudaStreamPerThread));

  T(cudaStreamDestroy(s));
  T(cudaStreamDestroy(nb));
  T(cudaStreamDestroy(hi));
  T(cudaStreamDestroy(lo));
  CHECK(cudaFree(buf));
  TC(cudaGetLastError());
  /* A destroyed stream: the driver does not survive it, ours refuses it. */
  TREFUSE(cudaStreamQuery(dead));
  TREFUSE(cudaStreamSynchronize(dead));
  TREFUSE(cudaStreamGetFlags(dead, &flags));
  TREFUSE(cudaStreamDestroy(dead));
  TC(cudaGetLastError());
  return 0;
}
