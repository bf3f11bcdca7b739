/* The paged KV block pool (engine/kv_blocks.h): allocation and release with refcounts, exhaustion, the LRU
 * order of cached blocks, prefix lookups (longest chain, exact tokens, exact parents even when every hash
 * collides), duplicate registration, refused double releases and the checker catching wrong holders. */
#include <stdio.h>
#include "testutil.h"
#include "engine/kv_blocks.h"

static void check_ok(const KvBlockPool *p, const int32_t *const *tables, const int *lens, int n) {
  Diag d = {0};
  if (kv_blocks_check(p, tables, lens, n, &d)) fail_msg("kv_blocks_check: %s", d.msg);
}

static void check_no_holders(const KvBlockPool *p) {
  int zero = 0;
  const int32_t *none[1] = {NULL};
  check_ok(p, none, &zero, 0);
}

static void test_bad_sizes(void **state) {
  Diag d = {0};
  assert_null(kv_blocks_new(0, 16, &d));
  assert_contains(d.msg, "must be at least 1");
  Diag d2 = {0};
  assert_null(kv_blocks_new(4, 0, &d2));
  assert_true(d2.set);
}

static void test_alloc_release_exhaustion(void **state) {
  Diag d = {0};
  KvBlockPool *p = kv_blocks_new(4, 16, &d);
  assert_non_null(p);
  int32_t ids[4];
  int seen = 0;
  for (int i = 0; i < 4; i++) {
    ids[i] = kv_blocks_alloc(p);
    assert_true(ids[i] >= 0 && ids[i] < 4);
    assert_false(seen & (1 << ids[i]));
    seen |= 1 << ids[i];
    assert_int_equal(kv_blocks_refcount(p, ids[i]), 1);
  }
  assert_int_equal(kv_blocks_alloc(p), -1); /* exhausted: -1, no crash */
  KvBlockStats st;
  kv_blocks_stats(p, &st);
  assert_int_equal(st.held, 4);
  assert_int_equal(st.free, 0);
  const int32_t *tables[1] = {ids};
  int lens[1] = {4};
  check_ok(p, tables, lens, 1);
  for (int i = 0; i < 4; i++) assert_int_equal(kv_blocks_release(p, ids[i], &d), 0);
  kv_blocks_stats(p, &st);
  assert_int_equal(st.free, 4);
  assert_int_equal(st.held + st.cached, 0);
  check_no_holders(p);
  assert_int_not_equal(kv_blocks_alloc(p), -1);
  kv_blocks_free(p);
}

static void test_double_release_refused(void **state) {
  Diag d = {0};
  KvBlockPool *p = kv_blocks_new(2, 4, &d);
  int a = kv_blocks_alloc(p);
  assert_int_equal(kv_blocks_release(p, a, &d), 0);
  assert_int_equal(kv_blocks_release(p, a, &d), -1);
  assert_contains(d.msg, "double release");
  Diag d2 = {0};
  assert_int_equal(kv_blocks_release(p, 7, &d2), -1);
  assert_contains(d2.msg, "not in 0..1");
  /* A registered block with two holders takes two releases, then is cached; a third is refused. */
  int32_t t[4] = {1, 2, 3, 4};
  int b = kv_blocks_alloc(p);
  int32_t got[1];
  assert_int_equal(kv_blocks_register(p, b, -1, t, &d), b);
  assert_int_equal(kv_blocks_lookup(p, t, 4, 1, got), 1);
  assert_int_equal(got[0], b);
  assert_int_equal(kv_blocks_refcount(p, b), 2);
  assert_int_equal(kv_blocks_release(p, b, &d), 0);
  assert_int_equal(kv_blocks_release(p, b, &d), 0);
  KvBlockStats st;
  kv_blocks_stats(p, &st);
  assert_int_equal(st.cached, 1);
  Diag d3 = {0};
  assert_int_equal(kv_blocks_release(p, b, &d3), -1);
  assert_contains(d3.msg, "cached");
  check_no_holders(p);
  kv_blocks_free(p);
}

static void test_checker_catches_wrong_holders(void **state) {
  Diag d = {0};
  KvBlockPool *p = kv_blocks_new(4, 4, &d);
  int32_t t[2] = {kv_blocks_alloc(p), kv_blocks_alloc(p)};
  const int32_t *tables[2] = {t, t};
  int lens[2] = {2, 1};
  Diag e = {0};
  assert_int_equal(kv_blocks_check(p, tables, lens, 1, &e), 0);
  /* The caller claims block t[0] has two holders: refcount 1 disagrees. */
  assert_int_equal(kv_blocks_check(p, tables, lens, 2, &e), -1);
  assert_contains(e.msg, "refcount 1 but 2 holders");
  /* A holder forgotten: block t[1] is held with no table listing it (a leak). */
  Diag e2 = {0};
  lens[0] = 1;
  assert_int_equal(kv_blocks_check(p, tables, lens, 1, &e2), -1);
  assert_contains(e2.msg, "but 0 holders");
  /* A table listing a free block. */
  int32_t bad[1] = {3};
  const int32_t *t3[1] = {bad};
  int l3[1] = {1};
  Diag e3 = {0};
  assert_int_equal(kv_blocks_check(p, t3, l3, 1, &e3), -1);
  assert_true(e3.set);
  kv_blocks_free(p);
}

