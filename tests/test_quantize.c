/* `lathe quantize`'s pieces: every ggml format's quantizer against its dequantizer (errors within the
 * format's step, odd block counts, blocks of zeros, constants and outliers), the type rule and its
 * row-length fallbacks, the GGUF writer read back by lathe's reader, the PyPI gguf package's
 * dequantizer reproducing lathe's values bit for bit, and whole models (the fixtures and the default
 * model) quantized, loaded and run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "base/rng.h"
#include "generate/generate.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "model/quantize.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

#define FIXTURES "tests/fixtures/models"

static const int formats[] = {GGML_Q8_0, GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
enum { N_FORMATS = sizeof formats / sizeof formats[0] };

static double gauss(uint64_t *s) {
  double u = splitmix64_unit(s) + 1e-12, v = splitmix64_unit(s);
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* n values: mostly N(0, scale), with blocks of zeros, of one constant, of all-positive values and a
 * few outliers, so the scale choices meet their edge cases. */
static void fill(float *x, int64_t n, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) x[i] = (float)(gauss(&s) * 0.05);
  for (int64_t i = 0; i < n && i < 32; i++) x[i] = 0;
  for (int64_t i = 256; i < n && i < 288; i++) x[i] = 0.125f;
  for (int64_t i = 512; i < n && i < 768; i++) x[i] = fabsf(x[i]) + 0.01f;
  for (int64_t i = 300; i < n; i += 997) x[i] *= 40;
}

/* The largest |error| the format may make on one block: half its element step at the block's range
 * (two steps for the k-formats, whose scales are themselves quantized to 6 or 8 bits). */
static double allowed_error(int type, const float *x, int be) {
  float mn = x[0], mx = x[0], amax = 0;
  for (int i = 0; i < be; i++) {
    mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
    amax = fmaxf(amax, fabsf(x[i]));
  }
  double range = (double)mx - fmin(mn, 0);
  switch (type) {
  case GGML_Q8_0: return amax / 127.0 * 0.51 + amax * 1e-3;
  case GGML_Q4_0: return amax / 8.0 * 1.01 + amax * 1e-3;
  case GGML_Q5_0: return amax / 16.0 * 1.01 + amax * 1e-3;
  case GGML_Q4_1: return (mx - mn) / 15.0 * 0.51 + amax * 2e-3;
  case GGML_Q5_1: return (mx - mn) / 31.0 * 0.51 + amax * 2e-3;
  case GGML_Q4_K: return range / 15.0 * 2 + amax * 2e-2;
  case GGML_Q5_K: return range / 31.0 * 2 + amax * 2e-2;
  default: return amax / 32.0 * 2 + amax * 2e-2; /* q6_k */
  }
}

/* Relative RMS error each format reaches on Gaussian data (a step / sqrt(12) per element, with room). */
static double rms_bound(int type) {
  switch (type) {
  case GGML_Q8_0: return 0.012;
  case GGML_Q4_0: return 0.15;
  case GGML_Q4_1: return 0.11;
  case GGML_Q5_0: return 0.075;
  case GGML_Q5_1: return 0.055;
  case GGML_Q4_K: return 0.12;
  case GGML_Q5_K: return 0.07; /* min clamped at 0 and 6-bit scales: above q5_1 */
  default: return 0.035;       /* q6_k */
  }
}

