/* The registry's lock-free lookups under concurrency, as a plain program so
 * it also runs under ThreadSanitizer (suite tsan; Criterion cannot start
 * there): readers probe a registered stub while a writer registers 4000
 * kernels (growing the map several times) and unregisters them. Exits 0
 * when every lookup found the right record. */
#include "fake_driver.h"
#include "nvcc_abi.h"
#include "register.h"

#include <pthread.h>
#include <stdio.h>

struct wrapper {
  int magic, version;
  const unsigned long long *data;
  void *extra;
};

enum { FATBINS = 20, PER = 200, READERS = 3 };
static const unsigned long long image[4] = {1};
static struct wrapper wrap = {0x466243B1, 1, image, NULL};
static char stub, stubs[FATBINS][PER];
static atomic_bool done;
static atomic_int misses;

static void *reader(void *arg) {
  (void)arg;
  while (!atomic_load(&done)) {
    struct cudaev__kfunc *f = cudaev__kfunc_find(&stub);
    if (f == NULL || f->magic != CUDAEV_KFUNC_MAGIC || strcmp(f->name, "k") != 0)
      atomic_fetch_add(&misses, 1);
  }
  return NULL;
}

int main(void) {
  static struct cudaev_driver t;
  fake_driver_base(&t);
  cudaev__driver_install(&t, 13000);
  void **h0 = __cudaRegisterFatBinary(&wrap);
  __cudaRegisterFunction(h0, &stub, "k", "k", -1, NULL, NULL, NULL, NULL, NULL);
  pthread_t r[READERS];
  for (int i = 0; i < READERS; i++) pthread_create(&r[i], NULL, reader, NULL);
  void **h[FATBINS];
  for (int i = 0; i < FATBINS; i++) {
    h[i] = __cudaRegisterFatBinary(&wrap);
    for (int j = 0; j < PER; j++)
      __cudaRegisterFunction(h[i], &stubs[i][j], "x", "x", -1, NULL, NULL, NULL, NULL, NULL);
  }
  for (int i = 0; i < FATBINS; i++) __cudaUnregisterFatBinary(h[i]);
  atomic_store(&done, true);
  for (int i = 0; i < READERS; i++) pthread_join(r[i], NULL);
  int bad = atomic_load(&misses);
  if (cudaev__kfunc_find(&stubs[5][5]) != NULL) bad++;
  printf("register_threads: %d bad lookups\n", bad);
  return bad == 0 ? 0 : 1;
}
