/* WeightStore: one name → tensor table over safetensors shards or a GGUF file, in Hugging Face names.
 * Reads convert (and for GGUF dequantize and un-permute) row by row, so no whole-tensor f32 copy of
 * a large embedding is ever needed. */
#include "weights.h"
#include "../base/mem.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../base/arena.h"
#include "../base/hash.h"
#include "gguf.h"
#include "safetensors.h"

typedef struct Entry {
  const char *name; /* Hugging Face name (or the GGUF name when no mapping applies) */
  WeightInfo info;
  const StTensor *st;   /* safetensors source, or */
  const GgufTensor *gg; /* GGUF source */
  int unpermute_heads;  /* > 0: undo llama.cpp's q/k row permutation with this many heads */
  const char *file;     /* the file holding it */
} Entry;

struct WeightStore {
  Arena *arena;
  const char *dir;
  const char *source; /* the .gguf, model.safetensors or model.safetensors.index.json */
  GgufFile *gguf;
  StFile **shards;
  int n_shards;
  Entry *entries;
  int n, cap_entries;
  const char *last_shard_path; /* of the shard open_shard opened last */
  int *slots;                  /* open-addressing hash of entry indices (-1 empty) */
  int n_slots;
};

/* ---- table ---- */

static Entry *find_entry(const WeightStore *w, const char *name) {
  if (!w->n_slots) return NULL;
  for (size_t i = hash_str(HASH_SEED, name) & (size_t)(w->n_slots - 1);; i = (i + 1) & (size_t)(w->n_slots - 1)) {
    int e = w->slots[i];
    if (e < 0) return NULL;
    if (strcmp(w->entries[e].name, name) == 0) return &w->entries[e];
  }
}

/* Builds the hash once every entry is in; fails on a duplicate name. */
static int build_index(WeightStore *w, Diag *d) {
  int n = 16;
  while (n < 2 * w->n) n *= 2;
  w->n_slots = n;
  w->slots = ARENA_ARRAY(w->arena, int, n);
  for (int i = 0; i < n; i++) w->slots[i] = -1;
  for (int e = 0; e < w->n; e++) {
    const char *name = w->entries[e].name;
    size_t i = hash_str(HASH_SEED, name) & (size_t)(n - 1);
    while (w->slots[i] >= 0) {
      if (strcmp(w->entries[w->slots[i]].name, name) == 0) {
        diag_error(d, 0, 0, "tensor '%s' appears twice in the model files", name);
        return 0;
      }
      i = (i + 1) & (size_t)(n - 1);
    }
    w->slots[i] = e;
  }
  return 1;
}

static Entry *add_entry(WeightStore *w, const char *name) {
  if (w->n == w->cap_entries) {
    int cap = w->cap_entries ? 2 * w->cap_entries : 64;
    Entry *ne = ARENA_ARRAY(w->arena, Entry, cap);
    if (w->n) memcpy(ne, w->entries, sizeof(Entry) * (size_t)w->n);
    w->entries = ne;
    w->cap_entries = cap;
  }
  Entry *e = &w->entries[w->n++];
  memset(e, 0, sizeof *e);
  e->name = arena_strdup(w->arena, name);
  return e;
}

/* ---- safetensors directory ---- */

static void add_st_tensor(WeightStore *w, const char *name, const StTensor *t, const char *file) {
  Entry *e = add_entry(w, name);
  e->st = t;
  e->file = file;
  e->info.rank = t->rank;
  e->info.dtype = e->info.native = t->dtype;
  for (int i = 0; i < 4; i++) e->info.dims[i] = i < t->rank ? t->shape[i] : 1;
}

static StFile *open_shard(WeightStore *w, const char *file, Diag *d) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", w->dir, file);
  StFile *f = st_open(path, d);
  if (!f) return NULL;
  w->last_shard_path = arena_strdup(w->arena, path);
  StFile **ns = ARENA_ARRAY(w->arena, StFile *, w->n_shards + 1);
  if (w->n_shards) memcpy(ns, w->shards, sizeof(StFile *) * (size_t)w->n_shards);
  ns[w->n_shards++] = f;
  w->shards = ns;
  return f;
}

