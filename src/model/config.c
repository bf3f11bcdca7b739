/* ModelConfig from a Hugging Face config.json (+ generation_config.json) or from GGUF metadata. */
#include "config.h"
#include "../base/mem.h"
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf.h"

static const char *const SUPPORTED = "supported: llama, mistral, qwen2, qwen3";

/* HF class names and model_type / GGUF architecture strings. */
static int arch_from_name(const char *s, ModelArch *out) {
  static const struct {
    const char *name;
    ModelArch arch;
  } table[] = {{"LlamaForCausalLM", ARCH_LLAMA},     {"llama", ARCH_LLAMA},
               {"Qwen2ForCausalLM", ARCH_QWEN2},     {"qwen2", ARCH_QWEN2},
               {"Qwen3ForCausalLM", ARCH_QWEN3},     {"qwen3", ARCH_QWEN3},
               {"MistralForCausalLM", ARCH_MISTRAL}, {"mistral", ARCH_MISTRAL}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(s, table[i].name) == 0) {
      *out = table[i].arch;
      return 1;
    }
  return 0;
}

static void config_defaults(ModelConfig *c) {
  memset(c, 0, sizeof *c);
  c->rope_theta = 10000.0;
  c->max_ctx = 4096;
  c->bos_id = -1;
  c->eos_id = -1;
}

static void add_eos(ModelConfig *c, long long id) {
  if (id < 0 || id > INT_MAX) return;
  for (int i = 0; i < c->n_eos; i++)
    if (c->eos_ids[i] == id) return;
  if (c->n_eos < (int)(sizeof c->eos_ids / sizeof c->eos_ids[0])) c->eos_ids[c->n_eos++] = (int)id;
}

/* Checks that do not depend on the source format. */
static int validate(ModelConfig *c, const char *where, Diag *d) {
  if (c->hidden <= 0 || c->layers <= 0 || c->heads <= 0 || c->kv_heads <= 0 || c->intermediate <= 0 || c->vocab <= 0) {
    diag_error(d, 0, 0,
               "%s: sizes must be positive (hidden %d, layers %d, heads %d, kv heads %d, intermediate %d, "
               "vocab %d)",
               where, c->hidden, c->layers, c->heads, c->kv_heads, c->intermediate, c->vocab);
    return 0;
  }
  if (c->heads % c->kv_heads) {
    diag_error(d, 0, 0, "%s: %d attention heads is not a multiple of %d key/value heads", where, c->heads, c->kv_heads);
    return 0;
  }
  if (c->head_dim <= 0 || c->head_dim % 2) {
    diag_error(d, 0, 0, "%s: head_dim %d must be positive and even", where, c->head_dim);
    return 0;
  }
  if (!(c->rms_eps > 0) || !(c->rope_theta > 0) || c->max_ctx <= 0) {
    diag_error(d, 0, 0, "%s: rms_norm_eps, rope_theta and the context length must be positive", where);
    return 0;
  }
  return 1;
}

/* ---- Hugging Face ---- */

static int json_int_of(json_t *v, long long *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 1;
  }
  if (json_is_real(v)) {
    double x = json_real_value(v);
    if (x == floor(x) && fabs(x) < 9e15) {
      *out = (long long)x;
      return 1;
    }
  }
  return 0;
}

static int req_int(json_t *root, const char *key, int *out, const char *file, Diag *d) {
  json_t *v = json_object_get(root, key);
  long long x;
  if (!v) {
    diag_error(d, 0, 0, "%s: missing required key '%s'", file, key);
    return 0;
  }
  if (!json_int_of(v, &x) || x < INT_MIN || x > INT_MAX) {
    diag_error(d, 0, 0, "%s: key '%s' must be an integer", file, key);
    return 0;
  }
  *out = (int)x;
  return 1;
}

/* Optional integer: absent or null keeps the default. */
static int opt_int(json_t *root, const char *key, int *out, const char *file, Diag *d) {
  json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v)) return 1;
  return req_int(root, key, out, file, d);
}

