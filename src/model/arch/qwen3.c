/* Qwen3: Qwen3ForCausalLM (dense).
 *
 * Hyperparameters beyond the common ones (config.c): head_dim (often not hidden / heads), rope_theta,
 * rope_scaling (as Llama), attention_bias (false), hidden_act (silu only), use_sliding_window (false) with
 * sliding_window. GGUF "qwen3.*": attention.key_length (head_dim), rope.freq_base, rope.dimension_count,
 * rope.scaling.type; q/k/v biases when blk.0.attn_q.bias is present.
 * Tensors: the Llama-family names (blocks.c) plus q_norm / k_norm per layer; not permuted.
 * Graph: the Llama decoder with RMSNorm over each head's q and k before RoPE. */
#include "blocks.h"
#include "hparams.h"

static int hf_config(const HfObj *root, ModelConfig *c, Diag *d) {
  c->qk_norm = 1;
  return rope_read_hf(root, c, d) && hp_hf_biases(root, c, d) && hp_hf_silu_activation(root, d) &&
         hp_hf_sliding_window(root, "use_sliding_window", c, d);
}

static int gguf_config(const struct GgufFile *f, ModelConfig *c, Diag *d) {
  c->qk_norm = 1;
  hp_gguf_detect_qkv_bias(f, c);
  return rope_read_gguf(f, "qwen3", c, d);
}

static Graph *build(const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d) {
  AttnSpec attn = {.qkv_bias = c->qkv_bias, .qk_norm = 1};
  return mb_llama_decoder(c, o, &attn, arena, pool, d);
}

const ArchDesc ARCH_DESC_QWEN3 = {.id = ARCH_QWEN3,
                                  .name = "qwen3",
                                  .hf_class = "Qwen3ForCausalLM",
                                  .gguf_qk_permuted = 0,
                                  .top = LLAMA_TOP_TENSORS,
                                  .layer = LLAMA_LAYER_TENSORS,
                                  .ignored_tensor = llama_family_ignored_tensor,
                                  .hf_config = hf_config,
                                  .gguf_config = gguf_config,
                                  .build = build};
