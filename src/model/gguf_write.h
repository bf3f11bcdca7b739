/* GGUF v3 writer: metadata pairs and tensors are collected in memory, then written in one pass
 * (header, pairs, tensor infos, data), each tensor's data at an offset that is a multiple of the
 * alignment (32, GGUF's default; general.alignment is not written). */
#ifndef LATHE_GGUF_WRITE_H
#define LATHE_GGUF_WRITE_H
#include <stddef.h>
#include <stdint.h>
#include "../base/diag.h"
#include "gguf.h"

typedef struct GgufWriter GgufWriter;

GgufWriter *gguf_writer_new(void);
void gguf_writer_free(GgufWriter *w);
/* Metadata in the order added; a key added twice is an error at gguf_writer_write. */
void gguf_writer_u32(GgufWriter *w, const char *key, uint32_t v);
void gguf_writer_i32(GgufWriter *w, const char *key, int32_t v);
void gguf_writer_f32(GgufWriter *w, const char *key, float v);
void gguf_writer_bool(GgufWriter *w, const char *key, int v);
void gguf_writer_str(GgufWriter *w, const char *key, const char *v);
void gguf_writer_str_array(GgufWriter *w, const char *key, const char *const *v, size_t n);
void gguf_writer_i32_array(GgufWriter *w, const char *key, const int32_t *v, size_t n);
/* A value already in GGUF's encoding (gguf_kv_raw's bytes), copied as is. */
void gguf_writer_raw(GgufWriter *w, const char *key, GgufValueType type, const void *bytes, size_t len);
int gguf_writer_has_key(const GgufWriter *w, const char *key);
/* A tensor: ne in ggml order (ne[0] the row length), data of nbytes (the writer keeps its own copy). */
int gguf_writer_tensor(GgufWriter *w, const char *name, int type, int n_dims, const int64_t *ne, const void *data,
                       size_t nbytes, Diag *d);
/* Writes the file; returns its size in bytes, or 0 after a diag. */
size_t gguf_writer_write(GgufWriter *w, const char *path, Diag *d);
#endif
