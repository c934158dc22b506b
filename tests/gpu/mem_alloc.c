/* gpu suite, Memory Management allocations and Unified Addressing: device,
 * pinned, mapped, write-combined, registered (with each flag) and managed
 * memory; their flags, device pointers and pointer attributes; and bad
 * input for each call (NULL, size 0, bad flags, double free, freeing the
 * wrong kind, double registration). Prints no addresses: pointers are
 * described relative to the allocation they came from. */
#include "common.h"

#include <stdint.h>
#include <unistd.h>

static const char *rel(const void *p, const void *base) {
  if (p == NULL) return "null";
  if (p == base) return "same";
  return "other";
}

static void attrs(const char *what, const void *p) {
  struct cudaPointerAttributes a;
  memset(&a, 0x5a, sizeof a);
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  cudaError_t l = cudaGetLastError();
  if (e != cudaSuccess) {
    printf("attrs %-22s -> %s (last %s)\n", what, cudaGetErrorName(e), cudaGetErrorName(l));
    return;
  }
  printf("attrs %-22s -> type=%d device=%d devicePointer=%s hostPointer=%s (last %s)\n", what,
         (int)a.type, a.device, rel(a.devicePointer, p), rel(a.hostPointer, p),
         cudaGetErrorName(l));
}

int main(void) {
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  printf("devices>0: %d\n", n > 0);

  /* cudaMalloc / cudaFree */
  void *d = (void *)1;
  TC(cudaFree(NULL));
  TC(cudaMalloc(&d, 0));
  printf("cudaMalloc(0) pointer: %s\n", d == NULL ? "null" : "non-null");
  TC(cudaMalloc(NULL, 16));
  TC(cudaMalloc(&d, (size_t)1 << 62));
  TC(cudaMalloc(&d, 1000));
  attrs("device", d);
  attrs("device+17", (char *)d + 17);
  TC(cudaFree(d));
  attrs("device freed", d);
  TC(cudaFree(d));
  int on_stack = 0;
  TC(cudaFree(&on_stack));
  char *heap = malloc(4096);
  TC(cudaFree(heap));
  attrs("malloc", heap);
  attrs("stack", &on_stack);
  attrs("NULL", NULL);
  TC(cudaPointerGetAttributes(NULL, heap));

  size_t fr = 0, tot = 0;
  TC(cudaMemGetInfo(&fr, &tot));
  printf("meminfo free<=total: %d total>0: %d\n", fr <= tot, tot > 0);
  TC(cudaMemGetInfo(NULL, &tot));
  TC(cudaMemGetInfo(&fr, NULL));

  /* pinned host memory */
  void *h = (void *)1;
  unsigned fl = 0xdead;
  TC(cudaMallocHost(&h, 0));
  printf("cudaMallocHost(0) pointer: %s\n", h == NULL ? "null" : "non-null");
  TC(cudaMallocHost(NULL, 64));
  TC(cudaMallocHost(&h, 4096));
  attrs("cudaMallocHost", h);
  attrs("cudaMallocHost+5", (char *)h + 5);
  TC(cudaHostGetFlags(&fl, h));
  printf("flags cudaMallocHost: 0x%x\n", fl);
  void *hd = NULL;
  TC(cudaHostGetDevicePointer(&hd, h, 0));
  printf("device pointer of cudaMallocHost: %s\n", rel(hd, h));
  TC(cudaHostGetDevicePointer(&hd, h, 1));
  TC(cudaHostGetDevicePointer(NULL, h, 0));
  TC(cudaFree(h));
  TC(cudaFreeHost(h));
  TC(cudaFreeHost(h));
  TC(cudaFreeHost(NULL));

  static const unsigned alloc_flags[] = {
      cudaHostAllocDefault,
      cudaHostAllocPortable,
      cudaHostAllocMapped,
      cudaHostAllocWriteCombined,
      cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined,
      8,
      0x10,
      0x80000000u};
  for (size_t i = 0; i < sizeof alloc_flags / sizeof alloc_flags[0]; i++) {
    h = NULL;
    cudaError_t e = cudaHostAlloc(&h, 1000, alloc_flags[i]);
    printf("cudaHostAlloc flags 0x%x -> %s (last %s)\n", alloc_flags[i], cudaGetErrorName(e),
           cudaGetErrorName(cudaGetLastError()));
    if (e == cudaSuccess) {
      fl = 0xdead;
      TC(cudaHostGetFlags(&fl, h));
      printf("  flags back 0x%x\n", fl);
      hd = NULL;
      TC(cudaHostGetDevicePointer(&hd, h, 0));
      printf("  device pointer: %s\n", rel(hd, h));
      attrs("  hostalloc", h);
      TC(cudaFreeHost(h));
    }
  }
  TC(cudaHostAlloc(NULL, 10, 0));
  TC(cudaHostAlloc(&h, 0, 0));
  TC(cudaHostGetFlags(NULL, heap));
  TC(cudaHostGetFlags(&fl, heap));

  /* registered host memory */
  long pg = sysconf(_SC_PAGESIZE);
  char *buf = NULL;
  if (posix_memalign((void **)&buf, (size_t)pg, (size_t)pg * 4) != 0) return 3;
  static const unsigned reg_flags[] = {cudaHostRegisterDefault,
                                       cudaHostRegisterPortable,
                                       cudaHostRegisterMapped,
                                       cudaHostRegisterReadOnly,
                                       cudaHostRegisterPortable | cudaHostRegisterMapped,
                                       0x10,
                                       0x100};
  for (size_t i = 0; i < sizeof reg_flags / sizeof reg_flags[0]; i++) {
    cudaError_t e = cudaHostRegister(buf, (size_t)pg * 4, reg_flags[i]);
    printf("cudaHostRegister flags 0x%x -> %s (last %s)\n", reg_flags[i], cudaGetErrorName(e),
           cudaGetErrorName(cudaGetLastError()));
    if (e == cudaSuccess) {
      attrs("  registered", buf);
      attrs("  registered+100", buf + 100);
      hd = NULL;
      TC(cudaHostGetDevicePointer(&hd, buf, 0));
      printf("  device pointer: %s\n", rel(hd, buf));
      TC(cudaHostRegister(buf, (size_t)pg * 4, reg_flags[i]));
      TC(cudaHostRegister(buf + pg, (size_t)pg, 0));
      TC(cudaHostUnregister(buf));
    }
  }
  /* IoMemory on ordinary memory: the driver's answer, whatever it is. */
  TC(cudaHostRegister(buf, (size_t)pg, cudaHostRegisterIoMemory));
  cudaHostUnregister(buf);
  cudaGetLastError();
  TC(cudaHostUnregister(buf));
  TC(cudaHostUnregister(NULL));
  TC(cudaHostRegister(NULL, 4096, 0));
  TC(cudaHostRegister(buf, 0, 0));
  TC(cudaHostRegister(buf + 1, 100, 0));
  cudaHostUnregister(buf + 1);
  cudaGetLastError();
  TC(cudaHostGetDevicePointer(&hd, heap, 0));
  free(buf);

  /* managed memory */
  void *m = (void *)1;
  TC(cudaMallocManaged(&m, 0, cudaMemAttachGlobal));
  TC(cudaMallocManaged(NULL, 64, cudaMemAttachGlobal));
  TC(cudaMallocManaged(&m, 64, 0));
  TC(cudaMallocManaged(&m, 64, cudaMemAttachSingle));
  TC(cudaMallocManaged(&m, 64, 3));
  TC(cudaMallocManaged(&m, 4096, cudaMemAttachHost));
  attrs("managed host", m);
  TC(cudaFree(m));
  TC(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
  attrs("managed global", m);
  attrs("managed+4095", (char *)m + 4095);
  memset(m, 7, 4096);
  TC(cudaFreeHost(m));
  TC(cudaFree(m));
  TC(cudaFree(m));

  /* every allocation kind freed by the wrong function */
  TC(cudaMalloc(&d, 64));
  TC(cudaFreeHost(d));
  TC(cudaHostUnregister(d));
  TC(cudaFree(d));

  free(heap);
  TC(cudaDeviceSynchronize());
  return 0;
}