static int opt_num(json_t *root, const char *key, double *out, int required, const char *file, Diag *d) {
  json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v)) {
    if (required) diag_error(d, 0, 0, "%s: missing required key '%s'", file, key);
    return !required;
  }
  if (!json_is_number(v)) {
    diag_error(d, 0, 0, "%s: key '%s' must be a number", file, key);
    return 0;
  }
  *out = json_number_value(v);
  return 1;
}

static int read_rope_scaling(json_t *root, ModelConfig *c, const char *file, Diag *d) {
  json_t *rs = json_object_get(root, "rope_scaling");
  if (!rs || json_is_null(rs)) return 1;
  if (!json_is_object(rs)) {
    diag_error(d, 0, 0, "%s: rope_scaling must be an object or null", file);
    return 0;
  }
  json_t *t = json_object_get(rs, "rope_type");
  if (!t) t = json_object_get(rs, "type");
  const char *type = json_is_string(t) ? json_string_value(t) : "";
  if (strcmp(type, "default") == 0) return 1;
  if (strcmp(type, "llama3") != 0) {
    diag_error(d, 0, 0, "%s: rope_scaling type '%s' is not supported (supported: llama3)", file, type);
    return 0;
  }
  c->rope_llama3 = 1;
  return opt_num(rs, "factor", &c->rope_factor, 1, file, d) &&
         opt_num(rs, "low_freq_factor", &c->rope_low_freq, 1, file, d) &&
         opt_num(rs, "high_freq_factor", &c->rope_high_freq, 1, file, d) &&
         req_int(rs, "original_max_position_embeddings", &c->rope_orig_ctx, file, d);
}

/* bos_token_id (int or null) and eos_token_id (int, list or null). Returns the first eos found. */
static void read_special_ids(json_t *root, ModelConfig *c, int override_eos) {
  long long x;
  json_t *b = json_object_get(root, "bos_token_id");
  if (json_int_of(b, &x) && x >= 0 && x <= INT_MAX) c->bos_id = (int)x;
  json_t *e = json_object_get(root, "eos_token_id");
  int first = -1;
  if (json_int_of(e, &x)) {
    add_eos(c, x);
    if (x >= 0 && x <= INT_MAX) first = (int)x;
  } else if (json_is_array(e)) {
    for (size_t i = 0; i < json_array_size(e); i++)
      if (json_int_of(json_array_get(e, i), &x)) {
        add_eos(c, x);
        if (first < 0 && x >= 0 && x <= INT_MAX) first = (int)x;
      }
  }
  if (first >= 0 && (override_eos || c->eos_id < 0)) c->eos_id = first;
}

static json_t *load_json(const char *path, int must_exist, Diag *d) {
  json_error_t err;
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    if (must_exist) diag_error(d, 0, 0, "%s: cannot open", path);
    return NULL;
  }
  json_t *root = json_loadf(fp, JSON_REJECT_DUPLICATES, &err);
  fclose(fp);
  if (!root) {
    diag_error(d, err.line, err.column, "%s: invalid JSON: %s", path, err.text);
    return NULL;
  }
  if (!json_is_object(root)) {
    diag_error(d, 0, 0, "%s: expected a JSON object", path);
    json_decref(root);
    return NULL;
  }
  return root;
}

static int hf_arch(json_t *root, ModelConfig *c, const char *file, Diag *d) {
  json_t *archs = json_object_get(root, "architectures");
  json_t *a0 = json_is_array(archs) ? json_array_get(archs, 0) : NULL;
  json_t *mt = json_object_get(root, "model_type");
  const char *name = json_is_string(a0) ? json_string_value(a0) : json_is_string(mt) ? json_string_value(mt) : NULL;
  if (!name) {
    diag_error(d, 0, 0, "%s: neither 'architectures' nor 'model_type' names the architecture", file);
    return 0;
  }
  snprintf(c->arch_name, sizeof c->arch_name, "%s", name);
  if (!arch_from_name(name, &c->arch)) {
    diag_error(d, 0, 0, "unknown architecture '%s' in %s (%s)", name, file, SUPPORTED);
    return 0;
  }
  return 1;
}

