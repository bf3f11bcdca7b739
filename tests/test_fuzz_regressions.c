/* Replays fuzz/regressions (inputs fuzz_program once failed on) through the whole compiler for both targets,
 * under this build's sanitizers: each must compile or fail with a Diag, never crash. The same files are
 * replayed by `make fuzz-program` under clang's sanitizers (float-cast-overflow included). */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "driver/pipeline.h"

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static void test_regressions_compile_or_fail_cleanly(void **state) {
  DIR *dp = opendir("fuzz/regressions");
  if (!dp) fail_msg("fuzz/regressions not found (run from the repository root)");
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "fuzz/regressions/%s", e->d_name);
    char *src = read_all(path);
    assert_non_null(src);
    for (int t = 0; t < 2; t++) {
      Compilation *c = compilation_new(t ? TARGET_CUDA : TARGET_CPU, NULL);
      Diag d = {0};
      int ok = compile_source(c, src, ST_CODE, &d);
      if (!ok && !d.set) fail_msg("%s: failed without a message", path);
      if (ok) {
        StrBuf b = {0};
        for (int s = 0; s < ST_COUNT; s++) print_stage(&b, c, (Stage)s);
        sb_free(&b);
      }
      compilation_free(c);
    }
    free(src);
    n++;
  }
  closedir(dp);
  assert_true(n >= 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_regressions_compile_or_fail_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
