/* Pinned host memory as NVIDIA's runtime hands it out, compared with ours,
 * which serves it from a pool (src/hostpool.h): flags, device pointers and
 * pointer attributes on any byte of an allocation, cudaHostRegister over
 * it, frees of interior, freed and foreign pointers, data through copies
 * over many reuse cycles, and cudaDeviceReset with allocations outstanding. */
#include <stdint.h>

#include "common.h"

static const size_t sizes[] = {1, 1000, 4096, 100000, (size_t)1 << 20, (size_t)64 << 20};
static const unsigned flag_sets[] = {
    cudaHostAllocDefault,
    cudaHostAllocPortable,
    cudaHostAllocMapped,
    cudaHostAllocWriteCombined,
    cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined,
};

static const char *same(const void *a, const void *b) { return a == b ? "same" : "other"; }

/* Flags, device pointer and attributes at the first, a middle and the last
 * byte. */
static void probe(const char *what, char *h, size_t size) {
  size_t at[3] = {0, size / 2, size - 1};
  for (int i = 0; i < 3; i++) {
    unsigned fl = 0;
    cudaError_t e = cudaHostGetFlags(&fl, h + at[i]);
    void *d = NULL;
    cudaError_t e2 = cudaHostGetDevicePointer(&d, h + at[i], 0);
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e3 = cudaPointerGetAttributes(&a, h + at[i]);
    printf("%s byte %d: flags %s 0x%x; devptr %s %s; attrs %s type=%d device=%d host=%s\n", what, i,
           cudaGetErrorName(e), fl, cudaGetErrorName(e2), same(d, h + at[i]), cudaGetErrorName(e3),
           (int)a.type, a.device, same(a.hostPointer, h + at[i]));
    cudaGetLastError();
  }
}

static void semantics(void) {
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    for (size_t fi = 0; fi < sizeof flag_sets / sizeof flag_sets[0]; fi++) {
      char *h = NULL;
      cudaError_t e = cudaHostAlloc((void **)&h, sizes[si], flag_sets[fi]);
      printf("cudaHostAlloc(%zu, 0x%x) -> %s, page-aligned %d\n", sizes[si], flag_sets[fi],
             cudaGetErrorName(e), h != NULL && ((uintptr_t)h & 4095) == 0);
      if (e != cudaSuccess) continue;
      char what[64];
      snprintf(what, sizeof what, "  %zu/0x%x", sizes[si], flag_sets[fi]);
      probe(what, h, sizes[si]);
      if (sizes[si] >= 8192) {
        /* Registering pinned memory again, whole and a page inside. */
        TC(cudaHostRegister(h, sizes[si], cudaHostRegisterDefault));
        TC(cudaHostRegister(h + 4096, 4096, cudaHostRegisterDefault));
        TC(cudaHostUnregister(h));
      }
      if (sizes[si] > 1) TC(cudaFreeHost(h + 1));
      TC(cudaFreeHost(h));
      TC(cudaFreeHost(h));
    }
  }
  int on_stack;
  TC(cudaFreeHost(&on_stack));
  char *heap = malloc(64);
  TC(cudaFreeHost(heap));
  free(heap);
}

/* Data through pooled buffers: each cycle fills a buffer, copies it to the
 * device and back into a second pooled buffer, checks it, and frees both. */
static void data_cycles(void) {
  enum { CYCLES = 200 };
  size_t n = (size_t)1 << 20;
  char *d = NULL;
  if (cudaMalloc((void **)&d, n) != cudaSuccess) {
    printf("cudaMalloc failed\n");
    return;
  }
  int bad = 0, errors = 0;
  for (int c = 0; c < CYCLES; c++) {
    size_t len = 4096 + (size_t)(c * 7919) % (n - 4096);
    unsigned char *a = NULL, *b = NULL;
    if (cudaMallocHost((void **)&a, len) != cudaSuccess ||
        cudaMallocHost((void **)&b, len) != cudaSuccess) {
      errors++;
      break;
    }
    for (size_t i = 0; i < len; i++) a[i] = (unsigned char)(i * 31 + c);
    memset(b, 0, len);
    if (cudaMemcpyAsync(d, a, len, cudaMemcpyHostToDevice, 0) != cudaSuccess ||
        cudaMemcpyAsync(b, d, len, cudaMemcpyDeviceToHost, 0) != cudaSuccess ||
        cudaStreamSynchronize(0) != cudaSuccess)
      errors++;
    for (size_t i = 0; i < len; i++)
      if (b[i] != (unsigned char)(i * 31 + c)) {
        bad++;
        break;
      }
    if (cudaFreeHost(a) != cudaSuccess || cudaFreeHost(b) != cudaSuccess) errors++;
  }
  printf("%d cycles through pooled buffers: %d wrong, %d errors\n", CYCLES, bad, errors);
  TC(cudaFree(d));
}

/* cudaDeviceReset frees the device's pinned memory: allocations from
 * before it are gone, and new ones work. */
static void reset(void) {
  char *old = NULL;
  TC(cudaMallocHost((void **)&old, 4096));
  TC(cudaDeviceReset());
  char *h = NULL;
  TC(cudaMallocHost((void **)&h, 4096));
  unsigned fl = 0;
  TC(cudaHostGetFlags(&fl, h));
  printf("after reset: flags 0x%x\n", fl);
  char *d = NULL;
  TC(cudaMalloc((void **)&d, 4096));
  memset(h, 7, 4096);
  TC(cudaMemcpy(d, h, 4096, cudaMemcpyHostToDevice));
  memset(h, 0, 4096);
  TC(cudaMemcpy(h, d, 4096, cudaMemcpyDeviceToHost));
  printf("after reset: data back %d\n", h[0] == 7 && h[4095] == 7);
  TC(cudaFree(d));
  TC(cudaFreeHost(h));
  TC(cudaFreeHost(old));
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("SKIP: no device\n");
    return 77;
  }
  printf("== semantics\n");
  semantics();
  printf("== data\n");
  data_cycles();
  printf("== reset\n");
  reset();
  return 0;
}
