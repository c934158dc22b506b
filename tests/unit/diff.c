/* Differential test: cudart-probe (probe.c) prints the same transcript on
 * NVIDIA's libcudart.so.13 as on ours, with this machine's driver situation
 * (none on CI), and with the toolkit's stub libcuda on the search path. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name) {
  const char *v = getenv(name);
  cr_assert_not_null(v, "%s not set (run through meson test)", name);
  return v;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot open %s", path);
  static char bufs[4][1 << 20];
  static int next;
  char *b = bufs[next++ % 4];
  size_t n = fread(b, 1, sizeof bufs[0] - 1, f);
  b[n] = 0;
  fclose(f);
  return b;
}

/* Runs the probe with LD_LIBRARY_PATH=libdir[:extra], returns stdout; checks
 * on stderr that the intended libcudart was mapped. */
static char *run_probe(const char *tag, const char *libdir, const char *extra) {
  char cmd[16384], out[4096], err[4096];
  const char *b = env("CUDAEV_BUILD_DIR");
  snprintf(out, sizeof out, "%s/diff-%s.out", b, tag);
  snprintf(err, sizeof err, "%s/diff-%s.err", b, tag);
  const char *old = getenv("LD_LIBRARY_PATH");
  snprintf(cmd, sizeof cmd,
           "LD_LIBRARY_PATH='%s%s%s%s%s' '%s/tests/unit/cudart-probe' > '%s' 2> '%s'", libdir,
           extra ? ":" : "", extra ? extra : "", old ? ":" : "", old ? old : "", b, out, err);
  cr_assert_eq(system(cmd), 0, "probe failed: %s", cmd);
  char *e = slurp(err);
  char real[4096];
  cr_assert_not_null(realpath(libdir, real));
  cr_assert_not_null(strstr(e, real), "[%s] the probe did not map a libcudart from %s:\n%s", tag,
                     real, e);
  return slurp(out);
}

static void compare(const char *extra, const char *tag) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* A sanitized libcudart cannot be loaded into the plain probe. */
  cr_skip_test("sanitizer build: the differential run needs a plain build");
#endif
  char nvdir[4096], tn[64], to[64];
  snprintf(nvdir, sizeof nvdir, "%s", env("CUDAEV_NVIDIA_CUDART"));
  *strrchr(nvdir, '/') = 0;
  snprintf(tn, sizeof tn, "%s-nvidia", tag);
  snprintf(to, sizeof to, "%s-cudaev", tag);
  char *nv = run_probe(tn, nvdir, extra);
  char *ours = run_probe(to, env("CUDAEV_BUILD_DIR"), extra);
  /* Report the first differing line, then fail. */
  const char *a = nv, *b = ours;
  int line = 1;
  while (*a && *a == *b) {
    if (*a == '\n') line++;
    a++, b++;
  }
  if (*a || *b) {
    char la[256] = {0}, lb[256] = {0};
    const char *sa = a, *sb = b;
    while (sa > nv && sa[-1] != '\n') sa--;
    while (sb > ours && sb[-1] != '\n') sb--;
    sscanf(sa, "%255[^\n]", la);
    sscanf(sb, "%255[^\n]", lb);
    cr_assert_fail("[%s] transcripts differ at line %d:\n  NVIDIA: %s\n  cudaev: %s", tag, line, la,
                   lb);
  }
  cr_expect_gt(strlen(nv), 1000u);
}

Test(diff, same_transcript_as_nvidia) { compare(NULL, "plain"); }

Test(diff, same_transcript_with_stub_libcuda) {
  char dir[4096], cmd[16384];
  snprintf(dir, sizeof dir, "%s/stub-libcuda", env("CUDAEV_BUILD_DIR"));
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && ln -sf '%s/lib64/stubs/libcuda.so' '%s/libcuda.so.1'",
           dir, env("CUDAEV_TOOLKIT"), dir);
  cr_assert_eq(system(cmd), 0);
  compare(dir, "stub");
}
