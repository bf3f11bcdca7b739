/* Shared hyperparameter readers of the decoder blocks, for the architectures' config hooks: the RoPE
 * variants (rope.c: default and llama3 scaling, from config.json or GGUF), the MLP activation, attention
 * biases and the sliding window (hparams.c). Each checks its values and names the file and key on error. */
#ifndef LATHE_MODEL_ARCH_HPARAMS_H
#define LATHE_MODEL_ARCH_HPARAMS_H
#include "../config.h"
#include "../config_keys.h"

struct GgufFile;

/* rope_theta (default 10000), partial_rotary_factor (1 only), rope_scaling or transformers v5's
 * rope_parameters: type default or llama3 (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings); any other type is an error. */
int rope_read_hf(const HfObj *root, ModelConfig *c, Diag *d);
/* <arch>.rope.freq_base, <arch>.rope.dimension_count (must be head_dim), <arch>.rope.scaling.type (none only),
 * and llama.cpp's rope_freqs.weight table (llama3 scaling). */
int rope_read_gguf(const struct GgufFile *f, const char *arch, ModelConfig *c, Diag *d);

/* hidden_act: silu (or its alias swish), the SwiGLU gate's activation; absent means silu. */
int hp_hf_silu_activation(const HfObj *root, Diag *d);
/* attention_bias (q/k/v/o biases; lathe builds q/k/v biases, so o_proj's must be absent: checked against the
 * tensors) and mlp_bias (false only). */
int hp_hf_biases(const HfObj *root, ModelConfig *c, Diag *d);
/* sliding_window, honoured when gate_key is NULL or that key (use_sliding_window) is true. */
int hp_hf_sliding_window(const HfObj *root, const char *gate_key, ModelConfig *c, Diag *d);
/* GGUF: q/k/v biases when the file has blk.0.attn_q.bias. */
void hp_gguf_detect_qkv_bias(const struct GgufFile *f, ModelConfig *c);
#endif