static int open_sharded(WeightStore *w, const char *index_path, Diag *d) {
  json_error_t err;
  json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    diag_error(d, err.line, err.column, "%s: invalid JSON: %s", index_path, err.text);
    return 0;
  }
  json_t *map = json_object_get(root, "weight_map");
  int ok = json_is_object(map);
  if (!ok) diag_error(d, 0, 0, "%s: no \"weight_map\" object", index_path);
  /* Shard files are opened once each, in first-mention order. */
  const char **names = NULL, **paths = NULL;
  StFile **files = NULL;
  int n_names = 0;
  const char *key;
  json_t *v;
  if (ok) {
    names = xcalloc(json_object_size(map) + 1, sizeof *names, "the tensor index names");
    files = xcalloc(json_object_size(map) + 1, sizeof *files, "the tensor index files");
    paths = xcalloc(json_object_size(map) + 1, sizeof *paths, "the tensor index paths");
  }
  if (ok) json_object_foreach(map, key, v) {
      const char *file = json_string_value(v);
      if (!file || !*file || strchr(file, '/') || file[0] == '.') {
        diag_error(d, 0, 0, "%s: weight_map entry '%s' must name a shard file in the same directory", index_path, key);
        ok = 0;
        break;
      }
      StFile *sf = NULL;
      const char *path = NULL;
      for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], file) == 0) sf = files[i], path = paths[i];
      if (!sf) {
        sf = open_shard(w, file, d);
        if (!sf) {
          ok = 0;
          break;
        }
        names[n_names] = file;
        path = paths[n_names] = w->last_shard_path;
        files[n_names++] = sf;
      }
      const StTensor *t = st_find_tensor(sf, key);
      if (!t) {
        diag_error(d, 0, 0, "%s: weight_map puts '%s' in %s, but that file has no such tensor", index_path, key, file);
        ok = 0;
        break;
      }
      add_st_tensor(w, key, t, path);
    }
  free(names);
  free(paths);
  free(files);
  json_decref(root);
  return ok;
}

/* 1 if the directory's index lists `file` as one of its shards. */
static int index_names_shard(const char *index_path, const char *file) {
  json_t *root = json_load_file(index_path, 0, NULL), *v;
  const char *key;
  int found = 0;
  json_t *map = root ? json_object_get(root, "weight_map") : NULL;
  if (json_is_object(map))
    json_object_foreach(map, key, v) found |= json_is_string(v) && !strcmp(json_string_value(v), file);
  json_decref(root);
  return found;
}

/* dir: a Hugging Face model directory; file: NULL, or one .safetensors file in it that the user named (the
 * model is then that file alone, unless it is a shard of the directory's index). */
static int open_hf_dir(WeightStore *w, const char *dir, const char *file, ModelConfig *cfg, Diag *d) {
  w->dir = arena_strdup(w->arena, dir);
  if (!model_config_from_hf_dir(dir, cfg, d)) return 0;
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  w->source = arena_strdup(w->arena, path);
  if (stat(path, &st) == 0 && (!file || index_names_shard(path, file))) return open_sharded(w, path, d);
  if (!file) file = "model.safetensors";
  snprintf(path, sizeof path, "%s/%s", dir, file);
  if (stat(path, &st) != 0) {
    diag_error(d, 0, 0, "%s: no model.safetensors or model.safetensors.index.json", dir);
    return 0;
  }
  w->source = arena_strdup(w->arena, path);
  StFile *f = open_shard(w, file, d);
  if (!f) return 0;
  for (int i = 0; i < st_tensor_count(f); i++)
    add_st_tensor(w, st_tensor_at(f, i)->name, st_tensor_at(f, i), w->source);
  return 1;
}

/* ---- GGUF ---- */

static DType gguf_stored_dtype(int type) { return type == GGML_F16 ? DT_F16 : type == GGML_BF16 ? DT_BF16 : DT_F32; }

static int open_gguf(WeightStore *w, const char *path, ModelConfig *cfg, Diag *d) {
  w->source = arena_strdup(w->arena, path);
  w->gguf = gguf_open(path, d);
  if (!w->gguf || !model_config_from_gguf(w->gguf, cfg, d)) return 0;
  /* llama.cpp permutes q/k rows only for some architectures (its "llama": Llama, Mistral, SmolLM2). */
  const ArchDesc *arch = arch_get(cfg->arch);
  int permuted = arch->gguf_qk_permuted;
  for (int i = 0; i < gguf_tensor_count(w->gguf); i++) {
    const GgufTensor *t = gguf_tensor_at(w->gguf, i);
    const char *hf = arch_gguf_to_hf(arch, w->arena, t->name);
    Entry *e = add_entry(w, hf ? hf : t->name);
    e->gg = t;
    e->file = w->source;
    e->info.rank = t->n_dims;
    e->info.dtype = e->info.native = gguf_stored_dtype(t->type);
    ggml_type_dtype(t->type, &e->info.native);
    for (int k = 0; k < 4; k++) e->info.dims[k] = k < t->n_dims ? t->ne[t->n_dims - 1 - k] : 1;
    if (permuted && hf && strstr(hf, ".self_attn.") && (strstr(hf, ".q_proj.") || strstr(hf, ".k_proj."))) {
      int heads = strstr(hf, ".q_proj.") ? cfg->heads : cfg->kv_heads;
      int64_t rows = e->info.dims[0];
      if (heads <= 0 || rows % (2 * heads)) {
        diag_error(d, 0, 0, "%s: tensor '%s' has %lld rows, not a multiple of 2 x %d heads", path, t->name,
                   (long long)rows, heads);
        return 0;
      }
      e->unpermute_heads = heads;
    }
  }
  return 1;
}

