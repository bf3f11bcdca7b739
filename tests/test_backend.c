/* CPU backend (compile through the on-disk cache, dlopen, launch), cache location, plan runtime. */
#include "testutil.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cache.h"
#include "base/arena.h"
#include "code/code.h"
#include "runtime/plan.h"

/* Two kernels following code.h's C ABI: one plain, one reading a symbol. */
static const char *k_source = "#include <stdint.h>\n"
                              "void add_f32(void *const *bufs, const int64_t *syms) {\n"
                              "  const float *a = bufs[0], *b = bufs[1]; float *c = bufs[2];\n"
                              "#pragma omp parallel for\n"
                              "  for (int64_t i = 0; i < 1000; i++) c[i] = a[i] + b[i];\n"
                              "}\n"
                              "void scale_n(void *const *bufs, const int64_t *syms) {\n"
                              "  float *x = bufs[0]; int64_t n = syms[0];\n"
                              "  for (int64_t i = 0; i < n; i++) x[i] *= (float)n;\n"
                              "}\n";

static char g_root[256]; /* per-run scratch directory; never the user's real cache */
static int g_dir_seq;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) { return remove(path); }

static int group_setup(void **state) {
  snprintf(g_root, sizeof g_root, "/tmp/lathe-test-backend-XXXXXX");
  return mkdtemp(g_root) ? 0 : -1;
}

static int group_teardown(void **state) {
  nftw(g_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

/* Points LATHE_CACHE_DIR at a fresh directory under g_root (not yet created) and returns it. */
static const char *fresh_cache(char *out, size_t n) {
  snprintf(out, n, "%s/cache%d/nested", g_root, g_dir_seq++);
  setenv("LATHE_CACHE_DIR", out, 1);
  return out;
}

/* Number of directory entries whose name ends with suffix (all entries when suffix is ""). */
static int count_files(const char *dir, const char *suffix) {
  DIR *dp = opendir(dir);
  if (!dp) return -1;
  int count = 0;
  struct dirent *e;
  size_t sl = strlen(suffix);
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    size_t l = strlen(e->d_name);
    if (l >= sl && !strcmp(e->d_name + l - sl, suffix)) count++;
  }
  closedir(dp);
  return count;
}

static void test_cache_dir_honours_env(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  const char *got = cache_dir();
  assert_non_null(got);
  assert_string_equal(got, dir);
  struct stat st;
  assert_int_equal(stat(dir, &st), 0); /* created with mkdir -p semantics */
  assert_true(S_ISDIR(st.st_mode));
  char path[1024], want[1024];
  cache_path(path, sizeof path, 0xabcULL, ".so");
  snprintf(want, sizeof want, "%s/0000000000000abc.so", dir);
  assert_string_equal(path, want);
  /* A path below a regular file cannot be a directory. */
  char bad[600];
  snprintf(bad, sizeof bad, "%s/afile", g_root);
  FILE *f = fopen(bad, "w");
  assert_non_null(f);
  fclose(f);
  strcat(bad, "/sub");
  setenv("LATHE_CACHE_DIR", bad, 1);
  assert_null(cache_dir());
}

static void test_cache_dir_fallbacks(void **state) {
  char xdg[512], want[600];
  unsetenv("LATHE_CACHE_DIR");
  snprintf(xdg, sizeof xdg, "%s/xdg", g_root);
  setenv("XDG_CACHE_HOME", xdg, 1);
  snprintf(want, sizeof want, "%s/lathe", xdg);
  const char *got = cache_dir();
  assert_non_null(got);
  assert_string_equal(got, want);
  unsetenv("XDG_CACHE_HOME");
}

static void test_compile_launch_and_cache_hit(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  assert_non_null(b);
  BackendModule *m = b->ops->compile(b, k_source, &d);
  if (!m) fail_msg("%s", d.msg);
  int compiles = -1, hits = -1;
  backend_cpu_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 1);
  assert_int_equal(hits, 0);
  assert_int_equal(count_files(dir, ".so"), 1);
  assert_int_equal(count_files(dir, ""), 1); /* no temporaries left behind */

  size_t bytes = 1000 * sizeof(float);
  float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
  for (int i = 0; i < 1000; i++) ha[i] = (float)i, hb[i] = 0.5f * (float)i;
  void *da = b->ops->alloc(b, bytes, &d), *db = b->ops->alloc(b, bytes, &d), *dc = b->ops->alloc(b, bytes, &d);
  assert_true(da && db && dc);
  assert_int_equal((uintptr_t)da % 64, 0);
  assert_true(b->ops->upload(b, da, ha, bytes, &d));
  assert_true(b->ops->upload(b, db, hb, bytes, &d));
  void *bufs[3] = {da, db, dc};
  assert_true(b->ops->launch(b, m, "add_f32", bufs, 3, NULL, 0, 1, 1, &d));
  assert_true(b->ops->sync(b, &d));
  assert_true(b->ops->download(b, hc, dc, bytes, &d));
  for (int i = 0; i < 1000; i++) assert_true(hc[i] == 1.5f * (float)i);

  int64_t n = 10;
  void *one[1] = {da};
  assert_true(b->ops->launch(b, m, "scale_n", one, 1, &n, 1, 1, 1, &d));
  assert_true(b->ops->download(b, hc, da, bytes, &d));
  assert_true(hc[3] == 30.0f);
  assert_true(hc[10] == 10.0f); /* beyond n: untouched */
  assert_false(d.set);

  /* The same source again: served from the cache, the compiler is not run. */
  BackendModule *m2 = b->ops->compile(b, k_source, &d);
  assert_non_null(m2);
  backend_cpu_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 1);
  assert_int_equal(hits, 1);
  assert_true(b->ops->launch(b, m2, "add_f32", bufs, 3, NULL, 0, 1, 1, &d));

  /* A new backend (a new process, in effect) also hits the on-disk entry. */
  Backend *b2 = backend_cpu_new(&d);
  BackendModule *m3 = b2->ops->compile(b2, k_source, &d);
  assert_non_null(m3);
  backend_cpu_stats(b2, &compiles, &hits);
  assert_int_equal(compiles, 0);
  assert_int_equal(hits, 1);
  b2->ops->module_free(b2, m3);
  b2->ops->destroy(b2);

  b->ops->free(b, da);
  b->ops->free(b, db);
  b->ops->free(b, dc);
  b->ops->module_free(b, m2);
  b->ops->module_free(b, m);
  b->ops->destroy(b);
  free(ha);
  free(hb);
  free(hc);
}

