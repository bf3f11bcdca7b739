/* The tuning database (tune/db.c, db_json.c) and its keys (tune/key.c): round trip, export and import, two
 * processes writing at once, a corrupt file, an older and a newer schema; structural identities. */
#include "testutil.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "base/notice.h"
#include "driver/pipeline.h"
#include "model/config.h"
#include "model/arch/arch.h"
#include "model/presets.h"
#include "tune/db.h"
#include "tune/key.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/lathe_tune_db_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd);
}

static void path_of(char *out, const char *name) { snprintf(out, 300, "%s/%s", dir, name); }

static TuneRecord record(const char *kernel, const char *schedule, TuneStatus st, double us) {
  TuneRecord r = {0};
  snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
  snprintf(r.bucket, sizeof r.bucket, "seq=8");
  snprintf(r.device, sizeof r.device, "cpu test, 2 cores");
  snprintf(r.compiler, sizeof r.compiler, "%s", TUNE_COMPILER_IDENTITY);
  snprintf(r.schedule, sizeof r.schedule, "%s", schedule);
  snprintf(r.name, sizeof r.name, "linear_0");
  r.status = st;
  r.median_us = us, r.min_us = us * 0.9, r.max_us = us * 1.2, r.samples = 5;
  return r;
}

static void round_trip(void **state) {
  (void)state;
  char p[300], q[300], json[300];
  path_of(p, "a.db");
  path_of(q, "b.db");
  path_of(json, "a.json");
  Diag d = {0};
  TuneDb *db = tune_db_open(p, &d);
  assert_non_null(db);
  TuneRecord r;
  assert_int_equal(tune_db_best(db, "k1", NULL, "cpu test, 2 cores", TUNE_COMPILER_IDENTITY, &r, &d), 0);
  assert_true(tune_db_add(db, &(TuneRecord){0}, &d)); /* an empty record is stored as given */
  TuneRecord a = record("k1", "red=serial vec=1", TS_OK, 50), b = record("k1", "red=serial vec=4", TS_OK, 20),
             w = record("k1", "red=serial vec=8", TS_WRONG, 0), f = record("k1", "red=serial vec=2", TS_FAULT, 0);
  TuneRecord other = record("k1", "red=serial vec=2", TS_OK, 1);
  snprintf(other.compiler, sizeof other.compiler, "lathe-old");
  TuneRecord *all[] = {&a, &b, &w, &f, &other};
  for (int i = 0; i < 5; i++) assert_true(tune_db_add(db, all[i], &d));
  /* the fastest ok one: never wrong or faulted, never another compiler's */
  assert_int_equal(tune_db_best(db, "k1", "seq=8", "cpu test, 2 cores", TUNE_COMPILER_IDENTITY, &r, &d), 1);
  assert_string_equal(r.schedule, "red=serial vec=4");
  assert_true(r.median_us == 20 && r.min_us == 18 && r.max_us == 24 && r.samples == 5 && r.status == TS_OK);
  assert_true(r.time > 0);
  assert_int_equal(tune_db_best(db, "k1", NULL, "cpu test, 2 cores", TUNE_COMPILER_IDENTITY, &r, &d), 1);
  assert_int_equal(tune_db_best(db, "k1", "seq=16", "cpu test, 2 cores", TUNE_COMPILER_IDENTITY, &r, &d), 0);
  assert_int_equal(tune_db_best(db, "k1", "seq=8", "cuda other", TUNE_COMPILER_IDENTITY, &r, &d), 0);
  StrBuf s = {0};
  assert_true(tune_db_stats(db, &s, &d));
  assert_contains(sb_str(&s), "measurements: 6\n");
  assert_contains(sb_str(&s), "status wrong: 1\n");
  assert_contains(sb_str(&s), "status fault: 1\n");
  sb_free(&s);
  int n;
  assert_true(tune_db_export(db, json, &n, &d));
  assert_int_equal(n, 6);
  /* into another database, twice: the second import adds nothing */
  TuneDb *db2 = tune_db_open(q, &d);
  assert_non_null(db2);
  assert_true(tune_db_import(db2, json, &n, &d));
  assert_int_equal(n, 6);
  assert_true(tune_db_import(db2, json, &n, &d));
  assert_int_equal(n, 0);
  assert_int_equal(tune_db_best(db2, "k1", "seq=8", "cpu test, 2 cores", TUNE_COMPILER_IDENTITY, &r, &d), 1);
  assert_string_equal(r.schedule, "red=serial vec=4");
  /* prune: only other compilers' measurements go */
  assert_true(tune_db_prune(db2, TUNE_COMPILER_IDENTITY, &n, &d));
  assert_int_equal(n, 2); /* lathe-old's and the empty record's */
  tune_db_close(db2);
  tune_db_close(db);
  /* a bad export */
  FILE *bad = fopen(json, "w");
  fputs("{\"schema\": 1, \"measurements\": [{\"kernel\": 3}]}", bad);
  fclose(bad);
  db2 = tune_db_open(q, &d);
  d = (Diag){0};
  assert_false(tune_db_import(db2, json, &n, &d));
  assert_contains(d.msg, "measurement 0: \"kernel\" is missing, not a string or too long");
  tune_db_close(db2);
}

