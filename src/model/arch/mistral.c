/* Mistral: MistralForCausalLM (Mistral 7B and relatives); llama.cpp converts these to GGUF "llama".
 *
 * Hyperparameters beyond the common ones (config.c): as Llama (rope_theta, rope_scaling, attention_bias,
 * hidden_act), and sliding_window (null: full attention; a window caps the context, since within it sliding
 * and full attention agree). GGUF "mistral.*": as Llama.
 * Tensors: the Llama-family names (blocks.c), q/k rows permuted as for Llama.
 * Graph: the Llama decoder. */
#include "blocks.h"
#include "hparams.h"

static int hf_config(const HfObj *root, ModelConfig *c, Diag *d) {
  return rope_read_hf(root, c, d) && hp_hf_biases(root, c, d) && hp_hf_silu_activation(root, d) &&
         hp_hf_sliding_window(root, NULL, c, d);
}

static int gguf_config(const struct GgufFile *f, ModelConfig *c, Diag *d) {
  hp_gguf_detect_qkv_bias(f, c);
  return rope_read_gguf(f, "mistral", c, d);
}

static Graph *build(const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d) {
  AttnSpec attn = {.qkv_bias = c->qkv_bias};
  return mb_llama_decoder(c, o, &attn, arena, pool, d);
}

const ArchDesc ARCH_DESC_MISTRAL = {.id = ARCH_MISTRAL,
                                    .name = "mistral",
                                    .hf_class = "MistralForCausalLM",
                                    .gguf_qk_permuted = 1,
                                    .top = LLAMA_TOP_TENSORS,
                                    .layer = LLAMA_LAYER_TENSORS,
                                    .ignored_tensor = llama_family_ignored_tensor,
                                    .hf_config = hf_config,
                                    .gguf_config = gguf_config,
                                    .build = build};
