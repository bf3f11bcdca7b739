/* Schedule spaces (tile/space.c): every candidate of a set of programs is legal, builds, renders C that the
 * CPU backend runs correctly against the float64 reference, and renders CUDA C that NVRTC compiles; the
 * text form of a schedule round-trips. */
#include "testutil.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/nvrtc.h"
#include "base/clock.h"
#include "base/hash.h"
#include "driver/execute.h"
#include "tile/space.h"

static const char *PROGRAMS[] = {
    "x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)",
    "x: f32[seq, 64]; w: bf16[64, 64]; y = linear(x, w)",
    "x: f32[3, 40]; w: f32[40]; y = rms_norm(x, w, 1e-6)",
    "x: f32[600, 40]; w: f32[40]; y = rms_norm(x, w, 1e-6)", /* rows enough for block fills on CUDA (FILLS) */
    "x: f32[seq, 37]; y = softmax(x, -1)",
    "a: f32[5, 33]; b: f32[33]; y = a * b + 1",
    /* rows long enough for CUDA store vectors (svec=4: whole 16-byte vectors for up to 128 threads) */
    "x: f32[3, 512]; w: f32[512]; y = rms_norm(x, w, 1e-6)",
    "x: f32[2, 256]; y = softmax(x, -1)",
    "q: f32[1,4,seq,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]; y = attention(q, k, v, true)",
};
enum { NPROGRAMS = sizeof PROGRAMS / sizeof PROGRAMS[0], FILLS = 3 };

static Compilation *loop_of(const char *src, Target t) {
  Compilation *c = compilation_new(t, NULL);
  Diag d = {0};
  if (!compile_source(c, src, ST_TILE, &d)) fail_msg("%s: %s", src, d.msg);
  return c;
}

/* The default schedules of c's tile program (one per kernel), malloc'ed. */
static Schedule *defaults(const Compilation *c) {
  Schedule *s = calloc((size_t)c->tile->nkernels, sizeof *s);
  for (int i = 0; i < c->tile->nkernels; i++) s[i] = c->tile->kernels[i].s;
  return s;
}

typedef void (*CandidateFn)(Compilation *c, const char *src, int kernel, const Schedule *s, void *ctx);

/* The kernel's own form (strategy, threads, vector) differs from the default's, and so does its blocked
 * variant or flash-decoding: a combination of two knob groups, each of which is covered alone. */
static int mixes_groups(const Schedule *s, const Schedule *def) {
  int self = s->red != def->red || s->block_threads != def->block_threads || s->vec != def->vec;
  int variant = s->rows != def->rows || s->row_axis != def->row_axis || s->mma != def->mma || s->flash != def->flash ||
                s->rows_serial != def->rows_serial || s->gemm_fill != def->gemm_fill ||
                s->gemm_library != def->gemm_library || s->flash_decode != def->flash_decode ||
                s->decode_fill != def->decode_fill;
  return self && variant;
}

/* Calls fn for every candidate of every kernel (the other kernels at their defaults), c compiled with it;
 * with `groups`, only the candidates that vary one knob group (mixes_groups), to keep NVRTC's time in
 * bounds on the programs with the largest spaces. */
static int each_candidate(const char *src, Target t, int groups, CandidateFn fn, void *ctx) {
  Compilation *c = loop_of(src, t);
  Schedule *def = defaults(c);
  TileProgram *tp = c->tile;
  int total = 0;
  for (int i = 0; i < tp->nkernels; i++) {
    ScheduleSpace sp;
    Diag d = {0};
    assert_true(schedule_space(c->loop, tp->kernels[i].k, &c->device, c->matmul, &def[i], &sp, &d));
    assert_true(sp.n >= 1);
    assert_true(schedule_equal(&sp.s[0], &def[i])); /* the default first */
    for (int j = 0; j < sp.n; j++) {
      for (int m = 0; m < j; m++) assert_false(schedule_equal(&sp.s[m], &sp.s[j])); /* each once */
      if (groups && mixes_groups(&sp.s[j], &def[i])) continue;
      Schedule *given = defaults(c);
      given[i] = sp.s[j];
      d = (Diag){0};
      if (!compile_schedules(c, given, ST_CODE, &d)) fail_msg("%s kernel %d candidate %d: %s", src, i, j, d.msg);
      fn(c, src, i, &sp.s[j], ctx);
      free(given);
      total++;
    }
  }
  free(def);
  compilation_free(c);
  return total;
}

