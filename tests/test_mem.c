/* Checked allocation (base/mem.h): a failed or overflowing allocation is "out of memory: N bytes for WHAT",
 * in the Diag for mem_*, through the out-of-memory handler for x*; the arena and string buffers use the
 * latter. Huge requests make the allocator fail for real (ASan returns NULL with allocator_may_return_null). */
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/arena.h"
#include "base/mem.h"

const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define HUGE_BYTES ((size_t)1 << 46) /* 64 TiB: more than any test machine has */

static void test_mem_alloc_failure_is_a_diag(void **state) {
  Diag d = {0};
  assert_null(mem_alloc(&d, HUGE_BYTES, "a test buffer"));
  assert_true(d.set);
  assert_string_equal(d.msg, "out of memory: 70368744177664 bytes for a test buffer");
  Diag c = {0};
  assert_null(mem_calloc(&c, HUGE_BYTES / 8, 8, "a test array"));
  assert_string_equal(c.msg, "out of memory: 70368744177664 bytes for a test array");
  Diag r = {0};
  void *p = mem_alloc(&r, 16, "a small buffer");
  assert_non_null(p);
  assert_false(r.set);
  assert_null(mem_realloc(&r, p, HUGE_BYTES, "a grown buffer"));
  assert_contains(r.msg, "bytes for a grown buffer");
  free(p); /* a failed realloc leaves the block alone */
}

static void test_mem_calloc_overflow_is_a_diag(void **state) {
  Diag d = {0};
  assert_null(mem_calloc(&d, SIZE_MAX / 2, 4, "an overflowing array"));
  assert_string_equal(d.msg, "out of memory: the size of an overflowing array overflows");
}

static void test_mem_success_and_zero_sizes(void **state) {
  Diag d = {0};
  unsigned char *z = mem_calloc(&d, 0, 8, "nothing");
  assert_non_null(z); /* a zero-size request still gives a pointer to free */
  free(z);
  int *a = mem_calloc(&d, 100, sizeof(int), "ints");
  for (int i = 0; i < 100; i++) assert_int_equal(a[i], 0);
  free(a);
  assert_false(d.set);
}

static jmp_buf g_jump;
static char g_msg[256];
static int g_calls;
static void record_oom(const char *msg) {
  g_calls++;
  snprintf(g_msg, sizeof g_msg, "%s", msg);
  longjmp(g_jump, 1);
}

static void test_x_failure_calls_the_handler(void **state) {
  mem_set_oom_handler(record_oom);
  g_calls = 0;
  if (!setjmp(g_jump)) {
    (void)xmalloc(HUGE_BYTES, "the fused kernels");
    fail_msg("xmalloc returned on failure");
  }
  assert_int_equal(g_calls, 1);
  assert_string_equal(g_msg, "out of memory: 70368744177664 bytes for the fused kernels");
  if (!setjmp(g_jump)) {
    (void)xcalloc(SIZE_MAX / 4, 8, "a table");
    fail_msg("xcalloc returned on overflow");
  }
  assert_string_equal(g_msg, "out of memory: the size of a table overflows");
  if (!setjmp(g_jump)) {
    (void)xreallocarray(NULL, SIZE_MAX / 2, 3, "a list");
    fail_msg("xreallocarray returned on overflow");
  }
  assert_int_equal(g_calls, 3);
  char *s = xstrndup("abcdef", 3, "a name");
  assert_string_equal(s, "abc");
  free(s);
  mem_set_oom_handler(NULL);
}

/* The arena reports through the handler (it used to abort with no message), sizes that overflow too. */
static void test_arena_reports_oom(void **state) {
  mem_set_oom_handler(record_oom);
  Arena *a = arena_new();
  g_calls = 0;
  if (!setjmp(g_jump)) {
    (void)arena_alloc(a, HUGE_BYTES);
    fail_msg("arena_alloc returned on failure");
  }
  assert_int_equal(g_calls, 1);
  assert_contains(g_msg, "bytes for the compiler's arena");
  arena_free(a);
  a = arena_new();
  if (!setjmp(g_jump)) {
    (void)arena_alloc(a, SIZE_MAX - 3); /* rounding up used to wrap to a tiny block */
    fail_msg("arena_alloc returned for SIZE_MAX - 3 bytes");
  }
  assert_string_equal(g_msg, "out of memory: the size of the compiler's arena overflows");
  if (!setjmp(g_jump)) {
    (void)ARENA_ARRAY(a, double, SIZE_MAX / 4); /* count * size used to wrap */
    fail_msg("ARENA_ARRAY returned for an overflowing count");
  }
  assert_int_equal(g_calls, 3);
  assert_contains(g_msg, "overflows");
  int *ok = ARENA_ARRAY(a, int, 10);
  ok[9] = 1;
  arena_free(a);
  mem_set_oom_handler(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mem_alloc_failure_is_a_diag), cmocka_unit_test(test_mem_calloc_overflow_is_a_diag),
      cmocka_unit_test(test_mem_success_and_zero_sizes),  cmocka_unit_test(test_x_failure_calls_the_handler),
      cmocka_unit_test(test_arena_reports_oom),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
