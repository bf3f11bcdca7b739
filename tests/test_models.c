/* Whole models against Hugging Face transformers: the tiny random-weight fixtures
 * (tests/fixtures/models/, made by scripts/make_model_fixtures.py) and the default model
 * (SmolLM2-135M-Instruct, reference logits from scripts/make_smollm2_fixture.py). Logits are compared
 * normwise (max |lathe - ref| / max |ref|) with the f32 tolerance; greedy tokens must match exactly. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "testutil.h"
#include "generate/generate.h"
#include "model/presets.h"
#include "base/settings.h"

#define FIXTURES "tests/fixtures/models"
#define LOGIT_TOL 1e-4

static Backend *cpu; /* the backend under test: cpu, or cuda with LATHE_TEST_TARGET=cuda (make test-gpu) */
static Target target = TARGET_CPU;

typedef struct Expected {
  json_t *root;
  int32_t prompt[64];
  int nprompt;
  int32_t greedy[64];
  int ngreedy;
} Expected;

static void load_expected(const char *path, Expected *e) {
  json_error_t err;
  e->root = json_load_file(path, 0, &err);
  if (!e->root) fail_msg("%s: %s", path, err.text);
  json_t *p = json_object_get(e->root, "prompt_ids"), *g = json_object_get(e->root, "greedy");
  e->nprompt = (int)json_array_size(p);
  e->ngreedy = (int)json_array_size(g);
  assert_true(e->nprompt > 0 && e->nprompt <= 64 && e->ngreedy <= 64);
  for (int i = 0; i < e->nprompt; i++) e->prompt[i] = (int32_t)json_integer_value(json_array_get(p, (size_t)i));
  for (int i = 0; i < e->ngreedy; i++) e->greedy[i] = (int32_t)json_integer_value(json_array_get(g, (size_t)i));
}

static double logits_error(const float *got, const double *want, int n) {
  double maxref = 0, maxdiff = 0;
  for (int i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    maxref = fmax(maxref, fabs(want[i]));
    maxdiff = fmax(maxdiff, fabs(got[i] - want[i]));
  }
  return maxdiff / fmax(maxref, 1e-6);
}

static double json_logits_error(const float *got, json_t *arr, int n) {
  assert_int_equal((int)json_array_size(arr), n);
  double *want = malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) want[i] = json_number_value(json_array_get(arr, (size_t)i));
  double e = logits_error(got, want, n);
  free(want);
  return e;
}

static Model *load(const char *path) {
  Diag d = {0};
  ModelLoadOptions o = {target, 64, 1};
  Model *m = model_load(path, cpu, &o, &d);
  if (!m) fail_msg("load %s: %s", path, d.msg);
  return m;
}

/* A quantized GGUF dequantized to exact f32 values (--weights f32): the reference its blocks are checked against
 * (the CPU's default reads the blocks themselves). */
static Model *load_f32(const char *path) {
  Diag d = {0};
  ModelLoadOptions o = {target, 64, 1, .weight_dtype_set = 1, .weight_dtype = DT_F32};
  Model *m = model_load(path, cpu, &o, &d);
  if (!m) fail_msg("load %s as f32: %s", path, d.msg);
  return m;
}

static void greedy_matches(Model *m, const Expected *e, const char *name) {
  Diag d = {0};
  GenerateOptions go = {.max_tokens = e->ngreedy, .prefill_chunk = 5, .sampling = {.greedy = 1}, .ignore_eos = 1};
  int32_t *out = NULL;
  int nout = 0, cached = 0;
  GenerateStats st;
  if (!generate(m, e->prompt, e->nprompt, &cached, &go, NULL, NULL, &out, &nout, &st, &d))
    fail_msg("%s: generate: %s", name, d.msg);
  assert_int_equal(nout, e->ngreedy);
  for (int i = 0; i < nout; i++)
    if (out[i] != e->greedy[i])
      fail_msg("%s: greedy token %d is %d, transformers gives %d", name, i, out[i], e->greedy[i]);
  free(out);
}

