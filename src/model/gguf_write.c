/* GGUF v3 writer. Metadata is encoded into one growing byte buffer as it is added; tensor data is
 * copied and written after the infos, padded with zeros to the alignment. */
#include "gguf_write.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_ALIGN 32

typedef struct WTensor {
  char *name;
  int type, n_dims;
  int64_t ne[4];
  void *data;
  size_t nbytes;
} WTensor;

struct GgufWriter {
  unsigned char *kv; /* encoded pairs */
  size_t kv_len, kv_cap;
  char **keys;
  size_t n_kv, keys_cap;
  int oom;
  WTensor *tensors;
  int n_tensors, tensors_cap;
};

GgufWriter *gguf_writer_new(void) { return calloc(1, sizeof(GgufWriter)); }

void gguf_writer_free(GgufWriter *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
  for (int i = 0; i < w->n_tensors; i++) {
    free(w->tensors[i].name);
    free(w->tensors[i].data);
  }
  free(w->keys);
  free(w->tensors);
  free(w->kv);
  free(w);
}

static void put(GgufWriter *w, const void *p, size_t n) {
  if (w->oom) return;
  if (w->kv_len + n > w->kv_cap) {
    size_t cap = w->kv_cap ? w->kv_cap : 4096;
    while (cap < w->kv_len + n) cap *= 2;
    unsigned char *nk = realloc(w->kv, cap);
    if (!nk) {
      w->oom = 1;
      return;
    }
    w->kv = nk;
    w->kv_cap = cap;
  }
  memcpy(w->kv + w->kv_len, p, n);
  w->kv_len += n;
}

