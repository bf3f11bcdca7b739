/* ModelConfig from a Hugging Face config.json (+ generation_config.json) or from GGUF metadata: the keys every
 * decoder shares, then the architecture's own (its hf_config / gguf_config hook), then the checks that do
 * not depend on the format. */
#include "config.h"
#include "../base/mem.h"
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config_keys.h"
#include "gguf.h"

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

/* Cross-checks that do not depend on the source format (each value's own range was checked as it was read). */
static int validate(ModelConfig *c, const char *where, Diag *d) {
  if (c->heads % c->kv_heads) {
    diag_error(d, 0, 0, "%s: %d attention heads is not a multiple of %d key/value heads", where, c->heads, c->kv_heads);
    return 0;
  }
  if (c->head_dim <= 0 || c->head_dim % 2) {
    diag_error(d, 0, 0, "%s: head_dim %d must be positive and even", where, c->head_dim);
    return 0;
  }
  if ((long long)c->heads * c->head_dim > HP_MAX_WIDTH) {
    diag_error(d, 0, 0, "%s: %d heads of %d is too wide (at most %lld)", where, c->heads, c->head_dim, HP_MAX_WIDTH);
    return 0;
  }
  return 1;
}

/* ---- Hugging Face ---- */

/* bos_token_id (int or null) and eos_token_id (int, list or null). */
static void read_special_ids(json_t *root, ModelConfig *c, int override_eos) {
  json_int_t x;
  json_t *b = json_object_get(root, "bos_token_id");
  if (json_is_integer(b) && (x = json_integer_value(b)) >= 0 && x <= INT_MAX) c->bos_id = (int)x;
  json_t *e = json_object_get(root, "eos_token_id");
  int first = -1;
  if (json_is_integer(e)) {
    x = json_integer_value(e);
    add_eos(c, x);
    if (x >= 0 && x <= INT_MAX) first = (int)x;
  } else if (json_is_array(e)) {
    for (size_t i = 0; i < json_array_size(e); i++)
      if (json_is_integer(json_array_get(e, i))) {
        x = json_integer_value(json_array_get(e, i));
        add_eos(c, x);
        if (first < 0 && x >= 0 && x <= INT_MAX) first = (int)x;
      }
  }
  if (first >= 0 && (override_eos || c->eos_id < 0)) c->eos_id = first;
}

/* Parse errors name the file, with jansson's line and column after it. */
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
    diag_error(d, 0, 0, "%s:%d:%d: invalid JSON: %s", path, err.line, err.column, err.text);
    return NULL;
  }
  if (!json_is_object(root)) {
    diag_error(d, 0, 0, "%s: expected a JSON object", path);
    json_decref(root);
    return NULL;
  }
  return root;
}

static const ArchDesc *hf_arch(json_t *root, ModelConfig *c, const char *file, Diag *d) {
  json_t *archs = json_object_get(root, "architectures");
  json_t *a0 = json_is_array(archs) ? json_array_get(archs, 0) : NULL;
  json_t *mt = json_object_get(root, "model_type");
  const char *name = json_is_string(a0) ? json_string_value(a0) : json_is_string(mt) ? json_string_value(mt) : NULL;
  if (!name) {
    diag_error(d, 0, 0, "%s: neither 'architectures' nor 'model_type' names the architecture", file);
    return NULL;
  }
  snprintf(c->arch_name, sizeof c->arch_name, "%s", name);
  const ArchDesc *a = arch_find(name);
  if (!a) diag_error(d, 0, 0, "unknown architecture '%s' in %s (supported: %s)", name, file, arch_supported());
  else c->arch = a->id;
  return a;
}

