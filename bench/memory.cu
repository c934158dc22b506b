/* Allocation costs. Each sample is one call (or one pair).
 *
 * malloc_1mib_us              cudaMalloc 1 MiB
 * free_1mib_us                cudaFree of it
 * malloc_host_free_4kib_us    cudaMallocHost 4 KiB + cudaFreeHost, steady state
 * malloc_host_free_64mib_us   cudaMallocHost 64 MiB + cudaFreeHost, steady state
 * malloc_host_free_first_4kib_us, malloc_host_free_first_64mib_us
 *                             the first such pair of a fresh process (fork +
 *                             exec of this binary; the child initialises its
 *                             context with cudaFree(0) first, untimed, then
 *                             times its one pair and sends the time back
 *                             through a pipe): what a program pays before any
 *                             memory can be reused
 */
#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

#include <vector>

static int child_first_pair(size_t bytes, int fd) {
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(0));
  void *p;
  uint64_t t0 = bench_now_ns();
  CHECK(cudaMallocHost(&p, bytes));
  CHECK(cudaFreeHost(p));
  uint64_t t1 = bench_now_ns();
  double us = bench_us(t0, t1);
  if (write(fd, &us, sizeof us) != (ssize_t)sizeof us) DIE("child: write: %s", strerror(errno));
  return 0;
}

/* One fresh process: its first pair of `bytes`, in us. */
static double first_pair(const char *self, size_t bytes) {
  int p[2];
  if (pipe(p) != 0) DIE("pipe: %s", strerror(errno));
  char fdarg[16], sizearg[32];
  snprintf(fdarg, sizeof fdarg, "%d", p[1]);
  snprintf(sizearg, sizeof sizearg, "%zu", bytes);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) DIE("fork: %s", strerror(errno));
  if (pid == 0) {
    close(p[0]);
    char *args[] = {(char *)self, (char *)"--first-pair", sizearg, fdarg, NULL};
    execv("/proc/self/exe", args);
    fprintf(stderr, "bench: execv /proc/self/exe: %s\n", strerror(errno));
    _exit(127);
  }
  close(p[1]);
  double us = -1;
  ssize_t got = read(p[0], &us, sizeof us);
  close(p[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) DIE("waitpid: %s", strerror(errno));
  if (got != (ssize_t)sizeof us || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    DIE("first-pair child failed (status 0x%x)", status);
  return us;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--first-pair") == 0)
    return child_first_pair((size_t)strtoull(argv[2], NULL, 10), atoi(argv[3]));
  bench_init(argc, argv);
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(0));

  if (bench_begin("malloc_free_1mib")) {
    const int warm = 50, n = 2000;
    std::vector<double> a((size_t)n), f((size_t)n);
    for (int i = -warm; i < n; i++) {
      void *p;
      uint64_t t0 = bench_now_ns();
      CHECK(cudaMalloc(&p, 1 << 20));
      uint64_t t1 = bench_now_ns();
      CHECK(cudaFree(p));
      uint64_t t2 = bench_now_ns();
      if (i >= 0) {
        a[(size_t)i] = bench_us(t0, t1);
        f[(size_t)i] = bench_us(t1, t2);
      }
    }
    bench_unit("malloc_1mib_us", "us");
    for (double x : a) bench_sample("malloc_1mib_us", x);
    bench_unit("free_1mib_us", "us");
    for (double x : f) bench_sample("free_1mib_us", x);
    bench_end();
  }

  struct {
    const char *bench, *metric;
    size_t bytes;
    int warm, n;
  } host[] = {
      {"malloc_host_free_4kib", "malloc_host_free_4kib_us", 4096, 50, 2000},
      {"malloc_host_free_64mib", "malloc_host_free_64mib_us", (size_t)64 << 20, 3, 30},
  };
  for (auto &h : host) {
    if (!bench_begin(h.bench)) continue;
    std::vector<double> v((size_t)h.n);
    for (int i = -h.warm; i < h.n; i++) {
      void *p;
      uint64_t t0 = bench_now_ns();
      CHECK(cudaMallocHost(&p, h.bytes));
      CHECK(cudaFreeHost(p));
      uint64_t t1 = bench_now_ns();
      if (i >= 0) v[(size_t)i] = bench_us(t0, t1);
    }
    bench_unit(h.metric, "us");
    for (double x : v) bench_sample(h.metric, x);
    bench_end();
  }
  struct {
    const char *bench, *metric;
    size_t bytes;
  } first[] = {
      {"malloc_host_free_first_4kib", "malloc_host_free_first_4kib_us", 4096},
      {"malloc_host_free_first_64mib", "malloc_host_free_first_64mib_us", (size_t)64 << 20},
  };
  for (auto &h : first) {
    if (!bench_begin(h.bench)) continue;
    const int n = 12;
    std::vector<double> v((size_t)n);
    for (int i = 0; i < n; i++) v[(size_t)i] = first_pair(argv[0], h.bytes);
    bench_unit(h.metric, "us");
    for (double x : v) bench_sample(h.metric, x);
    bench_end();
  }
  fflush(stdout);
  return 0;
}