static void round_trip_every_format(void **st) {
  (void)st;
  for (int f = 0; f < N_FORMATS; f++) {
    int type = formats[f], be;
    size_t bb;
    assert_true(ggml_type_block(type, &be, &bb));
    for (int blocks = 1; blocks <= 41; blocks += 8) { /* odd block counts: 1, 9, 17, 25, 33, 41 */
      int64_t n = (int64_t)blocks * be;
      float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
      unsigned char *q = malloc((size_t)blocks * bb);
      fill(x, n, 1000u * (unsigned)type + (unsigned)blocks);
      Diag d = {0};
      if (!ggml_quantize(type, x, q, n, &d) || !ggml_dequantize(type, q, y, n, &d))
        fail_msg("%s: %s", ggml_type_name(type), d.msg);
      double se = 0, sx = 0;
      for (int64_t b = 0; b < blocks; b++) {
        double tol = allowed_error(type, x + b * be, be);
        for (int i = 0; i < be; i++) {
          int64_t k = b * be + i;
          double e = fabs((double)y[k] - x[k]);
          if (!(e <= tol))
            fail_msg("%s, %d blocks: element %lld is %g for %g (error %g > %g)", ggml_type_name(type), blocks,
                     (long long)k, y[k], x[k], e, tol);
          se += e * e;
          sx += (double)x[k] * x[k];
        }
      }
      /* a block of zeros comes back as zeros exactly */
      for (int i = 0; i < 32; i++) assert_true(y[i] == 0.0f);
      double rel = sqrt(se / sx);
      if (blocks == 41)
        print_message("%s: relative RMS error %.4f (bound %.3f)\n", ggml_type_name(type), rel, rms_bound(type));
      if (blocks >= 9 && !(rel <= rms_bound(type)))
        fail_msg("%s: relative RMS error %.4f > %.3f", ggml_type_name(type), rel, rms_bound(type));
      free(x);
      free(y);
      free(q);
    }
  }
}

