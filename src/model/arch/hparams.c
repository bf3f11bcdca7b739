/* Activation, bias and sliding-window hyperparameters (hparams.h). */
#include "hparams.h"
#include <string.h>
#include "../gguf.h"

int hp_hf_silu_activation(const HfObj *root, Diag *d) {
  const char *act;
  if (!hf_str(root, "hidden_act", &act, d)) return 0;
  if (!act || !strcmp(act, "silu") || !strcmp(act, "swish")) return 1;
  diag_error(d, 0, 0, "%s: hidden_act '%s' is not supported (supported: silu)", root->file, act);
  return 0;
}

int hp_hf_biases(const HfObj *root, ModelConfig *c, Diag *d) {
  int mlp_bias = 0;
  if (!hf_bool(root, "attention_bias", &c->qkv_bias, d) || !hf_bool(root, "mlp_bias", &mlp_bias, d)) return 0;
  if (mlp_bias) {
    diag_error(d, 0, 0, "%s: mlp_bias true is not supported", root->file);
    return 0;
  }
  return 1;
}

int hp_hf_sliding_window(const HfObj *root, const char *gate_key, ModelConfig *c, Diag *d) {
  int use = 1;
  if (gate_key) {
    use = 0;
    if (!hf_bool(root, gate_key, &use, d)) return 0;
  }
  if (!use) return 1;
  return hf_int(root, "sliding_window", 0, 1, HP_MAX_CTX, &c->sliding_window, d);
}

void hp_gguf_detect_qkv_bias(const GgufFile *f, ModelConfig *c) {
  c->qkv_bias = gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL;
}
