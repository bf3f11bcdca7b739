/* Code stage: C and CUDA renderers on hand-built loop-stage kernels. The C is compiled with the
 * system compiler, run on random data and compared with plain C loops written here; the CUDA is
 * compiled with NVRTC for sm_90 under every reduction strategy. */
#include "testutil.h"
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "backend/nvrtc.h"
#include "code/code.h"
#include "kernel_testutil.h"

/* y[4] = sum of x[4,3,50] over two axes (a flattened two-axis reduction domain) */
static void k_sum2(Zoo *z) {
  int x = buf(z, "x", DT_F32, BUF_INPUT, 3, I(z, 4), I(z, 3), I(z, 50)),
      y = buf(z, "y", DT_F32, BUF_OUTPUT, 1, I(z, 4), NULL, NULL);
  LKernel *k = kern(z, "sum2_0", y);
  int i0 = par(k, "i0", I(z, 4));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", I(z, 3)), r1 = red(k, ph, "r1", I(z, 50));
  ph->body = ld(z, x, 3, V(z, i0), V(z, r0), V(z, r1));
  set_out(k, 1, V(z, i0), NULL, NULL, ex_acc(z->P, 0, DT_F32));
}

/* y i32[4] = max over rows of x i32[4,33] (integer identity and max) */
static void k_imax(Zoo *z) {
  int x = buf(z, "x", DT_I32, BUF_INPUT, 2, I(z, 4), I(z, 33), NULL),
      y = buf(z, "y", DT_I32, BUF_OUTPUT, 1, I(z, 4), NULL, NULL);
  LKernel *k = kern(z, "imax_0", y);
  int i0 = par(k, "i0", I(z, 4));
  LPhase *ph = phase(k, RED_MAX, DT_I64);
  int r0 = red(k, ph, "r0", I(z, 33));
  ph->body = ld(z, x, 2, V(z, i0), V(z, r0), NULL);
  set_out(k, 1, V(z, i0), NULL, NULL, ex_cast(z->P, DT_I32, ex_acc(z->P, 0, DT_I64)));
}

/* y bool[4] = min over rows of x[4,10] < 0 */
static void k_minneg(Zoo *z) {
  int x = buf(z, "x", DT_F32, BUF_INPUT, 2, I(z, 4), I(z, 10), NULL),
      y = buf(z, "y", DT_BOOL, BUF_OUTPUT, 1, I(z, 4), NULL, NULL);
  LKernel *k = kern(z, "minneg_0", y);
  int i0 = par(k, "i0", I(z, 4));
  LPhase *ph = phase(k, RED_MIN, DT_F32);
  int r0 = red(k, ph, "r0", I(z, 10));
  ph->body = ld(z, x, 2, V(z, i0), V(z, r0), NULL);
  set_out(k, 1, V(z, i0), NULL, NULL, bin(z, X_LT, ex_acc(z->P, 0, DT_F32), f32c(z, -0.5)));
}

/* y f16[6,9] = f16(a f16[6,9] * b bf16[9] + 1) */
static void k_half(Zoo *z) {
  int a = buf(z, "a", DT_F16, BUF_INPUT, 2, I(z, 6), I(z, 9), NULL),
      b = buf(z, "b", DT_BF16, BUF_INPUT, 1, I(z, 9), NULL, NULL);
  int y = buf(z, "y", DT_F16, BUF_OUTPUT, 2, I(z, 6), I(z, 9), NULL);
  LKernel *k = kern(z, "half_0", y);
  int i0 = par(k, "i0", I(z, 6)), i1 = par(k, "i1", I(z, 9));
  Expr *v = bin(z, X_ADD, bin(z, X_MUL, ld(z, a, 2, V(z, i0), V(z, i1), NULL), ld(z, b, 1, V(z, i1), NULL, NULL)),
                f32c(z, 1));
  set_out(k, 2, V(z, i0), V(z, i1), NULL, ex_cast(z->P, DT_F16, v));
}

/* A DAG of depth 40 whose tree would have 2^40 leaves: only CSE makes it renderable. */
#define CSE_DEPTH 40
static void k_cse(Zoo *z) {
  int x = buf(z, "x", DT_F32, BUF_INPUT, 1, I(z, 10), NULL, NULL),
      y = buf(z, "y", DT_F32, BUF_OUTPUT, 1, I(z, 10), NULL, NULL);
  LKernel *k = kern(z, "cse_0", y);
  int i0 = par(k, "i0", I(z, 10));
  Expr *e = ld(z, x, 1, V(z, i0), NULL, NULL);
  for (int i = 0; i < CSE_DEPTH; i++)
    e = bin(z, X_ADD, bin(z, X_MUL, e, f32c(z, 0.5)), bin(z, X_MUL, e, f32c(z, 0.25)));
  set_out(k, 1, V(z, i0), NULL, NULL, e);
}

