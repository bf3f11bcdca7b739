/* lathe tune's process and compile-time parts: the child runner's watchdog (a crash is a fault, a hang a
 * timeout, and the parent goes on), and compile-time selection (measured, else the default, with the reason;
 * no database: no reasons and the default; a corrupt database: a warning and the defaults). */
#include "testutil.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/notice.h"
#include "tile/space.h"
#include "tune/child.h"
#include "tune/key.h"
#include "tune/lookup.h"
#include "tune/prior.h"
#include "tune/search.h"
#include "tune/tune.h"

static int ok_fn(void *ctx, StrBuf *out) {
  (void)ctx;
  sb_putn(out, "a\0b", 3);
  return 1;
}
static int failed_fn(void *ctx, StrBuf *out) {
  (void)ctx;
  sb_puts(out, "compile error");
  return 0;
}
static int crash_fn(void *ctx, StrBuf *out) {
  (void)ctx, (void)out;
  raise(SIGKILL); /* what a device fault or a sanitizer's abort looks like from outside */
  return 1;
}
static int exit_fn(void *ctx, StrBuf *out) {
  (void)ctx, (void)out;
  _exit(1); /* dies before the last byte, whatever the status */
}
static int hang_fn(void *ctx, StrBuf *out) {
  (void)ctx, (void)out;
  for (;;) pause();
  return 1;
}

static void child_watchdog(void **state) {
  (void)state;
  StrBuf b = {0};
  char why[256];
  assert_int_equal(tune_run_child(ok_fn, NULL, 30, &b, why, sizeof why), CHILD_OK);
  assert_int_equal(b.len, 3);
  assert_memory_equal(b.data, "a\0b", 3);
  sb_clear(&b);
  assert_int_equal(tune_run_child(failed_fn, NULL, 30, &b, why, sizeof why), CHILD_FAILED);
  assert_string_equal(sb_str(&b), "compile error");
  sb_clear(&b);
  assert_int_equal(tune_run_child(crash_fn, NULL, 30, &b, why, sizeof why), CHILD_FAULT);
  assert_contains(why, "killed by signal 9");
  assert_int_equal(tune_run_child(exit_fn, NULL, 30, &b, why, sizeof why), CHILD_FAULT);
  assert_contains(why, "exited with status 1 before finishing");
  assert_int_equal(tune_run_child(hang_fn, NULL, 1, &b, why, sizeof why), CHILD_TIMEOUT);
  assert_contains(why, "still running after 1 s: killed");
  /* and the parent goes on */
  assert_int_equal(tune_run_child(ok_fn, NULL, 30, &b, why, sizeof why), CHILD_OK);
  sb_free(&b);
}

/* The serving child: "echo" answers and goes on (keeping state between requests), "fail" fails and goes on,
 * "quit" fails and exits, "crash" dies, "hang" hangs. */
static int served_here;
static int serve_fn(void *ctx, const char *req, size_t n, StrBuf *out) {
  (void)ctx;
  served_here++; /* the child's own count: it persists from one request to the next */
  if (n == 4 && !memcmp(req, "echo", 4)) return sb_printf(out, "echo %d", served_here), 1;
  if (n == 4 && !memcmp(req, "fail", 4)) return sb_puts(out, "a compile error"), 0;
  if (n == 4 && !memcmp(req, "quit", 4)) return sb_puts(out, "a launch error"), -1;
  if (n == 5 && !memcmp(req, "crash", 5)) raise(SIGKILL);
  for (;;) pause();
}

