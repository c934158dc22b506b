// Stream capture while other threads work: what a capture sees must not
// depend on the runtime's own threads (ours has the pinned pool's reaper
// and the staging ring's copy threads, NVIDIA's none) nor on what the
// runtime does for itself on the application's threads.
//
// For each capture mode of the capturing thread, and for each thing a
// second thread of the application does inside the capture window (nothing,
// pinned allocation and free, a free of pinned memory allocated before, a
// staged pageable copy on a stream of its own with its synchronisation, a
// synchronous pageable copy), the capture is
// held open for 30 ms while the pinned pool has freed memory to give back
// (ours: its reaper purges after 4 ms idle here, so its driver frees fall
// inside the window). Printed: the second thread's codes, the capture's end,
// the graph's launch and its result. Every case runs ROUNDS times; a case
// whose rounds disagree says so, so a race shows as a difference.
#include "common.h"

#include <pthread.h>
#include <unistd.h>

#include <string>
#include <vector>

__global__ void add_one(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

enum action { NOTHING, PINNED, PINNED_FREE, STAGED_ASYNC, STAGED_SYNC, N_ACTIONS };
static const char *action_name[] = {"nothing", "pinned alloc+free",
                                    "pinned free (allocated before)", "staged async copy+sync",
                                    "staged sync copy"};
static const char *mode_name(cudaStreamCaptureMode m) {
  return m == cudaStreamCaptureModeGlobal        ? "global"
         : m == cudaStreamCaptureModeThreadLocal ? "thread-local"
                                                 : "relaxed";
}

static const size_t COPY = (size_t)8 << 20;  // past the staging ring's threshold
static const int N = 1 << 16, LAUNCHES = 10, ROUNDS = 5;

struct other {
  action what;
  char *host;       // pageable
  void *dev;        // COPY bytes
  void *pre;        // pinned, allocated before the capture
  cudaStream_t st;  // the second thread's own stream
  cudaError_t e[3];
};

static void *other_main(void *arg) {
  other *o = (other *)arg;
  o->e[0] = o->e[1] = o->e[2] = cudaSuccess;
  switch (o->what) {
  case NOTHING: break;
  case PINNED: {
    void *p = nullptr;
    o->e[0] = cudaMallocHost(&p, (size_t)1 << 20);
    o->e[1] = p != nullptr ? cudaFreeHost(p) : cudaSuccess;
    break;
  }
  case PINNED_FREE:
    o->e[0] = cudaFreeHost(o->pre);
    if (o->e[0] == cudaSuccess) o->pre = nullptr;
    break;
  case STAGED_ASYNC:
    o->e[0] = cudaMemcpyAsync(o->dev, o->host, COPY, cudaMemcpyHostToDevice, o->st);
    o->e[1] = cudaMemcpyAsync(o->host, o->dev, COPY, cudaMemcpyDeviceToHost, o->st);
    o->e[2] = cudaStreamSynchronize(o->st);
    break;
  case STAGED_SYNC:
    o->e[0] = cudaMemcpy(o->dev, o->host, COPY, cudaMemcpyHostToDevice);
    o->e[1] = cudaMemcpy(o->host, o->dev, COPY, cudaMemcpyDeviceToHost);
    break;
  default: break;
  }
  cudaGetLastError();  // the thread's last error is its own
  return nullptr;
}

// One round: the pool gets memory to give back, the capture opens, the
// second thread acts and ends, the capture stays open for 30 ms, ends, and
// its graph runs. Returns the round's line.
static std::string round_once(cudaStreamCaptureMode mode, action what, int *d, cudaStream_t s,
                              other *o) {
  char line[512];
  void *p = nullptr;
  if (cudaMallocHost(&p, (size_t)4 << 20) == cudaSuccess) cudaFreeHost(p);
  o->pre = nullptr;
  cudaError_t pre = cudaMallocHost(&o->pre, (size_t)256 << 10);
  cudaMemset(d, 0, N * sizeof(int));
  cudaDeviceSynchronize();
  cudaError_t begin = cudaStreamBeginCapture(s, mode);
  add_one<<<(N + 255) / 256, 256, 0, s>>>(d, N);
  o->what = what;
  pthread_t th;
  pthread_create(&th, nullptr, other_main, o);
  pthread_join(th, nullptr);
  for (int i = 1; i < LAUNCHES; i++) {
    add_one<<<(N + 255) / 256, 256, 0, s>>>(d, N);
    usleep(3000);
  }
  cudaGraph_t g = nullptr;
  cudaError_t end = cudaStreamEndCapture(s, &g);
  cudaError_t inst = cudaErrorUnknown, launch = cudaErrorUnknown, sync = cudaErrorUnknown;
  int first = -1;
  if (g != nullptr) {
    cudaGraphExec_t x = nullptr;
    inst = cudaGraphInstantiate(&x, g, 0);
    if (inst == cudaSuccess) {
      launch = cudaGraphLaunch(x, s);
      sync = cudaStreamSynchronize(s);
      cudaMemcpy(&first, d, sizeof first, cudaMemcpyDeviceToHost);
      cudaGraphExecDestroy(x);
    }
    cudaGraphDestroy(g);
  }
  // A free the capture refused left the memory allocated: it goes now.
  cudaError_t after = o->pre != nullptr ? cudaFreeHost(o->pre) : cudaSuccess;
  cudaError_t last = cudaGetLastError();
  snprintf(line, sizeof line,
           "other: %s %s %s | begin %s end %s graph %d instantiate %s launch %s sync %s "
           "result %d (want %d) pinned before %s, freed after %s last %s",
           cudaGetErrorName(o->e[0]), cudaGetErrorName(o->e[1]), cudaGetErrorName(o->e[2]),
           cudaGetErrorName(begin), cudaGetErrorName(end), g != nullptr,
           g != nullptr ? cudaGetErrorName(inst) : "-",
           inst == cudaSuccess ? cudaGetErrorName(launch) : "-",
           inst == cudaSuccess ? cudaGetErrorName(sync) : "-", first, LAUNCHES,
           cudaGetErrorName(pre), cudaGetErrorName(after), cudaGetErrorName(last));
  return line;
}

int main() {
  // Ours: the pinned pool gives idle memory back 4 ms after its last use,
  // so its reaper's driver frees fall inside every capture window below.
  // NVIDIA's runtime has no such setting and ignores it.
  setenv("CUDAEV_HOST_POOL_DECAY_MS", "4", 1);
  int *d = nullptr;
  cudaStream_t s;
  other o = {};
  CHECK(cudaSetDevice(0));
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&o.st, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&d, N * sizeof(int)));
  CHECK(cudaMalloc(&o.dev, COPY));
  std::vector<char> host(COPY, 7);
  o.host = host.data();

  const cudaStreamCaptureMode modes[] = {
      cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
  int differing = 0;
  for (cudaStreamCaptureMode mode : modes) {
    for (int a = 0; a < N_ACTIONS; a++) {
      std::string first = round_once(mode, (action)a, d, s, &o);
      for (int r = 1; r < ROUNDS; r++) {
        std::string again = round_once(mode, (action)a, d, s, &o);
        if (again == first) continue;
        differing++;
        printf("  round %d differs: %s\n", r, again.c_str());
      }
      printf("capture %s, other thread %s: %s\n", mode_name(mode), action_name[a], first.c_str());
    }
  }
  printf("rounds that differ from their case's first: %d\n", differing);
  CHECK(cudaDeviceSynchronize());
  return differing == 0 ? 0 : 1;
}
