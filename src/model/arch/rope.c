/* RoPE variants: their hyperparameters from config.json or GGUF (hparams.h), and the inverse frequencies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../gguf.h"
#include "arch.h"
#include "hparams.h"

static int read_llama3(const HfObj *o, ModelConfig *c, Diag *d) {
  c->rope_llama3 = 1;
  if (!hf_num(o, "factor", 1, 1.0, 1024.0, &c->rope_factor, d) ||
      !hf_num(o, "low_freq_factor", 1, 1e-3, 1e3, &c->rope_low_freq, d) ||
      !hf_num(o, "high_freq_factor", 1, 1e-3, 1e3, &c->rope_high_freq, d) ||
      !hf_int(o, "original_max_position_embeddings", 1, 1, HP_MAX_CTX, &c->rope_orig_ctx, d))
    return 0;
  if (!(c->rope_high_freq > c->rope_low_freq)) {
    diag_error(d, 0, 0, "%s: %shigh_freq_factor %g must be larger than low_freq_factor %g", o->file, o->prefix,
               c->rope_high_freq, c->rope_low_freq);
    return 0;
  }
  return 1;
}

int rope_read_hf(const HfObj *root, ModelConfig *c, Diag *d) {
  json_t *theta = json_object_get(root->obj, "rope_theta");
  if (!hf_num(root, "rope_theta", 0, 1.0, HP_MAX_ROPE_THETA, &c->rope_theta, d)) return 0;
  double partial = 1.0;
  if (!hf_num(root, "partial_rotary_factor", 0, 0.0, 1.0, &partial, d)) return 0;
  if (partial != 1.0) {
    diag_error(d, 0, 0, "%s: partial_rotary_factor %g is not supported (RoPE over the whole head only)", root->file,
               partial);
    return 0;
  }
  /* rope_scaling (most checkpoints), else transformers v5's rope_parameters */
  const char *key = "rope_scaling";
  json_t *rs = json_object_get(root->obj, key);
  if (!rs || json_is_null(rs)) rs = json_object_get(root->obj, key = "rope_parameters");
  if (!rs || json_is_null(rs)) return 1;
  if (!json_is_object(rs)) {
    diag_error(d, 0, 0, "%s: %s must be an object or null", root->file, key);
    return 0;
  }
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%s.", key);
  HfObj o = {rs, root->file, prefix};
  if ((!theta || json_is_null(theta)) && !hf_num(&o, "rope_theta", 0, 1.0, HP_MAX_ROPE_THETA, &c->rope_theta, d))
    return 0;
  json_t *t = json_object_get(rs, "rope_type");
  if (!t) t = json_object_get(rs, "type");
  const char *type = json_is_string(t) ? json_string_value(t) : "";
  if (strcmp(type, "default") == 0) return 1;
  if (strcmp(type, "llama3") == 0) return read_llama3(&o, c, d);
  diag_error(d, 0, 0, "%s: %s type '%s' is not supported (supported: default, llama3)", root->file, key, type);
  return 0;
}

/* llama.cpp stores Llama 3 RoPE scaling not as metadata but as a per-frequency divisor table,
 * rope_freqs.weight (head_dim/2 floats). Recover the llama3 parameters: the factor is the table's
 * maximum; the other three are the values every Llama 3.x release uses (original context from the
 * metadata when present). The table is then recomputed and must match, else the file is refused
 * rather than run with the wrong frequencies. */