/* ---- public ---- */

WeightStore *weights_open(const char *path, ModelConfig *cfg, Diag *d) {
  struct stat st;
  if (stat(path, &st) != 0) {
    diag_error(d, 0, 0, "%s: %s", path, strerror(errno));
    return NULL;
  }
  WeightStore *w = mem_calloc(d, 1, sizeof *w, "a weight store");
  if (!w) return NULL;
  w->arena = arena_new();
  size_t len = strlen(path);
  int ok;
  if (S_ISDIR(st.st_mode)) {
    ok = open_hf_dir(w, path, NULL, cfg, d);
  } else if (len >= 12 && strcmp(path + len - 12, ".safetensors") == 0) {
    /* one weights file: its directory holds config.json (and the tokenizer) */
    const char *slash = strrchr(path, '/');
    char dir[4096] = ".";
    if (slash == path) snprintf(dir, sizeof dir, "/");
    else if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    ok = open_hf_dir(w, dir, slash ? slash + 1 : path, cfg, d);
  } else if (len >= 5 && strcmp(path + len - 5, ".gguf") == 0) {
    ok = open_gguf(w, path, cfg, d);
  } else {
    diag_error(d, 0, 0, "%s: expected a Hugging Face model directory, a .safetensors file in one, or a .gguf file",
               path);
    ok = 0;
  }
  if (ok) ok = build_index(w, d);
  if (!ok) {
    weights_close(w);
    return NULL;
  }
  return w;
}

void weights_close(WeightStore *w) {
  if (!w) return;
  for (int i = 0; i < w->n_shards; i++) st_close(w->shards[i]);
  gguf_close(w->gguf);
  arena_free(w->arena);
  free(w);
}

int weights_has(WeightStore *w, const char *name, WeightInfo *info) {
  const Entry *e = find_entry(w, name);
  if (!e) return 0;
  if (info) *info = e->info;
  return 1;
}

/* Writes n f32 values to dst[at..at+n) as `want`. */
static void store_f32(DType want, void *dst, int64_t at, const float *src, int64_t n) {
  if (want == DT_F32) {
    memcpy((float *)dst + at, src, sizeof(float) * (size_t)n);
  } else {
    unsigned short *o = (unsigned short *)dst + at;
    for (int64_t i = 0; i < n; i++) o[i] = want == DT_F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
  }
}

/* GGUF row g of a permuted q/k tensor is Hugging Face row hf_row(g): llama.cpp stored, per head, the
 * two rotate-half halves interleaved (row 2b+a of a head came from row a*hd/2+b). */
static int64_t hf_row(int64_t g, int64_t head_dim) {
  int64_t h = g / head_dim, local = g % head_dim;
  return h * head_dim + (local % 2) * (head_dim / 2) + local / 2;
}

static int read_gguf(const Entry *e, DType want, void *dst, Diag *d) {
  const GgufTensor *t = e->gg;
  int blk;
  size_t bb;
  ggml_type_block(t->type, &blk, &bb);
  int64_t n = 1;
  for (int k = 0; k < t->n_dims; k++) n *= t->ne[k];
  /* Rows in PyTorch order: a 1-D tensor (a bias) is n rows of one element for the permutation. */
  int64_t row_len = t->n_dims >= 2 ? t->ne[0] : 1, rows = row_len ? n / row_len : 0;
  if (t->n_dims < 2 || !e->unpermute_heads) {
    /* Chunks of whole blocks, about 64K elements each. */
    int64_t chunk = blk * ((65536 + blk - 1) / blk);
    float *buf = mem_calloc(d, (size_t)(n < chunk ? n : chunk), sizeof(float), "dequantizing a weight");
    if (!buf) return 0;
    int ok = 1;
    float *tmp = e->unpermute_heads ? mem_calloc(d, (size_t)n, sizeof(float), "un-permuting a weight") : NULL;
    if (e->unpermute_heads && !tmp) ok = 0;
    for (int64_t at = 0; ok && at < n; at += chunk) {
      int64_t m = n - at < chunk ? n - at : chunk;
      ok = ggml_dequantize(t->type, (const unsigned char *)t->data + (size_t)(at / blk) * bb, buf, m, d);
      if (!ok) break;
      if (tmp) memcpy(tmp + at, buf, sizeof(float) * (size_t)m);
      else store_f32(want, dst, at, buf, m);
    }
    if (ok && tmp) { /* permuted 1-D bias */
      int64_t hd = n / e->unpermute_heads;
      for (int64_t g = 0; g < n; g++) store_f32(want, dst, hf_row(g, hd), &tmp[g], 1);
    }
    free(tmp);
    free(buf);
    return ok;
  }
  int64_t hd = rows / e->unpermute_heads;
  size_t row_bytes = (size_t)(row_len / blk) * bb;
  float *buf = mem_calloc(d, (size_t)row_len, sizeof(float), "a weight row");
  if (!buf) return 0;
  int ok = 1;
  for (int64_t g = 0; ok && g < rows; g++) {
    ok = ggml_dequantize(t->type, (const unsigned char *)t->data + (size_t)g * row_bytes, buf, row_len, d);
    if (ok) store_f32(want, dst, hf_row(g, hd) * row_len, buf, row_len);
  }
  free(buf);
  return ok;
}