/* y[12] = silu(sum_r x[r]*rsqrt(s[0])*w1[i,r]) * sum_r x[r]*rsqrt(s[0])*w2[i,r], w1/w2 bf16[12,256]:
 * two phases that share a loop, an invariant scale, bf16 vector loads */
static void k_gateup(Zoo *z) {
  int x = buf(z, "x", DT_F32, BUF_INPUT, 1, I(z, 256), NULL, NULL),
      sc = buf(z, "s", DT_F32, BUF_INPUT, 1, I(z, 1), NULL, NULL);
  int w1 = buf(z, "w1", DT_BF16, BUF_INPUT, 2, I(z, 12), I(z, 256), NULL);
  int w2 = buf(z, "w2", DT_BF16, BUF_INPUT, 2, I(z, 12), I(z, 256), NULL);
  int y = buf(z, "y", DT_F32, BUF_OUTPUT, 1, I(z, 12), NULL, NULL);
  LKernel *k = kern(z, "gateup_0", y);
  int i0 = par(k, "i0", I(z, 12));
  Expr *inv = ex_un(z->P, X_RSQRT, bin(z, X_ADD, ld(z, sc, 1, I(z, 0), NULL, NULL), f32c(z, 2)));
  for (int p = 0; p < 2; p++) {
    LPhase *ph = phase(k, RED_ADD, DT_F32);
    int r = red(k, ph, p ? "r1" : "r0", I(z, 256));
    Expr *xn = bin(z, X_MUL, ld(z, x, 1, V(z, r), NULL, NULL), inv);
    ph->body = bin(z, X_MUL, xn, ex_cast(z->P, DT_F32, ld(z, p ? w2 : w1, 2, V(z, i0), V(z, r), NULL)));
  }
  Expr *g = ex_acc(z->P, 0, DT_F32);
  set_out(k, 1, V(z, i0), NULL, NULL,
          bin(z, X_MUL, bin(z, X_MUL, g, ex_un(z->P, X_SIGMOID, g)), ex_acc(z->P, 1, DT_F32)));
}

static Zoo zoo_all(void) {
  Zoo z = zoo_new();
  k_add(&z);
  k_rms(&z, "rms_norm_0", DT_F32);
  k_rms(&z, "rms_norm_bf16", DT_BF16);
  k_softmax(&z, "softmax_0", I(&z, 6), I(&z, 37));
  k_softmax(&z, "softmax_seqrows", ex_sym(z.P, "seq"), I(&z, 37));
  k_softmax(&z, "softmax_seqcols", I(&z, 3), ex_sym(z.P, "seq"));
  k_matvec(&z);
  k_seqsum(&z);
  k_sum2(&z);
  k_imax(&z);
  k_minneg(&z);
  k_half(&z);
  k_cse(&z);
  k_gateup(&z);
  return z;
}

/* ---- host data and references ---- */

#define SEQ_VALUE 19

typedef struct Host {
  void *raw[64];   /* storage, as the kernel sees it */
  double *val[64]; /* decoded values */
  int64_t n[64];
} Host;

static double decode(DType t, const void *raw, int64_t i) {
  switch (t) {
  case DT_F32: return ((const float *)raw)[i];
  case DT_F16: return f16_to_f32(((const uint16_t *)raw)[i]);
  case DT_BF16: return bf16_to_f32(((const uint16_t *)raw)[i]);
  case DT_I32: return ((const int32_t *)raw)[i];
  case DT_I64: return (double)((const int64_t *)raw)[i];
  case DT_BOOL: return ((const uint8_t *)raw)[i];
  default: return 0;
  }
}

static void encode(DType t, void *raw, int64_t i, double v) {
  switch (t) {
  case DT_F32: ((float *)raw)[i] = (float)v; break;
  case DT_F16: ((uint16_t *)raw)[i] = f32_to_f16((float)v); break;
  case DT_BF16: ((uint16_t *)raw)[i] = f32_to_bf16((float)v); break;
  case DT_I32: ((int32_t *)raw)[i] = (int32_t)v; break;
  case DT_I64: ((int64_t *)raw)[i] = (int64_t)v; break;
  case DT_BOOL: ((uint8_t *)raw)[i] = v != 0; break;
  default: break;
  }
}