/* One fixture: the prompt in one step, in chunks, and token by token (checking every position). */
static void check_fixture(const char *name) {
  char dir[256], path[300];
  snprintf(dir, sizeof dir, FIXTURES "/%s", name);
  snprintf(path, sizeof path, "%s/expected.json", dir);
  Expected e;
  load_expected(path, &e);
  Model *m = load(dir);
  int V = m->cfg.vocab;
  Diag d = {0};
  json_t *all = json_object_get(e.root, "logits_all");
  /* token by token: position i's logits after feeding prompt[0..i] */
  for (int i = 0; i < e.nprompt; i++) {
    if (!model_step(m, &e.prompt[i], 1, i, &d)) fail_msg("%s: step %d: %s", name, i, d.msg);
    double err = json_logits_error(m->logits, json_array_get(all, (size_t)i), V);
    if (!(err <= LOGIT_TOL)) fail_msg("%s: decode position %d: logits error %.3g > %.1g", name, i, err, LOGIT_TOL);
  }
  /* whole prompt at once, and in chunks of 5 + 4 + 3, over the same (overwritten) cache */
  if (!model_step(m, e.prompt, e.nprompt, 0, &d)) fail_msg("%s: prefill: %s", name, d.msg);
  double err = json_logits_error(m->logits, json_object_get(e.root, "logits_last"), V);
  if (!(err <= LOGIT_TOL)) fail_msg("%s: prefill logits error %.3g", name, err);
  assert_true(model_step(m, e.prompt, 5, 0, &d) && model_step(m, e.prompt + 5, 4, 5, &d) &&
              model_step(m, e.prompt + 9, e.nprompt - 9, 9, &d));
  err = json_logits_error(m->logits, json_object_get(e.root, "logits_last"), V);
  if (!(err <= LOGIT_TOL)) fail_msg("%s: chunked prefill logits error %.3g", name, err);
  greedy_matches(m, &e, name);
  model_free(m);
  json_decref(e.root);
}

static void llama(void **s) { check_fixture("llama"); }
static void llama31_rope_scaling_tied(void **s) { check_fixture("llama31"); }
static void qwen2_qkv_bias(void **s) { check_fixture("qwen2"); }
static void qwen3_qk_norm(void **s) { check_fixture("qwen3"); }
static void mistral(void **s) { check_fixture("mistral"); }
static void llama_bf16_weights(void **s) { check_fixture("llama_bf16"); }

static void context_overflow_is_an_error(void **s) {
  Model *m = load(FIXTURES "/llama");
  Diag d = {0};
  int32_t ids[4] = {1, 2, 3, 4};
  assert_false(model_step(m, ids, 4, 62, &d));
  assert_contains(d.msg, "context");
  Diag d2 = {0};
  int32_t bad = 5000;
  assert_false(model_step(m, &bad, 1, 0, &d2));
  assert_contains(d2.msg, "outside the vocabulary");
  model_free(m);
}

/* The interrupt flag (Ctrl-C in the CLI) stops generation between steps and keeps what was generated. */
typedef struct InterruptAfter {
  volatile sig_atomic_t *flag;
  int left;
} InterruptAfter;

static int interrupt_after(void *ctx, int32_t id, const char *text) {
  InterruptAfter *ia = ctx;
  if (--ia->left == 0) *ia->flag = 1;
  return 0;
}

static void generate_stops_when_interrupted(void **s) {
  Expected e;
  load_expected(FIXTURES "/llama/expected.json", &e);
  Model *m = load(FIXTURES "/llama");
  volatile sig_atomic_t flag = 1;
  GenerateOptions go = {
      .max_tokens = 8, .prefill_chunk = 5, .sampling = {.greedy = 1}, .ignore_eos = 1, .interrupt = &flag};
  int32_t *out = NULL;
  int nout = 0, cached = 0;
  GenerateStats st;
  Diag d = {0};
  /* set before the call: no prefill chunk runs, nothing is generated */
  assert_true(generate(m, e.prompt, e.nprompt, &cached, &go, NULL, NULL, &out, &nout, &st, &d));
  assert_string_equal(st.stop_reason, "interrupted");
  assert_int_equal(nout, 0);
  assert_int_equal(cached, 0);
  /* set after the third token: three tokens (the greedy ones), the cache holds all but the last */
  flag = 0;
  InterruptAfter ia = {&flag, 3};
  assert_true(generate(m, e.prompt, e.nprompt, &cached, &go, interrupt_after, &ia, &out, &nout, &st, &d));
  assert_string_equal(st.stop_reason, "interrupted");
  assert_int_equal(nout, 3);
  assert_int_equal(st.generated, 3);
  assert_int_equal(cached, e.nprompt + 2);
  for (int i = 0; i < 3; i++) assert_int_equal(out[i], e.greedy[i]);
  free(out);
  model_free(m);
  json_decref(e.root);
}