static void concurrent_writers(void **state) {
  (void)state;
  char p[300];
  path_of(p, "c.db");
  enum { ROWS = 150 };
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    if ((kids[k] = fork()) == 0) {
      Diag d = {0};
      TuneDb *db = tune_db_open(p, &d); /* both may create the file at once */
      if (!db) _exit(3);
      for (int i = 0; i < ROWS; i++) {
        char sched[64];
        snprintf(sched, sizeof sched, "writer=%d row=%d", k, i);
        TuneRecord r = record(k ? "kb" : "ka", sched, TS_OK, 10 + i);
        if (!tune_db_add(db, &r, &d)) _exit(4);
      }
      tune_db_close(db);
      _exit(0);
    }
  }
  for (int k = 0; k < 2; k++) {
    int status;
    assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  Diag d = {0};
  TuneDb *db = tune_db_open(p, &d);
  StrBuf s = {0};
  assert_true(tune_db_stats(db, &s, &d));
  assert_contains(sb_str(&s), "measurements: 300\n");
  assert_contains(sb_str(&s), "kernels: 2\n");
  sb_free(&s);
  tune_db_close(db);
}

static void corrupt_file(void **state) {
  (void)state;
  char p[300];
  path_of(p, "corrupt.db");
  FILE *f = fopen(p, "w");
  for (int i = 0; i < 200; i++) fputs("this is not an sqlite database at all. ", f);
  fclose(f);
  Diag d = {0};
  assert_null(tune_db_open(p, &d));
  assert_contains(d.msg, "not a database");
  /* the file is left as it was */
  f = fopen(p, "r");
  char head[8] = {0};
  assert_int_equal(fread(head, 1, 7, f), 7);
  fclose(f);
  assert_string_equal(head, "this is");
}

static int warnings;
static char last_warning[512];
static void sink(void *ctx, const Notice *n) {
  (void)ctx;
  if (n->kind != NOTICE_WARNING) return;
  warnings++;
  snprintf(last_warning, sizeof last_warning, "%s", n->text);
}

