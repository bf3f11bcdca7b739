/* The measured GEMM algorithms kept across runs (backend/gemm_algos.c): a round trip, malformed and overlong
 * lines skipped and counted, a missing file, the path's identity, and concurrent appends that all land whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "backend/gemm_algos.h"

static char dir[256];

static void setup_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/lathe-gemm-algos-%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  setenv("LATHE_CACHE_DIR", dir, 1);
}

static GemmAlgoRecord rec(int64_t m, uint64_t seed) {
  GemmAlgoRecord r = {m, 3072, 2048, {0}};
  for (int i = 0; i < 8; i++) r.algo[i] = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i * 0xFFFFFFFF00000001ULL;
  return r;
}

static void round_trip(void **st) {
  (void)st;
  setup_dir();
  char path[4200], other[4200];
  assert_true(gemm_algos_path(path, sizeof path, "NVIDIA H200 sm_90 132 SMs cuBLASLt 130000"));
  assert_true(gemm_algos_path(other, sizeof other, "NVIDIA L4 sm_89 58 SMs cuBLASLt 130000"));
  assert_string_not_equal(path, other); /* another device, another file */
  assert_non_null(strstr(path, dir));
  GemmAlgoRecord got[4];
  int bad = -1;
  assert_int_equal(gemm_algos_load(path, got, 4, &bad), 0); /* no file yet */
  assert_int_equal(bad, 0);
  GemmAlgoRecord a = rec(64, 1), b = rec(2048, 2);
  b.algo[7] = ~0ULL; /* every bit of a word */
  assert_true(gemm_algos_append(path, &a));
  assert_true(gemm_algos_append(path, &b));
  assert_int_equal(gemm_algos_load(path, got, 4, &bad), 2);
  assert_int_equal(bad, 0);
  assert_memory_equal(&got[0], &a, sizeof a);
  assert_memory_equal(&got[1], &b, sizeof b);
  assert_int_equal(gemm_algos_load(path, got, 1, &bad), 1); /* at most cap */
}

static void damaged_lines_are_skipped(void **st) {
  (void)st;
  setup_dir();
  char path[4200];
  assert_true(gemm_algos_path(path, sizeof path, "dev"));
  GemmAlgoRecord a = rec(17, 5);
  assert_true(gemm_algos_append(path, &a));
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  fputs("garbage\n", f);
  fputs("64 3072 2048 0 1 2 3 4 5 6 7\n", f); /* words not 16 digits */
  fputs("-1 3072 2048 0000000000000000 0000000000000000 0000000000000000 0000000000000000 "
        "0000000000000000 0000000000000000 0000000000000000 0000000000000000\n",
        f);                                    /* a shape that cannot be */
  for (int i = 0; i < 700; i++) fputc('7', f); /* overlong */
  fputc('\n', f);
  fputs("64 3072 2048 000000000000000", f); /* truncated last line */
  fclose(f);
  GemmAlgoRecord got[8];
  int bad = 0;
  assert_int_equal(gemm_algos_load(path, got, 8, &bad), 1);
  assert_int_equal(bad, 5);
  assert_memory_equal(&got[0], &a, sizeof a);
  GemmAlgoRecord b = rec(33, 6);
  assert_true(gemm_algos_append(path, &b)); /* after the cut line: a line of its own */
  assert_int_equal(gemm_algos_load(path, got, 8, &bad), 2);
  assert_int_equal(bad, 5);
  assert_memory_equal(&got[1], &b, sizeof b);
}

static void concurrent_appends_land_whole(void **st) {
  (void)st;
  setup_dir();
  char path[4200];
  assert_true(gemm_algos_path(path, sizeof path, "dev"));
  enum { KIDS = 4, EACH = 200 };
  for (int c = 0; c < KIDS; c++) {
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
      for (int i = 0; i < EACH; i++) {
        GemmAlgoRecord r = rec(1 + c * EACH + i, (uint64_t)(c * EACH + i));
        if (!gemm_algos_append(path, &r)) _exit(1);
      }
      _exit(0);
    }
  }
  for (int c = 0; c < KIDS; c++) {
    int status = 0;
    wait(&status);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  GemmAlgoRecord *got = malloc(sizeof *got * KIDS * EACH);
  int bad = 0;
  assert_int_equal(gemm_algos_load(path, got, KIDS * EACH, &bad), KIDS * EACH);
  assert_int_equal(bad, 0);
  char *seen = calloc(KIDS * EACH, 1);
  for (int i = 0; i < KIDS * EACH; i++) {
    GemmAlgoRecord want = rec(got[i].m, (uint64_t)(got[i].m - 1));
    assert_memory_equal(&got[i], &want, sizeof want);
    seen[got[i].m - 1]++;
  }
  for (int i = 0; i < KIDS * EACH; i++) assert_int_equal(seen[i], 1);
  free(seen);
  free(got);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip),
      cmocka_unit_test(damaged_lines_are_skipped),
      cmocka_unit_test(concurrent_appends_land_whole),
  };
  int rc = cmocka_run_group_tests_name("gemm_algos", tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) rc = rc ? rc : 1;
  return rc;
}