typedef struct CpuCtx {
  Backend *be;
  SymEnv env;
} CpuCtx;

static void run_and_check(Compilation *c, const char *src, int kernel, const Schedule *s, void *ctx) {
  CpuCtx *cc = ctx;
  Execution x = {0};
  Diag d = {0};
  StrBuf text = {0};
  schedule_format(&text, s);
  if (!execute_program(c, cc->be, &cc->env, 7, &x, &d)) fail_msg("%s [%s]: %s", src, sb_str(&text), d.msg);
  double err[LT_MAX_OUTPUTS];
  assert_true(execute_check(c, &x, &cc->env, err, &d));
  for (int o = 0; o < x.nout; o++)
    if (!(err[o] <= check_tolerance(x.out[o].dtype, c->matmul)))
      fail_msg("%s kernel %d [%s]: error %g", src, kernel, sb_str(&text), err[o]);
  execution_free(&x);
  sb_free(&text);
}

static void cpu_candidates_are_correct(void **state) {
  (void)state;
  Diag d = {0};
  CpuCtx cc = {backend_cpu_new(&d), {0}};
  assert_non_null(cc.be);
  /* 5 tokens: not a multiple of the blocked rows, so every blocked variant runs its tail too */
  symenv_set(&cc.env, "seq", 5);
  double t0 = now_ms();
  int n = 0;
  for (int p = 0; p < NPROGRAMS; p++) n += each_candidate(PROGRAMS[p], TARGET_CPU, 0, run_and_check, &cc);
  print_message("%d CPU candidates checked in %.1f s\n", n, (now_ms() - t0) / 1000);
  assert_true(n > 100);
  cc.be->ops->destroy(cc.be);
}

typedef struct CudaCtx {
  uint64_t *seen;
  int nseen, cap, compiled, fills; /* fills: only the block-fill candidates (NVRTC's time), of vector 1 or 8 */
} CudaCtx;

static void nvrtc_compiles(Compilation *c, const char *src, int kernel, const Schedule *s, void *ctx) {
  CudaCtx *cc = ctx;
  if (cc->fills && (!s->block_fill || (s->vec != 1 && s->vec != 8))) return;
  if (cc->fills) cc->fills++;
  uint64_t h = hash_str(HASH_SEED, sb_str(&c->code));
  for (int i = 0; i < cc->nseen; i++)
    if (cc->seen[i] == h) return; /* the same source as another candidate (a knob its kernels do not use) */
  if (cc->nseen == cc->cap) cc->seen = realloc(cc->seen, (size_t)(cc->cap = cc->cap * 2 + 64) * sizeof *cc->seen);
  cc->seen[cc->nseen++] = h;
  void *cubin = NULL;
  size_t size = 0;
  Diag d = {0};
  StrBuf text = {0};
  schedule_format(&text, s);
  if (!nvrtc_compile(sb_str(&c->code), "sm_90", &cubin, &size, &d))
    fail_msg("%s kernel %d [%s]: %s", src, kernel, sb_str(&text), d.msg);
  free(cubin);
  sb_free(&text);
  cc->compiled++;
}

static void cuda_candidates_compile(void **state) {
  (void)state;
  if (!nvrtc_available()) skip();
  CudaCtx cc = {0};
  double t0 = now_ms();
  int n = 0;
  /* the kernels with a blocked variant (linear, the tensor-core GEMM, attention): each knob group alone; the
   * rest: every candidate */
  for (int p = 0; p < NPROGRAMS; p++) {
    cc.fills = p == FILLS;
    n += each_candidate(PROGRAMS[p], TARGET_CUDA, p <= 1 || p == NPROGRAMS - 1, nvrtc_compiles, &cc);
    if (p == FILLS) assert_true(cc.fills > 1); /* the program has block-fill candidates */
  }
  cc.fills = 0;
  print_message("%d CUDA candidates, %d distinct sources compiled by NVRTC in %.1f s\n", n, cc.compiled,
                (now_ms() - t0) / 1000);
  assert_true(cc.compiled > 60);
  /* every candidate of the CPU space is checked; on CUDA at least this many, counting knob-group skips */
  assert_true(n > 150);
  free(cc.seen);
}

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

