/* What a user's program built against an installed cudaev looks like:
 * install.sh compiles it with nothing but `pkg-config --cflags --libs
 * cudaev` and -Wall -Wextra -pedantic -Werror, in C99 and C11 (so the
 * toolkit's headers must come in through -isystem, and cudaev.h must be
 * clean), then runs it with and without the toolkit's lib64 on
 * LD_LIBRARY_PATH.
 *
 * It prints the file libcudart.so.13 was loaded from (the loader's own
 * record) and how many distinct libcudart files are mapped, and exits 0
 * only if one is and a promise on a foreign loop completed. */
#define _GNU_SOURCE
#include <cudaev.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static int count_mapped_cudarts(void) {
  char line[4096], seen[8][1024];
  int n = 0;
  FILE *maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return -1;
  while (fgets(line, sizeof line, maps) != NULL) {
    char *path = strchr(line, '/');
    if (path == NULL || strstr(path, "libcudart") == NULL) continue;
    path[strcspn(path, "\n")] = '\0';
    int known = 0;
    for (int i = 0; i < n; i++) known |= strcmp(seen[i], path) == 0;
    if (!known && n < 8) snprintf(seen[n++], sizeof seen[0], "%s", path);
  }
  fclose(maps);
  return n;
}

int main(void) {
  cudaev_loop_t *loop;
  cudaev_future_t *f;
  if (cudaev_loop_new_foreign(&loop) != cudaSuccess || cudaev_promise_new(loop, &f) != cudaSuccess)
    return 1;
  cudaev_promise_set(f, cudaSuccess);
  cudaev_loop_process(loop);
  cudaError_t outcome = cudaev_future_result(f);
  cudaev_future_release(f);
  cudaev_loop_destroy(loop);

  struct link_map *lm = NULL;
  void *h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) {
    printf("libcudart.so.13 not loaded?\n");
    return 1;
  }
  int mapped = count_mapped_cudarts();
  printf("libcudart.so.13: %s\nlibcudart files mapped: %d\npromise: %s\n", lm->l_name, mapped,
         cudaev_error_name(outcome));
  dlclose(h);
  return mapped == 1 && outcome == cudaSuccess ? 0 : 1;
}