/* More bits, less error: each format's RMS error on the same data ranks as its bits per weight. */
static void more_bits_less_error(void **st) {
  (void)st;
  const int order[] = {GGML_Q4_0, GGML_Q5_0, GGML_Q8_0};
  const int korder[] = {GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
  int64_t n = 256 * 16;
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
  unsigned char *q = malloc((size_t)n * 2);
  uint64_t s = 7;
  for (int64_t i = 0; i < n; i++) x[i] = (float)gauss(&s);
  for (int set = 0; set < 2; set++) {
    double last = INFINITY;
    for (int k = 0; k < 3; k++) {
      int type = set ? korder[k] : order[k];
      Diag d = {0};
      assert_true(ggml_quantize(type, x, q, n, &d) && ggml_dequantize(type, q, y, n, &d));
      double se = 0;
      for (int64_t i = 0; i < n; i++) se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
      if (!(se < last)) fail_msg("%s: error %g is not below the previous format's %g", ggml_type_name(type), se, last);
      last = se;
    }
  }
  free(x);
  free(y);
  free(q);
}

static void partial_blocks_are_refused(void **st) {
  (void)st;
  float x[300] = {0};
  unsigned char q[1024];
  for (int f = 0; f < N_FORMATS; f++) {
    Diag d = {0};
    int be;
    ggml_type_block(formats[f], &be, NULL);
    assert_false(ggml_quantize(formats[f], x, q, be + 3, &d));
    assert_contains(d.msg, "not a multiple of the block size");
  }
}

static void type_rule_and_fallbacks(void **st) {
  (void)st;
  int fb;
  /* 1-D stays f32 */
  assert_int_equal(quant_tensor_type(QUANT_Q4_K_M, "blk.0.attn_norm.weight", 1, 576, 0, 30, 0, &fb), GGML_F32);
  assert_int_equal(fb, 0);
  /* a row of 1536 takes q4_k; of 576 (not a multiple of 256) the fallback q5_0; of 100, f16 */
  assert_int_equal(quant_tensor_type(QUANT_Q4_K_M, "blk.1.ffn_gate.weight", 2, 1536, 1, 30, 0, &fb), GGML_Q4_K);
  assert_int_equal(quant_tensor_type(QUANT_Q4_K_M, "blk.1.ffn_gate.weight", 2, 576, 1, 30, 0, &fb), GGML_Q5_0);
  assert_int_equal(fb, 1);
  assert_int_equal(quant_tensor_type(QUANT_Q4_K_M, "blk.1.ffn_gate.weight", 2, 100, 1, 30, 0, &fb), GGML_F16);
  assert_int_equal(quant_tensor_type(QUANT_Q5_K_M, "blk.1.ffn_gate.weight", 2, 576, 1, 30, 0, &fb), GGML_Q5_1);
  assert_int_equal(quant_tensor_type(QUANT_Q6_K, "blk.1.ffn_gate.weight", 2, 576, 1, 30, 0, &fb), GGML_Q8_0);
  assert_int_equal(quant_tensor_type(QUANT_Q8_0, "blk.1.ffn_gate.weight", 2, 48, 1, 30, 0, &fb), GGML_F16);
  assert_int_equal(quant_tensor_type(QUANT_Q4_0, "blk.1.ffn_gate.weight", 2, 64, 1, 30, 0, &fb), GGML_Q4_0);
  /* the LM head: q6_k but under q8_0 */
  assert_int_equal(quant_tensor_type(QUANT_Q4_K_M, "output.weight", 2, 2048, -1, 30, 1, &fb), GGML_Q6_K);
  assert_int_equal(quant_tensor_type(QUANT_Q4_1, "token_embd.weight", 2, 2048, -1, 30, 1, &fb), GGML_Q6_K);
  assert_int_equal(quant_tensor_type(QUANT_Q8_0, "output.weight", 2, 2048, -1, 30, 1, &fb), GGML_Q8_0);
  /* attn_v / ffn_down: q6_k in llama.cpp's use_more_bits layers (n = 32: 0..3, 28..31, 6, 9, ...) */
  int more[32] = {0};
  for (int l = 0; l < 32; l++)
    more[l] = quant_tensor_type(QUANT_Q4_K_M, "blk.x.attn_v.weight", 2, 2048, l, 32, 0, &fb) == GGML_Q6_K;
  int want[32] = {[0] = 1,  [1] = 1,  [2] = 1,  [3] = 1,  [6] = 1,  [9] = 1,  [12] = 1, [15] = 1,
                  [18] = 1, [21] = 1, [24] = 1, [27] = 1, [28] = 1, [29] = 1, [30] = 1, [31] = 1};
  for (int l = 0; l < 32; l++)
    if (more[l] != want[l]) fail_msg("layer %d: attn_v q6_k %d, want %d", l, more[l], want[l]);
  assert_int_equal(quant_tensor_type(QUANT_Q5_K_M, "blk.6.ffn_down.weight", 2, 2048, 6, 32, 0, &fb), GGML_Q6_K);
  assert_int_equal(quant_tensor_type(QUANT_Q5_K_M, "blk.7.ffn_down.weight", 2, 2048, 7, 32, 0, &fb), GGML_Q5_K);
  assert_int_equal(quant_tensor_type(QUANT_Q5_K_M, "blk.6.attn_q.weight", 2, 2048, 6, 32, 0, &fb), GGML_Q5_K);
  QuantScheme s;
  assert_true(quant_scheme_from_name("q5_k_m", &s) && s == QUANT_Q5_K_M);
  assert_false(quant_scheme_from_name("q3_k", &s));
}

static char *tmp_path(const char *suffix) {
  static int k;
  char *p = malloc(256);
  snprintf(p, 256, "build/tests/quantize_test_%d_%d%s", (int)getpid(), k++, suffix);
  return p;
}

/* One tensor per format (3 rows of 768: 24 blocks of 32, 3 of 256 per row) and f32/f16/bf16, plus
 * metadata of each kind; read back by lathe's reader, then by the gguf package. */
static void writer_read_back_and_gguf_py(void **st) {
  (void)st;
  const int types[] = {GGML_F32,  GGML_F16,  GGML_BF16, GGML_Q8_0, GGML_Q4_0, GGML_Q4_1,
                       GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
  enum { NT = sizeof types / sizeof types[0], ROW = 768, ROWS = 3, N = ROW * ROWS };
  GgufWriter *w = gguf_writer_new();
  gguf_writer_str(w, "general.architecture", "llama");
  gguf_writer_u32(w, "test.u32", 77);
  gguf_writer_f32(w, "test.f32", 0.5f);
  gguf_writer_bool(w, "test.bool", 1);
  const char *toks[] = {"a", "bc", "<s>"};
  gguf_writer_str_array(w, "test.strs", toks, 3);
  int32_t ints[] = {1, -2, 3};
  gguf_writer_i32_array(w, "test.ints", ints, 3);
  float *x = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * N * NT);
  unsigned char *q = malloc(N * 4);
  Diag d = {0};
  for (int i = 0; i < NT; i++) {
    fill(x, N, 50u + (unsigned)i);
    int be;
    size_t bb;
    ggml_type_block(types[i], &be, &bb);
    size_t nb = (size_t)(N / be) * bb;
    assert_true(ggml_quantize(types[i], x, q, N, &d));
    assert_true(ggml_dequantize(types[i], q, ref + (size_t)i * N, N, &d));
    char name[64];
    snprintf(name, sizeof name, "t.%s", ggml_type_name(types[i]));
    int64_t ne[2] = {ROW, ROWS};
    assert_true(gguf_writer_tensor(w, name, types[i], 2, ne, q, nb, &d));
  }
  int64_t bad_ne[2] = {100, 1};
  assert_false(gguf_writer_tensor(w, "t.bad", GGML_Q8_0, 2, bad_ne, q, 34, &d));
  assert_contains(d.msg, "rows of 100");
  char *path = tmp_path(".gguf"), *refp = tmp_path(".f32");
  Diag d2 = {0};
  assert_true(gguf_writer_write(w, path, &d2) > 0);
  gguf_writer_free(w);

  GgufFile *g = gguf_open(path, &d2);
  if (!g) fail_msg("%s", d2.msg);
  int64_t v;
  double fv;
  int bv;
  const char *sv;
  assert_true(gguf_get_int(g, "test.u32", &v) && v == 77);
  assert_true(gguf_get_float(g, "test.f32", &fv) && fv == 0.5);
  assert_true(gguf_get_bool(g, "test.bool", &bv) && bv == 1);
  assert_true(gguf_get_str(g, "general.architecture", &sv) && strcmp(sv, "llama") == 0);
  assert_string_equal(gguf_arr_str(g, "test.strs", 2), "<s>");
  assert_int_equal(gguf_arr_int(g, "test.ints", 1), -2);
  assert_int_equal(gguf_tensor_count(g), NT);
  float *y = malloc(sizeof(float) * N);
  for (int i = 0; i < NT; i++) {
    const GgufTensor *t = gguf_tensor_at(g, i);
    assert_int_equal(t->type, types[i]);
    assert_int_equal(t->ne[0], ROW);
    assert_int_equal(t->ne[1], ROWS);
    assert_int_equal((int)(((const unsigned char *)t->data - (const unsigned char *)gguf_tensor_at(g, 0)->data) % 32),
                     0);
    assert_true(ggml_dequantize(t->type, t->data, y, N, &d2));
    assert_memory_equal(y, ref + (size_t)i * N, sizeof(float) * N);
  }
  gguf_close(g);
  FILE *f = fopen(refp, "wb");
  assert_non_null(f);
  assert_int_equal((int)fwrite(ref, sizeof(float), (size_t)N * NT, f), N * NT);
  fclose(f);
  char cmd[800];
  snprintf(cmd, sizeof cmd, "scripts/gguf-py-check.sh %s %s --expect-key test.strs", path, refp);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  char line[512] = "", all[2048] = "";
  while (fgets(line, sizeof line, p))
    if (strlen(all) + strlen(line) < sizeof all) strcat(all, line);
  int rc = pclose(p);
  print_message("%s", all);
  int status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  unlink(path);
  unlink(refp);
  free(path);
  free(refp);
  free(x), free(y), free(q), free(ref);
  if (status == 77) skip();
  if (status != 0) fail_msg("gguf package check failed (exit %d): %s", status, all);
  assert_contains(all, "bit for bit");
}

static Backend *cpu;

static Model *load(const char *path) {
  Diag d = {0};
  ModelLoadOptions o = {TARGET_CPU, 64, 1};
  Model *m = model_load(path, cpu, &o, &d);
  if (!m) fail_msg("load %s: %s", path, d.msg);
  return m;
}

static double logits_error(const float *a, const float *b, int n) {
  double maxref = 0, maxdiff = 0;
  for (int i = 0; i < n; i++) {
    if (!isfinite(a[i])) return INFINITY;
    maxref = fmax(maxref, fabs(b[i]));
    maxdiff = fmax(maxdiff, fabs(a[i] - b[i]));
  }
  return maxdiff / fmax(maxref, 1e-6);
}

/* Quantizes `in`, loads the result and compares its last-position logits on `ids` with the original's.
 * Returns the error; the quantized model is left in *out_model (caller frees). */
static double quantized_vs_original(const char *in, QuantScheme s, const int32_t *ids, int n, Model **out_model,
                                    QuantReport *rep) {
  char *path = tmp_path(".gguf");
  Diag d = {0};
  if (!quantize_model(in, path, s, rep, &d)) fail_msg("quantize %s: %s", in, d.msg);
  Model *orig = load(in), *qm = load(path);
  unlink(path);
  free(path);
  assert_int_equal(orig->cfg.vocab, qm->cfg.vocab);
  assert_int_equal(orig->cfg.layers, qm->cfg.layers);
  assert_int_equal(orig->cfg.head_dim, qm->cfg.head_dim);
  assert_int_equal(orig->cfg.tied_embeddings, qm->cfg.tied_embeddings);
  assert_int_equal(orig->cfg.rope_llama3, qm->cfg.rope_llama3);
  assert_int_equal(orig->cfg.bos_id, qm->cfg.bos_id);
  assert_int_equal(orig->cfg.eos_id, qm->cfg.eos_id);
  int V = orig->cfg.vocab;
  if (!model_step(orig, ids, n, 0, &d) || !model_step(qm, ids, n, 0, &d)) fail_msg("%s: step: %s", in, d.msg);
  double e = logits_error(qm->logits, orig->logits, V);
  model_free(orig);
  if (out_model) *out_model = qm;
  else model_free(qm);
  return e;
}

/* Every fixture architecture (llama's q/k permutation, llama 3 RoPE scaling's rope_freqs table and
 * tied embeddings, qwen2 biases, qwen3 q/k norms) from safetensors through q8_0 and q4_k_m. */
static void fixtures_quantized_run_close(void **st) {
  (void)st;
  const char *names[] = {"llama", "llama31", "qwen2", "qwen3", "mistral", "llama_bf16"};
  int32_t ids[12] = {1, 17, 200, 42, 5, 99, 100, 7, 255, 3, 64, 11};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char dir[256];
    snprintf(dir, sizeof dir, FIXTURES "/%s", names[i]);
    QuantReport rep;
    double e8 = quantized_vs_original(dir, QUANT_Q8_0, ids, 12, NULL, &rep);
    double e4 = quantized_vs_original(dir, QUANT_Q4_K_M, ids, 12, NULL, &rep);
    print_message("%s: logits error q8_0 %.4f, q4_k_m %.4f\n", names[i], e8, e4);
    if (!(e8 <= 0.04)) fail_msg("%s: q8_0 logits error %.4f", names[i], e8);
    if (!(e4 <= 0.25)) fail_msg("%s: q4_k_m logits error %.4f", names[i], e4);
    assert_true(rep.n_fallback > 0); /* hidden 64: no row is a multiple of 256 */
  }
}

