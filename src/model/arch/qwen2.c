/* Qwen2 / Qwen2.5: Qwen2ForCausalLM.
 *
 * Hyperparameters beyond the common ones (config.c): rope_theta, rope_scaling (as Llama), hidden_act (silu
 * only), use_sliding_window (false) with sliding_window. The q/k/v projections always have biases.
 * GGUF "qwen2.*": rope.freq_base, rope.dimension_count, rope.scaling.type.
 * Tensors: the Llama-family names (blocks.c), not permuted (llama.cpp's Qwen2 uses NeoX-style RoPE).
 * Graph: the Llama decoder with q/k/v biases. */
#include "blocks.h"
#include "hparams.h"

static int hf_config(const HfObj *root, ModelConfig *c, Diag *d) {
  c->qkv_bias = 1;
  return rope_read_hf(root, c, d) && hp_hf_silu_activation(root, d) &&
         hp_hf_sliding_window(root, "use_sliding_window", c, d);
}

static int gguf_config(const struct GgufFile *f, ModelConfig *c, Diag *d) {
  c->qkv_bias = 1;
  return rope_read_gguf(f, "qwen2", c, d);
}

static Graph *build(const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d) {
  AttnSpec attn = {.qkv_bias = 1};
  return mb_llama_decoder(c, o, &attn, arena, pool, d);
}

const ArchDesc ARCH_DESC_QWEN2 = {.id = ARCH_QWEN2,
                                  .name = "qwen2",
                                  .hf_class = "Qwen2ForCausalLM",
                                  .gguf_qk_permuted = 0,
                                  .top = LLAMA_TOP_TENSORS,
                                  .layer = LLAMA_LAYER_TENSORS,
                                  .ignored_tensor = llama_family_ignored_tensor,
                                  .hf_config = hf_config,
                                  .gguf_config = gguf_config,
                                  .build = build};