static int hf_fields(json_t *root, ModelConfig *c, const char *file, Diag *d) {
  if (!req_int(root, "hidden_size", &c->hidden, file, d) || !req_int(root, "num_hidden_layers", &c->layers, file, d) ||
      !req_int(root, "num_attention_heads", &c->heads, file, d) ||
      !req_int(root, "intermediate_size", &c->intermediate, file, d) ||
      !req_int(root, "vocab_size", &c->vocab, file, d) || !opt_num(root, "rms_norm_eps", &c->rms_eps, 1, file, d))
    return 0;
  c->kv_heads = c->heads;
  c->head_dim = c->heads > 0 ? c->hidden / c->heads : 0;
  if (!opt_int(root, "num_key_value_heads", &c->kv_heads, file, d) ||
      !opt_int(root, "head_dim", &c->head_dim, file, d) || !opt_num(root, "rope_theta", &c->rope_theta, 0, file, d) ||
      !opt_int(root, "max_position_embeddings", &c->max_ctx, file, d) || !read_rope_scaling(root, c, file, d))
    return 0;
  json_t *tie = json_object_get(root, "tie_word_embeddings");
  c->tied_embeddings = json_is_true(tie);
  c->qkv_bias = c->arch == ARCH_QWEN2 || json_is_true(json_object_get(root, "attention_bias"));
  c->qk_norm = c->arch == ARCH_QWEN3;
  return 1;
}

int model_config_from_hf_dir(const char *dir, ModelConfig *c, Diag *d) {
  config_defaults(c);
  char file[4096];
  snprintf(file, sizeof file, "%s/config.json", dir);
  json_t *root = load_json(file, 1, d);
  if (!root) return 0;
  int ok = hf_arch(root, c, file, d) && hf_fields(root, c, file, d);
  if (ok) read_special_ids(root, c, 0);
  json_decref(root);
  if (!ok) return 0;
  /* generation_config.json is what generate() uses: its bos wins, its eos ids join the list. */
  char gen[4096];
  snprintf(gen, sizeof gen, "%s/generation_config.json", dir);
  Diag gd = {0};
  json_t *g = load_json(gen, 0, &gd);
  if (gd.set) {
    diag_error(d, gd.line, gd.col, "%s", gd.msg);
    return 0;
  }
  if (g) {
    read_special_ids(g, c, 1);
    json_decref(g);
  }
  return validate(c, file, d);
}

/* ---- GGUF ---- */

static int gguf_req_int(const GgufFile *f, const char *arch, const char *suffix, int *out, Diag *d) {
  char key[160];
  int64_t v;
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  if (!gguf_get_int(f, key, &v)) {
    diag_error(d, 0, 0, "GGUF metadata: missing required key '%s'", key);
    return 0;
  }
  if (v < 0 || v > INT_MAX) {
    diag_error(d, 0, 0, "GGUF metadata: '%s' = %lld is out of range", key, (long long)v);
    return 0;
  }
  *out = (int)v;
  return 1;
}

