/* Model hyper-parameters, from a Hugging Face config.json or GGUF metadata, in Hugging Face terms. The keys
 * every decoder shares are read here; each architecture reads its own (arch/<name>.c). */
#ifndef LATHE_MODEL_CONFIG_H
#define LATHE_MODEL_CONFIG_H
#include "../base/diag.h"
#include "arch/arch.h"

typedef struct ModelConfig {
  ModelArch arch;
  char arch_name[64]; /* as the file says: "LlamaForCausalLM", "llama", "qwen3", ... */
  int hidden;         /* hidden_size */
  int layers;         /* num_hidden_layers */
  int heads;          /* num_attention_heads */
  int kv_heads;       /* num_key_value_heads */
  int head_dim;       /* head_dim (default hidden / heads) */
  int intermediate;   /* intermediate_size */
  int vocab;          /* vocab_size */
  int max_ctx;        /* max_position_embeddings */
  double rms_eps;     /* rms_norm_eps */
  double rope_theta;  /* rope_theta */
  /* rope_scaling {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
   * original_max_position_embeddings}; rope_llama3 = 0 when absent. */
  int rope_llama3;
  double rope_factor, rope_low_freq, rope_high_freq;
  int rope_orig_ctx;
  int tied_embeddings;   /* tie_word_embeddings */
  int qkv_bias;          /* Qwen2: biases on q/k/v projections */
  int qk_norm;           /* Qwen3: RMSNorm on q and k per head */
  int sliding_window;    /* > 0: attention sees only the last sliding_window positions (lathe: context cap) */
  int bos_id, eos_id;    /* -1 if unknown */
  int eos_ids[8], n_eos; /* all end-of-sequence ids (generation_config may list several) */
} ModelConfig;

/* Reads <dir>/config.json (and generation_config.json if present). Unknown architecture: the diag
 * names it. Missing required keys, values of the wrong type or out of range: the diag names the key and
 * the file. */
int model_config_from_hf_dir(const char *dir, ModelConfig *c, Diag *d);
struct GgufFile;
int model_config_from_gguf(const struct GgufFile *f, ModelConfig *c, Diag *d);
#endif
