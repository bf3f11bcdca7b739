/* Compile-cache entries (backend/cache.c): the trailer written atomically, and verification before use,
 * so a truncated, overwritten, foreign, symlinked or FIFO entry is reported BAD (never loaded, never a
 * hang); the CPU backend rebuilds such an entry with one warning. */
#include "testutil.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cache.h"
#include "base/notice.h"

static char g_dir[256];
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) { return remove(path); }

static int setup(void **state) {
  snprintf(g_dir, sizeof g_dir, "/tmp/lathe-test-cache-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

static char g_warnings[4096];
static int g_nwarnings;
static void capture_warning(const char *msg) {
  g_nwarnings++;
  snprintf(g_warnings + strlen(g_warnings), sizeof g_warnings - strlen(g_warnings), "%s\n", msg);
}
static void capture_warning_notice(void *ctx, const Notice *n) {
  if (n->kind == NOTICE_WARNING) capture_warning(n->text);
}

static const char content[] = "\x7f"
                              "ELF pretend object code, long enough to be truncated in several places";
#define KEY 0x1234abcd5678ef00ULL

static void store(const char *path) {
  char why[256] = "";
  if (!cache_store(g_dir, path, KEY, content, sizeof content, why, sizeof why)) fail_msg("store: %s", why);
}

static CacheLookup load(const char *path, uint64_t key, char *why) {
  void *data = NULL;
  size_t size = 0;
  CacheLookup r = cache_load(path, key, &data, &size, why, 256);
  if (r == CACHE_HIT) {
    assert_int_equal(size, sizeof content);
    assert_memory_equal(data, content, sizeof content);
  } else {
    assert_null(data);
  }
  free(data);
  return r;
}

static void test_store_then_load(void **state) {
  char path[512], why[256];
  snprintf(path, sizeof path, "%s/a.bin", g_dir);
  assert_int_equal(load(path, KEY, why), CACHE_MISS);
  store(path);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, sizeof content + CACHE_TRAILER_BYTES);
  assert_int_equal(load(path, KEY, why), CACHE_HIT);
  /* nothing but the entry is left in the directory (the temporary name was renamed) */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", g_dir);
  assert_int_equal(system(cmd), 0);
  unlink(path);
}

static void test_truncated_at_every_length_is_bad(void **state) {
  char path[512], why[256];
  snprintf(path, sizeof path, "%s/t.bin", g_dir);
  for (off_t len = 0; len < (off_t)(sizeof content + CACHE_TRAILER_BYTES); len++) {
    store(path);
    assert_int_equal(truncate(path, len), 0);
    if (load(path, KEY, why) != CACHE_BAD) fail_msg("a file truncated to %lld bytes was accepted", (long long)len);
  }
  unlink(path);
}

static void test_any_changed_byte_is_bad(void **state) {
  char path[512], why[256];
  snprintf(path, sizeof path, "%s/c.bin", g_dir);
  for (off_t at = 0; at < (off_t)(sizeof content + CACHE_TRAILER_BYTES); at++) {
    store(path);
    int fd = open(path, O_RDWR);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    if (load(path, KEY, why) != CACHE_BAD) fail_msg("a change at byte %lld was accepted", (long long)at);
  }
  store(path); /* appended bytes */
  FILE *f = fopen(path, "ab");
  fputs("x", f);
  fclose(f);
  assert_int_equal(load(path, KEY, why), CACHE_BAD);
  unlink(path);
}

static void test_foreign_symlink_fifo_dir_are_bad(void **state) {
  char path[512], link[512], why[256];
  snprintf(path, sizeof path, "%s/f.bin", g_dir);
  store(path);
  assert_int_equal(load(path, KEY ^ 1, why), CACHE_BAD); /* another program's entry under this name */
  assert_contains(why, "another program");
  snprintf(link, sizeof link, "%s/l.bin", g_dir);
  assert_int_equal(symlink(path, link), 0);
  assert_int_equal(load(link, KEY, why), CACHE_BAD);
  assert_contains(why, "symbolic link");
  unlink(link);
  unlink(path);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(load(path, KEY, why), CACHE_BAD); /* returns at once: no writer needed */
  assert_contains(why, "not a regular file");
  unlink(path);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(load(path, KEY, why), CACHE_BAD);
  rmdir(path);
}

static void test_seal_file(void **state) {
  char path[512], why[256];
  snprintf(path, sizeof path, "%s/s.bin", g_dir);
  FILE *f = fopen(path, "wb");
  fwrite(content, 1, sizeof content, f);
  fclose(f);
  assert_true(cache_seal_file(path, KEY, why, sizeof why));
  assert_int_equal(load(path, KEY, why), CACHE_HIT);
  unlink(path);
}

static void test_store_into_missing_dir_fails_cleanly(void **state) {
  char dir[512], path[600], why[256] = "";
  snprintf(dir, sizeof dir, "%s/missing", g_dir);
  snprintf(path, sizeof path, "%s/x.bin", dir);
  assert_false(cache_store(dir, path, KEY, content, sizeof content, why, sizeof why));
  assert_contains(why, "cannot create a temporary file");
}

/* The CPU backend: a damaged .so is removed and rebuilt with one warning, then loads from the cache again. */
static const char *k_source = "#include <stdint.h>\n"
                              "void add_one(void *const *bufs, const int64_t *syms) {\n"
                              "  float *x = bufs[0]; for (int i = 0; i < 4; i++) x[i] += 1;\n"
                              "}\n";

static int count_so(char *found, size_t n) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s/cpu/*.so 2>/dev/null", g_dir);
  FILE *p = popen(cmd, "r");
  int count = 0;
  char line[512];
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = 0;
    if (count++ == 0) snprintf(found, n, "%s", line);
  }
  pclose(p);
  return count;
}

static void run_add_one(Backend *b) {
  Diag d = {0};
  BackendModule *m = b->ops->compile(b, k_source, &d);
  if (!m) fail_msg("%s", d.msg);
  float x[4] = {1, 2, 3, 4};
  void *bufs[1] = {x};
  if (!b->ops->launch(b, m, "add_one", bufs, 1, NULL, 0, 1, 1, &d)) fail_msg("%s", d.msg);
  assert_true(x[0] == 2 && x[3] == 5);
  b->ops->module_free(b, m);
}

static void test_cpu_backend_rebuilds_damaged_entry(void **state) {
  char dir[512], so[512];
  snprintf(dir, sizeof dir, "%s/cpu", g_dir);
  setenv("LATHE_CACHE_DIR", dir, 1);
  notice_set_sink(capture_warning_notice, NULL);
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  assert_non_null(b);
  run_add_one(b);
  assert_int_equal(count_so(so, sizeof so), 1);
  static const long lengths[] = {0, 100, 1024, 4096, 8000};
  for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
    g_nwarnings = 0;
    g_warnings[0] = 0;
    assert_int_equal(truncate(so, lengths[i]), 0);
    run_add_one(b); /* would die in dlopen (SIGBUS) on a truncated object */
    assert_int_equal(g_nwarnings, 1);
    assert_contains(g_warnings, "is damaged");
  }
  g_nwarnings = 0;
  run_add_one(b); /* the rebuilt entry is a hit, silently */
  assert_int_equal(g_nwarnings, 0);
  int compiles, hits;
  backend_cpu_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 6);
  assert_int_equal(hits, 1);
  b->ops->destroy(b);
  notice_set_sink(NULL, NULL);
  unsetenv("LATHE_CACHE_DIR");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_then_load),
      cmocka_unit_test(test_truncated_at_every_length_is_bad),
      cmocka_unit_test(test_any_changed_byte_is_bad),
      cmocka_unit_test(test_foreign_symlink_fifo_dir_are_bad),
      cmocka_unit_test(test_seal_file),
      cmocka_unit_test(test_store_into_missing_dir_fails_cleanly),
      cmocka_unit_test(test_cpu_backend_rebuilds_damaged_entry),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