static void host_init(Host *h, const LProgram *lp, const SymEnv *env, unsigned seed) {
  srand(seed);
  for (int b = 0; b < lp->nbufs; b++) {
    const LBuf *lb = &lp->bufs[b];
    h->n[b] = shape_numel_eval(&lb->shape, env);
    h->raw[b] = calloc((size_t)h->n[b] + 1, dtype_size(lb->dtype));
    h->val[b] = calloc((size_t)h->n[b] + 1, sizeof(double));
    for (int64_t i = 0; i < h->n[b]; i++) {
      double v = lb->dtype == DT_I32 ? (double)(rand() % 2001 - 1000) : (double)rand() / RAND_MAX * 2 - 1;
      if (lb->kind == BUF_OUTPUT) v = lb->dtype == DT_F32 ? NAN : 0; /* unwritten outputs show up */
      encode(lb->dtype, h->raw[b], i, v);
      h->val[b][i] = decode(lb->dtype, h->raw[b], i);
    }
  }
}

static void host_free(Host *h, int nbufs) {
  for (int b = 0; b < nbufs; b++) {
    free(h->raw[b]);
    free(h->val[b]);
  }
}

/* The expected output of kernel `name` from the decoded inputs; params[] are its buffers in order. */
/* The decoded values of kernel kk's parameter called `name`. */
static const double *named(const KKernel *kk, const LProgram *lp, double *const *in, const char *name) {
  for (int i = 0; i < kk->nparams; i++)
    if (!strcmp(lp->bufs[kk->params[i].buf].name, name)) return in[i];
  fail_msg("%s has no parameter %s", kk->name, name);
  return NULL;
}

static void reference(const KKernel *kk, const LProgram *lp, double *const *in, double *want, int64_t seq) {
  char name[64]; /* a register-blocked variant computes what its kernel does */
  snprintf(name, sizeof name, "%s", kk->name);
  char *suffix = strstr(name, "_rows");
  if (suffix) *suffix = 0;
  if (!strcmp(name, "gateup_0")) {
    const double *x = named(kk, lp, in, "x"), *s = named(kk, lp, in, "s");
    const double *w1 = named(kk, lp, in, "w1"), *w2 = named(kk, lp, in, "w2");
    for (int i = 0; i < 12; i++) {
      double g = 0, u = 0, inv = 1 / sqrt(s[0] + 2);
      for (int r = 0; r < 256; r++) {
        g += x[r] * inv * w1[i * 256 + r];
        u += x[r] * inv * w2[i * 256 + r];
      }
      want[i] = g / (1 + exp(-g)) * u;
    }
  } else if (!strcmp(name, "add_0")) {
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 7; j++) want[i * 7 + j] = in[1][i * 7 + j] + in[2][j];
  } else if (!strncmp(name, "rms_norm", 8)) {
    for (int r = 0; r < 6; r++) {
      double ss = 0;
      for (int j = 0; j < 50; j++) ss += in[1][r * 50 + j] * in[1][r * 50 + j];
      double sc = 1 / sqrt(ss / 50 + 1e-5);
      for (int j = 0; j < 50; j++) want[r * 50 + j] = in[1][r * 50 + j] * sc * in[2][j];
    }
  } else if (!strncmp(name, "softmax", 7)) {
    int64_t rows = !strcmp(name, "softmax_0") ? 6 : !strcmp(name, "softmax_seqrows") ? seq : 3;
    int64_t cols = !strcmp(name, "softmax_seqcols") ? seq : 37;
    for (int64_t r = 0; r < rows; r++) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < cols; j++) m = fmax(m, in[1][r * cols + j]);
      for (int64_t j = 0; j < cols; j++) s += exp(in[1][r * cols + j] - m);
      for (int64_t j = 0; j < cols; j++) want[r * cols + j] = exp(in[1][r * cols + j] - m) / s;
    }
  } else if (!strcmp(name, "matvec_0")) {
    for (int i = 0; i < 16; i++) {
      double s = 0;
      for (int k = 0; k < 100; k++) s += in[1][i * 100 + k] * in[2][k];
      want[i] = s;
    }
  } else if (!strcmp(name, "seqsum_0")) {
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++) {
        double s = 0;
        for (int64_t r = 0; r < seq; r++) s += in[1][(i * seq + r) * 5 + j];
        want[i * 5 + j] = s;
      }
  } else if (!strcmp(name, "sum2_0")) {
    for (int i = 0; i < 4; i++) {
      double s = 0;
      for (int r = 0; r < 150; r++) s += in[1][i * 150 + r];
      want[i] = s;
    }
  } else if (!strcmp(name, "imax_0")) {
    for (int i = 0; i < 4; i++) {
      double m = -1e30;
      for (int r = 0; r < 33; r++) m = fmax(m, in[1][i * 33 + r]);
      want[i] = m;
    }
  } else if (!strcmp(name, "minneg_0")) {
    for (int i = 0; i < 4; i++) {
      double m = 1e30;
      for (int r = 0; r < 10; r++) m = fmin(m, in[1][i * 10 + r]);
      want[i] = m < -0.5;
    }
  } else if (!strcmp(name, "half_0")) {
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 9; j++) want[i * 9 + j] = in[1][i * 9 + j] * in[2][j] + 1;
  } else if (!strcmp(name, "cse_0")) {
    for (int i = 0; i < 10; i++) want[i] = in[1][i] * pow(0.75, CSE_DEPTH);
  }
}

