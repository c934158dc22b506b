/* Time from process start to the first kernel completed.
 *
 * startup_first_kernel_ms  the parent (which never touches CUDA) reads the
 *                          clock, forks and execs this binary afresh; the
 *                          child launches an empty kernel, synchronizes, reads
 *                          CLOCK_MONOTONIC (system-wide) and sends the time
 *                          back through a pipe. One sample per fresh process:
 *                          exec, dynamic loading, runtime and context
 *                          initialisation, module load, launch and sync.
 */
#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

#include <vector>

__global__ void empty_kernel() {}

static int child(int fd) {
  empty_kernel<<<1, 1>>>();
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  uint64_t t = bench_now_ns();
  if (write(fd, &t, sizeof t) != (ssize_t)sizeof t)
    DIE("startup child: write: %s", strerror(errno));
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(atoi(argv[2]));
  bench_init(argc, argv);
  if (bench_begin("startup_first_kernel")) {
    const int warm = 1, n = 10;
    std::vector<double> v((size_t)n);
    for (int i = -warm; i < n; i++) {
      int p[2];
      if (pipe(p) != 0) DIE("pipe: %s", strerror(errno));
      char fdarg[16];
      snprintf(fdarg, sizeof fdarg, "%d", p[1]);
      fflush(stdout);
      fflush(stderr);
      uint64_t t0 = bench_now_ns();
      pid_t pid = fork();
      if (pid < 0) DIE("fork: %s", strerror(errno));
      if (pid == 0) {
        close(p[0]);
        char *args[] = {argv[0], (char *)"--child", fdarg, NULL};
        execv("/proc/self/exe", args);
        fprintf(stderr, "bench: execv /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
      }
      close(p[1]);
      uint64_t t1 = 0;
      ssize_t got = read(p[0], &t1, sizeof t1);
      close(p[0]);
      int status = 0;
      if (waitpid(pid, &status, 0) != pid) DIE("waitpid: %s", strerror(errno));
      if (got != (ssize_t)sizeof t1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        DIE("startup child failed (status 0x%x)", status);
      if (i >= 0) v[(size_t)i] = (double)(t1 - t0) / 1e6;
    }
    bench_unit("startup_first_kernel_ms", "ms");
    for (double x : v) bench_sample("startup_first_kernel_ms", x);
    bench_end();
  }
  fflush(stdout);
  return 0;
}