static void test_syntax_error_reports_compiler_message(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  BackendModule *m = b->ops->compile(b, "void broken(void) { int x = ; }\n", &d);
  assert_null(m);
  assert_true(d.set);
  assert_contains(d.msg, "C compiler failed");
  assert_contains(d.msg, "error");
  assert_contains(d.msg, "expected expression");
  assert_contains(d.msg, "kernel.c:1:"); /* named as the source, not by its temporary path */
  assert_int_equal(count_files(dir, ".so"), 0);
  assert_int_equal(count_files(dir, ""), 0); /* source, stderr and partial output removed */
  b->ops->destroy(b);
}

static void test_unknown_kernel_is_an_error(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  BackendModule *m = b->ops->compile(b, k_source, &d);
  assert_non_null(m);
  void *bufs[1] = {NULL};
  assert_false(b->ops->launch(b, m, "nope", bufs, 0, NULL, 0, 1, 1, &d));
  assert_string_equal(d.msg, "kernel 'nope' not found in module");
  b->ops->module_free(b, m);
  b->ops->destroy(b);
}

static void test_unusable_cache_dir_compiles_in_temp_dir(void **state) {
  char bad[600];
  snprintf(bad, sizeof bad, "%s/plainfile", g_root);
  FILE *f = fopen(bad, "w");
  assert_non_null(f);
  fclose(f);
  strcat(bad, "/cache");
  setenv("LATHE_CACHE_DIR", bad, 1);
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  BackendModule *m = b->ops->compile(b, k_source, &d);
  if (!m) fail_msg("%s", d.msg);
  int64_t n = 2;
  float x[4] = {1, 2, 3, 4};
  void *bufs[1] = {x};
  assert_true(b->ops->launch(b, m, "scale_n", bufs, 1, &n, 1, 1, 1, &d));
  assert_true(x[1] == 4.0f && x[2] == 3.0f);
  b->ops->module_free(b, m);
  b->ops->destroy(b);
}

static void test_missing_compiler_is_an_error(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  setenv("LATHE_CC", "lathe-no-such-compiler", 1);
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  BackendModule *m = b->ops->compile(b, k_source, &d);
  unsetenv("LATHE_CC");
  assert_null(m);
  assert_contains(d.msg, "lathe-no-such-compiler");
  assert_int_equal(count_files(dir, ""), 0);
  b->ops->destroy(b);
}

/* ---- plan runtime ---- */