static double tolerance(DType t) { return t == DT_F16 ? 2e-3 : t == DT_BF16 ? 1.6e-2 : 1e-4; }

typedef void (*CKernelFn)(void *const *bufs, const int64_t *syms);

/* Compiles C source into a shared object in a fresh temporary directory and dlopens it. */
static void *compile_c(const char *src, char *dir) {
  strcpy(dir, "/tmp/lathe_codegen_XXXXXX");
  assert_non_null(mkdtemp(dir));
  char path[256], so[256], cmd[700];
  snprintf(path, sizeof path, "%s/k.c", dir);
  snprintf(so, sizeof so, "%s/k.so", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(src, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -O2 -shared -fPIC -fopenmp -Wall -Werror -Wno-unused-function -o %s %s 2>&1",
           so, path);
  int rc = system(cmd);
  if (rc != 0) fail_msg("cc failed on generated C:\n%s", src);
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_msg("dlopen: %s", dlerror());
  /* libgomp's worker threads outlive the handle: keep the runtime mapped after dlclose. */
  void *gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  if (gomp) dlclose(gomp);
  unlink(path);
  unlink(so);
  rmdir(dir);
  return h;
}

/* Renders the zoo for the CPU under schedule s, runs every kernel and checks it. */
static void run_zoo_cpu(Schedule s) {
  Zoo z = zoo_all();
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CPU, s, &d);
  assert_non_null(kp);
  StrBuf src = {0};
  if (!render_c(&src, kp, &d)) fail_msg("render_c: %s", d.msg);
  char dir[64];
  void *so = compile_c(sb_str(&src), dir);
  SymEnv env = {0};
  symenv_set(&env, "seq", SEQ_VALUE);
  Host h;
  host_init(&h, z.lp, &env, 7);
  int variants = 0;
  for (int kv = 0; kv < 2 * kp->nkernels; kv++) { /* every kernel, then every register-blocked variant */
    const KKernel *kk = kv < kp->nkernels ? &kp->kernels[kv] : kp->kernels[kv - kp->nkernels].alt;
    if (!kk) continue;
    variants += kv >= kp->nkernels;
    CKernelFn fn = (CKernelFn)(uintptr_t)dlsym(so, kk->name);
    if (!fn) fail_msg("kernel %s not in the shared object", kk->name);
    void *bufs[K_MAX_PARAMS];
    double *vals[K_MAX_PARAMS];
    int64_t syms[16];
    for (int i = 0; i < kk->nparams; i++) {
      bufs[i] = h.raw[kk->params[i].buf];
      vals[i] = h.val[kk->params[i].buf];
    }
    for (int i = 0; i < kk->nsyms; i++) assert_true(symenv_get(&env, kk->syms[i], &syms[i]));
    fn(bufs, syms);
    int ob = kk->params[0].buf;
    const LBuf *out = &z.lp->bufs[ob];
    double *want = calloc((size_t)h.n[ob] + 1, sizeof(double));
    reference(kk, z.lp, vals, want, SEQ_VALUE);
    for (int64_t i = 0; i < h.n[ob]; i++) {
      double got = decode(out->dtype, h.raw[ob], i);
      if (!(fabs(got - want[i]) <= tolerance(out->dtype) * (1 + fabs(want[i]))))
        fail_msg("%s (omp=%d vec=%d): element %lld is %.9g, expected %.9g", kk->name, s.omp, s.vec, (long long)i, got,
                 want[i]);
    }
    free(want);
  }
  if (s.rows > 1) assert_int_equal(variants, kp->nkernels); /* every zoo kernel has a parallel axis 0 */
  host_free(&h, z.lp->nbufs);
  dlclose(so);
  sb_free(&src);
  arena_free(z.a);
}