/* The default model, when installed (`make model`; .ci/run installs it). */
static const char *default_model(void) {
  static char buf[512];
  const char *env = getenv("LATHE_MODEL");
  if (env && access(env, R_OK) == 0) return env;
  const char *home = getenv("HOME");
  snprintf(buf, sizeof buf, "%s/.cache/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : ".");
  return access(buf, R_OK) == 0 ? buf : NULL;
}

static void smollm2_default_model(void **s) {
  const char *path = default_model();
  if (!path) {
    print_message("default model not installed (make model); skipped\n");
    skip();
  }
  Expected e;
  load_expected(FIXTURES "/smollm2/expected.json", &e);
  /* its exact values (the CPU's default, the blocks, is checked against these in smollm2_native_weights) */
  Model *m = load_f32(path);
  int V = m->cfg.vocab;
  assert_int_equal(V, 49152);
  FILE *f = fopen(FIXTURES "/smollm2/logits_last.f32", "rb");
  assert_non_null(f);
  float *want_f = malloc(sizeof(float) * (size_t)V);
  assert_int_equal((int)fread(want_f, sizeof(float), (size_t)V, f), V);
  fclose(f);
  double *want = malloc(sizeof(double) * (size_t)V);
  for (int i = 0; i < V; i++) want[i] = want_f[i];
  Diag d = {0};
  if (!model_step(m, e.prompt, e.nprompt, 0, &d)) fail_msg("smollm2: %s", d.msg);
  double err = logits_error(m->logits, want, V);
  if (!(err <= LOGIT_TOL)) fail_msg("smollm2: logits error %.3g", err);
  /* and against transformers itself (scripts/smollm2_transformers_check.py, run on the GGUF) */
  f = fopen(FIXTURES "/smollm2/logits_last_transformers.f32", "rb");
  assert_non_null(f);
  assert_int_equal((int)fread(want_f, sizeof(float), (size_t)V, f), V);
  fclose(f);
  for (int i = 0; i < V; i++) want[i] = want_f[i];
  err = logits_error(m->logits, want, V);
  if (!(err <= LOGIT_TOL)) fail_msg("smollm2: logits error vs transformers %.3g", err);
  Expected tf;
  load_expected(FIXTURES "/smollm2/transformers.json", &tf);
  assert_int_equal(tf.ngreedy, e.ngreedy);
  for (int i = 0; i < tf.ngreedy; i++) assert_int_equal(tf.greedy[i], e.greedy[i]);
  json_decref(tf.root);
  greedy_matches(m, &e, "smollm2");
  /* the tokenizer gives the fixture's ids for the fixture's text */
  int32_t *ids = NULL;
  int n = 0;
  const char *text = json_string_value(json_object_get(e.root, "prompt_text"));
  assert_true(tokenizer_encode(m->tok, text, 1, &ids, &n, &d));
  assert_int_equal(n, e.nprompt);
  for (int i = 0; i < n; i++) assert_int_equal(ids[i], e.prompt[i]);
  free(ids);
  free(want);
  free(want_f);
  model_free(m);
  json_decref(e.root);
}

/* --weights native: the default model's quantized tensors (q4_1, q8_0 embedding / tied LM head) read as
 * blocks by the kernels, straight from the mapping, against the dequantized f32 path, and the greedy tokens are
 * transformers' (the fixture's), through q/k rows re-permuted as whole blocks (generate's 5-token chunks and
 * decode steps run the unblocked kernels). int_dot = 0 (LATHE_CPU_INT_DOT=0): the blocks decoded to f32, exact,
 * so only the kernels' summation order differs (LOGIT_TOL); 1: the default, integer dot products over
 * activations quantized to int16 per 32 elements, whose rounding (at most 2^-16 of a block's largest value)
 * the logits carry within QDOT_LOGIT_TOL (2.1e-4 measured on this prompt). */
#define QDOT_LOGIT_TOL 1e-3
static void native_against_f32(int int_dot) {
  const char *path = default_model();
  if (!path) {
    print_message("default model not installed (make model); skipped\n");
    skip();
  }
  setting_set(SET_CPU_INT_DOT, int_dot ? NULL : "0");
  Expected e;
  load_expected(FIXTURES "/smollm2/expected.json", &e);
  Diag d = {0};
  ModelLoadOptions o = {target, 64, 1};
  Model *ref = load_f32(path);
  o.weights_native = 1;
  Model *m = model_load(path, cpu, &o, &d);
  if (!m) fail_msg("load native: %s", d.msg);
  assert_true(m->weights_native);
  assert_true(m->weight_bytes * 4 < ref->weight_bytes); /* blocks, not f32 */
  int V = m->cfg.vocab;
  double *want = malloc(sizeof(double) * (size_t)V);
  /* the prompt in one step (a blocked prefill where it has 8 tokens or more), then one decode step */
  for (int step = 0; step < 2; step++) {
    const int32_t *ids = step ? &e.greedy[0] : e.prompt;
    int n = step ? 1 : e.nprompt, past = step ? e.nprompt : 0;
    if (!model_step(ref, ids, n, past, &d) || !model_step(m, ids, n, past, &d)) fail_msg("smollm2 native: %s", d.msg);
    for (int i = 0; i < V; i++) want[i] = ref->logits[i];
    double err = logits_error(m->logits, want, V), tol = int_dot ? QDOT_LOGIT_TOL : LOGIT_TOL;
    if (!(err <= tol)) fail_msg("smollm2 native: step %d: logits error %.3g against the f32 path", step, err);
  }
  free(want);
  greedy_matches(m, &e, int_dot ? "smollm2 native" : "smollm2 native, decoded to f32");
  model_free(ref);
  model_free(m);
  json_decref(e.root);
  setting_set(SET_CPU_INT_DOT, NULL);
}
static void smollm2_native_weights(void **s) { native_against_f32(1); }
static void smollm2_native_weights_decoded(void **s) { native_against_f32(0); }

/* The default model with f16 weights (--weights f16: each dequantized value rounded to f16) on the CPU: the
 * projections' dot products of the f16 rows, converted by the hardware, with f32 activation rows (render_hdot.c; a
 * prefill's tiles of 8 rows, the decode step's rows) against the same weights converted element by element in the
 * sums' loops (LATHE_CPU_HALF_DOT=0): only the f32 summation order differs (LOGIT_TOL); the greedy tokens are
 * transformers' (the fixture's). */
static void smollm2_f16_weights(void **s) {
  const char *path = default_model();
  if (!path || target != TARGET_CPU) {
    print_message("default model not installed (make model), or not the CPU; skipped\n");
    skip();
  }
  Expected e;
  load_expected(FIXTURES "/smollm2/expected.json", &e);
  Diag d = {0};
  ModelLoadOptions o = {target, 64, 1, .weight_dtype_set = 1, .weight_dtype = DT_F16};
  setting_set(SET_CPU_HALF_DOT, "0");
  Model *ref = model_load(path, cpu, &o, &d);
  setting_set(SET_CPU_HALF_DOT, NULL);
  if (!ref) fail_msg("load f16, converted in the loops: %s", d.msg);
  Model *m = model_load(path, cpu, &o, &d);
  if (!m) fail_msg("load f16: %s", d.msg);
  int V = m->cfg.vocab;
  double *want = malloc(sizeof(double) * (size_t)V);
  for (int step = 0; step < 2; step++) { /* the prompt (a blocked prefill), then one decode step */
    const int32_t *ids = step ? &e.greedy[0] : e.prompt;
    int n = step ? 1 : e.nprompt, past = step ? e.nprompt : 0;
    if (!model_step(ref, ids, n, past, &d) || !model_step(m, ids, n, past, &d)) fail_msg("smollm2 f16: %s", d.msg);
    for (int i = 0; i < V; i++) want[i] = ref->logits[i];
    double err = logits_error(m->logits, want, V);
    if (!(err <= LOGIT_TOL))
      fail_msg("smollm2 f16: step %d: logits error %.3g against the loops' conversion", step, err);
  }
  free(want);
  greedy_matches(m, &e, "smollm2 f16 weights");
  model_free(ref);
  model_free(m);
  json_decref(e.root);
}

/* The built-in architectures' shapes (two layers, random bf16 weights) on the backend under test
 * against the CPU: hidden 576 and a vocabulary of 151936 are sizes that no fixture has (a CUDA
 * reduction once read past the end for both). A 37-token prompt runs the prefill variants (tensor
 * cores and flash attention on CUDA), whole and in two chunks, then greedy steps run the decode graph
 * and the device argmax. */
static void presets_match_the_cpu(void **s) {
  if (target == TARGET_CPU) {
    print_message("compares a GPU with the CPU; run with LATHE_TEST_TARGET=cuda\n");
    skip();
  }
  Diag d = {0};
  Backend *host = backend_cpu_new(&d);
  if (!host) fail_msg("cpu backend: %s", d.msg);
  static const char *names[] = {"smollm2-135m", "qwen3-0.6b"};
  for (int c = 0; c < 2; c++) {
    ModelConfig cfg;
    assert_true(model_preset(names[c], &cfg));
    cfg.layers = 2;
    ModelLoadOptions o = {.max_ctx = 64, .quiet = 1};
    o.target = TARGET_CPU;
    Model *ref = model_new_random(&cfg, DT_BF16, host, &o, &d);
    if (!ref) { /* e.g. no C compiler on the GPU machine; the CPU suite covers the CPU itself */
      print_message("no cpu reference for %s (%s); skipped\n", names[c], d.msg);
      host->ops->destroy(host);
      skip();
    }
    o.target = target;
    Model *m = model_new_random(&cfg, DT_BF16, cpu, &o, &d);
    if (!m) fail_msg("%s: %s", names[c], d.msg);
    int32_t prompt[37];
    for (int i = 0; i < 37; i++) prompt[i] = (int32_t)((i * 7919 + 13) % cfg.vocab);
    if (!model_step(ref, prompt, 37, 0, &d) || !model_step(m, prompt, 37, 0, &d)) fail_msg("%s: %s", names[c], d.msg);
    double *want = malloc(sizeof(double) * (size_t)cfg.vocab);
    for (int i = 0; i < cfg.vocab; i++) want[i] = ref->logits[i];
    double err = logits_error(m->logits, want, cfg.vocab);
    if (!(err <= LOGIT_TOL)) fail_msg("%s: prefill logits differ from the cpu by %.3g", names[c], err);
    /* the same prompt in two prefill chunks (the second after 20 cached tokens: flash attention's
     * causal bound with past > 0 on CUDA) leaves the same logits and cache */
    if (!model_step(m, prompt, 20, 0, &d) || !model_step(m, prompt + 20, 17, 20, &d))
      fail_msg("%s: %s", names[c], d.msg);
    err = logits_error(m->logits, want, cfg.vocab);
    if (!(err <= LOGIT_TOL)) fail_msg("%s: chunked prefill logits differ from the cpu by %.3g", names[c], err);
    /* and in three, the middle one 5 tokens (flash-decoding with several query rows after 20 cached) */
    if (!model_step(m, prompt, 20, 0, &d) || !model_step(m, prompt + 20, 5, 20, &d) ||
        !model_step(m, prompt + 25, 12, 25, &d))
      fail_msg("%s: %s", names[c], d.msg);
    err = logits_error(m->logits, want, cfg.vocab);
    if (!(err <= LOGIT_TOL)) fail_msg("%s: 20 + 5 + 12 prefill logits differ from the cpu by %.3g", names[c], err);
    int32_t tok_ref = prompt[36], tok = prompt[36];
    for (int step = 0; step < 4; step++) {
      int32_t next_ref, next;
      if (!model_step_greedy(ref, &tok_ref, 1, 37 + step, &next_ref, &d) ||
          !model_step_greedy(m, &tok, 1, 37 + step, &next, &d))
        fail_msg("%s: %s", names[c], d.msg);
      if (next != next_ref) fail_msg("%s: greedy step %d gives %d, the cpu %d", names[c], step, next, next_ref);
      tok_ref = next_ref;
      tok = next;
    }
    free(want);
    model_free(ref);
    model_free(m);
  }
  host->ops->destroy(host);
}

int main(void) {
  Diag d = {0};
  const char *want = getenv("LATHE_TEST_TARGET");
  if (want && !strcmp(want, "cuda")) {
    target = TARGET_CUDA;
    cpu = backend_cuda_new(&d);
  } else {
    cpu = backend_cpu_new(&d);
  }
  if (!cpu) {
    fprintf(stderr, "backend: %s\n", d.msg);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(llama),
      cmocka_unit_test(llama31_rope_scaling_tied),
      cmocka_unit_test(qwen2_qkv_bias),
      cmocka_unit_test(qwen3_qk_norm),
      cmocka_unit_test(mistral),
      cmocka_unit_test(llama_bf16_weights),
      cmocka_unit_test(context_overflow_is_an_error),
      cmocka_unit_test(generate_stops_when_interrupted),
      cmocka_unit_test(smollm2_default_model),
      cmocka_unit_test(smollm2_native_weights),
      cmocka_unit_test(smollm2_native_weights_decoded),
      cmocka_unit_test(smollm2_f16_weights),
      cmocka_unit_test(presets_match_the_cpu),
  };
  int rc = cmocka_run_group_tests_name("models", tests, NULL, NULL);
  cpu->ops->destroy(cpu);
  return rc;
}