/* out[i] = a[i] + b[i] for i < n, as a kernel-stage program: parfor i < n: store out[i]. */
typedef struct AddProgram {
  Arena *arena;
  LProgram lp;
  LBuf bufs[3];
  KKernel kernel;
  KProgram kp;
  StrBuf src; /* the code stage's output for kp */
  const LaunchTable *lt;
} AddProgram;

static AddProgram *add_program_new(void) {
  AddProgram *ap = calloc(1, sizeof *ap);
  ap->arena = arena_new();
  ExprPool *pool = expr_pool_new(ap->arena);
  Expr *n = ex_sym(pool, "n");
  const char *names[3] = {"a", "b", "out"};
  for (int i = 0; i < 3; i++)
    ap->bufs[i] =
        (LBuf){.id = i, .name = names[i], .dtype = DT_F32, .shape = {1, {n}}, .kind = i < 2 ? BUF_INPUT : BUF_OUTPUT};
  LProgram *lp = &ap->lp;
  lp->arena = ap->arena;
  lp->pool = pool;
  lp->bufs = ap->bufs;
  lp->nbufs = 3;
  lp->inputs[0] = 0, lp->inputs[1] = 1, lp->ninputs = 2;
  lp->outputs[0] = 2, lp->noutputs = 1;
  lp->symbols[0] = "n", lp->nsymbols = 1;

  Expr *i = ex_var(pool, 0);
  Expr *va = ex_load(pool, 0, DT_F32, 1, &i, MEM_GLOBAL);
  Expr *vb = ex_load(pool, 1, DT_F32, 1, &i, MEM_GLOBAL);
  KStmt *store = arena_alloc(ap->arena, sizeof *store);
  *store = (KStmt){
      .kind = KS_STORE, .value = ex_bin(pool, X_ADD, va, vb), .buf = 2, .space = MEM_GLOBAL, .nidx = 1, .idx = {i}};
  KStmt **body = arena_alloc(ap->arena, sizeof *body);
  body[0] = store;
  KStmt *loop = arena_alloc(ap->arena, sizeof *loop);
  *loop = (KStmt){.kind = KS_PARFOR, .var = 0, .hi = n, .body = body, .nbody = 1};

  KKernel *k = &ap->kernel;
  k->name = "add_0";
  k->params[0] = (KParam){0, 0}, k->params[1] = (KParam){1, 0}, k->params[2] = (KParam){2, 1};
  k->nparams = 3;
  k->syms[0] = "n", k->nsyms = 1;
  k->body = loop;
  k->grid = ex_int(pool, 1);
  k->block = 1;
  k->var_names[0] = "i0", k->nvars = 1;
  k->sched = (Schedule){.red = RS_SERIAL, .block_threads = 1, .vec = 1, .omp = 1};
  ap->kp = (KProgram){.loop = lp, .target = TARGET_CPU, .kernels = k, .nkernels = 1};
  Diag d = {0};
  if (!code_render_program(&ap->kp, ap->arena, &ap->src, &ap->lt, &d)) fail_msg("render: %s", d.msg);
  return ap;
}

static void add_program_free(AddProgram *ap) {
  sb_free(&ap->src);
  arena_free(ap->arena);
  free(ap);
}

static void test_plan_run_add(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  AddProgram *ap = add_program_new();
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  Plan *p = plan_new(ap->lt, sb_str(&ap->src), b, &d);
  if (!p) fail_msg("plan_new: %s", d.msg);
  assert_contains(plan_source(p), "void add_0(void *const *lt_bufs, const int64_t *lt_syms)");

  float a[37], bb[37], out[37];
  for (int i = 0; i < 37; i++) a[i] = (float)i, bb[i] = 100.0f - (float)i, out[i] = -1.0f;
  SymEnv env = {0};
  symenv_set(&env, "n", 37);
  void *ins[2] = {a, bb}, *outs[1] = {out};
  if (!plan_run(p, &env, ins, outs, &d)) fail_msg("plan_run: %s", d.msg);
  for (int i = 0; i < 37; i++) assert_true(out[i] == 100.0f);

  /* The same plan serves another value of the symbol. */
  symenv_set(&env, "n", 5);
  out[5] = -1.0f;
  assert_true(plan_run(p, &env, ins, outs, &d));
  assert_true(out[4] == 100.0f && out[5] == -1.0f);

  /* A dimension of 0: nothing to copy, nothing to compute, no crash. */
  symenv_set(&env, "n", 0);
  assert_true(plan_run(p, &env, ins, outs, &d));

  double ms = -1;
  symenv_set(&env, "n", 37);
  assert_true(plan_bench(p, &env, ins, 1, 5, &ms, &d));
  assert_true(ms >= 0.0);
  assert_false(d.set);
  assert_false(plan_bench(p, &env, ins, 0, 0, &ms, &d));
  assert_true(d.set);

  plan_free(p);
  b->ops->destroy(b);
  add_program_free(ap);
}