/* The unrolling knob: a GEMV row of 4096 over 128 threads of 8-element vectors has 4 vectors a thread; automatic
 * unrolling takes all 4 a step (3 vector loads each: 8 f32 = two 16-byte loads, 8 bf16 = one), unroll=2 two and
 * unroll=1 one; the space offers 1 and 2 beside automatic; each compiles under NVRTC; an illegal count is refused. */
static void unrolling_knob(void **state) {
  (void)state;
  const char *src = "x: f32[1, 4096]; w: bf16[64, 4096]; y = linear(x, w)";
  Compilation *c = loop_of(src, TARGET_CUDA);
  ScheduleSpace sp;
  Diag d = {0};
  assert_true(schedule_space(c->loop, c->tile->kernels[0].k, &c->device, c->matmul, &c->tile->kernels[0].s, &sp, &d));
  int seen[5] = {0};
  for (int i = 0; i < sp.n; i++) seen[sp.s[i].unroll]++;
  assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
  Schedule s = c->tile->kernels[0].s;
  s.red = RS_BLOCK, s.block_threads = 128, s.vec = 8;
  const int want_loads[5] = {12, 3, 6, 0, 12};
  for (int u = 0; u <= 4; u++) {
    if (u == 3) continue;
    s.unroll = u;
    if (!compile_schedules(c, &s, ST_CODE, &d)) fail_msg("unroll=%d: %s", u, d.msg);
    const char *code = sb_str(&c->code);
    if (count_of(code, "= *(const lt_u4 *)(") != want_loads[u])
      fail_msg("unroll=%d: %d vector loads a step, not %d", u, count_of(code, "= *(const lt_u4 *)("), want_loads[u]);
    if (nvrtc_available()) {
      void *cubin = NULL;
      size_t size = 0;
      if (!nvrtc_compile(code, "sm_90", &cubin, &size, &d)) fail_msg("unroll=%d: %s", u, d.msg);
      free(cubin);
    }
  }
  s.unroll = 3;
  assert_false(schedule_check(c->loop, c->tile->kernels[0].k, &c->device, &s, &d));
  assert_contains(d.msg, "unrolling of 3 vectors");
  compilation_free(c);
}

/* Split-k parts: the GEMM's candidates split to fill none, half, all or twice the blocks the h200 holds at once
 * (0, 132, 264, 528), and the grid of 64 output tiles at 4096 rows follows: 64, then more parts the larger the fill
 * (at most 8 a tile). */
static void split_k_parts(void **state) {
  (void)state;
  const char *src = "x: f32[seq, 1024]; w: bf16[96, 1024]; y = linear(x, w)";
  Compilation *c = loop_of(src, TARGET_CUDA);
  ScheduleSpace sp;
  Diag d = {0};
  assert_true(schedule_space(c->loop, c->tile->kernels[0].k, &c->device, c->matmul, &c->tile->kernels[0].s, &sp, &d));
  const int fills[4] = {0, 132, 264, 528};
  int64_t grid[4];
  for (int f = 0; f < 4; f++) {
    int found = -1;
    for (int i = 0; i < sp.n && found < 0; i++)
      if (sp.s[i].mma && sp.s[i].gemm_fill == fills[f] && !sp.s[i].gemm_library) found = i;
    if (found < 0) fail_msg("no GEMM candidate with fill=%d", fills[f]);
    if (!compile_schedules(c, &sp.s[found], ST_KERNEL, &d)) fail_msg("fill=%d: %s", fills[f], d.msg);
    const KKernel *g = c->kernel->kernels[0].alt;
    assert_non_null(g);
    SymEnv env = {0};
    symenv_set(&env, "seq", 4096);
    assert_true(ex_eval_int(g->grid, &env, &grid[f]));
  }
  assert_int_equal(grid[0], 64);
  assert_true(grid[1] > grid[0] && grid[2] > grid[1] && grid[3] > grid[2]);
  assert_true(grid[3] <= 64 * 8);
  compilation_free(c);
}