/* A GGUF with llama's permutation read back un-permuted: quantizing the quantized file to q8_0 again
 * gives the same q/k rows (up to requantization) as the first. */
static void requantized_gguf_keeps_rows(void **st) {
  (void)st;
  char *a = tmp_path(".gguf"), *b = tmp_path(".gguf");
  Diag d = {0};
  QuantReport rep;
  assert_true(quantize_model(FIXTURES "/llama", a, QUANT_Q8_0, &rep, &d));
  assert_true(quantize_model(a, b, QUANT_Q8_0, &rep, &d));
  ModelConfig ca, cb;
  WeightStore *wa = weights_open(a, &ca, &d), *wb = weights_open(b, &cb, &d),
              *wo = weights_open(FIXTURES "/llama", &ca, &d);
  assert_non_null(wa);
  assert_non_null(wb);
  assert_non_null(wo);
  WeightInfo info;
  assert_true(weights_has(wo, "model.layers.0.self_attn.q_proj.weight", &info));
  int64_t n = info.dims[0] * info.dims[1];
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n),
        *z = malloc(sizeof(float) * (size_t)n);
  assert_true(weights_read(wo, "model.layers.0.self_attn.q_proj.weight", DT_F32, x, &d));
  assert_true(weights_read(wa, "model.layers.0.self_attn.q_proj.weight", DT_F32, y, &d));
  assert_true(weights_read(wb, "model.layers.0.self_attn.q_proj.weight", DT_F32, z, &d));
  double amax = 0, e1 = 0, e2 = 0;
  for (int64_t i = 0; i < n; i++) {
    amax = fmax(amax, fabs(x[i]));
    e1 = fmax(e1, fabs(y[i] - x[i]));
    e2 = fmax(e2, fabs(z[i] - y[i]));
  }
  assert_true(e1 <= amax / 100 && e2 <= amax / 100);
  GgufFile *g = weights_gguf(wb);
  const char *arch;
  assert_true(gguf_get_str(g, "general.architecture", &arch) && strcmp(arch, "llama") == 0);
  int64_t ft;
  assert_true(gguf_get_int(g, "general.file_type", &ft) && ft == 7);
  free(x), free(y), free(z);
  weights_close(wa), weights_close(wb), weights_close(wo);
  unlink(a), unlink(b);
  free(a), free(b);
}