static void test_c_serial(void **state) { run_zoo_cpu((Schedule){RS_SERIAL, 1, 1, 0}); }
static void test_c_omp(void **state) { run_zoo_cpu((Schedule){RS_SERIAL, 1, 1, 1}); }
static void test_c_omp_vec4(void **state) { run_zoo_cpu((Schedule){RS_SERIAL, 1, 4, 1}); }
static void test_c_vec8(void **state) { run_zoo_cpu((Schedule){RS_SERIAL, 1, 8, 0}); }
/* Register blocking of parallel axis 0 by 4 (every kernel's variant, full blocks and the remainder) */
static void test_c_rows4(void **state) { run_zoo_cpu((Schedule){RS_SERIAL, 1, 8, 1, .rows = 4, .row_axis = 0}); }
static void test_c_rows2(void **state) { run_zoo_cpu((Schedule){RS_SERIAL, 1, 1, 0, .rows = 2, .row_axis = 0}); }

/* The C has only standard headers, typed restrict pointers and the ABI signature. */
static void test_c_text(void **state) {
  Zoo z = zoo_all();
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CPU, (Schedule){RS_SERIAL, 1, 1, 1}, &d);
  assert_non_null(kp);
  StrBuf src = {0};
  assert_true(render_c(&src, kp, &d));
  const char *s = sb_str(&src);
  assert_contains(s, "#include <stdint.h>");
  assert_contains(s, "void add_0(void *const *lt_bufs, const int64_t *lt_syms) {");
  assert_contains(s, "float *restrict y = (float *)lt_bufs[0];");
  assert_contains(s, "const float *restrict a = (const float *)lt_bufs[1];");
  assert_contains(s, "const int64_t seq = lt_syms[0];");
  assert_contains(s, "#pragma omp parallel for schedule(static)");
  assert_contains(s, "uint16_t *restrict y = (uint16_t *)lt_bufs[0];");
  assert_contains(s, "(-INFINITY)");
  assert_contains(s, "9.99999975e-06f"); /* eps = 1e-5 to f32, round-tripping digits */
  assert_contains(s, "lt_maxi(");
  assert_contains(s, "fmaxf(");
  /* The depth-40 DAG stays small: every doubly used node is named once. */
  const char *cse = strstr(s, "void cse_0(");
  assert_non_null(cse);
  assert_contains(cse, "const float v");
  assert_true(strlen(cse) < 20000);
  sb_free(&src);
  arena_free(z.a);
}

/* ---- CUDA ---- */

static void compile_zoo_cuda_rows(RedStrategy r, int block, int vec, int rows, const char *arch) {
  if (!nvrtc_available()) skip();
  Zoo z = zoo_all();
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){r, block, vec, 0, rows, rows > 1 ? 0 : -1}, &d);
  if (!kp) fail_msg("kernel_from_tile: %s", d.msg);
  StrBuf src = {0};
  if (!render_cuda(&src, kp, &d)) fail_msg("render_cuda: %s", d.msg);
  const char *s = sb_str(&src);
  assert_null(strstr(s, "#include"));
  assert_contains(s, "extern \"C\" __global__ void __launch_bounds__(");
  assert_contains(s, "const float *__restrict__ a");
  assert_contains(s, "const i64 *__restrict__ lt_syms) {\n  lt_pdl();\n  const i64 seq = lt_syms[0];\n");
  if (r != RS_SERIAL) assert_contains(s, "__shfl_xor_sync(0xffffffffu, ");
  if (r == RS_BLOCK && block > 32) {
    assert_contains(s, "__shared__ float smem");
    assert_contains(s, "__syncthreads();");
  }
  void *cubin = NULL;
  size_t size = 0;
  if (!nvrtc_compile(s, arch, &cubin, &size, &d)) fail_msg("%s\n---\n%s", d.msg, s);
  assert_non_null(cubin);
  assert_true(size > 0);
  free(cubin);
  sb_free(&src);
  arena_free(z.a);
}

static void compile_zoo_cuda(RedStrategy r, int block, int vec, const char *arch) {
  compile_zoo_cuda_rows(r, block, vec, 1, arch);
}

