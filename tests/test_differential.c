/* Differential tests: a broad generated set of programs (every op, broadcast patterns, sizes 1, 3,
 * 127, 4097, every dtype, symbolic dimensions, four fusion policies) compiled for the CPU, run on random
 * inputs and compared with the float64 reference interpreter; the CUDA C of each is compiled by NVRTC
 * for sm_90. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "backend/nvrtc.h"
#include "base/settings.h"
#include "driver/check.h"
#include "driver/execute.h"

typedef struct Case {
  char name[96];
  char *src;     /* malloc'ed */
  char dims[64]; /* "seq=7,kv=9" */
  FusionPolicy fusion;
  const char *cuda_has;     /* text the CUDA C must contain (the template kernel the case is for), or NULL */
  const char *cuda_has_too; /* more text it must contain, or NULL */
  int exact;                /* output 0 must equal the reference exactly (a quantized weight decoded) */
  double tol;               /* > 0: every output's tolerance on CUDA (a quantized weight rounded to bf16 for a GEMM) */
  int own_gemm;             /* on CUDA, run without cuBLASLt (LATHE_CUBLASLT=0): lathe's own tensor-core GEMM */
  const char *quant_unroll; /* LATHE_QUANT_UNROLL while the case compiles, or NULL */
  const char *quant_dot;    /* LATHE_QUANT_DOT while the case compiles, or NULL */
  const char *quant_gemv;   /* LATHE_QUANT_GEMV while the case compiles, or NULL */
  const char *cpu_has;      /* text the C must contain (on the CPU), or NULL */
  const char *gemv_rows;    /* LATHE_GEMV_ROWS while the case compiles, or NULL */
} Case;

static Case cases[1024];
static int ncases;
static Backend *backend;          /* cpu, or cuda when LATHE_TEST_TARGET=cuda (make test-gpu) */
static Backend *backend_own_gemm; /* cuda without cuBLASLt, for Case.own_gemm (made on first use) */
static Target target = TARGET_CPU;

static const char *FLOATS[] = {"f32", "f16", "bf16"};
static const int SIZES[] = {1, 3, 127, 4097};

static void add_case(const char *name, const char *dims, int policy, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_case(const char *name, const char *dims, int policy, const char *fmt, ...) {
  Case *c = &cases[ncases++];
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(c->dims, sizeof c->dims, "%s", dims ? dims : "");
  c->fusion = fusion_policy_default();
  if (policy == 1) c->fusion.allow_recompute = 1;
  if (policy == 2) c->fusion.fuse_reductions = 0;
  if (policy == 3) c->fusion.realize_reread = 1; /* the CPU's: a projection RoPE reads twice gets its kernel */
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&c->src, fmt, ap) < 0) abort();
  va_end(ap);
}

static void parse_dims(const char *spec, SymEnv *env, char names[][16]) {
  memset(env, 0, sizeof *env);
  for (const char *p = spec; *p;) {
    int len = 0;
    long long v = 0;
    if (sscanf(p, "%15[a-z_]=%lld%n", names[env->n], &v, &len) != 2) break;
    symenv_set(env, names[env->n], v);
    p += len;
    if (*p == ',') p++;
  }
}

static void run_case(void **state) {
  const Case *tc = *state;
  SymEnv env;
  char names[16][16];
  parse_dims(tc->dims, &env, names);
  Diag d = {0};
  if (tc->quant_unroll) setting_set(SET_QUANT_UNROLL, tc->quant_unroll);
  if (tc->quant_dot) setting_set(SET_QUANT_DOT, tc->quant_dot);
  if (tc->quant_gemv) setting_set(SET_QUANT_GEMV, tc->quant_gemv);
  if (tc->gemv_rows) setting_set(SET_GEMV_ROWS, tc->gemv_rows);
  Compilation *c = compilation_new(target, &tc->fusion);
  if (!compile_source(c, tc->src, ST_CODE, &d)) fail_msg("%s: compile failed: %s\n%s", tc->name, d.msg, tc->src);
  if (target == TARGET_CPU && tc->cpu_has && !strstr(sb_str(&c->code), tc->cpu_has))
    fail_msg("%s: the C has no %s", tc->name, tc->cpu_has);
  Execution x;
  Backend *be = backend;
  if (target == TARGET_CUDA && tc->own_gemm) {
    /* the backend reads LATHE_CUBLASLT when a plan first asks for cuBLASLt: during this backend's first run */
    setting_set(SET_CUBLASLT, "0");
    if (!backend_own_gemm && !(backend_own_gemm = backend_cuda_new(&d))) fail_msg("cuda backend: %s", d.msg);
    be = backend_own_gemm;
  }
  int ran = execute_program(c, be, &env, 7, &x, &d);
  if (be != backend) setting_set(SET_CUBLASLT, NULL);
  if (!ran) fail_msg("%s: run failed: %s", tc->name, d.msg);
  double err[64];
  if (!execute_check(c, &x, &env, err, &d)) fail_msg("%s: reference failed: %s", tc->name, d.msg);
  for (int i = 0; i < x.nout; i++) {
    double tol = tc->exact && i == 0 ? 0 : check_tolerance(x.out[i].dtype, c->matmul);
    if (target == TARGET_CUDA && tc->tol > 0) tol = tc->tol;
    if (!(err[i] <= tol))
      fail_msg("%s: output %d (%s) error %.3g > tolerance %.3g\nprogram: %s\n--- loop ---", tc->name, i,
               dtype_name(x.out[i].dtype), err[i], tol, tc->src);
  }
  execution_free(&x);
  compilation_free(c);
  if (target == TARGET_CUDA) { /* the GPU run above already compiled it with NVRTC */
    if (tc->quant_unroll) setting_set(SET_QUANT_UNROLL, NULL);
    if (tc->quant_dot) setting_set(SET_QUANT_DOT, NULL);
    if (tc->quant_gemv) setting_set(SET_QUANT_GEMV, NULL);
    if (tc->gemv_rows) setting_set(SET_GEMV_ROWS, NULL);
    return;
  }

  /* The same program's CUDA C must compile under NVRTC. */
  Compilation *g = compilation_new(TARGET_CUDA, &tc->fusion);
  if (!compile_source(g, tc->src, ST_CODE, &d)) fail_msg("%s: CUDA codegen failed: %s", tc->name, d.msg);
  void *cubin = NULL;
  size_t size = 0;
  if (!nvrtc_compile(sb_str(&g->code), "sm_90", &cubin, &size, &d))
    fail_msg("%s: NVRTC failed: %s\n%s", tc->name, d.msg, sb_str(&g->code));
  assert_true(size > 0);
  if (tc->cuda_has && !strstr(sb_str(&g->code), tc->cuda_has))
    fail_msg("%s: the CUDA C has no %s", tc->name, tc->cuda_has);
  if (tc->cuda_has_too && !strstr(sb_str(&g->code), tc->cuda_has_too))
    fail_msg("%s: the CUDA C has no %s", tc->name, tc->cuda_has_too);
  free(cubin);
  compilation_free(g);
  if (tc->quant_unroll) setting_set(SET_QUANT_UNROLL, NULL);
  if (tc->quant_dot) setting_set(SET_QUANT_DOT, NULL);
  if (tc->quant_gemv) setting_set(SET_QUANT_GEMV, NULL);
  if (tc->gemv_rows) setting_set(SET_GEMV_ROWS, NULL);
}

