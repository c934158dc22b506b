/* The built libcudart.so.13 exports exactly NVIDIA's 422 names under the
 * version node libcudart.so.13, our own API under CUDAEV_<n> nodes, and
 * nothing else; its SONAME is libcudart.so.13 and it does not link libcuda.
 * Which CUDAEV_<n> node each cudaev_ function is in is pinned by the `abi`
 * test (tools/check-abi.py). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMES 1024

static int read_lines(const char *path, char names[][128], int max) {
  char line[120];
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot open %s", path);
  int n = 0;

  while (n < max && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (line[0]) snprintf(names[n++], 128, "%s", line);
  }
  fclose(f);
  return n;
}

static char reference[MAX_NAMES][128];
static char exported[MAX_NAMES][128];

static const char *env(const char *name) {
  const char *v = getenv(name);
  cr_assert_not_null(v, "%s not set (run through meson test)", name);
  return v;
}

static int cmp(const void *a, const void *b) { return strcmp(a, b); }

/* CUDAEV_0, CUDAEV_1, ...: our API's nodes (tools/gen_version_script.py). */
static bool cudaev_node(const char *node) {
  if (strncmp(node, "CUDAEV_", 7) != 0 || node[7] == 0) return false;
  return strspn(node + 7, "0123456789") == strlen(node + 7);
}

Test(exports, match_nvidia_reference_list) {
  char path[4096], cmd[8192];
  /* The committed copy, and the shared reference beside the checkout when
   * it is there: they must agree. */
  snprintf(path, sizeof path, "%s/src/exports.txt", env("CUDAEV_SOURCE_DIR"));
  int nref = read_lines(path, reference, MAX_NAMES);
  cr_assert_eq(nref, 422);
  snprintf(path, sizeof path, "%s/../shared/reference/nvidia-libcudart-13.0-exports.txt",
           env("CUDAEV_SOURCE_DIR"));
  FILE *shared = fopen(path, "r");
  if (shared != NULL) {
    fclose(shared);
    static char shared_names[MAX_NAMES][128];
    int ns = read_lines(path, shared_names, MAX_NAMES);
    cr_assert_eq(ns, nref);
    for (int i = 0; i < ns; i++) cr_expect_str_eq(shared_names[i], reference[i]);
  }

  snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s/libcudart.so.13' > '%s/exports-nm.txt'",
           env("CUDAEV_BUILD_DIR"), env("CUDAEV_BUILD_DIR"));
  cr_assert_eq(system(cmd), 0);
  snprintf(path, sizeof path, "%s/exports-nm.txt", env("CUDAEV_BUILD_DIR"));
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  int n = 0, ours = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char addr[64], type[8], sym[120];
    if (sscanf(line, "%63s %7s %119s", addr, type, sym) != 3) continue;
    if (strcmp(type, "A") == 0) { /* the version nodes themselves */
      cr_expect(strcmp(sym, "libcudart.so.13") == 0 || cudaev_node(sym), "%s", sym);
      continue;
    }
    char *at = strstr(sym, "@@");
    cr_assert_not_null(at, "unversioned export %s", sym);
    *at = 0;
    const char *node = at + 2;
    if (strncmp(sym, "cudaev_", 7) == 0) {
      cr_expect(cudaev_node(node), "%s in node %s", sym, node);
      cr_expect_neq(sym[7], '_', "internal symbol %s leaked", sym);
      ours++;
      continue;
    }
    cr_expect_str_eq(node, "libcudart.so.13", "%s", sym);
    cr_assert_lt(n, MAX_NAMES);
    snprintf(exported[n++], 128, "%s", sym);
  }
  fclose(f);
  qsort(exported, (size_t)n, sizeof exported[0], cmp);
  qsort(reference, (size_t)nref, sizeof reference[0], cmp);
  cr_expect_eq(n, nref, "exported %d cudart names, reference has %d", n, nref);
  for (int i = 0, j = 0; i < n || j < nref;) {
    int c = i >= n ? 1 : j >= nref ? -1 : strcmp(exported[i], reference[j]);
    if (c < 0)
      cr_expect_fail("exported but not in NVIDIA's list: %s", exported[i++]);
    else if (c > 0)
      cr_expect_fail("missing export: %s", reference[j++]);
    else
      i++, j++;
  }
  (void)ours;
}

Test(exports, soname_and_no_libcuda) {
  char cmd[8192], path[4096];
  snprintf(path, sizeof path, "%s/readelf-d.txt", env("CUDAEV_BUILD_DIR"));
  snprintf(cmd, sizeof cmd, "readelf -d '%s/libcudart.so.13' > '%s'", env("CUDAEV_BUILD_DIR"),
           path);
  cr_assert_eq(system(cmd), 0);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char line[512];
  bool soname = false;
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, "(SONAME)")) soname = strstr(line, "[libcudart.so.13]") != NULL;
    if (strstr(line, "(NEEDED)"))
      cr_expect_null(strstr(line, "libcuda"), "links libcuda: %s", line);
  }
  fclose(f);
  cr_expect(soname, "SONAME is not libcudart.so.13");
}