/* Registers a one-block chain holding tokens (v, v+1) and returns its block, still held. */
static int reg1(KvBlockPool *p, int v) {
  Diag d = {0};
  int32_t t[2] = {v, v + 1};
  int id = kv_blocks_alloc(p);
  assert_true(id >= 0);
  assert_int_equal(kv_blocks_register(p, id, -1, t, &d), id);
  return id;
}

static int lookup1(KvBlockPool *p, int v) {
  int32_t t[2] = {v, v + 1};
  int32_t got[1];
  return kv_blocks_lookup(p, t, 2, 1, got) ? got[0] : -1;
}

static void test_lru_eviction_order(void **state) {
  Diag d = {0};
  KvBlockPool *p = kv_blocks_new(4, 2, &d);
  int a = reg1(p, 10), b = reg1(p, 20), c = reg1(p, 30);
  /* Released b, a, c: cached in that order, so evicted in that order. */
  kv_blocks_release(p, b, &d);
  kv_blocks_release(p, a, &d);
  kv_blocks_release(p, c, &d);
  KvBlockStats st;
  kv_blocks_stats(p, &st);
  assert_int_equal(st.cached, 3);
  assert_int_equal(st.free, 1);
  int x = kv_blocks_alloc(p); /* the truly free block goes first */
  assert_true(x != a && x != b && x != c);
  kv_blocks_stats(p, &st);
  assert_int_equal(st.evictions, 0);
  assert_int_equal(kv_blocks_alloc(p), b); /* then the least recently released */
  assert_false(kv_blocks_is_registered(p, b));
  assert_int_equal(lookup1(p, 20), -1);
  /* A hit on a takes it off the LRU; released again it becomes the most recent: c goes next, then a. */
  assert_int_equal(lookup1(p, 10), a);
  kv_blocks_release(p, a, &d);
  assert_int_equal(kv_blocks_alloc(p), c);
  assert_int_equal(kv_blocks_alloc(p), a);
  assert_int_equal(kv_blocks_alloc(p), -1);
  kv_blocks_stats(p, &st);
  assert_int_equal(st.evictions, 3);
  assert_int_equal(st.held, 4);
  kv_blocks_free(p);
}

/* Registers tokens[0 .. nb * bs) as a chain of nb blocks; ids[] gets them (held). */
static void reg_chain(KvBlockPool *p, const int32_t *tokens, int nb, int32_t *ids) {
  Diag d = {0};
  int bs = kv_blocks_block_size(p);
  for (int k = 0; k < nb; k++) {
    ids[k] = kv_blocks_alloc(p);
    assert_int_equal(kv_blocks_register(p, ids[k], k ? ids[k - 1] : -1, tokens + k * bs, &d), ids[k]);
  }
}

static void release_all(KvBlockPool *p, const int32_t *ids, int n) {
  Diag d = {0};
  for (int i = n - 1; i >= 0; i--) assert_int_equal(kv_blocks_release(p, ids[i], &d), 0);
}

static void test_prefix_longest_match(void **state) {
  Diag d = {0};
  KvBlockPool *p = kv_blocks_new(16, 4, &d);
  int32_t t[16], u[16];
  for (int i = 0; i < 16; i++) t[i] = u[i] = 100 + i;
  int32_t ids[3], got[4];
  reg_chain(p, t, 3, ids); /* blocks of t[0..12) */
  release_all(p, ids, 3);
  assert_int_equal(kv_blocks_lookup(p, t, 16, 4, got), 3); /* the 4th block is not registered */
  for (int k = 0; k < 3; k++) assert_int_equal(got[k], ids[k]);
  release_all(p, got, 3);
  assert_int_equal(kv_blocks_lookup(p, t, 16, 1, got), 1); /* max_blocks */
  release_all(p, got, 1);
  assert_int_equal(kv_blocks_lookup(p, t, 11, 4, got), 2); /* only full blocks of the query */
  release_all(p, got, 2);
  u[9] = 7; /* the third block differs: two match */
  assert_int_equal(kv_blocks_lookup(p, u, 16, 4, got), 2);
  release_all(p, got, 2);
  u[9] = t[9];
  u[0] = 7; /* the first block differs: nothing, though blocks 2 and 3 are equal */
  assert_int_equal(kv_blocks_lookup(p, u, 16, 4, got), 0);
  KvBlockStats st;
  kv_blocks_stats(p, &st);
  assert_int_equal(st.lookups, 5);
  assert_int_equal(st.hit_blocks, 3 + 1 + 2 + 2);
  assert_int_equal(st.hit_tokens, 4 * st.hit_blocks);
  assert_int_equal(st.miss_blocks, 1 + 0 + 0 + 2 + 4);
  check_no_holders(p);
  kv_blocks_free(p);
}