static void test_cuda_serial(void **state) { compile_zoo_cuda(RS_SERIAL, 128, 1, "sm_90"); }
static void test_cuda_warp_rows8(void **state) { compile_zoo_cuda_rows(RS_WARP, 128, 8, 8, "sm_90"); }
static void test_cuda_block_rows4(void **state) { compile_zoo_cuda_rows(RS_BLOCK, 256, 8, 4, "sm_90"); }
static void test_cuda_serial_vec4(void **state) { compile_zoo_cuda(RS_SERIAL, 256, 4, "sm_90"); }
static void test_cuda_warp(void **state) { compile_zoo_cuda(RS_WARP, 256, 1, "sm_90"); }
static void test_cuda_warp_vec4(void **state) { compile_zoo_cuda(RS_WARP, 128, 4, "sm_90"); }
static void test_cuda_block(void **state) { compile_zoo_cuda(RS_BLOCK, 256, 1, "sm_90"); }
static void test_cuda_block_vec8(void **state) { compile_zoo_cuda(RS_BLOCK, 1024, 8, "sm_90"); }
static void test_cuda_block32(void **state) { compile_zoo_cuda(RS_BLOCK, 32, 2, "sm_90"); }
/* Before sm_80 there is no cvt.rn.bf16.f32: the bit-manipulation path must compile. */
static void test_cuda_sm75(void **state) { compile_zoo_cuda(RS_WARP, 256, 1, "sm_75"); }

static void test_nvrtc_error_log(void **state) {
  if (!nvrtc_available()) skip();
  Diag d = {0};
  void *cubin = (void *)1;
  size_t size = 1;
  assert_false(nvrtc_compile("extern \"C\" __global__ void k() { undefined_thing(); }", "sm_90", &cubin, &size, &d));
  assert_null(cubin);
  assert_contains(d.msg, "nvrtc");
  assert_contains(d.msg, "undefined_thing");
}

/* ---- refusals ---- */

static void test_c_refuses_cuda_primitives(void **state) {
  Zoo z = zoo_new();
  k_rms(&z, "rms_norm_0", DT_F32);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_BLOCK, 256, 1, 0}, &d);
  assert_non_null(kp);
  StrBuf src = {0};
  assert_false(render_c(&src, kp, &d));
  assert_true(d.set);
  assert_contains(d.msg, "render_c: kernel rms_norm_0");
  assert_contains(d.msg, "CPU target does not have");
  sb_free(&src);
  arena_free(z.a);
}

static void test_cuda_refuses_parfor(void **state) {
  Zoo z = zoo_new();
  k_add(&z);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CPU, (Schedule){RS_SERIAL, 1, 1, 1}, &d);
  assert_non_null(kp);
  StrBuf src = {0};
  assert_false(render_cuda(&src, kp, &d));
  assert_contains(d.msg, "parallel-for");
  sb_free(&src);
  arena_free(z.a);
}

/* A load from a buffer that is not a parameter of the kernel is an error, not bad code. */
static void test_render_refuses_unknown_buffer(void **state) {
  Zoo z = zoo_new();
  k_add(&z);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CPU, (Schedule){RS_SERIAL, 1, 1, 0}, &d);
  assert_non_null(kp);
  kp->kernels[0].nparams = 2; /* drop b */
  StrBuf src = {0};
  assert_false(render_code(&src, kp, &d));
  assert_contains(d.msg, "is not a parameter");
  sb_free(&src);
  arena_free(z.a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_c_text),
      cmocka_unit_test(test_c_serial),
      cmocka_unit_test(test_c_omp),
      cmocka_unit_test(test_c_omp_vec4),
      cmocka_unit_test(test_c_vec8),
      cmocka_unit_test(test_c_rows4),
      cmocka_unit_test(test_c_rows2),
      cmocka_unit_test(test_cuda_serial),
      cmocka_unit_test(test_cuda_serial_vec4),
      cmocka_unit_test(test_cuda_warp),
      cmocka_unit_test(test_cuda_warp_vec4),
      cmocka_unit_test(test_cuda_block),
      cmocka_unit_test(test_cuda_block_vec8),
      cmocka_unit_test(test_cuda_warp_rows8),
      cmocka_unit_test(test_cuda_block_rows4),
      cmocka_unit_test(test_cuda_block32),
      cmocka_unit_test(test_cuda_sm75),
      cmocka_unit_test(test_nvrtc_error_log),
      cmocka_unit_test(test_c_refuses_cuda_primitives),
      cmocka_unit_test(test_cuda_refuses_parfor),
      cmocka_unit_test(test_render_refuses_unknown_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