static const char *default_model(void) {
  static char buf[512];
  const char *env = getenv("LATHE_MODEL");
  if (env && access(env, R_OK) == 0) return env;
  const char *home = getenv("HOME");
  snprintf(buf, sizeof buf, "%s/.cache/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
  return access(buf, R_OK) == 0 ? buf : NULL;
}

/* The default model (Q4_1) to q8_0: logits close to the original's, the tokenizer carried over, and
 * the same greedy continuation of "The capital of France is" (" Paris"). */
static void default_model_to_q8_0(void **st) {
  (void)st;
  const char *path = default_model();
  if (!path) {
    print_message("default model not installed (make model); skipped\n");
    skip();
  }
  int32_t ids[5] = {504, 3575, 282, 4649, 314}; /* "The capital of France is" */
  Model *qm;
  QuantReport rep;
  double e = quantized_vs_original(path, QUANT_Q8_0, ids, 5, &qm, &rep);
  print_message("default model: q8_0 logits error %.4f vs the Q4_1 original\n", e);
  if (!(e <= 0.05)) fail_msg("q8_0 logits error %.4f", e);
  assert_true(rep.tokenizer);
  assert_non_null(qm->tok);
  int32_t *out = NULL;
  int nout = 0;
  Diag d = {0};
  assert_true(tokenizer_encode(qm->tok, "The capital of France is", 1, &out, &nout, &d));
  assert_int_equal(nout, 5);
  assert_memory_equal(out, ids, sizeof ids);
  free(out);
  int32_t next;
  assert_true(model_step_greedy(qm, ids, 5, 0, &next, &d));
  assert_int_equal(next, 7042); /* " Paris", as transformers (tests/fixtures/models/smollm2) */
  model_free(qm);
}

static int setup(void **st) {
  (void)st;
  Diag d = {0};
  cpu = backend_cpu_new(&d);
  return cpu ? 0 : -1;
}

static int teardown(void **st) {
  (void)st;
  cpu->ops->destroy(cpu);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip_every_format),      cmocka_unit_test(more_bits_less_error),
      cmocka_unit_test(partial_blocks_are_refused),   cmocka_unit_test(type_rule_and_fallbacks),
      cmocka_unit_test(writer_read_back_and_gguf_py), cmocka_unit_test(fixtures_quantized_run_close),
      cmocka_unit_test(requantized_gguf_keeps_rows),  cmocka_unit_test(default_model_to_q8_0),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