static uint64_t constant_hash(uint64_t parent, const int32_t *tokens, int n) { return 42; }

static void test_forced_collision_never_shares(void **state) {
  Diag d = {0};
  KvBlockPool *p = kv_blocks_new(8, 4, &d);
  assert_int_equal(kv_blocks_set_hash(p, constant_hash), 0);
  int32_t x[8] = {1, 1, 1, 1, 5, 5, 5, 5}, y[8] = {2, 2, 2, 2, 5, 5, 5, 5}, z[4] = {9, 9, 9, 9};
  int32_t xs[2], got[2];
  reg_chain(p, x, 2, xs);
  assert_int_equal(kv_blocks_set_hash(p, NULL), -1); /* not once something is registered */
  /* Same hash, other tokens: no match, and registering them takes a block of their own. */
  assert_int_equal(kv_blocks_lookup(p, z, 4, 1, got), 0);
  int zb = kv_blocks_alloc(p);
  assert_int_equal(kv_blocks_register(p, zb, -1, z, &d), zb);
  /* y's second block has x's second block's tokens and hash, but another parent: never matched. */
  assert_int_equal(kv_blocks_lookup(p, y, 8, 2, got), 0);
  int32_t ys[1];
  reg_chain(p, y, 1, ys);
  assert_int_equal(kv_blocks_lookup(p, y, 8, 2, got), 1);
  assert_int_equal(got[0], ys[0]);
  kv_blocks_release(p, got[0], &d);
  assert_int_equal(kv_blocks_lookup(p, x, 8, 2, got), 2);
  assert_int_equal(got[1], xs[1]);
  release_all(p, got, 2);
  int32_t ztab[1] = {zb};
  const int32_t *tables[3] = {xs, ys, ztab};
  int lens[3] = {2, 1, 1};
  check_ok(p, tables, lens, 3);
  kv_blocks_free(p);
}

static void test_register_duplicate_and_errors(void **state) {
  Diag d = {0};
  KvBlockPool *p = kv_blocks_new(4, 2, &d);
  int32_t t[2] = {3, 4};
  int a = kv_blocks_alloc(p), b = kv_blocks_alloc(p);
  assert_int_equal(kv_blocks_register(p, a, -1, t, &d), a);
  /* Same chain position registered again: the existing block is taken, b goes back to free. */
  assert_int_equal(kv_blocks_register(p, b, -1, t, &d), a);
  assert_int_equal(kv_blocks_refcount(p, a), 2);
  assert_int_equal(kv_blocks_refcount(p, b), 0);
  assert_false(kv_blocks_is_registered(p, b));
  Diag e1 = {0}, e2 = {0}, e3 = {0};
  assert_int_equal(kv_blocks_register(p, a, -1, t, &e1), -1);
  assert_contains(e1.msg, "already registered");
  assert_int_equal(kv_blocks_register(p, b, -1, t, &e2), -1);
  assert_contains(e2.msg, "not held");
  int c = kv_blocks_alloc(p), e = kv_blocks_alloc(p);
  assert_int_equal(kv_blocks_register(p, e, c, t, &e3), -1);
  assert_contains(e3.msg, "not registered");
  assert_non_null(kv_blocks_tokens(p, a));
  assert_int_equal(kv_blocks_tokens(p, a)[1], 4);
  assert_null(kv_blocks_tokens(p, c));
  kv_blocks_release(p, a, &d);
  kv_blocks_release(p, a, &d);
  kv_blocks_release(p, c, &d);
  kv_blocks_release(p, e, &d);
  check_no_holders(p);
  kv_blocks_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_sizes),
      cmocka_unit_test(test_alloc_release_exhaustion),
      cmocka_unit_test(test_double_release_refused),
      cmocka_unit_test(test_checker_catches_wrong_holders),
      cmocka_unit_test(test_lru_eviction_order),
      cmocka_unit_test(test_prefix_longest_match),
      cmocka_unit_test(test_forced_collision_never_shares),
      cmocka_unit_test(test_register_duplicate_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