static void put_u32(GgufWriter *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(GgufWriter *w, uint64_t v) { put(w, &v, 8); }
static void put_str(GgufWriter *w, const char *s) {
  put_u64(w, strlen(s));
  put(w, s, strlen(s));
}

static void begin(GgufWriter *w, const char *key, GgufValueType type) {
  if (w->n_kv == w->keys_cap) {
    size_t cap = w->keys_cap ? 2 * w->keys_cap : 64;
    char **nk = realloc(w->keys, cap * sizeof *nk);
    if (!nk) {
      w->oom = 1;
      return;
    }
    w->keys = nk;
    w->keys_cap = cap;
  }
  char *k = strdup(key);
  if (!k) w->oom = 1;
  w->keys[w->n_kv++] = k;
  put_str(w, key);
  put_u32(w, (uint32_t)type);
}

void gguf_writer_u32(GgufWriter *w, const char *key, uint32_t v) {
  begin(w, key, GGUF_U32);
  put_u32(w, v);
}

void gguf_writer_i32(GgufWriter *w, const char *key, int32_t v) {
  begin(w, key, GGUF_I32);
  put(w, &v, 4);
}

void gguf_writer_f32(GgufWriter *w, const char *key, float v) {
  begin(w, key, GGUF_F32);
  put(w, &v, 4);
}

void gguf_writer_bool(GgufWriter *w, const char *key, int v) {
  begin(w, key, GGUF_BOOL);
  unsigned char b = v != 0;
  put(w, &b, 1);
}

void gguf_writer_str(GgufWriter *w, const char *key, const char *v) {
  begin(w, key, GGUF_STRING);
  put_str(w, v);
}

void gguf_writer_str_array(GgufWriter *w, const char *key, const char *const *v, size_t n) {
  begin(w, key, GGUF_ARRAY);
  put_u32(w, GGUF_STRING);
  put_u64(w, n);
  for (size_t i = 0; i < n; i++) put_str(w, v[i]);
}

void gguf_writer_i32_array(GgufWriter *w, const char *key, const int32_t *v, size_t n) {
  begin(w, key, GGUF_ARRAY);
  put_u32(w, GGUF_I32);
  put_u64(w, n);
  put(w, v, 4 * n);
}

void gguf_writer_raw(GgufWriter *w, const char *key, GgufValueType type, const void *bytes, size_t len) {
  begin(w, key, type);
  put(w, bytes, len);
}

int gguf_writer_has_key(const GgufWriter *w, const char *key) {
  for (size_t i = 0; i < w->n_kv; i++)
    if (w->keys[i] && strcmp(w->keys[i], key) == 0) return 1;
  return 0;
}

int gguf_writer_tensor(GgufWriter *w, const char *name, int type, int n_dims, const int64_t *ne, const void *data,
                       size_t nbytes, Diag *d) {
  int be;
  size_t bb;
  if (!ggml_type_block(type, &be, &bb) || n_dims < 1 || n_dims > 4) {
    diag_error(d, 0, 0, "gguf write: tensor '%s': bad type %d or rank %d", name, type, n_dims);
    return 0;
  }
  int64_t n = 1;
  for (int k = 0; k < n_dims; k++) n *= ne[k];
  if (ne[0] % be || (size_t)(n / be) * bb != nbytes) {
    diag_error(d, 0, 0, "gguf write: tensor '%s': %zu bytes do not hold %lld %s elements in rows of %lld", name, nbytes,
               (long long)n, ggml_type_name(type), (long long)ne[0]);
    return 0;
  }
  for (int i = 0; i < w->n_tensors; i++)
    if (strcmp(w->tensors[i].name, name) == 0) {
      diag_error(d, 0, 0, "gguf write: tensor '%s' added twice", name);
      return 0;
    }
  if (w->n_tensors == w->tensors_cap) {
    int cap = w->tensors_cap ? 2 * w->tensors_cap : 64;
    WTensor *nt = realloc(w->tensors, (size_t)cap * sizeof *nt);
    if (!nt) {
      diag_error(d, 0, 0, "out of memory");
      return 0;
    }
    w->tensors = nt;
    w->tensors_cap = cap;
  }
  WTensor *t = &w->tensors[w->n_tensors];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  t->data = malloc(nbytes ? nbytes : 1);
  if (!t->name || !t->data) {
    free(t->name);
    free(t->data);
    diag_error(d, 0, 0, "out of memory keeping tensor '%s' (%zu bytes)", name, nbytes);
    return 0;
  }
  memcpy(t->data, data, nbytes);
  t->type = type;
  t->n_dims = n_dims;
  for (int k = 0; k < 4; k++) t->ne[k] = k < n_dims ? ne[k] : 1;
  t->nbytes = nbytes;
  w->n_tensors++;
  return 1;
}

static size_t padded(size_t n) { return (n + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN; }

size_t gguf_writer_write(GgufWriter *w, const char *path, Diag *d) {
  if (w->oom) {
    diag_error(d, 0, 0, "out of memory building the GGUF metadata");
    return 0;
  }
  for (size_t i = 0; i < w->n_kv; i++)
    for (size_t j = 0; j < i; j++)
      if (strcmp(w->keys[i], w->keys[j]) == 0) {
        diag_error(d, 0, 0, "gguf write: metadata key '%s' added twice", w->keys[i]);
        return 0;
      }
  /* Header and tensor infos into a second buffer, reusing put() by swapping buffers. */
  GgufWriter hdr = {0};
  put(&hdr, "GGUF", 4);
  put_u32(&hdr, 3);
  put_u64(&hdr, (uint64_t)w->n_tensors);
  put_u64(&hdr, (uint64_t)w->n_kv);
  put(&hdr, w->kv, w->kv_len);
  size_t off = 0;
  for (int i = 0; i < w->n_tensors; i++) {
    const WTensor *t = &w->tensors[i];
    put_str(&hdr, t->name);
    put_u32(&hdr, (uint32_t)t->n_dims);
    for (int k = 0; k < t->n_dims; k++) put_u64(&hdr, (uint64_t)t->ne[k]);
    put_u32(&hdr, (uint32_t)t->type);
    put_u64(&hdr, off);
    off = padded(off + t->nbytes);
  }
  if (hdr.oom) {
    free(hdr.kv);
    diag_error(d, 0, 0, "out of memory building the GGUF header");
    return 0;
  }
  static const unsigned char zeros[GGUF_ALIGN];
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(hdr.kv);
    diag_error(d, 0, 0, "%s: cannot create: %s", path, strerror(errno));
    return 0;
  }
  size_t total = padded(hdr.kv_len);
  int ok =
      fwrite(hdr.kv, 1, hdr.kv_len, f) == hdr.kv_len && fwrite(zeros, 1, total - hdr.kv_len, f) == total - hdr.kv_len;
  for (int i = 0; ok && i < w->n_tensors; i++) {
    const WTensor *t = &w->tensors[i];
    size_t pad = i + 1 < w->n_tensors ? padded(t->nbytes) - t->nbytes : 0;
    ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes && fwrite(zeros, 1, pad, f) == pad;
    total += t->nbytes + pad;
  }
  free(hdr.kv);
  if (fclose(f) != 0) ok = 0;
  if (!ok) {
    diag_error(d, 0, 0, "%s: write failed: %s", path, strerror(errno));
    remove(path);
    return 0;
  }
  return total;
}
