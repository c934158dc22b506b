/* gpu suite, sharing memory between two processes: a cudaMalloc
 * allocation through cudaIpcGetMemHandle / cudaIpcOpenMemHandle, and a
 * pool allocation through cudaMemPoolExportToShareableHandle (a POSIX file
 * descriptor passed over a unix socket with SCM_RIGHTS) and
 * cudaMemPoolExportPointer / cudaMemPoolImportPointer. The parent
 * re-executes this binary ("child FD") so the child starts with a fresh
 * CUDA state; each side checks what the other wrote. Bad input for each
 * call is covered on the side that can make it. An interprocess event goes
 * across too: the child waits for the parent's work and records its own. */
#include "common.h"

#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE 65537

struct msg {
  cudaIpcMemHandle_t mem;
  struct cudaMemPoolPtrExportData ptr;
  cudaIpcEventHandle_t ev;
};

static uint32_t sum(const void *p, size_t n) {
  const unsigned char *b = p;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

static uint32_t device_sum(const void *d, size_t n) {
  unsigned char *h = malloc(n);
  uint32_t r = 0;
  if (h != NULL && cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) == cudaSuccess) r = sum(h, n);
  free(h);
  return r;
}

static int send_msg(int sock, const struct msg *m, int fd) {
  struct iovec iov = {(void *)m, sizeof *m};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return sendmsg(sock, &mh, 0) == (ssize_t)sizeof *m ? 0 : -1;
}

static int recv_msg(int sock, struct msg *m, int *fd) {
  struct iovec iov = {m, sizeof *m};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  if (recvmsg(sock, &mh, MSG_WAITALL) != (ssize_t)sizeof *m) return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  if (c == NULL || c->cmsg_type != SCM_RIGHTS) return -1;
  memcpy(fd, CMSG_DATA(c), sizeof *fd);
  return 0;
}