static int read_st(const StTensor *t, DType want, void *dst) {
  int64_t n = (int64_t)(t->nbytes / dtype_size(t->dtype));
  if (t->dtype == want) {
    memcpy(dst, t->data, t->nbytes);
    return 1;
  }
  const unsigned char *s = t->data;
  float buf[1024];
  for (int64_t at = 0; at < n; at += 1024) {
    int64_t m = n - at < 1024 ? n - at : 1024;
    for (int64_t i = 0; i < m; i++) {
      if (t->dtype == DT_F32) {
        memcpy(&buf[i], s + 4 * (at + i), 4);
      } else {
        unsigned short h;
        memcpy(&h, s + 2 * (at + i), 2);
        buf[i] = t->dtype == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    }
    store_f32(want, dst, at, buf, m);
  }
  return 1;
}

int weights_read(WeightStore *w, const char *name, DType want, void *dst, Diag *d) {
  const Entry *e = find_entry(w, name);
  if (!e) {
    diag_error(d, 0, 0, "weight '%s' is not in the model", name);
    return 0;
  }
  if (want != DT_F32 && want != DT_F16 && want != DT_BF16) {
    diag_error(d, 0, 0, "weight '%s': cannot read as %s (f32, f16 or bf16 only)", name, dtype_name(want));
    return 0;
  }
  return e->st ? read_st(e->st, want, dst) : read_gguf(e, want, dst, d);
}

int weights_native(WeightStore *w, const char *name, const void **data, size_t *bytes, void **owned, Diag *d) {
  const Entry *e = find_entry(w, name);
  *owned = NULL;
  if (!e || !e->gg || !dtype_is_quant(e->info.native)) {
    diag_error(d, 0, 0, "weight '%s' is not a quantized tensor of the GGUF file", name);
    return 0;
  }
  const GgufTensor *t = e->gg;
  *data = t->data;
  *bytes = t->nbytes;
  if (!e->unpermute_heads) return 1; /* the file's blocks as they are */
  if (t->n_dims < 2) {
    diag_error(d, 0, 0, "weight '%s': a permuted 1-D quantized tensor cannot be read as blocks", name);
    return 0;
  }
  int64_t rows = e->info.dims[0], hd = rows / e->unpermute_heads;
  size_t row_bytes = t->nbytes / (size_t)rows;
  unsigned char *copy = mem_alloc(d, t->nbytes, "un-permuting a quantized weight");
  if (!copy) return 0;
  for (int64_t g = 0; g < rows; g++)
    memcpy(copy + (size_t)hf_row(g, hd) * row_bytes, (const unsigned char *)t->data + (size_t)g * row_bytes, row_bytes);
  *data = *owned = copy;
  return 1;
}

struct GgufFile *weights_gguf(WeightStore *w) {
  return w->gguf;
}

const char *weights_dir(WeightStore *w) { return w->gguf ? NULL : w->dir; }

const char *weights_source(const WeightStore *w) { return w->source; }

int weights_count(const WeightStore *w) { return w->n; }

const char *weights_name_at(const WeightStore *w, int i, WeightInfo *info) {
  if (i < 0 || i >= w->n) return NULL;
  if (info) *info = w->entries[i].info;
  return w->entries[i].name;
}

const char *weights_stored_name(const WeightStore *w, const char *name) {
  const Entry *e = find_entry(w, name);
  return e && e->gg ? e->gg->name : name;
}

const char *weights_file_of(const WeightStore *w, const char *name) {
  const Entry *e = find_entry(w, name);
  return e ? e->file : w->source;
}