/* The runtime takes only the code stage's source and launch table: a hand-written C kernel with a
 * hand-made table (no kernel-stage program at all) runs, the kernel launched by its table name. */
static void test_plan_runs_a_launch_table(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  Arena *arena = arena_new();
  ExprPool *pool = expr_pool_new(arena);
  Expr *n = ex_sym(pool, "n");
  LaunchBuf bufs[2] = {{"x", DT_F32, {1, {n}}, LB_INPUT}, {"y", DT_F32, {1, {n}}, LB_OUTPUT}};
  static const int inputs[] = {0}, outputs[] = {1};
  static const char *const symbols[] = {"n"};
  LaunchKernel k = {.name = "triple_0", .fn = "lt_triple", .nparams = 2, .nsyms = 1, .block = 1};
  k.params[0] = (LaunchParam){0, 0};
  k.params[1] = (LaunchParam){1, 1};
  k.syms[0] = "n";
  k.grid = ex_int(pool, 1);
  LaunchTable lt = {.bufs = bufs,
                    .nbufs = 2,
                    .inputs = inputs,
                    .ninputs = 1,
                    .outputs = outputs,
                    .noutputs = 1,
                    .symbols = symbols,
                    .nsymbols = 1,
                    .kernels = &k,
                    .nkernels = 1};
  const char *src = "#include <stdint.h>\n"
                    "void lt_triple(void *const *bufs, const int64_t *syms) {\n"
                    "  const float *x = bufs[0]; float *y = bufs[1];\n"
                    "  for (int64_t i = 0; i < syms[0]; i++) y[i] = 3 * x[i];\n"
                    "}\n";
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  Plan *p = plan_new(&lt, src, b, &d);
  if (!p) fail_msg("plan_new: %s", d.msg);
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};
  SymEnv env = {0};
  symenv_set(&env, "n", 6);
  void *ins[1] = {x}, *outs[1] = {y};
  if (!plan_run(p, &env, ins, outs, &d)) fail_msg("plan_run: %s", d.msg);
  for (int i = 0; i < 6; i++) assert_true(y[i] == 3 * x[i]);
  plan_free(p);
  b->ops->destroy(b);
  arena_free(arena);
}

static void test_plan_run_unbound_symbol(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  AddProgram *ap = add_program_new();
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  Plan *p = plan_new(ap->lt, sb_str(&ap->src), b, &d);
  if (!p) fail_msg("plan_new: %s", d.msg);
  float x[1] = {0};
  void *ins[2] = {x, x}, *outs[1] = {x};
  SymEnv env = {0};
  assert_false(plan_run(p, &env, ins, outs, &d));
  assert_string_equal(d.msg, "symbolic dimension 'n' has no value; pass --dim n=N");
  Diag d2 = {0};
  double ms;
  assert_false(plan_bench(p, &env, ins, 0, 3, &ms, &d2));
  assert_contains(d2.msg, "'n' has no value");
  plan_free(p);
  b->ops->destroy(b);
  add_program_free(ap);
}

static void test_plan_new_reports_compile_failure(void **state) {
  char dir[512];
  fresh_cache(dir, sizeof dir);
  setenv("LATHE_CC", "lathe-no-such-compiler", 1);
  AddProgram *ap = add_program_new();
  Diag d = {0};
  Backend *b = backend_cpu_new(&d);
  Plan *p = plan_new(ap->lt, sb_str(&ap->src), b, &d);
  unsetenv("LATHE_CC");
  assert_null(p);
  assert_true(d.set);
  b->ops->destroy(b);
  add_program_free(ap);
}

int main(void) {
  unsetenv("LATHE_CC");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cache_dir_honours_env),
      cmocka_unit_test(test_cache_dir_fallbacks),
      cmocka_unit_test(test_compile_launch_and_cache_hit),
      cmocka_unit_test(test_syntax_error_reports_compiler_message),
      cmocka_unit_test(test_unknown_kernel_is_an_error),
      cmocka_unit_test(test_unusable_cache_dir_compiles_in_temp_dir),
      cmocka_unit_test(test_missing_compiler_is_an_error),
      cmocka_unit_test(test_plan_run_add),
      cmocka_unit_test(test_plan_run_unbound_symbol),
      cmocka_unit_test(test_plan_new_reports_compile_failure),
      cmocka_unit_test(test_plan_runs_a_launch_table),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
