/* The Llama-family builder's graph, compiled like any program: every architecture variant, random
 * weights and caches, run on the CPU backend at a prefill and a decode shape and compared with the
 * float64 reference; the CUDA C of each compiled by NVRTC. */
/* LeakSanitizer's exit scan crashes on a dynamic-TLS entry that a dlclose'd kernel module left behind in this
 * program ("Tracer caught signal 11" at DTLS 0x21fc); leaks are still found from every other root. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "use_tls=0"; }
/* what is reachable only from thread-local storage (the blocks, pthread keys, OpenMP's per-thread state) is then
 * unreachable to the scan */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:tls_get_addr\nleak:pthread_setspecific\nleak:libgomp.so\n";
}

#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "backend/nvrtc.h"
#include "driver/execute.h"
#include "model/config.h"

static ModelConfig tiny(ModelArch arch) {
  ModelConfig c = {0};
  c.arch = arch;
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.intermediate = 96;
  c.vocab = 256;
  c.max_ctx = 32;
  c.rms_eps = 1e-5;
  c.rope_theta = 10000;
  c.tied_embeddings = arch != ARCH_LLAMA;
  c.qkv_bias = arch == ARCH_QWEN2;
  c.qk_norm = arch == ARCH_QWEN3;
  return c;
}

/* dims: "name=value ..." for every symbol; paged: the batched step over a paged cache of blocks of 4 */
static void check_model_as(const ModelConfig *cfg, DType wdt, const char *dims, int paged) {
  ModelBuildOptions o = {.max_ctx = 32, .weight_dtype = wdt, .cache_dtype = DT_F32, .paged_block = paged ? 4 : 0};
  Diag d = {0};
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  c->graph = model_build(cfg, &o, c->arena, c->pool, &d);
  if (!c->graph) fail_msg("build: %s", d.msg);
  if (!compile_graph(c, ST_CODE, &d)) fail_msg("compile: %s", d.msg);
  SymEnv env = {0};
  char names[8][16]; /* the environment keeps the names' pointers */
  long long value;
  int used, k = 0;
  for (const char *p = dims; k < 8 && sscanf(p, " %15[a-z]=%lld%n", names[k], &value, &used) == 2; p += used, k++)
    symenv_set(&env, names[k], value);
  for (int i = 0; i < c->graph->nsymbols; i++)
    if (!symenv_get(&env, c->graph->symbols[i], &(int64_t){0})) fail_msg("no value for %s", c->graph->symbols[i]);
  Backend *cpu = backend_cpu_new(&d);
  assert_non_null(cpu);
  Execution x;
  if (!execute_program(c, cpu, &env, 3, &x, &d)) fail_msg("run: %s", d.msg);
  double err[64];
  if (!execute_check(c, &x, &env, err, &d)) fail_msg("reference: %s", d.msg);
  assert_int_equal(x.nout, 2);
  if (!(err[0] <= check_tolerance(DT_F32, MM_HIGH)))
    fail_msg("logits error %.3g (%s, %s)", err[0], dtype_name(wdt), dims);
  /* next_token is the first maximum of each row of logits the same run produced */
  const float *logits = x.out[0].data;
  int64_t rows = x.out[0].numel / cfg->vocab;
  assert_true(rows >= 1);
  for (int64_t r = 0; r < rows; r++) {
    int64_t best = 0;
    for (int i = 1; i < cfg->vocab; i++)
      if (logits[r * cfg->vocab + i] > logits[r * cfg->vocab + best]) best = i;
    assert_int_equal(((const int64_t *)x.out[1].data)[r], best);
  }
  execution_free(&x);
  cpu->ops->destroy(cpu);
  compilation_free(c);

  Compilation *g = compilation_new(TARGET_CUDA, NULL);
  g->graph = model_build(cfg, &o, g->arena, g->pool, &d);
  if (!g->graph || !compile_graph(g, ST_CODE, &d)) fail_msg("cuda codegen: %s", d.msg);
  void *cubin = NULL;
  size_t size = 0;
  if (!nvrtc_compile(sb_str(&g->code), "sm_90", &cubin, &size, &d)) fail_msg("nvrtc: %s", d.msg);
  free(cubin);
  compilation_free(g);
}

static void check_model(const ModelConfig *cfg, DType wdt, const char *dims) { check_model_as(cfg, wdt, dims, 0); }

/* The batched step: 7 tokens of 3 sequences (random positions, block tables and slots, a few of them out of
 * range: clamped reads and dropped writes, as the reference defines them), 3 logit rows. */
static void llama_paged(void **s) {
  ModelConfig c = tiny(ARCH_LLAMA);
  check_model_as(&c, DT_F32, "tok=7 seqs=3 ctx=11 rows=3 blocks=6", 1);
}
static void qwen3_paged_bf16(void **s) {
  ModelConfig c = tiny(ARCH_QWEN3);
  check_model_as(&c, DT_BF16, "tok=9 seqs=2 ctx=6 rows=2 blocks=5", 1);
}

static void llama_prefill(void **s) {
  ModelConfig c = tiny(ARCH_LLAMA);
  check_model(&c, DT_F32, "seq=5 past=0");
}
static void llama_decode(void **s) {
  ModelConfig c = tiny(ARCH_LLAMA);
  check_model(&c, DT_F32, "seq=1 past=9");
}
static void llama_chunk_bf16(void **s) {
  ModelConfig c = tiny(ARCH_LLAMA);
  check_model(&c, DT_BF16, "seq=4 past=6");
}
static void qwen2_bias(void **s) {
  ModelConfig c = tiny(ARCH_QWEN2);
  check_model(&c, DT_F32, "seq=3 past=2");
}
static void qwen3_qk_norm(void **s) {
  ModelConfig c = tiny(ARCH_QWEN3);
  check_model(&c, DT_F32, "seq=1 past=4");
}
static void llama3_rope_scaling(void **s) {
  ModelConfig c = tiny(ARCH_LLAMA);
  c.rope_llama3 = 1;
  c.rope_factor = 8;
  c.rope_low_freq = 1;
  c.rope_high_freq = 4;
  c.rope_orig_ctx = 2048;
  float f[8], plain[8];
  model_rope_inv_freq(&c, f);
  c.rope_llama3 = 0;
  model_rope_inv_freq(&c, plain);
  assert_true(f[0] == plain[0]);       /* high frequencies are kept */
  assert_true(f[7] < plain[7] / 7.9f); /* low frequencies are divided by the factor */
  c.rope_llama3 = 1;
  check_model(&c, DT_F32, "seq=2 past=3");
}
static void inconsistent_config_is_an_error(void **s) {
  ModelConfig c = tiny(ARCH_LLAMA);
  c.kv_heads = 3;
  ModelBuildOptions o = {.max_ctx = 8, .weight_dtype = DT_F32, .cache_dtype = DT_F32};
  Diag d = {0};
  Arena *a = arena_new();
  assert_null(model_build(&c, &o, a, expr_pool_new(a), &d));
  assert_contains(d.msg, "inconsistent");
  arena_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(llama_prefill),
      cmocka_unit_test(llama_decode),
      cmocka_unit_test(llama_chunk_bf16),
      cmocka_unit_test(qwen2_bias),
      cmocka_unit_test(qwen3_qk_norm),
      cmocka_unit_test(llama3_rope_scaling),
      cmocka_unit_test(llama_paged),
      cmocka_unit_test(qwen3_paged_bf16),
      cmocka_unit_test(inconsistent_config_is_an_error),
  };
  return cmocka_run_group_tests_name("model_graph", tests, NULL, NULL);
}