static void worker_serves_and_survives(void **state) {
  (void)state;
  TuneWorker w;
  StrBuf b = {0};
  char why[256];
  assert_true(tune_worker_start(&w, serve_fn, NULL, why, sizeof why));
  assert_int_equal(tune_worker_call(&w, "echo", 4, 30, &b, why, sizeof why), CHILD_OK);
  assert_string_equal(sb_str(&b), "echo 1");
  sb_clear(&b);
  assert_int_equal(tune_worker_call(&w, "fail", 4, 30, &b, why, sizeof why), CHILD_FAILED);
  assert_string_equal(sb_str(&b), "a compile error");
  sb_clear(&b);
  assert_int_equal(tune_worker_call(&w, "echo", 4, 30, &b, why, sizeof why), CHILD_OK);
  assert_string_equal(sb_str(&b), "echo 3"); /* the same child, which went on after the failure */
  sb_clear(&b);
  assert_int_equal(tune_worker_call(&w, "quit", 4, 30, &b, why, sizeof why), CHILD_FAILED);
  assert_string_equal(sb_str(&b), "a launch error");
  assert_int_equal(w.pid, 0); /* it ended itself */
  sb_clear(&b);
  assert_int_equal(tune_worker_call(&w, "echo", 4, 30, &b, why, sizeof why), CHILD_FAULT);
  assert_contains(why, "not running");
  assert_true(tune_worker_start(&w, serve_fn, NULL, why, sizeof why));
  assert_int_equal(tune_worker_call(&w, "crash", 5, 30, &b, why, sizeof why), CHILD_FAULT);
  assert_contains(why, "killed by signal 9");
  assert_int_equal(w.pid, 0);
  assert_true(tune_worker_start(&w, serve_fn, NULL, why, sizeof why));
  assert_int_equal(tune_worker_call(&w, "hang", 4, 1, &b, why, sizeof why), CHILD_TIMEOUT);
  assert_contains(why, "still running after 1 s: killed");
  assert_int_equal(w.pid, 0);
  assert_true(tune_worker_start(&w, serve_fn, NULL, why, sizeof why));
  assert_int_equal(tune_worker_call(&w, "echo", 4, 30, &b, why, sizeof why), CHILD_OK);
  assert_string_equal(sb_str(&b), "echo 1"); /* a new child */
  tune_worker_stop(&w);
  assert_int_equal(w.pid, 0);
  assert_int_equal(served_here, 0); /* all of it ran in the children */
  sb_free(&b);
}

static const char *PROG = "x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)";
static const char *PROG_BF16 = "x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)";
static const char *prog_here; /* PROG unless a test sets it */
static Target target_here = TARGET_CPU;
static char dir[128], dbpath[200];

static void plant(const char *schedule, const char *bucket, double us) {
  Compilation *c = compilation_new(target_here, NULL);
  Diag d = {0};
  assert_true(compile_source(c, prog_here ? prog_here : PROG, ST_LOOP, &d));
  TuneRecord r = {0};
  tune_kernel_key(c->loop, &c->loop->kernels[0], MM_HIGH, r.kernel);
  snprintf(r.bucket, sizeof r.bucket, "%s", bucket);
  tune_device_identity(&c->device, 0, r.device, sizeof r.device);
  snprintf(r.compiler, sizeof r.compiler, "%s", TUNE_COMPILER_IDENTITY);
  snprintf(r.schedule, sizeof r.schedule, "%s", schedule);
  snprintf(r.name, sizeof r.name, "linear_0");
  r.median_us = r.min_us = r.max_us = us;
  r.samples = 3;
  TuneDb *db = tune_db_open(dbpath, &d);
  assert_non_null(db);
  assert_true(tune_db_add(db, &r, &d));
  tune_db_close(db);
  compilation_free(c);
}

static const Prior *prior_here;

/* Compiles PROG through the tile stage with the database (or without: use_db 0). */
static Compilation *compile_with(int use_db, const SymEnv *env, TuneLookup *l, int *opened) {
  Compilation *c = compilation_new(target_here, NULL);
  *opened = use_db && tune_lookup_open(l, dbpath, env, 0);
  if (*opened) l->prior = prior_here, l->prior_cuda = NULL; /* measured/default alone unless a test plants one */
  if (*opened) c->schedules = &l->source;
  Diag d = {0};
  if (!compile_source(c, prog_here ? prog_here : PROG, ST_CODE, &d)) fail_msg("%s", d.msg);
  return c;
}

static int warnings;
static char warning[600];
static void sink(void *ctx, const Notice *n) {
  (void)ctx;
  if (n->kind == NOTICE_WARNING) warnings++, snprintf(warning, sizeof warning, "%s", n->text);
}

