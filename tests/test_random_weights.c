/* Random benchmark weights quantized at load (generate/random_weights.c): the blocks equal ggml_quantize of the
 * float pattern, also past the pattern's period where they are tiled, the dequantized reference equals
 * ggml_dequantize of those blocks, and each tensor gets the type `lathe quantize`'s rule gives it. */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "generate/random_weights.h"
#include "model/gguf.h"
#include "model/presets.h"
#include "model/quantize.h"

/* n elements of tensor "model.layers.0.mlp.up_proj.weight" as blocks of t and as their dequantized f32 values,
 * against quantizing the pattern directly. */
static void check_blocks(DType t, int64_t n) {
  Diag d = {0};
  const char *name = "model.layers.0.mlp.up_proj.weight";
  size_t bytes;
  assert_true(dtype_bytes(t, n, &bytes));
  float *src = malloc(sizeof(float) * (size_t)n), *deq = malloc(sizeof(float) * (size_t)n),
        *want_deq = malloc(sizeof(float) * (size_t)n);
  unsigned char *got = malloc(bytes), *want = malloc(bytes);
  for (int64_t i = 0; i < n; i++) src[i] = random_weight_value(i);
  int type = ggml_type_of_dtype(t);
  assert_true(ggml_quantize(type, src, want, n, &d));
  assert_true(random_weights_fill(name, t, t, got, n, &d));
  assert_memory_equal(got, want, bytes);
  assert_true(ggml_dequantize(type, want, want_deq, n, &d));
  assert_true(random_weights_fill(name, DT_F32, t, deq, n, &d));
  assert_memory_equal(deq, want_deq, sizeof(float) * (size_t)n);
  /* the float pattern itself when no block type is given, and norms are ones even with one */
  assert_true(random_weights_fill(name, DT_F32, DT_F32, deq, 64, &d));
  assert_memory_equal(deq, src, sizeof(float) * 64);
  assert_true(random_weights_fill("model.norm.weight", DT_F32, t, deq, 64, &d));
  for (int i = 0; i < 64; i++) assert_true(deq[i] == 1.0f);
  free(src), free(deq), free(want_deq), free(got), free(want);
}

static void blocks_equal_quantizing_the_pattern(void **state) {
  (void)state;
  check_blocks(DT_Q4_0, 32 * (65521 + 77)); /* more blocks than the period: tiled */
  check_blocks(DT_Q8_0, 32 * 301);
  check_blocks(DT_Q4_K, 256 * 9);
  check_blocks(DT_Q6_K, 256 * 5);
  check_blocks(DT_Q5_0, 32 * 7);
  Diag d = {0};
  unsigned char buf[64];
  assert_false(random_weights_fill("model.layers.0.mlp.up_proj.weight", DT_Q4_K, DT_Q4_K, buf, 100, &d));
  assert_non_null(strstr(d.msg, "not whole q4_k blocks"));
}

static DType type_of(const ModelConfig *c, QuantScheme s, const char *name, int rank, int64_t row) {
  RandomQuant q = {c, (int)s};
  return random_quant_weight_type(&q, name, rank, row, DT_BF16);
}

static void tensors_get_the_quantize_rule(void **state) {
  (void)state;
  ModelConfig c;
  assert_true(model_preset("llama-3.2-1b", &c)); /* 16 layers, tied embeddings, rows of 2048 and 8192 */
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.layers.5.self_attn.q_proj.weight", 2, 2048), DT_Q4_K);
  /* attn_v and ffn_down get q6_k in the first and last eighth and every third layer between */
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.layers.0.self_attn.v_proj.weight", 2, 2048), DT_Q6_K);
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.layers.15.mlp.down_proj.weight", 2, 8192), DT_Q6_K);
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.layers.4.mlp.down_proj.weight", 2, 8192), DT_Q6_K);
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.layers.5.mlp.down_proj.weight", 2, 8192), DT_Q4_K);
  /* the tied embedding is the LM head: q6_k, but q8_0 stays q8_0 */
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.embed_tokens.weight", 2, 2048), DT_Q6_K);
  assert_int_equal(type_of(&c, QUANT_Q8_0, "model.embed_tokens.weight", 2, 2048), DT_Q8_0);
  assert_int_equal(type_of(&c, QUANT_Q4_0, "model.layers.5.mlp.up_proj.weight", 2, 2048), DT_Q4_0);
  assert_int_equal(type_of(&c, QUANT_Q4_0, "model.embed_tokens.weight", 2, 2048), DT_Q6_K);
  /* 1-D tensors keep the fallback */
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.layers.5.input_layernorm.weight", 1, 2048), DT_BF16);
  /* qwen3-8b: an untied embedding table is a matrix like any other, the LM head q6_k */
  assert_true(model_preset("qwen3-8b", &c));
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.embed_tokens.weight", 2, 4096), DT_Q4_K);
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "lm_head.weight", 2, 4096), DT_Q6_K);
  /* smollm2-135m's rows of 576 are no multiple of 256: llama.cpp's fallbacks */
  assert_true(model_preset("smollm2-135m", &c));
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.layers.9.self_attn.q_proj.weight", 2, 576), DT_Q5_0);
  assert_int_equal(type_of(&c, QUANT_Q4_K_M, "model.embed_tokens.weight", 2, 576), DT_Q8_0);
  /* a row no block divides keeps the fallback (quantize would write f16) */
  assert_int_equal(type_of(&c, QUANT_Q8_0, "model.layers.1.mlp.up_proj.weight", 2, 40), DT_BF16);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(blocks_equal_quantizing_the_pattern),
      cmocka_unit_test(tensors_get_the_quantize_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