static int gguf_rope_freqs(const GgufFile *f, const char *arch, ModelConfig *c, Diag *d) {
  const GgufTensor *t = gguf_find_tensor(f, "rope_freqs.weight");
  if (!t) return 1;
  int half = c->head_dim / 2;
  if (t->type != GGML_F32 || t->ne[0] != half || t->n_dims != 1) {
    diag_error(d, 0, 0, "%s: tensor 'rope_freqs.weight' must be f32 [%d] (head_dim / 2)", gguf_file_name(f), half);
    return 0;
  }
  float *fac = malloc(sizeof(float) * (size_t)(half > 0 ? half : 1));
  if (!fac) {
    diag_error(d, 0, 0, "out of memory: %zu bytes for rope_freqs.weight", sizeof(float) * (size_t)half);
    return 0;
  }
  memcpy(fac, t->data, sizeof(float) * (size_t)half);
  double factor = 1.0;
  int ok = 1;
  for (int i = 0; i < half; i++) {
    if (!isfinite(fac[i]) || fac[i] < 1.0f) {
      diag_error(d, 0, 0, "%s: tensor 'rope_freqs.weight' entry %d is %g, not a scaling divisor >= 1",
                 gguf_file_name(f), i, fac[i]);
      ok = 0;
      break;
    }
    if (fac[i] > factor) factor = fac[i];
  }
  if (ok && factor > 1.0) {
    int orig = 8192;
    ok = gguf_key_int(f, arch, "rope.scaling.original_context_length", 0, 1, HP_MAX_CTX, &orig, d);
    double low = 1.0, high = 4.0, low_wl = orig / low, high_wl = orig / high;
    for (int i = 0; i < half && ok; i++) {
      double wavelen = 2 * M_PI / pow(c->rope_theta, -2.0 * i / c->head_dim), want;
      if (wavelen < high_wl) want = 1.0;
      else if (wavelen > low_wl) want = factor;
      else {
        double smooth = (orig / wavelen - low) / (high - low);
        want = 1.0 / ((1 - smooth) / factor + smooth);
      }
      if (!(fabs(fac[i] - want) <= 1e-3 * want)) {
        diag_error(d, 0, 0,
                   "%s: tensor 'rope_freqs.weight' entry %d is %g, not the llama3 RoPE scaling value %g "
                   "(factor %g, original context %d); this scaling is not supported",
                   gguf_file_name(f), i, fac[i], want, factor, orig);
        ok = 0;
      }
    }
    c->rope_llama3 = ok;
    c->rope_factor = factor;
    c->rope_low_freq = low;
    c->rope_high_freq = high;
    c->rope_orig_ctx = orig;
  }
  free(fac);
  return ok;
}

int rope_read_gguf(const GgufFile *f, const char *arch, ModelConfig *c, Diag *d) {
  if (!gguf_key_num(f, arch, "rope.freq_base", 0, 1.0, HP_MAX_ROPE_THETA, &c->rope_theta, d)) return 0;
  int dims = c->head_dim;
  if (!gguf_key_int(f, arch, "rope.dimension_count", 0, 0, HP_MAX_WIDTH, &dims, d)) return 0;
  if (dims != c->head_dim) {
    diag_error(d, 0, 0,
               "%s: metadata key '%s.rope.dimension_count' = %d, but the heads are %d wide: partial rotary "
               "embeddings are not supported",
               gguf_file_name(f), arch, dims, c->head_dim);
    return 0;
  }
  const char *type;
  if (!gguf_key_str(f, arch, "rope.scaling.type", &type, d)) return 0;
  if (type && strcmp(type, "none") != 0) {
    diag_error(d, 0, 0,
               "%s: metadata key '%s.rope.scaling.type' = '%s' is not supported (supported: none; Llama 3 "
               "scaling as the rope_freqs.weight table)",
               gguf_file_name(f), arch, type);
    return 0;
  }
  return gguf_rope_freqs(f, arch, c, d);
}

void model_rope_inv_freq(const ModelConfig *c, float *out) {
  int half = c->head_dim / 2;
  for (int i = 0; i < half; i++) {
    /* HF computes this in float32: 1 / base^(2i/d) */
    float inv = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / (double)c->head_dim));
    if (c->rope_llama3) {
      double lo_wl = c->rope_orig_ctx / c->rope_low_freq, hi_wl = c->rope_orig_ctx / c->rope_high_freq;
      double wl = 2 * M_PI / inv;
      if (wl > lo_wl) inv = (float)(inv / c->rope_factor);
      else if (wl >= hi_wl) {
        double smooth = (c->rope_orig_ctx / wl - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
        inv = (float)((1 - smooth) * inv / c->rope_factor + smooth * inv);
      }
    }
    out[i] = inv;
  }
}