/* On the GPU (LATHE_TEST_TARGET=cuda, make test-gpu): every CUDA candidate of the programs (each knob group alone
 * where the space is largest) runs on the device and matches the reference, at the device's own description. */
static void cuda_candidates_are_correct(void **state) {
  (void)state;
  const char *want = getenv("LATHE_TEST_TARGET");
  if (!want || strcmp(want, "cuda")) skip();
  Diag d = {0};
  CpuCtx cc = {backend_cuda_new(&d), {0}};
  if (!cc.be) fail_msg("cuda backend: %s", d.msg);
  symenv_set(&cc.env, "seq", 5);
  double t0 = now_ms();
  int n = 0;
  for (int p = 0; p < NPROGRAMS; p++)
    n += each_candidate(PROGRAMS[p], TARGET_CUDA, p <= 1 || p == NPROGRAMS - 1, run_and_check, &cc);
  print_message("%d CUDA candidates checked on the device in %.1f s\n", n, (now_ms() - t0) / 1000);
  assert_true(n > 150);
  cc.be->ops->destroy(cc.be);
}

/* At seq = 1 a variant blocking the tokens never runs: the candidates that differ only in it are one; at
 * seq = 64 they are all distinct, and the blocked variants over the weight's rows are kept at either size. */
/* The CUDA store-vector knob: a long row's loads and its store as 16-byte vectors (svec=4 in the space, the
 * store an lt_u4 in the code, NVRTC compiles it); a thread count that leaves some thread a partial vector keeps
 * one element a step (the same code as without the knob); the CPU refuses the knob. */
static void store_vectors(void **state) {
  (void)state;
  const char *src = "x: f32[4, 1024]; w: f32[1024]; y = rms_norm(x, w, 1e-6)";
  Compilation *c = loop_of(src, TARGET_CUDA);
  ScheduleSpace sp;
  Diag d = {0};
  assert_true(schedule_space(c->loop, c->tile->kernels[0].k, &c->device, c->matmul, &c->tile->kernels[0].s, &sp, &d));
  int with = 0;
  for (int i = 0; i < sp.n; i++) with += sp.s[i].store_vec == 4;
  assert_true(with > 4);
  Schedule s = c->tile->kernels[0].s;
  char *plain = NULL;
  for (int sv = 0; sv <= 4; sv += 4) {
    s.store_vec = sv;
    s.red = RS_BLOCK, s.block_threads = 256;
    assert_true(compile_schedules(c, &s, ST_CODE, &d));
    const char *code = sb_str(&c->code);
    if (!sv) {
      assert_null(strstr(code, "*(lt_u4 *)(y + "));
      plain = strdup(code);
      continue;
    }
    assert_non_null(strstr(code, "*(lt_u4 *)(y + "));
    assert_non_null(strstr(code, "__float_as_uint(st3)"));
    if (nvrtc_available()) {
      void *cubin = NULL;
      size_t size = 0;
      if (!nvrtc_compile(code, "sm_90", &cubin, &size, &d)) fail_msg("%s", d.msg);
      free(cubin);
    }
    StrBuf text = {0};
    schedule_format(&text, &s);
    assert_contains(sb_str(&text), " svec=4");
    Schedule back;
    assert_true(schedule_parse(sb_str(&text), &back, &d));
    assert_true(schedule_equal(&back, &s));
    sb_free(&text);
  }
  /* 1024 threads x 4 elements would need 4096 a row: one element a step, as without the knob */
  s.block_threads = 1024, s.store_vec = 0;
  assert_true(compile_schedules(c, &s, ST_CODE, &d));
  char *scalar1024 = strdup(sb_str(&c->code));
  s.store_vec = 4;
  assert_true(compile_schedules(c, &s, ST_CODE, &d));
  assert_string_equal(sb_str(&c->code), scalar1024);
  s.store_vec = 3;
  assert_false(schedule_check(c->loop, c->tile->kernels[0].k, &c->device, &s, &d));
  assert_contains(d.msg, "store vector width 3 does not divide 8");
  free(plain);
  free(scalar1024);
  compilation_free(c);
  c = loop_of(src, TARGET_CPU);
  s = c->tile->kernels[0].s;
  s.store_vec = 4;
  d = (Diag){0};
  assert_false(schedule_check(c->loop, c->tile->kernels[0].k, &c->device, &s, &d));
  assert_contains(d.msg, "a store vector width is a CUDA knob");
  compilation_free(c);
}