static void build_cases(void) {
  /* Every unary op, every float dtype, every size (several outputs per program). */
  for (int t = 0; t < 3; t++)
    for (int s = 0; s < 4; s++) {
      char name[64];
      snprintf(name, sizeof name, "unary_%s_%d", FLOATS[t], SIZES[s]);
      add_case(
          name, NULL, 0,
          "x: %s[%d]\nreturn exp(x), log(x), sqrt(x), rsqrt(x), tanh(x), sigmoid(x), silu(x), gelu(x), relu(x - 1),"
          " abs(x - 1), neg(x), -x",
          FLOATS[t], SIZES[s]);
    }
  /* Binary ops under every broadcast pattern. */
  static const char *bshapes[][2] = {{"[3,1]", "[1,4]"},   {"[2,3,4]", "[4]"},   {"[1,3]", "[5,1,3]"},
                                     {"[4097]", "[4097]"}, {"[127,1]", "[127]"}, {"[1]", "[3,3]"}};
  for (int i = 0; i < 6; i++)
    for (int t = 0; t < 3; t++) {
      char name[64];
      snprintf(name, sizeof name, "binary_%d_%s", i, FLOATS[t]);
      add_case(name, NULL, 0,
               "a: %s%s; b: %s%s\nreturn a + b, a - b, a * b, a / (abs(b) + 0.5), pow(abs(a) + 0.5, b), "
               "maximum(a, b), minimum(a, b), a * 2 + 1, 3.0 - b",
               FLOATS[t], bshapes[i][0], FLOATS[t], bshapes[i][1]);
    }
  add_case("binary_int", NULL, 0,
           "a: i32[3,4]; b: i32[4]\nreturn a + b, a * b, a - 1, maximum(a, b), a / (abs(b) + 1)");
  add_case("binary_i64", NULL, 0, "a: i64[5]; b: i64[5]\nreturn a + b * 3, minimum(a, b)");
  add_case("binary_mixed", NULL, 0, "a: f16[4,3]; b: f32[3]; c: bf16[4,1]\nreturn a + b, a * c, b - c");
  /* Reductions over every axis pattern, size and dtype. */
  for (int t = 0; t < 3; t++)
    for (int s = 0; s < 4; s++) {
      char name[64];
      snprintf(name, sizeof name, "reduce_%s_%d", FLOATS[t], SIZES[s]);
      add_case(name, NULL, 0,
               "x: %s[3,%d]\nreturn sum(x, axis=-1), mean(x, 1, keepdim=true), max(x, axis=0), min(x, -1), "
               "sum(x), mean(x, axis=[0,1]), argmax(x, -1), argmax(x, axis=0, keepdim=true)",
               FLOATS[t], SIZES[s]);
    }
  add_case("reduce_3d", NULL, 0, "x: f32[4,5,6]\nreturn sum(x, axis=[0,2]), max(x, axis=1, keepdim=true), mean(x, 0)");
  add_case("reduce_int", NULL, 0, "x: i32[7,9]\nreturn sum(x, -1), max(x, 0), min(x), argmax(x, 1)");
  /* Row ops: softmax, rms_norm, layer_norm at every size and dtype. */
  for (int t = 0; t < 3; t++)
    for (int s = 0; s < 4; s++) {
      char name[64];
      snprintf(name, sizeof name, "norms_%s_%d", FLOATS[t], SIZES[s]);
      add_case(name, NULL, 0,
               "x: %s[2,3,%d]; w: %s[%d]; b: %s[%d]\nreturn softmax(x, -1), rms_norm(x, w, 1e-6), "
               "layer_norm(x, w, b, 1e-5), softmax(x, axis=1)",
               FLOATS[t], SIZES[s], FLOATS[t], SIZES[s], FLOATS[t], SIZES[s]);
    }
  /* Matmul family. */
  for (int t = 0; t < 3; t++) {
    char name[64];
    snprintf(name, sizeof name, "matmul_%s", FLOATS[t]);
    add_case(name, NULL, 0,
             "a: %s[3,127]; b: %s[127,5]; c: %s[2,3,4]; d: %s[4,5]; e: %s[2,1,3,4]; f: %s[5,4,6]; v: %s[4]\n"
             "return matmul(a, b), matmul(c, d), matmul(e, f), matmul(v, d), matmul(c, v)",
             FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t]);
    snprintf(name, sizeof name, "linear_%s", FLOATS[t]);
    add_case(name, NULL, 0,
             "x: %s[2,3,127]; w: %s[5,127]; b: %s[5]; x1: %s[4097]; w1: %s[3,4097]\n"
             "return linear(x, w), linear(x, w, b), linear(x1, w1)",
             FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t]);
  }
  /* Embedding, rope, attention. */
  add_case("embedding", NULL, 0,
           "ids: i32[3,5]; table: f32[127,8]; ids2: i64[4]; t2: bf16[10,3]\n"
           "return embedding(ids, table), embedding(ids2, t2)");
  for (int t = 0; t < 3; t++) {
    char name[64];
    snprintf(name, sizeof name, "rope_%s", FLOATS[t]);
    add_case(name, NULL, 0,
             "x: %s[1,4,7,16]; pos: i32[7]; y: %s[7,64]; p2: i64[7]\n"
             "return rope(x, pos, 10000.0), rope(y, p2, 500000.0)",
             FLOATS[t], FLOATS[t]);
    snprintf(name, sizeof name, "attention_%s", FLOATS[t]);
    add_case(name, NULL, 0,
             "q: %s[1,8,3,16]; k: %s[1,2,5,16]; v: %s[1,2,5,16]; qs: %s[2,4,6,8]; ks: %s[2,4,6,8]; vs: %s[2,4,6,8]\n"
             "return attention(q, k, v, false), attention(q, k, v, true), attention(qs, ks, vs, causal=true)",
             FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t], FLOATS[t]);
  }
  /* Views and their fusion with compute. */
  add_case(
      "views", NULL, 0,
      "x: f32[2,3,4]; y: f32[5,4]\n"
      "return reshape(x, [6, 4]), permute(x, [2, 0, 1]), transpose(x, 0, 2), slice(x, 2, 1, 3), "
      "slice(x, 1, -2), concat(x, x * 2, 1), concat(reshape(x, [6,4]), y, 0), reshape(permute(x, [1,0,2]), [3, -1]) + 1, "
      "sum(reshape(x, [2, 12]), -1)");
  add_case(
      "casts", NULL, 0,
      "x: f32[5,7]; i: i32[5]\nreturn cast(cast(x, f16), f32), cast(x * 10, i32), cast(i, f32) / 2, cast(x, bf16), "
      "cast(cast(x, bf16), f16), cast(i, i64) * 3");
  /* Symbolic dimensions: one compiled program, run at several sizes. */
  static const char *seqs[] = {"seq=1", "seq=7", "seq=127"};
  for (int s = 0; s < 3; s++) {
    char name[64];
    snprintf(name, sizeof name, "symbolic_%s", seqs[s] + 4);
    add_case(name, seqs[s], 0,
             "x: f32[seq, 64]; w: f32[64]; wq: f32[32, 64]\n"
             "h = rms_norm(x, w, 1e-6)\nreturn linear(h, wq), softmax(x, 0), sum(x, 0), reshape(x, [-1])");
    snprintf(name, sizeof name, "symbolic_attention_%s", seqs[s] + 4);
    add_case(name, seqs[s], 0,
             "q: f32[1,4,1,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]\nreturn attention(q, k, v, true)");
  }
  /* bf16 weights over many tokens: the register-blocked variants, and on CUDA the tensor-core ones
   * (norm prologue, two weights sharing A, residual epilogue; 37 tokens leave a partial tile). */
  static const char *tokens[] = {"seq=37", "seq=130"};
  for (int s = 0; s < 2; s++) {
    char name[64];
    snprintf(name, sizeof name, "prefill_bf16_%s", tokens[s] + 4);
    add_case(
        name, tokens[s], 0,
        "x: f32[1, seq, 64]; nw: bf16[64]; wg: bf16[96, 64]; wu: bf16[96, 64]; wd: bf16[64, 96]; wq: bf16[64, 64]\n"
        "h = rms_norm(x, nw, 1e-6)\n"
        "return x + linear(silu(linear(h, wg)) * linear(h, wu), wd), linear(h, wq)");
    /* Tensor-core GEMMs with few tiles split k (Schedule.gemm_fill): k = 576 in 4 parts of 5, 5, 5
     * and 3 stages (gate/up sharing A, and 13 tiles of 128 columns), k = 1568 in 8 parts of 7 stages,
     * the last one empty. 130 tokens: 3 tiles of rows. */
    snprintf(name, sizeof name, "prefill_split_k_%s", tokens[s] + 4);
    add_case(name, tokens[s], 0,
             "x: f32[1, seq, 576]; nw: bf16[576]; wg: bf16[64, 576]; wu: bf16[64, 576]; wb: bf16[1568, 576]; "
             "wd: bf16[576, 1568]\n"
             "h = rms_norm(x, nw, 1e-6)\n"
             "return silu(linear(h, wg)) * linear(h, wu), x + linear(linear(h, wb), wd)");
  }
  /* Wide gate/up on tensor cores (67 blocks of 64 columns, the last one partial; k = 48 in stages of
   * 16), and a down projection over 4256 = 32 lanes * 8 * 16.6 elements: lanes with unequal numbers of
   * vectors (unrolled, they once read past the end). */
  add_case("prefill_bf16_wide_130", "seq=130", 0,
           "x: f32[1, seq, 48]; nw: bf16[48]; wg: bf16[4256, 48]; wu: bf16[4256, 48]; wd: bf16[48, 4256]\n"
           "h = rms_norm(x, nw, 1e-6)\n"
           "return x + linear(silu(linear(h, wg)) * linear(h, wu), wd)");
  /* f16 weights on the CPU: each sum a dot product of the weight row, converted by the hardware, with an f32
   * activation row computed once (render_hdot.c): a decode GEMV over a norm's output with gate and up sharing the
   * row (lt_hdot), a prefill's register-blocked projections (lt_hdott_pc over a tile of 8 rows, two weight rows at
   * a time, the last row of a weight alone; 37 rows leave 5 to lt_hdot), and one kernel whose q8_0 and f16 weights read
   * the same norm output (two row caches, one per form). */
  add_case("half_gemv", NULL, 0,
           "w: f16[5,2048]; v: f16[5,2048]; g: f32[2048]; x: f32[1,2048]\nh = rms_norm(x, g, 1e-6)\n"
           "return silu(linear(h, w)) * linear(h, v), linear(x, w)");
  cases[ncases - 1].cpu_has = "+ lt_hdot(w + (";
  add_case("half_tile_37", "seq=37", 0,
           "x: f32[1, seq, 64]; nw: f16[64]; wg: f16[96, 64]; wu: f16[96, 64]; wd: f16[64, 96]; wq: f16[64, 64]\n"
           "h = rms_norm(x, nw, 1e-6)\n"
           "return x + linear(silu(linear(h, wg)) * linear(h, wu), wd), linear(h, wq)");
  cases[ncases - 1].cpu_has = "lt_hdott_pc(wd + (";
  add_case("half_and_q8_0_tile_21", "seq=21", 0,
           "w: q8_0[13,64]; v: f16[13,64]; g: f32[64]; x: f32[seq,64]\nh = rms_norm(x, g, 1e-6)\n"
           "return silu(linear(h, w)) * linear(h, v), linear(h, v)");
  cases[ncases - 1].cpu_has = "lt_hdott_pc(v + (";
  /* Causal attention over many query tokens: the blocked variants of scores and P x V (one thread per
   * point on CUDA), with a partial block of rows. */
  add_case("prefill_attention_37", "seq=37", 0,
           "q: f32[1,4,seq,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]\nreturn attention(q, k, v, true)");
  /* On CUDA the three attention kernels become one flash-attention kernel for such prefills: head
   * dimension 128 with a partial block of rows and a partial tile of keys; without a mask; and heads
   * flattened into the columns ([seq, heads * 64], as a model's output projection reads them). */
  add_case("prefill_attention_d128_130", "seq=130", 0,
           "q: f32[1,4,seq,128]; k: f32[1,2,seq,128]; v: f32[1,2,seq,128]\nreturn attention(q, k, v, true)");
  /* past a tile of rows the CPU's block form (4 rows an item, k transposed a tile at a time): a last block of 3
   * rows, a last tile of 3 keys, no mask */
  add_case("prefill_attention_full_131", "seq=131", 0,
           "q: f32[1,6,seq,32]; k: f32[1,3,seq,32]; v: f32[1,3,seq,32]\nreturn attention(q, k, v, false)");
  cases[ncases - 1].cpu_has = "else if (lt_rows > 64)";
  add_case("prefill_attention_full_45", "seq=45", 0,
           "q: f32[1,4,seq,32]; k: f32[1,1,seq,32]; v: f32[1,1,seq,32]\nreturn attention(q, k, v, false)");
  add_case("prefill_attention_flat_70", "seq=70", 0,
           "q: f32[1,4,seq,64]; k: f32[1,2,seq,64]; v: f32[1,2,seq,64]\n"
           "return reshape(permute(attention(q, k, v, true), [0, 2, 1, 3]), [1, seq, 256])");
  /* The paged KV cache's ops: a scatter into a pool of blocks (some slots outside: nothing written), keys
   * through block tables (entries out of range clamped), and attention with a per-row key count. On CUDA
   * the kv_len attention over per-row keys is flash-decoding with one row per block and its own end. */
  add_case("paged_scatter_gather", "tok=9,ctx=13", 0,
           "c: f32[6, 4, 2, 8]; x: f32[tok, 2, 8]; s: i32[tok]; t: i32[3, 5]; r: i32[tok]\n"
           "p = cache_scatter(c, x, s)\nreturn paged_gather(p, t, r, len=ctx)");
  add_case("kv_len_attention", "tok=7,ctx=40", 0,
           "q: f32[tok, 6, 1, 24]; k: f32[tok, 2, ctx, 24]; v: f32[tok, 2, ctx, 24]; n: i32[tok]\n"
           "return attention(q, k, v, kv_len=n)");
  add_case("paged_attention_bf16", "tok=5,ctx=70", 0,
           "c: bf16[40, 16, 2, 32]; x: f32[tok, 2, 32]; s: i32[tok]; t: i32[2, 8]; r: i32[tok]; "
           "q: f32[tok, 4, 1, 32]; n: i32[tok]\n"
           "p = cache_scatter(c, x, s)\nk = permute(paged_gather(p, t, r, len=ctx), [0, 2, 1, 3])\n"
           "return attention(q, k, k, kv_len=n)");
  /* attention reading the paged caches through their block tables: on the CPU the vector form (heads sharing k and
   * v in one work item, each key's row once; bf16 rows converted once) */
  for (int f = 0; f < 2; f++) {
    add_case(f ? "paged_attention_vector_bf16" : "paged_attention_vector", "tok=6,ctx=90", 0,
             "c: %s[40, 16, 2, 32]; c2: %s[40, 16, 2, 32]; t: i32[3, 8]; r: i32[tok]; q: f32[tok, 6, 1, 32]; "
             "n: i32[tok]\nk = permute(paged_gather(c, t, r, len=ctx), [0, 2, 1, 3])\n"
             "v = permute(paged_gather(c2, t, r, len=ctx), [0, 2, 1, 3])\nreturn attention(q, k, v, kv_len=n)",
             f ? "bf16" : "f32", f ? "bf16" : "f32");
    cases[ncases - 1].cpu_has = f ? "lt_kp = lt_kb;" : "lt_vf lt_q[3][32 / LT_VW]";
  }
  /* Attention over a run-time number of keys with few query rows is one flash-decoding kernel on
   * CUDA: many keys in chunks merged by the last block (1000 keys: 32 chunks), several query rows
   * each with its own causal end, head and value widths that are no power of two, and one k / v
   * head read by six query heads. */
  add_case("decode_attention_chunks_1000", "seq=1000", 0,
           "q: f32[1,8,1,64]; k: f32[1,2,seq,64]; v: f32[1,2,seq,64]\nreturn attention(q, k, v, true)");
  cases[ncases - 1].cpu_has = "if (lt_rows <= 8)"; /* a contiguous cache: the CPU's vector form for one row */
  add_case("decode_attention_rows_5", "seq=5", 0,
           "q: f32[1,4,seq,32]; k: f32[1,2,seq,32]; v: f32[1,2,seq,32]\nreturn attention(q, k, v, true)");
  add_case("decode_attention_odd_widths_70", "seq=70", 0,
           "q: f32[1,6,1,100]; k: f32[1,3,seq,100]; v: f32[1,3,seq,100]\nreturn attention(q, k, v, false)");
  cases[ncases - 1].cpu_has = "float lt_q[100]"; /* widths no multiple of 16: the CPU's scalar form */
  add_case("decode_attention_mqa_300", "seq=300", 0,
           "q: f32[1,6,1,32]; k: f32[1,1,seq,32]; v: f32[1,1,seq,32]\n"
           "return reshape(permute(attention(q, k, v, true), [0, 2, 1, 3]), [1, 1, 192])");
  /* Fused chains under four fusion policies. */
  static const char *policies[] = {"default", "recompute", "nofuse", "reread"};
  for (int p = 0; p < 4; p++) {
    char name[64];
    snprintf(name, sizeof name, "mlp_%s", policies[p]);
    add_case(name, NULL, p,
             "x: f32[3,64]; nw: f32[64]; wg: f32[96,64]; wu: f32[96,64]; wd: f32[64,96]\n"
             "h = rms_norm(x, nw, 1e-6)\ny = x + linear(silu(linear(h, wg)) * linear(h, wu), wd)");
    snprintf(name, sizeof name, "block_%s", policies[p]);
    add_case(name, "seq=5", p,
             "x: bf16[1, seq, 64]; pos: i32[seq]; nw: bf16[64]; wq: bf16[64,64]; wk: bf16[32,64]; wv: bf16[32,64]; "
             "wo: bf16[64,64]\n"
             "h = rms_norm(x, nw, 1e-5)\n"
             "q = permute(reshape(linear(h, wq), [1, seq, 4, 16]), [0, 2, 1, 3])\n"
             "k = permute(reshape(linear(h, wk), [1, seq, 2, 16]), [0, 2, 1, 3])\n"
             "v = permute(reshape(linear(h, wv), [1, seq, 2, 16]), [0, 2, 1, 3])\n"
             "a = attention(rope(q, pos, 10000.0), rope(k, pos, 10000.0), v, true)\n"
             "o = reshape(permute(a, [0, 2, 1, 3]), [1, seq, 64])\n"
             "y = x + linear(o, wo)");
  }
  /* Names: a program's inputs, intermediates and dimensions named like the generated code's own names
   * (the lt_ locals of the template kernels and helpers, the loop variables i0 / j0 / r0, temporaries
   * acc0 / ld0_0 / s / o, CSE values v0, shared arrays smem0, C's lt_bufs / lt_syms, header macros
   * like NAN, names of the implementation like _x, keywords of C++ only): each must stay a name of its
   * own. On CUDA: the tensor-core GEMM (issue 13's program), flash attention, flash-decoding, a
   * reduction with warp shuffles. */
  add_case("names_linear_issue13", "seq=37", 0, "lt_M: f32[seq,256]; w: bf16[512,256]; y = linear(lt_M, w)");
  cases[ncases - 1].cuda_has = "linear_0_mma(";
  add_case("names_gemm", "lt_seq=130", 0,
           "lt_M: f32[1, lt_seq, 64]; lt_nw: bf16[64]; lt_acc: bf16[96, 64]; lt_c: bf16[96, 64]; acc0: bf16[64, 96]; "
           "lt_A: bf16[64, 64]\n"
           "lt_tid = rms_norm(lt_M, lt_nw, 1e-6)\nlt_v = silu(linear(lt_tid, lt_acc)) * linear(lt_tid, lt_c)\n"
           "lt_scratch = lt_M + linear(lt_v, acc0)\nlt_planes = linear(lt_tid, lt_A)\nreturn lt_scratch, lt_planes");
  cases[ncases - 1].cuda_has = "lt_mma_bf16(lt_c[lt_mt][lt_j]";
  add_case("names_flash", "lt_t=130", 0,
           "lt_q: f32[1,4,lt_t,32]; lt_k: f32[1,2,lt_t,32]; lt_sk: f32[1,2,lt_t,32]\n"
           "lt_s = attention(lt_q, lt_k, lt_sk, true)\nlt_o = reshape(permute(lt_s, [0, 2, 1, 3]), [1, lt_t, 128])\n"
           "return lt_o");
  cases[ncases - 1].cuda_has = "_flash(";
  add_case("names_flash_decode", "lt_tend=300", 0,
           "lt_q: f32[1,6,1,32]; lt_C: f32[1,3,lt_tend,32]; lt_acc: f32[1,3,lt_tend,32]\n"
           "s = attention(lt_q, lt_C, lt_acc, true)\no = s * 2\nreturn o, s");
  cases[ncases - 1].cuda_has = "lt_salpha";
  add_case("names_reduce", "lt_off=127", 0,
           "lt_off: f32[3, lt_off]; v0: f32[lt_off]; NAN: f32[3, 1]; _x: f32[lt_off]\n"
           "i0 = sum(lt_off * v0, -1)\nr0 = softmax(lt_off + NAN, -1)\nsmem0 = argmax(lt_off, -1)\n"
           "ld0_0 = max(lt_off, 0) + _x\nor = rms_norm(lt_off, _x, 1e-6)\nlt_bufs = mean(lt_off, -1)\n"
           "lt_syms = lt_off - NAN\nreturn i0, r0, smem0, ld0_0, or, lt_bufs, lt_syms");
  cases[ncases - 1].cuda_has = "lt_off";
  add_case("return_input", NULL, 0, "x: f32[3]; y: f32[3]\nz = x + y\nreturn x, z, z");
  /* Float -> integer casts saturate (NaN -> 0, out of range -> the end of the range) in every backend
   * and the reference: x * 1e30 leaves both ends of i32 and i64, sqrt(x - 2) is NaN. */
  for (int t = 0; t < 3; t++) {
    char name[64];
    snprintf(name, sizeof name, "cast_saturate_%s", FLOATS[t]);
    add_case(name, NULL, 0,
             "x: %s[127]\na = cast(x * 1e30, i32)\nb = cast(x * 1e30, i64)\nc = cast(sqrt(x - 2.0), i32)\n"
             "d = cast(x * 3e9, i32)\nreturn a, b, c, d",
             FLOATS[t]);
  }
  /* Quantized weights: every block format decoded in the kernel equals dequant.c's value bit for bit (odd
   * row counts, several blocks per row), and projections, a prefill's register-blocked variant and
   * embedding rows read it as any load. */
  static const char *QUANTS[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
  for (int t = 0; t < 8; t++) {
    int k = strchr(QUANTS[t], 'k') ? 256 : 32;
    char name[64];
    snprintf(name, sizeof name, "quant_%s", QUANTS[t]);
    add_case(name, "seq=5", 0,
             "w: %s[7,%d]; x: f32[seq,%d]; ids: i32[3]; b: %s[7,%d]\n"
             "return w * 1.0, linear(x, w), embedding(ids, w), silu(linear(x, w)) * linear(x, b), b * 2.0",
             QUANTS[t], 3 * k, 3 * k, QUANTS[t], 3 * k);
    cases[ncases - 1].exact = 1;
    cases[ncases - 1].cuda_has = "lt_dq_";
    /* a decode GEMV long enough for CUDA's eight-element dot products over the blocks (lt_qd8_*), gate and up
     * sharing the loop */
    static char dq8_call[8][32], qd8_plain[8][32];
    snprintf(qd8_plain[t], sizeof qd8_plain[t], "+ lt_qd8_%s(w + (", QUANTS[t]);
    snprintf(dq8_call[t], sizeof dq8_call[t], "lt_dq8_%s(w, ", QUANTS[t]);
    snprintf(name, sizeof name, "quant_gemv_%s", QUANTS[t]);
    add_case(name, NULL, 0, "w: %s[5,2048]; v: %s[5,2048]; x: f32[1,2048]\nreturn silu(linear(x, w)) * linear(x, v)",
             QUANTS[t], QUANTS[t]);
    cases[ncases - 1].cuda_has = qd8_plain[t];
    cases[ncases - 1].quant_gemv = "0";
    /* the same with LATHE_QUANT_DOT=0: each element decoded to f32 (lt_dq8_*), then multiplied */
    snprintf(name, sizeof name, "quant_gemv_decoded_%s", QUANTS[t]);
    add_case(name, NULL, 0, "w: %s[5,2048]; v: %s[5,2048]; x: f32[1,2048]\nreturn silu(linear(x, w)) * linear(x, v)",
             QUANTS[t], QUANTS[t]);
    cases[ncases - 1].cuda_has = dq8_call[t];
    cases[ncases - 1].quant_dot = "0";
    cases[ncases - 1].quant_gemv = "0";
    /* odd sizes: 7 rows (not a multiple of the rows a block), K not a multiple of the 256 elements a warp step
     * (32-blocks: 65 of them) or of 4 vectors a lane (256-blocks: 9); a norm's output as the activations */
    const int odd_k = k == 32 ? 65 * 32 : 9 * 256;
    snprintf(name, sizeof name, "quant_gemv_odd_%s", QUANTS[t]);
    add_case(name, NULL, 0,
             "w: %s[7,%d]; g: f32[%d]; x: f32[1,%d]\nreturn linear(rms_norm(x, g, 1e-6), w), linear(x, w)", QUANTS[t],
             odd_k, odd_k, odd_k);
    cases[ncases - 1].cuda_has = qd8_plain[t];
    cases[ncases - 1].quant_gemv = "0";
    /* several output rows a warp (LATHE_GEMV_ROWS: 2, 4, 8): 4301 rows (enough for a warp per row on an H200),
     * not a multiple of any (a last partial block of rows one at a time), the odd K, gate and up sharing the loop
     * over a norm's output, and one more plain projection of the same weight */
    static char rows_at[8][3][32];
    for (int r = 0; r < 3; r++) {
      static const char *R[] = {"2", "4", "8"};
      snprintf(name, sizeof name, "quant_gemv_rows%s_%s", R[r], QUANTS[t]);
      add_case(name, NULL, 0,
               "w: %s[4301,%d]; v: %s[4301,%d]; g: f32[%d]; x: f32[1,%d]\nh = rms_norm(x, g, 1e-6)\n"
               "return silu(linear(h, w)) * linear(h, v), linear(x, w)",
               QUANTS[t], odd_k, QUANTS[t], odd_k, odd_k, odd_k);
      snprintf(rows_at[t][r], sizeof rows_at[t][r], "row0 = (i1 * %s)", R[r]);
      cases[ncases - 1].cuda_has = qd8_plain[t];
      cases[ncases - 1].quant_gemv = "0";
      cases[ncases - 1].cuda_has_too = rows_at[t][r];
      cases[ncases - 1].gemv_rows = R[r];
    }
    /* the same with LATHE_QUANT_UNROLL=16: eight vectors a step (all 2048 columns of a warp's row in one step) */
    snprintf(name, sizeof name, "quant_gemv_unroll_%s", QUANTS[t]);
    add_case(name, NULL, 0, "w: %s[5,2048]; v: %s[5,2048]; x: f32[1,2048]\nreturn silu(linear(x, w)) * linear(x, v)",
             QUANTS[t], QUANTS[t]);
    cases[ncases - 1].cuda_has = qd8_plain[t];
    cases[ncases - 1].quant_gemv = "0";
    cases[ncases - 1].cuda_has_too = "+= 2048)";
    cases[ncases - 1].quant_unroll = "16";
    /* a CPU prefill's register-blocked projections: the tile form (lt_qdott_*) over 8 rows at a time, for 21 rows
     * (two tiles and 5 rows left over), 13 weight rows, 3 blocks of K; a norm's output as the activations, gate
     * and up sharing one tile */
    static char tile_call[8][32];
    snprintf(tile_call[t], sizeof tile_call[t], "lt_qdott_%s(v, ", QUANTS[t]);
    snprintf(name, sizeof name, "quant_tile_%s", QUANTS[t]);
    add_case(name, "seq=21", 0,
             "w: %s[13,%d]; v: %s[13,%d]; g: f32[%d]; x: f32[seq,%d]\nh = rms_norm(x, g, 1e-6)\n"
             "return silu(linear(h, w)) * linear(h, v), linear(x, v)",
             QUANTS[t], 3 * k, QUANTS[t], 3 * k, 3 * k, 3 * k);
    cases[ncases - 1].cpu_has = tile_call[t];
    if (t == 1) {
      /* three factors per row: 8 rows read 32 values, more than a row cache's key holds (K_QROW_KEYS): each weight
       * row decoded to f32 instead, the block of rows still the slowest point index */
      add_case("quant_tile_keys_q4_0", "seq=21", 0,
               "w: q4_0[13,64]; x: f32[seq,64]; a: f32[seq,1]; b: f32[seq,1]; c: f32[seq,1]\n"
               "return linear(x * a * b * c, w)");
      cases[ncases - 1].cpu_has = "lt_dqrow_q4_0(w, ";
    }
    /* the quantized GEMV on integer tensor cores (CUDA's decode form of a GEMM's sums, below its 8-row variant): 3
     * rows, 96 columns (6 blocks of 16) and 4352, a norm's output as the activations, gate and up in one kernel and a
     * plain projection. Its 24-bit activations keep f32's tolerance. */
    static const int qg_cols[2] = {96, 4352};
    for (int c = 0; c < 2; c++) {
      snprintf(name, sizeof name, "quant_qgemv%d_%s", qg_cols[c], QUANTS[t]);
      add_case(name, "seq=3", 0,
               "w: %s[%d,%d]; v: %s[%d,%d]; g: f32[%d]; x: f32[seq,%d]\nh = rms_norm(x, g, 1e-6)\n"
               "return silu(linear(h, w)) * linear(h, v), linear(x, w)",
               QUANTS[t], qg_cols[c], 2 * k, QUANTS[t], qg_cols[c], 2 * k, 2 * k, 2 * k);
      cases[ncases - 1].cuda_has = c ? "lt_qgemv<2, " : "lt_qgemv<1, ";
      cases[ncases - 1].quant_gemv = "1";
    }
    if (t == 0 || t == 7) { /* one row of fixed extent: an LM head over the last token */
      snprintf(name, sizeof name, "quant_qgemv_head_%s", QUANTS[t]);
      add_case(name, NULL, 0, "w: %s[4352,%d]; x: f32[1,%d]\nreturn linear(x, w)", QUANTS[t], 8 * k, 8 * k);
      cases[ncases - 1].cuda_has = "lt_qgemv<1, ";
      cases[ncases - 1].quant_gemv = "1";
    }
    if (t == 5) { /* gate and up in different formats (a Q4_K_M file's mix) */
      add_case("quant_qgemv_mixed", "seq=2", 0,
               "w: q4_k[2048,512]; v: q6_k[2048,512]; x: f32[seq,512]\nreturn silu(linear(x, w)) * linear(x, v)");
      cases[ncases - 1].cuda_has = "lt_qgemv<2, 5, 7, ";
      cases[ncases - 1].quant_gemv = "1";
    }
    /* a prefill's projections on tensor cores (CUDA, 37 >= 8 rows): the pre-pass dequantizes each weight whole to
     * bf16 in the scratch (lt_mma_dequant), then cuBLASLt's GEMM or lathe's own reads that copy as a bf16 weight.
     * The copy is each element's exact decoded value rounded to bf16 (relative error at most 2^-8), so the sums
     * are those of bf16 weights and get bf16's tolerance against the float64 sums of the exact values (A keeps
     * about f32 accuracy as hi + lo planes); the CPU computes them from the f32 values. */
    snprintf(name, sizeof name, "quant_gemm_%s", QUANTS[t]);
    add_case(name, "seq=37", 0,
             "w: %s[96,%d]; v: %s[96,%d]; x: f32[seq,%d]\nreturn linear(x, w), silu(linear(x, w)) * "
             "linear(x, v)",
             QUANTS[t], 2 * k, QUANTS[t], 2 * k, 2 * k);
    cases[ncases - 1].cuda_has = "lt_mma_dequant<";
    cases[ncases - 1].tol = check_tolerance(DT_BF16, MM_HIGH);
    if (t == 0 || t == 5) { /* q8_0 and q4_k again without cuBLASLt */
      snprintf(name, sizeof name, "quant_gemm_own_%s", QUANTS[t]);
      add_case(name, "seq=37", 0,
               "w: %s[96,%d]; v: %s[96,%d]; x: f32[seq,%d]\nreturn silu(linear(x, w)) * "
               "linear(x, v) + 1.0",
               QUANTS[t], 2 * k, QUANTS[t], 2 * k, 2 * k);
      cases[ncases - 1].cuda_has = "lt_mma_dequant<";
      cases[ncases - 1].tol = check_tolerance(DT_BF16, MM_HIGH);
      cases[ncases - 1].own_gemm = 1;
      /* a norm before the projections: the pre-pass computes each row's statistic in one block per row and
       * dequantizes the weights in a grid-stride loop over those same blocks */
      snprintf(name, sizeof name, "quant_gemm_norm_%s", QUANTS[t]);
      add_case(name, "seq=37", 0,
               "w: %s[96,%d]; v: %s[96,%d]; g: f32[%d]; x: f32[seq,%d]\nh = rms_norm(x, g, 1e-6)\n"
               "return silu(linear(h, w)) * linear(h, v)",
               QUANTS[t], 2 * k, QUANTS[t], 2 * k, 2 * k, 2 * k);
      cases[ncases - 1].cuda_has = "lt_mma_pack_stat<";
      cases[ncases - 1].cuda_has_too = "lt_mma_dequant<";
      cases[ncases - 1].tol = check_tolerance(DT_BF16, MM_HIGH);
    }
  }
}

