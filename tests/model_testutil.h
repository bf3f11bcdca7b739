/* Helpers for the model-format tests: a byte buffer, a GGUF writer, temp files. Everything static
 * (each test program includes this once). */
#ifndef LATHE_MODEL_TESTUTIL_H
#define LATHE_MODEL_TESTUTIL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Buf {
  unsigned char *p;
  size_t n, cap;
} Buf;

static inline void b_put(Buf *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
  }
  if (n) memcpy(b->p + b->n, src, n);
  b->n += n;
}
static inline void b_u32(Buf *b, uint32_t v) { b_put(b, &v, 4); }
static inline void b_u64(Buf *b, uint64_t v) { b_put(b, &v, 8); }
static inline void b_f32(Buf *b, float v) { b_put(b, &v, 4); }
static inline void b_str(Buf *b, const char *s) {
  b_u64(b, strlen(s));
  b_put(b, s, strlen(s));
}
static inline void b_free(Buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- GGUF writer: header, then kv_* calls (n_kv of them), then gguf_tensors. ---- */
enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY, T_U64, T_I64, T_F64 };

static inline void gguf_header(Buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  b_put(b, "GGUF", 4);
  b_u32(b, version);
  b_u64(b, n_tensors);
  b_u64(b, n_kv);
}
static inline void kv_u32(Buf *b, const char *k, uint32_t v) {
  b_str(b, k);
  b_u32(b, T_U32);
  b_u32(b, v);
}
static inline void kv_f32(Buf *b, const char *k, float v) {
  b_str(b, k);
  b_u32(b, T_F32);
  b_f32(b, v);
}
static inline void kv_str(Buf *b, const char *k, const char *v) {
  b_str(b, k);
  b_u32(b, T_STRING);
  b_str(b, v);
}
static inline void kv_str_arr(Buf *b, const char *k, const char *const *v, int n) {
  b_str(b, k);
  b_u32(b, T_ARRAY);
  b_u32(b, T_STRING);
  b_u64(b, (uint64_t)n);
  for (int i = 0; i < n; i++) b_str(b, v[i]);
}

typedef struct GTensor {
  const char *name;
  uint32_t type;
  int n_dims;
  uint64_t ne[4];
  const void *data;
  size_t nbytes;
} GTensor;

/* Tensor infos, padding to `align`, then each tensor's data at its own aligned offset. */
static inline void gguf_tensors(Buf *b, const GTensor *t, int n, size_t align) {
  size_t off = 0;
  size_t *offs = calloc((size_t)n + 1, sizeof *offs);
  for (int i = 0; i < n; i++) {
    offs[i] = off;
    off = (off + t[i].nbytes + align - 1) / align * align;
  }
  for (int i = 0; i < n; i++) {
    b_str(b, t[i].name);
    b_u32(b, (uint32_t)t[i].n_dims);
    for (int k = 0; k < t[i].n_dims; k++) b_u64(b, t[i].ne[k]);
    b_u32(b, t[i].type);
    b_u64(b, offs[i]);
  }
  static const unsigned char zeros[256];
  size_t pad = (align - b->n % align) % align;
  b_put(b, zeros, pad);
  size_t start = b->n;
  for (int i = 0; i < n; i++) {
    b_put(b, zeros, start + offs[i] - b->n);
    b_put(b, t[i].data, t[i].nbytes);
  }
  free(offs);
}

/* ---- files ---- */
static inline void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    abort();
  }
  if (n) fwrite(data, 1, n, f);
  fclose(f);
}
static inline void write_text(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  write_file(path, text, strlen(text));
}
static inline char *make_temp_dir(void) {
  char tmpl[] = "/tmp/lathe_model_XXXXXX";
  char *d = mkdtemp(tmpl);
  if (!d) abort();
  return strdup(d);
}
/* Removes the files the tests create (flat directories only), then the directory. */
static inline void remove_dir(char *dir) {
  static const char *const names[] = {
      "config.json",   "generation_config.json", "model.safetensors", "model.safetensors.index.json",
      "a.safetensors", "b.safetensors",          "model.gguf",        "bad.bin"};
  char path[512];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
  free(dir);
}
#endif
