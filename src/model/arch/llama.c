/* Llama: Llama 2, Llama 3.x, SmolLM2 and every LlamaForCausalLM checkpoint.
 *
 * Hyperparameters beyond the common ones (config.c): config.json rope_theta (10000), rope_scaling or
 * rope_parameters (default, or llama3 with factor, low/high_freq_factor, original_max_position_embeddings),
 * attention_bias (false), mlp_bias (false only), hidden_act (silu only). GGUF "llama.*": rope.freq_base
 * (10000), rope.dimension_count (= head_dim), rope.scaling.type (none), the rope_freqs.weight table (llama3
 * scaling); q/k/v biases when blk.0.attn_q.bias is present.
 * Tensors: the Llama-family names (blocks.c); llama.cpp's converter permuted the q/k rows.
 * Graph: embedding; per layer h += attention(rms_norm(h)), h += swiglu(rms_norm(h)); norm; LM head. */
#include "blocks.h"
#include "hparams.h"

static int hf_config(const HfObj *root, ModelConfig *c, Diag *d) {
  return rope_read_hf(root, c, d) && hp_hf_biases(root, c, d) && hp_hf_silu_activation(root, d);
}

static int gguf_config(const struct GgufFile *f, ModelConfig *c, Diag *d) {
  hp_gguf_detect_qkv_bias(f, c);
  return rope_read_gguf(f, "llama", c, d);
}

static Graph *build(const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d) {
  AttnSpec attn = {.qkv_bias = c->qkv_bias};
  return mb_llama_decoder(c, o, &attn, arena, pool, d);
}

const ArchDesc ARCH_DESC_LLAMA = {.id = ARCH_LLAMA,
                                  .name = "llama",
                                  .hf_class = "LlamaForCausalLM",
                                  .gguf_qk_permuted = 1,
                                  .top = LLAMA_TOP_TENSORS,
                                  .layer = LLAMA_LAYER_TENSORS,
                                  .ignored_tensor = llama_family_ignored_tensor,
                                  .hf_config = hf_config,
                                  .gguf_config = gguf_config,
                                  .build = build};