static int hf_fields(const HfObj *o, ModelConfig *c, Diag *d) {
  if (!hf_int(o, "hidden_size", 1, 1, HP_MAX_WIDTH, &c->hidden, d) ||
      !hf_int(o, "num_hidden_layers", 1, 1, HP_MAX_LAYERS, &c->layers, d) ||
      !hf_int(o, "num_attention_heads", 1, 1, HP_MAX_HEADS, &c->heads, d) ||
      !hf_int(o, "intermediate_size", 1, 1, HP_MAX_WIDTH, &c->intermediate, d) ||
      !hf_int(o, "vocab_size", 1, 1, HP_MAX_VOCAB, &c->vocab, d) ||
      !hf_num(o, "rms_norm_eps", 1, 1e-12, 1.0, &c->rms_eps, d))
    return 0;
  c->kv_heads = c->heads;
  c->head_dim = c->hidden / c->heads;
  return hf_int(o, "num_key_value_heads", 0, 1, HP_MAX_HEADS, &c->kv_heads, d) &&
         hf_int(o, "head_dim", 0, 1, HP_MAX_WIDTH, &c->head_dim, d) &&
         hf_int(o, "max_position_embeddings", 0, 1, HP_MAX_CTX, &c->max_ctx, d) &&
         hf_bool(o, "tie_word_embeddings", &c->tied_embeddings, d);
}

int model_config_from_hf_dir(const char *dir, ModelConfig *c, Diag *d) {
  config_defaults(c);
  char file[4096];
  snprintf(file, sizeof file, "%s/config.json", dir);
  json_t *root = load_json(file, 1, d);
  if (!root) return 0;
  HfObj o = {root, file, ""};
  const ArchDesc *a = hf_arch(root, c, file, d);
  int ok = a && hf_fields(&o, c, d) && a->hf_config(&o, c, d);
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

int model_config_from_gguf(const GgufFile *f, ModelConfig *c, Diag *d) {
  config_defaults(c);
  const char *name = gguf_file_name(f), *arch;
  if (!gguf_get_str(f, "general.architecture", &arch)) {
    diag_error(d, 0, 0, "%s: missing required key 'general.architecture'", name);
    return 0;
  }
  snprintf(c->arch_name, sizeof c->arch_name, "%s", arch);
  const ArchDesc *a = arch_find(arch);
  if (!a || strcmp(a->name, arch) != 0) { /* GGUF names architectures by model_type */
    diag_error(d, 0, 0, "%s: unknown architecture '%s' in GGUF metadata (supported: %s)", name, arch, arch_supported());
    return 0;
  }
  c->arch = a->id;
  if (!gguf_key_int(f, arch, "block_count", 1, 1, HP_MAX_LAYERS, &c->layers, d) ||
      !gguf_key_int(f, arch, "embedding_length", 1, 1, HP_MAX_WIDTH, &c->hidden, d) ||
      !gguf_key_int(f, arch, "feed_forward_length", 1, 1, HP_MAX_WIDTH, &c->intermediate, d) ||
      !gguf_key_int(f, arch, "attention.head_count", 1, 1, HP_MAX_HEADS, &c->heads, d))
    return 0;
  c->kv_heads = c->heads;
  c->head_dim = c->hidden / c->heads;
  int value_dim = 0;
  if (!gguf_key_int(f, arch, "attention.head_count_kv", 0, 1, HP_MAX_HEADS, &c->kv_heads, d) ||
      !gguf_key_int(f, arch, "attention.key_length", 0, 1, HP_MAX_WIDTH, &c->head_dim, d) ||
      !gguf_key_int(f, arch, "attention.value_length", 0, 1, HP_MAX_WIDTH, &value_dim, d) ||
      !gguf_key_int(f, arch, "context_length", 0, 1, HP_MAX_CTX, &c->max_ctx, d) ||
      !gguf_key_num(f, arch, "attention.layer_norm_rms_epsilon", 1, 1e-12, 1.0, &c->rms_eps, d) ||
      !gguf_key_int(f, arch, "vocab_size", 0, 1, HP_MAX_VOCAB, &c->vocab, d))
    return 0;
  if (value_dim && value_dim != c->head_dim) {
    diag_error(d, 0, 0, "%s: metadata key '%s.attention.value_length' = %d differs from the key length %d", name, arch,
               value_dim, c->head_dim);
    return 0;
  }
  size_t n_tokens = 0;
  GgufValueType et;
  if (c->vocab == 0 && gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n_tokens) && n_tokens <= HP_MAX_VOCAB)
    c->vocab = (int)n_tokens;
  if (c->vocab == 0) {
    diag_error(d, 0, 0, "%s: neither '%s.vocab_size' nor 'tokenizer.ggml.tokens' gives the vocabulary size", name,
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
  return validate(c, name, d) && a->gguf_config(f, c, d);
}