static void compile_time_selection(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/lathe_tune_use_XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(dbpath, sizeof dbpath, "%s/tune.db", dir);
  TuneLookup l;
  int opened;
  /* no database file: the defaults, nothing printed, no file made */
  Compilation *plain = compile_with(1, NULL, &l, &opened);
  assert_false(opened);
  assert_null(plain->tile->kernels[0].origin);
  assert_int_not_equal(access(dbpath, F_OK), 0);
  Schedule def = plain->tile->kernels[0].s;
  /* two measurements: the faster one is taken */
  plant("red=serial threads=1 vec=2 omp=0 rows=2 axis=0", "seq=8", 40);
  plant("red=serial threads=1 vec=4 omp=0 rows=8 axis=0", "seq=8", 30);
  plant("red=serial threads=1 vec=8 omp=0 rows=1 axis=-1", "seq=128", 900);
  SymEnv env = {0};
  symenv_set(&env, "seq", 7);
  Compilation *c = compile_with(1, &env, &l, &opened);
  assert_true(opened);
  assert_int_equal(c->tile->kernels[0].s.vec, 4);
  assert_int_equal(c->tile->kernels[0].s.rows, 8);
  assert_contains(c->tile->kernels[0].origin, "measured: 30.0 us, its kernels alone, 3 samples, at seq=8");
  StrBuf b = {0};
  tile_print(&b, c->tile);
  assert_contains(sb_str(&b), "rows=8(i0) => loop + variant rows  [measured: ");
  sb_free(&b);
  /* the code is the measured schedule's, not the default's */
  assert_string_not_equal(sb_str(&c->code), sb_str(&plain->code));
  tune_lookup_close(&l);
  compilation_free(c);
  /* another bucket: that bucket's measurement */
  symenv_set(&env, "seq", 100);
  c = compile_with(1, &env, &l, &opened);
  assert_int_equal(c->tile->kernels[0].s.vec, 8);
  tune_lookup_close(&l);
  compilation_free(c);
  /* without symbol values, measured at seq 8 and 128: the smaller's best, whose blocked variant runs there
   * (selection_across_sizes has the rest) */
  c = compile_with(1, NULL, &l, &opened);
  assert_int_equal(c->tile->kernels[0].s.vec, 4);
  tune_lookup_close(&l);
  compilation_free(c);
  /* a bucket never measured: the default, saying so, and the same code as without a database */
  symenv_set(&env, "seq", 3000);
  c = compile_with(1, &env, &l, &opened);
  assert_true(schedule_equal(&c->tile->kernels[0].s, &def));
  assert_string_equal(c->tile->kernels[0].origin, "default: no measurement");
  assert_string_equal(sb_str(&c->code), sb_str(&plain->code));
  tune_lookup_close(&l);
  compilation_free(c);
  /* --no-tune: the database is not consulted */
  c = compile_with(0, NULL, &l, &opened);
  assert_null(c->tile->kernels[0].origin);
  assert_string_equal(sb_str(&c->code), sb_str(&plain->code));
  compilation_free(c);
  /* a measured schedule that is illegal here (blocking an axis the kernel lacks): the default, with why */
  plant("red=serial threads=1 vec=1 omp=0 rows=8 axis=5", "seq=4096", 1);
  symenv_set(&env, "seq", 4000);
  c = compile_with(1, &env, &l, &opened);
  assert_true(schedule_equal(&c->tile->kernels[0].s, &def));
  assert_contains(c->tile->kernels[0].origin, "default (the measured schedule is not legal here: kernel linear_0: "
                                              "register blocking on parallel axis 5");
  tune_lookup_close(&l);
  compilation_free(c);
  /* a corrupt database: one warning, the defaults, the compile succeeds */
  FILE *f = fopen(dbpath, "w");
  for (int i = 0; i < 100; i++) fputs("not a database ", f);
  fclose(f);
  char wal[300];
  snprintf(wal, sizeof wal, "%s-wal", dbpath);
  unlink(wal);
  snprintf(wal, sizeof wal, "%s-shm", dbpath);
  unlink(wal);
  notice_set_sink(sink, NULL);
  c = compile_with(1, &env, &l, &opened);
  notice_set_sink(NULL, NULL);
  assert_false(opened);
  assert_int_equal(warnings, 1);
  assert_contains(warning, "not a database: compiling with the default schedules");
  assert_string_equal(sb_str(&c->code), sb_str(&plain->code));
  compilation_free(c);
  compilation_free(plain);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* A compile for no particular sizes (a model's plan) of a kernel measured at seq = 1 and seq = 512: its own
 * form from the first, its blocked variant from the second; one size of seq only: the default (a decode
 * measurement does not set a prefill's knobs). */
static void selection_across_sizes(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/lathe_tune_sizes_XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(dbpath, sizeof dbpath, "%s/tune.db", dir);
  TuneLookup l;
  int opened;
  plant("red=serial threads=1 vec=8 omp=1 rows=1 axis=-1", "seq=1", 20);
  Compilation *dflt = compile_with(0, NULL, &l, &opened);
  int default_rows = dflt->tile->kernels[0].s.rows, dflt_vec = dflt->tile->kernels[0].s.vec;
  assert_true(default_rows > 1);
  compilation_free(dflt);
  Compilation *c = compile_with(1, NULL, &l, &opened);
  assert_true(opened);
  assert_int_equal(c->tile->kernels[0].s.vec, dflt_vec);
  assert_int_equal(c->tile->kernels[0].s.rows, default_rows);
  assert_contains(c->tile->kernels[0].origin, "default: measured only at seq=1");
  tune_lookup_close(&l);
  compilation_free(c);
  plant("red=serial threads=1 vec=1 omp=0 rows=8 axis=0", "seq=512", 500);
  plant("red=serial threads=1 vec=2 omp=0 rows=2 axis=0", "seq=512", 700);
  c = compile_with(1, NULL, &l, &opened);
  const Schedule *s = &c->tile->kernels[0].s;
  assert_int_equal(s->vec, 8);
  assert_int_equal(s->omp, 1);
  assert_int_equal(s->rows, 8);
  assert_int_equal(s->row_axis, 0);
  assert_contains(c->tile->kernels[0].origin,
                  "measured: its own form 20.0 us at seq=1, its blocked variant 500.0 us at seq=512");
  tune_lookup_close(&l);
  compilation_free(c);
  /* given sizes: only that bucket */
  SymEnv env = {0};
  symenv_set(&env, "seq", 300);
  c = compile_with(1, &env, &l, &opened);
  assert_int_equal(c->tile->kernels[0].s.vec, 1);
  assert_int_equal(c->tile->kernels[0].s.rows, 8);
  tune_lookup_close(&l);
  compilation_free(c);
  /* the small size's best has a variant that runs there: it decides alone */
  plant("red=serial threads=1 vec=4 omp=0 rows=2 axis=1", "seq=1", 10);
  c = compile_with(1, NULL, &l, &opened);
  assert_int_equal(c->tile->kernels[0].s.vec, 4);
  assert_int_equal(c->tile->kernels[0].s.row_axis, 1);
  assert_contains(c->tile->kernels[0].origin, "measured: 10.0 us, its kernels alone, 3 samples, at seq=1");
  tune_lookup_close(&l);
  compilation_free(c);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* No measurement at these sizes: a prior that favours 8 rows and wide vectors picks them (saying its score),
 * one that ranks the default first keeps it; an unloaded prior is the default; bad prior text is refused. */
static void selection_by_prior(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/lathe_tune_prior_XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(dbpath, sizeof dbpath, "%s/tune.db", dir);
  plant("red=serial threads=1 vec=2 omp=0 rows=2 axis=0", "seq=8", 40); /* another bucket: not in scope */
  Prior p = {0};
  Diag d = {0};
  StrBuf text = {0};
  sb_puts(&text, "{\"format\": \"lathe-prior\", \"version\": 1, \"weights\": [");
  for (int i = 0; i < PRIOR_SCHEDULE_FEATURES; i++) {
    sb_puts(&text, i ? ", [" : "[");
    for (int j = 0; j < PRIOR_KERNEL_FEATURES; j++) /* bias column: log2 rows (7) and log2 vec (4) score up */
      sb_printf(&text, "%s%g", j ? ", " : "", j == 0 && (i == 7 || i == 4) ? 1.0 : 0.0);
    sb_puts(&text, "]");
  }
  sb_puts(&text, "]}");
  assert_true(prior_parse(sb_str(&text), "test", &p, &d));
  assert_true(p.loaded);
  prior_here = &p;
  SymEnv env = {0};
  symenv_set(&env, "seq", 64);
  TuneLookup l;
  int opened;
  Compilation *c = compile_with(1, &env, &l, &opened);
  assert_true(opened);
  assert_int_equal(c->tile->kernels[0].s.rows, 8);
  assert_int_equal(c->tile->kernels[0].s.vec, 8);
  assert_contains(c->tile->kernels[0].origin, "prior: ");
  assert_contains(c->tile->kernels[0].origin, "no measurement");
  StrBuf b = {0};
  tile_print(&b, c->tile);
  assert_contains(sb_str(&b), "[prior: ");
  sb_free(&b);
  tune_lookup_close(&l);
  compilation_free(c);
  /* one flat prior keeps the default (rows=8 on the CPU) */
  Prior flat = {0};
  flat.loaded = 1;
  prior_here = &flat;
  c = compile_with(1, &env, &l, &opened);
  assert_int_equal(c->tile->kernels[0].s.rows, 8);
  assert_contains(c->tile->kernels[0].origin, "default: no measurement, and the prior ranks it first");
  tune_lookup_close(&l);
  compilation_free(c);
  /* CUDA kernels consult CUDA's prior only: the CPU's (p) is never applied to them */
  Prior unloaded = {0};
  for (int cuda_prior = 0; cuda_prior < 2; cuda_prior++) {
    c = compilation_new(TARGET_CUDA, NULL);
    assert_true(tune_lookup_open(&l, dbpath, &env, 0));
    l.prior = &p;
    l.prior_cuda = cuda_prior ? &p : &unloaded;
    c->schedules = &l.source;
    if (!compile_source(c, PROG, ST_TILE, &d)) fail_msg("%s", d.msg);
    if (cuda_prior) assert_non_null(strstr(c->tile->kernels[0].origin, "prior"));
    else assert_string_equal(c->tile->kernels[0].origin, "default: no measurement");
    tune_lookup_close(&l);
    compilation_free(c);
  }
  prior_here = NULL;
  d = (Diag){0};
  assert_false(prior_parse("{\"format\": \"lathe-prior\", \"version\": 1, \"weights\": [[1]]}", "p.json", &p, &d));
  assert_contains(d.msg, "p.json: not a lathe prior");
  assert_true(prior_parse("  \n", "empty", &p, &d));
  assert_false(p.loaded);
  sb_free(&text);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* prior_pick: the best-scored candidate, but only within the prior's reach of the default (cand[0]), and only
 * when it outscores the default; "reach" round-trips through the JSON. */
static void prior_pick_within_reach(void **state) {
  (void)state;
  Prior p = {0};
  p.loaded = 1;
  p.w[4][0] = 1; /* log2 vec */
  p.w[7][0] = 2; /* log2 rows */
  double kf[PRIOR_KERNEL_FEATURES] = {1};
  Schedule c[3] = {{0}};
  c[0].red = RS_SERIAL, c[0].block_threads = 1, c[0].vec = 1, c[0].rows = 1;
  c[1] = c[0], c[1].vec = 8;                                           /* one knob away */
  c[2] = c[1], c[2].rows = 8, c[2].rows_serial = 1, c[2].row_axis = 1; /* three more */
  assert_true(schedule_distance(&c[0], &c[1]) == 1);
  assert_true(schedule_distance(&c[0], &c[2]) > 2);
  assert_int_equal(prior_pick(&p, kf, c, 3), 2);
  p.reach = 2;
  assert_int_equal(prior_pick(&p, kf, c, 3), 1);
  p.w[4][0] = -1; /* the near one now scores below the default: keep the default */
  assert_int_equal(prior_pick(&p, kf, c, 3), 0);
  char *text = prior_to_json(&p);
  Prior back;
  Diag d = {0};
  assert_true(prior_parse(text, "round trip", &back, &d));
  assert_int_equal(back.reach, 2);
  free(text);
}

/* The prior reads the description it compiles for (its kernel features include the multiprocessors, and the
 * candidates it ranks are that description's space): a prior by which threads per point pay off the more SMs there
 * are (log2 threads weighted -0.8 + log2(SMs) / 8) picks 1024 threads for a GEMV of 512 rows on the h200's 132 SMs
 * (+0.08 per doubling) and 64 on h200:sms=66 (-0.04 per doubling). */
static void prior_follows_the_description(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/lathe_tune_prior_dev_XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(dbpath, sizeof dbpath, "%s/tune.db", dir);
  plant("red=serial threads=1 vec=2 omp=0 rows=2 axis=0", "seq=8", 40); /* a database to consult: CPU only */
  Prior p = {0};
  p.loaded = 1;
  p.w[3][0] = -0.8, p.w[3][7] = 1.0;
  const char *gemv = "x: f32[1, 65536]; w: f32[512, 65536]; y = linear(x, w)";
  const char *devs[2] = {"h200", "h200:sms=66"};
  int threads[2];
  for (int i = 0; i < 2; i++) {
    Diag d = {0};
    TargetDesc t;
    assert_true(target_from_spec(devs[i], &t, &d));
    Compilation *c = compilation_new(TARGET_CUDA, NULL);
    c->device = t;
    TuneLookup l;
    SymEnv env = {0};
    assert_true(tune_lookup_open(&l, dbpath, &env, 0));
    l.prior_cuda = &p;
    c->schedules = &l.source;
    if (!compile_source(c, gemv, ST_TILE, &d)) fail_msg("%s: %s", devs[i], d.msg);
    assert_contains(c->tile->kernels[0].origin, "prior: ");
    threads[i] = c->tile->kernels[0].s.block_threads;
    assert_int_equal(c->tile->kernels[0].s.red, RS_BLOCK);
    tune_lookup_close(&l);
    compilation_free(c);
  }
  assert_int_equal(threads[0], 1024);
  assert_int_equal(threads[1], 64);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* A GEMV measured at seq = 1 with a rows variant that runs there, a GEMM at seq = 512 on tensor cores: a model's
 * plan keeps the tensor cores for its prefills (the small size's rows variant gives way; on the H200 keeping it
 * made qwen3-0.6b's 512-token prefill 5.8x slower), and says so. */
static void tensor_cores_kept_across_sizes(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/lathe_tune_mma_XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(dbpath, sizeof dbpath, "%s/tune.db", dir);
  target_here = TARGET_CUDA;
  prog_here = PROG_BF16;
  TuneLookup l;
  int opened;
  plant("red=block threads=64 vec=8 omp=0 rows=2 axis=1", "seq=1", 90);
  plant("red=block threads=64 vec=8 omp=0 rows=8 axis=0 mma=2 fill=264 lib=1", "seq=512", 400);
  Compilation *c = compile_with(1, NULL, &l, &opened);
  assert_true(opened);
  const Schedule *s = &c->tile->kernels[0].s;
  assert_int_equal(s->mma, 2);
  assert_int_equal(s->rows, 8);
  assert_int_equal(s->row_axis, 0);
  assert_int_equal(s->block_threads, 64);
  assert_contains(c->tile->kernels[0].origin, "without the rows variant measured there (90.0 us), its blocked "
                                              "variant 400.0 us at seq=512");
  tune_lookup_close(&l);
  compilation_free(c);
  /* the large size's best without tensor cores: the small size's rows variant decides alone, as on the CPU */
  plant("red=block threads=64 vec=8 omp=0 rows=4 axis=0", "seq=512", 300);
  c = compile_with(1, NULL, &l, &opened);
  assert_int_equal(c->tile->kernels[0].s.row_axis, 1);
  assert_int_equal(c->tile->kernels[0].s.mma, 0);
  assert_contains(c->tile->kernels[0].origin, "measured: 90.0 us, its kernels alone, 3 samples, at seq=1");
  tune_lookup_close(&l);
  compilation_free(c);
  target_here = TARGET_CPU;
  prog_here = NULL;
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* ---- the whole tuner over a backend with planted failures: the blocked variant of 2 rows gives wrong
 * outputs, that of 8 rows crashes, and with OpenMP hangs ---- */

static const BackendOps *real_ops;
static BackendOps planted_ops;
static int saw_omp, wrong_now;

static BackendModule *planted_compile(Backend *b, const char *source, Diag *d) {
  saw_omp = strstr(source, "#pragma omp") != NULL;
  wrong_now = 0; /* per candidate: one measuring child compiles many */
  return real_ops->compile(b, source, d);
}
static int planted_launch(Backend *b, BackendModule *m, const char *name, void *const *bufs, int nbufs,
                          const int64_t *syms, int nsyms, int64_t grid, int block, Diag *d) {
  if (strstr(name, "_rows4")) {
    if (saw_omp)
      for (;;) pause();
    raise(SIGKILL);
  }
  if (strstr(name, "_rows2")) wrong_now = 1;
  return real_ops->launch(b, m, name, bufs, nbufs, syms, nsyms, grid, block, d);
}
static int planted_download(Backend *b, void *dst, const void *src, size_t bytes, Diag *d) {
  int ok = real_ops->download(b, dst, src, bytes, d);
  if (ok && wrong_now && bytes >= sizeof(float)) ((float *)dst)[0] += 1;
  return ok;
}
static Backend *planted_backend(Diag *d) {
  Backend *b = backend_cpu_new(d);
  if (!b) return NULL;
  real_ops = b->ops;
  planted_ops = *b->ops;
  planted_ops.compile = planted_compile;
  planted_ops.launch = planted_launch;
  planted_ops.download = planted_download;
  b->ops = &planted_ops;
  return b;
}

static int count_status(void *ctx, const TuneRecord *r) {
  ((int *)ctx)[r->status]++;
  return 1;
}

static void tuner_survives_planted_failures(void **state) {
  (void)state;
  char tdir[] = "/tmp/lathe_tune_plant_XXXXXX", path[200];
  assert_non_null(mkdtemp(tdir));
  snprintf(path, sizeof path, "%s/tune.db", tdir);
  Diag d = {0};
  TuneDb *db = tune_db_open(path, &d);
  assert_non_null(db);
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  assert_true(compile_source(c, PROG, ST_TILE, &d));
  assert_int_equal(c->tile->kernels[0].s.rows, 8); /* the default blocks 8 rows: none of the planted */
  TuneOptions o = {{0, 0, 0, 0.03, 1}, 0, 2, {0}, 1, planted_backend, 0, NULL, NULL};
  symenv_set(&o.env, "seq", 8);
  TuneReport r;
  if (!tune_compilation(c, db, &o, &r, &d)) fail_msg("%s", d.msg);
  assert_int_equal(r.n, 1);
  const TuneKernelReport *k = &r.k[0];
  assert_int_equal(k->tried, k->candidates); /* the faults and hangs did not stop the search */
  /* rows 2 on either blockable axis (the tokens, the weight's rows): four vector widths, without OpenMP, with it
   * and with it decided at run time (the default's choice); rows 4: the same without OpenMP (faults) and with it
   * (hangs) */
  assert_int_equal(k->wrong, 24);
  assert_int_equal(k->faults, 8);
  assert_int_equal(k->timeouts, 16);
  Schedule best;
  assert_true(schedule_parse(k->best, &best, &d));
  assert_true(best.rows == 1 || best.rows == 8);
  assert_true(k->best_us > 0 && k->default_us > 0 && r.default_us > 0 && r.tuned_us > 0);
  /* the assembled step against the sum of its parts (one part here) */
  assert_false(k->absorbed);
  assert_true(r.parts_tuned_us == k->best_us && r.parts_default_us == k->default_us);
  assert_true(tune_assembled_ratio(&r) == r.tuned_us / k->best_us);
  int st[4] = {0};
  assert_true(tune_db_each(db, count_status, st, &d));
  assert_int_equal(st[TS_WRONG], 24);
  assert_int_equal(st[TS_FAULT], 8);
  assert_int_equal(st[TS_TIMEOUT], 16);
  assert_true(st[TS_OK] >= k->candidates - 48);
  free(r.k);
  tune_db_close(db);
  compilation_free(c);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tdir);
  assert_int_equal(system(cmd), 0);
}

/* The sum of the parts: every structure's time with its best (and its default), leaving out a structure timed
 * within another's part (attention's scores and softmax in the P x V's); nothing when a structure was not tuned
 * or a part did not measure; the assembled step's ratio to it. */
static void assembled_against_parts(void **state) {
  (void)state;
  TuneKernelReport k[3] = {{.default_us = 10, .best_us = 6},
                           {.default_us = 4, .best_us = 3, .absorbed = 1},
                           {.default_us = 5, .best_us = 5}};
  TuneReport r = {k, 3, 0, 20, 14.3, 0, 0};
  assert_true(tune_report_parts(&r));
  assert_true(r.parts_default_us == 15 && r.parts_tuned_us == 11);
  assert_true(fabs(tune_assembled_ratio(&r) - 1.3) < 1e-12);
  r.untuned = 1; /* a structure not searched: its part is unknown */
  assert_false(tune_report_parts(&r));
  assert_true(r.parts_tuned_us == 0 && tune_assembled_ratio(&r) == 0);
  r.untuned = 0;
  k[2].best_us = 0; /* a part that did not measure */
  assert_false(tune_report_parts(&r));
  k[2].best_us = 5;
  k[1].absorbed = 0;
  assert_true(tune_report_parts(&r));
  assert_true(r.parts_tuned_us == 14);
}

/* Under a budget the time follows the defaults' times (one run measures every structure's default first) and
 * the heaviest is searched first: the 16 x 512 x 256 product before the norm over 16 x 256 values. */
static void budget_follows_default_time(void **state) {
  (void)state;
  char tdir[] = "/tmp/lathe_tune_budget_XXXXXX", path[200];
  assert_non_null(mkdtemp(tdir));
  snprintf(path, sizeof path, "%s/tune.db", tdir);
  Diag d = {0};
  TuneDb *db = tune_db_open(path, &d);
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  assert_true(compile_source(
      c, "x: f32[seq, 256]; g: f32[256]; w: f32[512, 256]; h = rms_norm(x, g, 1e-6); y = linear(h, w)", ST_TILE, &d));
  TuneOptions o = {{0, 0, 6, 0.03, 3}, 1, 60, {0}, 1, backend_cpu_new, 0, NULL, NULL};
  symenv_set(&o.env, "seq", 16);
  TuneReport r;
  if (!tune_compilation(c, db, &o, &r, &d)) fail_msg("%s", d.msg);
  /* the product first (heaviest), with the budget to itself but for the norm's small share, if any is left */
  assert_true(r.n >= 1 && r.n + r.untuned == 2);
  assert_non_null(strstr(r.k[0].name, "linear"));
  assert_true(r.k[0].tried > 2);
  if (r.n == 2) assert_non_null(strstr(r.k[1].name, "rms_norm"));
  free(r.k);
  tune_db_close(db);
  compilation_free(c);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tdir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(child_watchdog),
      cmocka_unit_test(worker_serves_and_survives),
      cmocka_unit_test(compile_time_selection),
      cmocka_unit_test(selection_across_sizes),
      cmocka_unit_test(tensor_cores_kept_across_sizes),
      cmocka_unit_test(selection_by_prior),
      cmocka_unit_test(prior_pick_within_reach),
      cmocka_unit_test(prior_follows_the_description),
      cmocka_unit_test(tuner_survives_planted_failures),
      cmocka_unit_test(budget_follows_default_time),
      cmocka_unit_test(assembled_against_parts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