static void space_at_sizes(void **state) {
  (void)state;
  Compilation *c = loop_of(PROGRAMS[0], TARGET_CUDA);
  const LKernel *k = c->tile->kernels[0].k;
  ScheduleSpace all, one, many;
  Diag d = {0};
  assert_true(schedule_space(c->loop, k, &c->device, c->matmul, &c->tile->kernels[0].s, &all, &d));
  SymEnv env = {0};
  symenv_set(&env, "seq", 1);
  one = all;
  one.s = malloc(sizeof *one.s * (size_t)all.n);
  memcpy(one.s, all.s, sizeof *one.s * (size_t)all.n);
  schedule_space_at(k, &env, TARGET_CUDA, &one);
  assert_true(one.n < all.n);
  assert_true(schedule_equal(&one.s[0], &all.s[0]));
  int tokens_blocked = 0, weight_blocked = 0;
  for (int i = 1; i < one.n; i++) {
    tokens_blocked += one.s[i].rows > 1 && one.s[i].row_axis == 0;
    weight_blocked += one.s[i].rows > 1 && one.s[i].row_axis == 1;
  }
  assert_int_equal(tokens_blocked, 0);
  assert_true(weight_blocked > 0);
  symenv_set(&env, "seq", 64);
  many = all;
  many.s = malloc(sizeof *many.s * (size_t)all.n);
  memcpy(many.s, all.s, sizeof *many.s * (size_t)all.n);
  schedule_space_at(k, &env, TARGET_CUDA, &many);
  assert_int_equal(many.n, all.n);
  free(one.s);
  free(many.s);
  compilation_free(c);
}

static void schedule_text_round_trips(void **state) {
  (void)state;
  Schedule s = {.red = RS_BLOCK,
                .block_threads = 512,
                .vec = 4,
                .rows = 8,
                .row_axis = 1,
                .mma = 2,
                .gemm_fill = 264,
                .gemm_library = 1,
                .flash_decode = 1,
                .decode_fill = 132};
  StrBuf b = {0};
  schedule_format(&b, &s);
  assert_string_equal(sb_str(&b), "red=block threads=512 vec=4 omp=0 rows=8 axis=1 serial=0 mma=2 flash=0 decode=1 "
                                  "dfill=132 fill=264 lib=1 romp=0 bfill=0");
  Schedule back;
  Diag d = {0};
  assert_true(schedule_parse(sb_str(&b), &back, &d));
  assert_true(schedule_equal(&s, &back));
  back.vec = 2;
  assert_false(schedule_equal(&s, &back));
  /* a block fill round-trips and counts; a text from before it (the committed goldens) reads as none */
  back = s;
  back.block_fill = 264;
  assert_false(schedule_equal(&s, &back));
  sb_free(&b);
  schedule_format(&b, &back);
  assert_contains(sb_str(&b), " bfill=264");
  Schedule again;
  assert_true(schedule_parse(sb_str(&b), &again, &d));
  assert_int_equal(again.block_fill, 264);
  assert_true(schedule_parse("red=block threads=256 vec=8 romp=0", &again, &d));
  assert_int_equal(again.block_fill, 0);
  assert_false(schedule_parse("red=block threads=x", &back, &d));
  assert_contains(d.msg, "threads=x is not a number");
  d = (Diag){0};
  assert_false(schedule_parse("red=tree", &back, &d));
  assert_contains(d.msg, "red=tree (serial, warp or block)");
  d = (Diag){0};
  assert_false(schedule_parse("red=warp bogus=1", &back, &d));
  assert_contains(d.msg, "unknown word 'bogus=1'");
  sb_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(schedule_text_round_trips),
      cmocka_unit_test(space_at_sizes),
      cmocka_unit_test(store_vectors),
      cmocka_unit_test(unrolling_knob),
      cmocka_unit_test(split_k_parts),
      cmocka_unit_test(cpu_candidates_are_correct),
      cmocka_unit_test(cuda_candidates_compile),
      cmocka_unit_test(cuda_candidates_are_correct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
