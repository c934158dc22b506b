/* Every file descriptor the library opens is close-on-exec: a program uses
 * the library on the fake driver (loops in every run mode with GPU work
 * pending, the pinned pool, a timer, IPC handles), then execs itself with
 * "--list", which reports the descriptors it inherited. Only those the
 * program had before it touched the library (0, 1, 2 and whatever the
 * test runner left open) may be there. A plain program (Criterion forks
 * each test itself) in suite unit only: under TSan, fork() runs the pinned
 * pool's jemalloc prefork handler, whose 64+ locks TSan cannot track. */
#include "../check.h"
#include "cudaev.h"
#include "fake_driver.h"

#include <dirent.h>
#include <ev.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAXFD = 1024 };

/* The descriptors open now, except the one reading the list. */
static int open_fds(bool *open) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd == dirfd(d) || fd < 0 || fd >= MAXFD) continue;
    open[fd] = true;
    n++;
  }
  closedir(d);
  return n;
}

static CUresult write32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned flags) {
  (void)s, (void)flags;
  __atomic_store_n((uint32_t *)(uintptr_t)addr, v, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}
static CUresult ok(void) { return CUDA_SUCCESS; }
static uintptr_t next_handle = 0x10000;
static CUresult new_handle(void **out) {
  *out = (void *)(next_handle += 0x100);
  return CUDA_SUCCESS;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    static bool open[MAXFD];
    if (open_fds(open) < 0) return 2;
    for (int fd = 0; fd < MAXFD; fd++)
      if (open[fd]) printf("%d\n", fd);
    return 0;
  }
  static bool before[MAXFD];
  if (open_fds(before) < 0) return 2;

  static struct cudaev_driver t;
  fake_driver_loop(&t);
  /* Any argument list: every driver function returns CUresult and may
   * ignore its arguments (as src/driver/driver.c's not_supported). */
#define SET(member, fn) (*(void **)&t.member = (void *)(fn))
  t.cuStreamWriteValue32 = write32;
  SET(cuStreamWaitValue32, ok);
  SET(cuStreamCreate, new_handle);
  SET(cuStreamDestroy, ok);
  SET(cuStreamSynchronize, ok);
  SET(cuStreamQuery, ok);
  SET(cuEventCreate, new_handle);
  SET(cuEventDestroy, ok);
  SET(cuEventRecord, ok);
  SET(cuEventQuery, ok);
  SET(cuCtxSynchronize, ok);
  SET(cuIpcGetMemHandle, ok);
  SET(cuIpcOpenMemHandle, new_handle);
  SET(cuIpcCloseMemHandle, ok);
  SET(cuMemAlloc, new_handle);
  SET(cuMemFree, ok);
  cudaev__driver_install(&t, 13000);

  /* The pinned pool. */
  void *h = NULL;
  CHECK(cudaMallocHost(&h, 1 << 20) == cudaSuccess);
  /* IPC handles. */
  void *d = NULL, *d2 = NULL;
  CHECK(cudaMalloc(&d, 64) == cudaSuccess);
  cudaIpcMemHandle_t mh;
  CHECK(cudaIpcGetMemHandle(&mh, d) == cudaSuccess);
  CHECK(cudaIpcOpenMemHandle(&d2, mh, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess);
  /* Loops in every mode, each with a timer and GPU work pending while the
   * child is started. */
  struct ev_loop *evl = ev_loop_new(EVFLAG_AUTO);
  CHECK(evl != NULL);
  cudaev_loop_t *loops[3] = {NULL, NULL, NULL};
  CHECK(cudaev_loop_new_thread(&loops[0]) == cudaSuccess);
  CHECK(cudaev_loop_new_foreign(&loops[1]) == cudaSuccess);
  CHECK(evl != NULL && cudaev_loop_new_ev(evl, &loops[2]) == cudaSuccess);
  cudaStream_t s = NULL;
  CHECK(cudaStreamCreate(&s) == cudaSuccess);
  cudaev_future_t *f[6] = {NULL};
  for (int i = 0; i < 3; i++) {
    if (loops[i] == NULL) continue;
    CHECK(cudaev_future_new_timer(loops[i], 1000000000, &f[2 * i]) == cudaSuccess);
    CHECK(cudaev_future_new_stream(loops[i], s, &f[2 * i + 1]) == cudaSuccess);
  }

  fflush(stdout);
  int pipefd[2];
  CHECK(pipe(pipefd) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    close(pipefd[1]);
    execl("/proc/self/exe", argv[0], "--list", (char *)NULL);
    _exit(127);
  }
  close(pipefd[1]);
  FILE *in = fdopen(pipefd[0], "r");
  int fd, leaked = 0;
  while (in != NULL && fscanf(in, "%d", &fd) == 1) {
    if (fd >= 0 && fd < MAXFD && before[fd]) continue;
    fprintf(stderr, "cloexec: fd %d reached the exec'd child\n", fd);
    leaked++;
  }
  if (in != NULL) fclose(in);
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(leaked == 0);

  for (int i = 0; i < 6; i++)
    if (f[i] != NULL) cudaev_future_cancel(f[i]);
  for (int i = 0; i < 3; i++)
    if (loops[i] != NULL) cudaev_loop_destroy(loops[i]);
  for (int i = 0; i < 6; i++)
    if (f[i] != NULL) cudaev_future_release(f[i]);
  if (evl != NULL) ev_loop_destroy(evl);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaIpcCloseMemHandle(d2) == cudaSuccess);
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaFreeHost(h) == cudaSuccess);
  printf("cloexec: %d descriptors reached the child\n", leaked);
  return failures == 0 ? 0 : 1;
}