static int child(int sock) {
  struct msg m;
  int fd = -1;
  if (recv_msg(sock, &m, &fd) != 0) {
    printf("child: no message\n");
    return 3;
  }
  printf("child: received\n");

  /* legacy IPC handle */
  void *p = NULL;
  cudaIpcMemHandle_t zero;
  memset(&zero, 0, sizeof zero);
  TC(cudaIpcOpenMemHandle(&p, zero, cudaIpcMemLazyEnablePeerAccess));
  TREFUSE(cudaIpcOpenMemHandle(NULL, m.mem, cudaIpcMemLazyEnablePeerAccess));
  TC(cudaIpcOpenMemHandle(&p, m.mem, 0x10));
  TC(cudaIpcOpenMemHandle(&p, m.mem, cudaIpcMemLazyEnablePeerAccess));
  if (p != NULL) {
    printf("child: ipc sum=%08x\n", device_sum(p, SIZE));
    struct cudaPointerAttributes a;
    TC(cudaPointerGetAttributes(&a, p));
    printf("child: ipc pointer type=%d device=%d\n", (int)a.type, a.device);
    TC(cudaMemset(p, 0x5a, SIZE));
    TC(cudaDeviceSynchronize());
    TC(cudaIpcCloseMemHandle(p));
    TC(cudaIpcCloseMemHandle(p));
  }

  /* interprocess event: wait for the parent's work, record our own */
  cudaEvent_t ev = NULL;
  cudaIpcEventHandle_t zev;
  memset(&zev, 0, sizeof zev);
  TC(cudaIpcOpenEventHandle(&ev, zev));
  TC(cudaIpcOpenEventHandle(&ev, m.ev));
  if (ev != NULL) {
    TC(cudaEventSynchronize(ev));
    TC(cudaEventQuery(ev));
    TC(cudaStreamWaitEvent(0, ev, 0));
    TC(cudaEventRecord(ev, 0));
    TC(cudaEventSynchronize(ev));
    float ms = 0;
    TC(cudaEventElapsedTime(&ms, ev, ev)); /* DisableTiming: refused */
    TC(cudaEventDestroy(ev));
  }

  /* pool through a file descriptor */
  cudaMemPool_t pool = NULL;
  TC(cudaMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)-1,
                                          cudaMemHandleTypePosixFileDescriptor, 0));
  TC(cudaMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd, cudaMemHandleTypeNone, 0));
  TC(cudaMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd,
                                          cudaMemHandleTypePosixFileDescriptor, 0));
  if (pool != NULL) {
    void *q = NULL;
    struct cudaMemPoolPtrExportData bad;
    memset(&bad, 0, sizeof bad);
    TC(cudaMemPoolImportPointer(&q, pool, &bad));
    TREFUSE(cudaMemPoolImportPointer(NULL, pool, &m.ptr));
    TREFUSE(cudaMemPoolImportPointer(&q, pool, NULL));
    TC(cudaMemPoolImportPointer(&q, pool, &m.ptr));
    if (q != NULL) {
      printf("child: pool sum=%08x\n", device_sum(q, SIZE));
      void *r = NULL;
      TC(cudaMallocFromPoolAsync(&r, 16, pool, 0));
      TC(cudaMemset(q, 0x77, SIZE / 2));
      TC(cudaDeviceSynchronize());
      TC(cudaFree(q));
    }
    TC(cudaMemPoolDestroy(pool));
  }
  close(fd);
  fflush(stdout);
  char ack = 'k';
  if (write(sock, &ack, 1) != 1) return 4;
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) return child(atoi(argv[2]));

  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  unsigned char *h = malloc(SIZE);
  for (size_t i = 0; i < SIZE; i++) h[i] = (unsigned char)(i * 13 + 5);

  struct msg m;
  memset(&m, 0, sizeof m);
  void *d = NULL;
  CHECK(cudaMalloc(&d, SIZE));
  CHECK(cudaMemcpy(d, h, SIZE, cudaMemcpyHostToDevice));
  /* NULL outputs: cudaIpcGetMemHandle(NULL, d) crashes NVIDIA's runtime
   * (run7), so each NULL output of this program is tried in a fork. */
  TREFUSE(cudaIpcGetMemHandle(NULL, d));
  TC(cudaIpcGetMemHandle(&m.mem, NULL));
  TC(cudaIpcGetMemHandle(&m.mem, h));
  TC(cudaIpcGetMemHandle(&m.mem, d));

  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = NULL, def = NULL;
  CHECK(cudaMemPoolCreate(&pool, &props));
  int fd = -1;
  CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
  TC(cudaMemPoolExportToShareableHandle(&fd, def, cudaMemHandleTypePosixFileDescriptor, 0));
  TC(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypeWin32, 0));
  TC(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 1));
  TREFUSE(cudaMemPoolExportToShareableHandle(NULL, pool, cudaMemHandleTypePosixFileDescriptor, 0));
  fd = -1;
  TC(cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
  printf("fd valid: %d\n", fd >= 0);

  void *q = NULL, *nq = NULL;
  CHECK(cudaMallocFromPoolAsync(&q, SIZE, pool, 0));
  CHECK(cudaMemcpy(q, h + 1, SIZE - 1, cudaMemcpyHostToDevice));
  CHECK(cudaMemset((char *)q + SIZE - 1, 0x99, 1));
  CHECK(cudaMallocAsync(&nq, 64, 0));
  TC(cudaMemPoolExportPointer(&m.ptr, nq)); /* default pool: not shareable */
  TC(cudaMemPoolExportPointer(&m.ptr, d));
  TREFUSE(cudaMemPoolExportPointer(NULL, q));
  TC(cudaMemPoolExportPointer(&m.ptr, q));
  TC(cudaIpcGetMemHandle(&m.mem, q)); /* pool memory has no legacy IPC handle */
  TC(cudaIpcGetMemHandle(&m.mem, d)); /* restore the handle of d */
  CHECK(cudaDeviceSynchronize());
  printf("parent: ipc sum=%08x pool sum=%08x\n", device_sum(d, SIZE), device_sum(q, SIZE));

  /* interprocess event: only an Interprocess + DisableTiming event has a
   * handle; it is recorded after work the child then waits for. */
  cudaEvent_t plain = NULL, pev = NULL;
  CHECK(cudaEventCreate(&plain));
  TC(cudaIpcGetEventHandle(&m.ev, plain));
  TC(cudaEventCreateWithFlags(&pev, cudaEventInterprocess));
  CHECK(cudaEventCreateWithFlags(&pev, cudaEventInterprocess | cudaEventDisableTiming));
  TC(cudaIpcGetEventHandle(&m.ev, pev));
  void *scratch = NULL;
  CHECK(cudaMalloc(&scratch, 64 << 20));
  CHECK(cudaMemsetAsync(scratch, 0x33, 64 << 20, 0));
  CHECK(cudaEventRecord(pev, 0));

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 3;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    char arg[16];
    snprintf(arg, sizeof arg, "%d", sv[1]);
    execl("/proc/self/exe", argv[0], "child", arg, (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  if (send_msg(sv[0], &m, fd) != 0) printf("parent: send failed\n");
  char ack = 0;
  ssize_t got = read(sv[0], &ack, 1);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("parent: ack=%d child exit=%d\n", got == 1 && ack == 'k',
         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  printf("parent: after child ipc sum=%08x pool sum=%08x\n", device_sum(d, SIZE),
         device_sum(q, SIZE));

  TC(cudaEventSynchronize(pev));
  TC(cudaEventQuery(pev));
  TC(cudaEventDestroy(pev));
  TC(cudaEventDestroy(plain));
  TC(cudaFree(scratch));
  close(fd);
  TC(cudaFreeAsync(q, 0));
  TC(cudaFreeAsync(nq, 0));
  TC(cudaDeviceSynchronize());
  TC(cudaMemPoolDestroy(pool));
  TC(cudaFree(d));
  free(h);
  return 0;
}
