/* A fat binary's lazy library load racing its unregistration, as a plain
 * program so it also runs under ThreadSanitizer (suite tsan): one thread
 * loads the library (cudaev__fatbin_library, what the first launch does)
 * while another unregisters the fat binary. Whichever wins, every library
 * the fake driver loaded must be unloaded exactly once: a library
 * published after the fat binary was retired would never be. Exits 0 when
 * loads and unloads balance. */
#include "../check.h"
#include "fake_driver.h"
#include "nvcc_abi.h"
#include "register.h"

#include <pthread.h>
#include <sched.h>

struct wrapper {
  int magic, version;
  const unsigned long long *data;
  void *extra;
};

enum { ROUNDS = 2000 };
static const unsigned long long image[4] = {1};
static struct wrapper wrap = {0x466243B1, 1, image, NULL};
static atomic_int loads, unloads, next_lib = 1;

/* Yields a little inside the load, so that the unregistration often lands
 * between the fat binary's "dead" check and the library's publication. */
static CUresult fake_load(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv,
                          unsigned njo, CUlibraryOption *lo, void **lv, unsigned nlo) {
  (void)code, (void)jo, (void)jv, (void)njo, (void)lo, (void)lv, (void)nlo;
  for (int i = 0; i < 3; i++) sched_yield();
  atomic_fetch_add(&loads, 1);
  *lib = (CUlibrary)(uintptr_t)(0x10000 + 16 * atomic_fetch_add(&next_lib, 1));
  return CUDA_SUCCESS;
}
static CUresult fake_unload(CUlibrary lib) {
  (void)lib;
  atomic_fetch_add(&unloads, 1);
  return CUDA_SUCCESS;
}

static pthread_barrier_t start;
static void **handle;

static void *loader(void *arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  CUlibrary lib;
  cudaev__fatbin_library((struct cudaev__fatbin *)handle, &lib);
  return NULL;
}

int main(void) {
  static struct cudaev_driver t;
  fake_driver_base(&t);
  t.cuLibraryLoadData = fake_load;
  t.cuLibraryUnload = fake_unload;
  cudaev__driver_install(&t, 13000);
  pthread_barrier_init(&start, NULL, 2);
  for (int i = 0; i < ROUNDS; i++) {
    handle = __cudaRegisterFatBinary(&wrap);
    pthread_t th;
    pthread_create(&th, NULL, loader, NULL);
    pthread_barrier_wait(&start);
    __cudaUnregisterFatBinary(handle);
    pthread_join(th, NULL);
  }
  int l = atomic_load(&loads), u = atomic_load(&unloads);
  printf("register_race: %d loads, %d unloads in %d rounds\n", l, u, ROUNDS);
  CHECK(l == u);
  return failures == 0 ? 0 : 1;
}