static void gguf_opt_int(const GgufFile *f, const char *arch, const char *suffix, int *out) {
  char key[160];
  int64_t v;
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  if (gguf_get_int(f, key, &v) && v >= 0 && v <= INT_MAX) *out = (int)v;
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
    diag_error(d, 0, 0, "GGUF tensor 'rope_freqs.weight' must be f32 [%d] (head_dim / 2)", half);
    return 0;
  }
  float *fac = mem_calloc(d, (size_t)(half > 0 ? half : 1), sizeof(float), "the RoPE factors");
  if (!fac) return 0;
  memcpy(fac, t->data, sizeof(float) * (size_t)half);
  double factor = 1.0;
  for (int i = 0; i < half; i++)
    if (fac[i] > factor) factor = fac[i];
  int ok = 1;
  if (factor > 1.0) {
    int orig = 8192;
    gguf_opt_int(f, arch, "rope.scaling.original_context_length", &orig);
    double low = 1.0, high = 4.0, low_wl = orig / low, high_wl = orig / high;
    for (int i = 0; i < half && ok; i++) {
      double wavelen = 2 * M_PI / pow(c->rope_theta, -2.0 * i / c->head_dim), want;
      if (wavelen < high_wl)
        want = 1.0;
      else if (wavelen > low_wl)
        want = factor;
      else {
        double smooth = (orig / wavelen - low) / (high - low);
        want = 1.0 / ((1 - smooth) / factor + smooth);
      }
      if (!(fabs(fac[i] - want) <= 1e-3 * want)) {
        diag_error(d, 0, 0,
                   "GGUF tensor 'rope_freqs.weight' entry %d is %g, not the llama3 RoPE scaling value %g "
                   "(factor %g, original context %d); this scaling is not supported",
                   i, fac[i], want, factor, orig);
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

int model_config_from_gguf(const GgufFile *f, ModelConfig *c, Diag *d) {
  config_defaults(c);
  const char *arch;
  if (!gguf_get_str(f, "general.architecture", &arch)) {
    diag_error(d, 0, 0, "GGUF metadata: missing required key 'general.architecture'");
    return 0;
  }
  snprintf(c->arch_name, sizeof c->arch_name, "%s", arch);
  if (!arch_from_name(arch, &c->arch)) {
    diag_error(d, 0, 0, "unknown architecture '%s' in GGUF metadata (%s)", arch, SUPPORTED);
    return 0;
  }
  if (!gguf_req_int(f, arch, "block_count", &c->layers, d) ||
      !gguf_req_int(f, arch, "embedding_length", &c->hidden, d) ||
      !gguf_req_int(f, arch, "feed_forward_length", &c->intermediate, d) ||
      !gguf_req_int(f, arch, "attention.head_count", &c->heads, d))
    return 0;
  c->kv_heads = c->heads;
  gguf_opt_int(f, arch, "attention.head_count_kv", &c->kv_heads);
  c->head_dim = c->heads > 0 ? c->hidden / c->heads : 0;
  gguf_opt_int(f, arch, "attention.key_length", &c->head_dim);
  gguf_opt_int(f, arch, "context_length", &c->max_ctx);
  char key[160];
  snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
  if (!gguf_get_float(f, key, &c->rms_eps)) {
    diag_error(d, 0, 0, "GGUF metadata: missing required key '%s'", key);
    return 0;
  }
  snprintf(key, sizeof key, "%s.rope.freq_base", arch);
  gguf_get_float(f, key, &c->rope_theta);
  size_t n_tokens = 0;
  GgufValueType et;
  gguf_opt_int(f, arch, "vocab_size", &c->vocab);
  if (c->vocab == 0 && gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n_tokens) && n_tokens <= INT_MAX)
    c->vocab = (int)n_tokens;
  if (c->vocab == 0) {
    diag_error(d, 0, 0, "GGUF metadata: neither '%s.vocab_size' nor 'tokenizer.ggml.tokens' gives the vocabulary size",
               arch);
    return 0;
  }
  int64_t v;
  if (gguf_get_int(f, "tokenizer.ggml.bos_token_id", &v) && v >= 0 && v <= INT_MAX) c->bos_id = (int)v;
  if (gguf_get_int(f, "tokenizer.ggml.eos_token_id", &v) && v >= 0 && v <= INT_MAX) {
    c->eos_id = (int)v;
    add_eos(c, v);
  }
  /* End-of-turn ends a chat reply as well. */
  if (gguf_get_int(f, "tokenizer.ggml.eot_token_id", &v)) add_eos(c, v);
  c->tied_embeddings = gguf_find_tensor(f, "output.weight") == NULL;
  c->qkv_bias = c->arch == ARCH_QWEN2 || gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL;
  c->qk_norm = c->arch == ARCH_QWEN3 || gguf_find_tensor(f, "blk.0.attn_q_norm.weight") != NULL;
  if (!validate(c, "GGUF metadata", d)) return 0;
  return gguf_rope_freqs(f, arch, c, d);
}