int main(void) {
  build_cases();
  Diag d = {0};
  const char *want = getenv("LATHE_TEST_TARGET");
  if (want && !strcmp(want, "cuda")) {
    target = TARGET_CUDA;
    backend = backend_cuda_new(&d);
  } else {
    backend = backend_cpu_new(&d);
  }
  if (!backend) {
    fprintf(stderr, "%s backend: %s\n", target_name(target), d.msg);
    return 1;
  }
  struct CMUnitTest *tests = calloc((size_t)ncases, sizeof *tests);
  for (int i = 0; i < ncases; i++) {
    tests[i].name = cases[i].name;
    tests[i].test_func = run_case;
    tests[i].initial_state = &cases[i];
  }
  /* LATHE_TEST_FILTER: only the cases whose names match this pattern (cmocka's: * and ?), e.g. "quant_qgemv*" */
  const char *filter = getenv("LATHE_TEST_FILTER");
  if (filter && *filter) cmocka_set_test_filter(filter);
  int rc = _cmocka_run_group_tests("differential", tests, (size_t)ncases, NULL, NULL);
  free(tests);
  for (int i = 0; i < ncases; i++) free(cases[i].src);
  backend->ops->destroy(backend);
  if (backend_own_gemm) backend_own_gemm->ops->destroy(backend_own_gemm);
  return rc;
}