static void schema_change(void **state) {
  (void)state;
  char p[300];
  path_of(p, "old.db");
  sqlite3 *h;
  assert_int_equal(sqlite3_open(p, &h), SQLITE_OK);
  assert_int_equal(
      sqlite3_exec(h, "CREATE TABLE results(k TEXT, us REAL); INSERT INTO results VALUES('a', 1);", NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(h);
  notice_set_sink(sink, NULL);
  Diag d = {0};
  TuneDb *db = tune_db_open(p, &d);
  notice_set_sink(NULL, NULL);
  assert_non_null(db);
  assert_int_equal(warnings, 1);
  assert_contains(last_warning, "has schema 0, not this lathe's 1: replaced (its measurements dropped)");
  TuneRecord r = record("k", "red=serial", TS_OK, 3);
  assert_true(tune_db_add(db, &r, &d));
  tune_db_close(db);
  /* opened again: no warning, the measurement kept */
  notice_set_sink(sink, NULL);
  db = tune_db_open(p, &d);
  notice_set_sink(NULL, NULL);
  assert_int_equal(warnings, 1);
  assert_int_equal(tune_db_best(db, "k", "seq=8", "cpu test, 2 cores", TUNE_COMPILER_IDENTITY, &r, &d), 1);
  tune_db_close(db);
  /* a newer lathe's file: not used, not touched */
  assert_int_equal(sqlite3_open(p, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 7", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  assert_null(tune_db_open(p, &d));
  assert_contains(d.msg, "has schema 7, newer than this lathe's 1: not used");
}

static void kernel_keys(void **state) {
  (void)state;
  Diag d = {0};
  /* the same structure under other names and in another program: one key */
  Compilation *a = compilation_new(TARGET_CPU, NULL), *b = compilation_new(TARGET_CPU, NULL),
              *c = compilation_new(TARGET_CPU, NULL);
  assert_true(compile_source(a, "x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)", ST_LOOP, &d));
  assert_true(compile_source(b, "inp: f32[seq, 64]; m: f32[96, 64]; e: f32[seq, 8]; z = exp(e); out = linear(inp, m)",
                             ST_LOOP, &d));
  assert_true(compile_source(c, "x: f32[seq, 64]; w: f32[97, 64]; y = linear(x, w)", ST_LOOP, &d));
  char ka[24], kb[24], kc[24], km[24];
  tune_kernel_key(a->loop, &a->loop->kernels[0], MM_HIGH, ka);
  tune_kernel_key(b->loop, &b->loop->kernels[b->loop->nkernels - 1], MM_HIGH, kb);
  tune_kernel_key(c->loop, &c->loop->kernels[0], MM_HIGH, kc);
  tune_kernel_key(a->loop, &a->loop->kernels[0], MM_MEDIUM, km);
  assert_int_equal(strlen(ka), 16);
  assert_string_equal(ka, kb);
  assert_string_not_equal(ka, kc); /* another shape */
  assert_string_not_equal(ka, km); /* another precision */
  SymEnv env = {0};
  char bucket[64];
  tune_kernel_bucket(a->loop, &a->loop->kernels[0], &env, bucket, sizeof bucket);
  assert_string_equal(bucket, "seq=?");
  symenv_set(&env, "seq", 5);
  tune_kernel_bucket(a->loop, &a->loop->kernels[0], &env, bucket, sizeof bucket);
  assert_string_equal(bucket, "seq=8");
  TargetDesc h200 = target_default(TARGET_CUDA);
  char id[256];
  tune_device_identity(&h200, 12080, id, sizeof id);
  assert_contains(id, "sm_90, 132 SMs");
  assert_contains(id, "driver 12080");
  compilation_free(a);
  compilation_free(b);
  compilation_free(c);
}

/* A model's layers: every kernel of one structure shares one key, whatever its buffers' numbers (a model has
 * hundreds of buffers), so a tune measures each structure once. */
static void model_layers_share_keys(void **state) {
  (void)state;
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  ModelConfig cfg;
  assert_true(model_preset("smollm2-135m", &cfg));
  ModelBuildOptions bo = {256, DT_BF16, DT_F32, 0};
  Diag d = {0};
  assert_non_null(c->graph = model_build(&cfg, &bo, c->arena, c->pool, &d));
  assert_true(compile_graph(c, ST_LOOP, &d));
  const LProgram *p = c->loop;
  assert_true(p->nbufs > 300 && p->nkernels > 300);
  char(*keys)[24] = calloc((size_t)p->nkernels, sizeof *keys);
  int distinct = 0;
  for (int i = 0; i < p->nkernels; i++) {
    tune_kernel_key(p, &p->kernels[i], MM_HIGH, keys[i]);
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = !strcmp(keys[i], keys[j]);
    distinct += !seen;
  }
  /* about a dozen structures repeated in each of 30 layers, and the few before and after them */
  /* 15 structures before RoPE read its projections at two indices; those two now have kernels of their own */
  if (distinct > 18) fprintf(stderr, "distinct kernel keys: %d\n", distinct);
  assert_true(distinct <= 18);
  free(keys);
  compilation_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip),    cmocka_unit_test(concurrent_writers), cmocka_unit_test(corrupt_file),
      cmocka_unit_test(schema_change), cmocka_unit_test(kernel_keys),        cmocka_unit_test(model_layers_share_keys),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
