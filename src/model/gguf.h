/* GGUF v3 reader: the file is memory-mapped; metadata and tensor infos are parsed and validated up
 * front (every offset and size is checked against the file), so a truncated or corrupt file gives one
 * diag and never a crash. Tensor data pointers point into the mapping. */
#ifndef LATHE_GGUF_H
#define LATHE_GGUF_H
#include <stddef.h>
#include <stdint.h>
#include "../base/diag.h"
#include "../ir/dtype.h"

/* ggml tensor types this reader knows (numbering as in the GGUF spec). */
typedef enum GgmlType {
  GGML_F32 = 0,
  GGML_F16 = 1,
  GGML_Q4_0 = 2,
  GGML_Q4_1 = 3,
  GGML_Q5_0 = 6,
  GGML_Q5_1 = 7,
  GGML_Q8_0 = 8,
  GGML_Q4_K = 12,
  GGML_Q5_K = 13,
  GGML_Q6_K = 14,
  GGML_BF16 = 30
} GgmlType;
const char *ggml_type_name(int type); /* "q4_1", ... or "unknown" */

typedef enum GgufValueType {
  GGUF_U8 = 0,
  GGUF_I8 = 1,
  GGUF_U16 = 2,
  GGUF_I16 = 3,
  GGUF_U32 = 4,
  GGUF_I32 = 5,
  GGUF_F32 = 6,
  GGUF_BOOL = 7,
  GGUF_STRING = 8,
  GGUF_ARRAY = 9,
  GGUF_U64 = 10,
  GGUF_I64 = 11,
  GGUF_F64 = 12
} GgufValueType;

typedef struct GgufTensor {
  const char *name;
  int type; /* GgmlType */
  int n_dims;
  int64_t ne[4];    /* ggml order: ne[0] is the fastest-varying (row length) */
  const void *data; /* into the mapping */
  size_t nbytes;
} GgufTensor;

typedef struct GgufFile GgufFile;

GgufFile *gguf_open(const char *path, Diag *d);
/* Parses a GGUF image already in memory (tests, fuzzing); `name` prefixes diags. The bytes are not
 * copied: they must outlive the returned file. */
GgufFile *gguf_open_memory(const void *data, size_t size, const char *name, Diag *d);
void gguf_close(GgufFile *f);
/* The path (or name) the file was opened under, for messages. */
const char *gguf_file_name(const GgufFile *f);

/* Metadata. Each returns 1 if the key exists with a compatible type (integers of any width convert
 * to int64, f32/f64 to double), else 0. Strings are NUL-terminated copies owned by the file. */
/* 1 if the key exists, whatever its type. */
int gguf_has_key(const GgufFile *f, const char *key);
int gguf_get_int(const GgufFile *f, const char *key, int64_t *out);
int gguf_get_float(const GgufFile *f, const char *key, double *out);
int gguf_get_bool(const GgufFile *f, const char *key, int *out);
int gguf_get_str(const GgufFile *f, const char *key, const char **out);
/* Arrays: element count and type; elements by index. */
int gguf_get_arr(const GgufFile *f, const char *key, GgufValueType *elem_type, size_t *n);
const char *gguf_arr_str(const GgufFile *f, const char *key, size_t i); /* NULL if not a string array */
int64_t gguf_arr_int(const GgufFile *f, const char *key, size_t i);     /* 0 if not an int array */
double gguf_arr_float(const GgufFile *f, const char *key, size_t i);

/* Metadata pairs in file order, for copying them into another file: the key, the value type and the
 * value's bytes exactly as stored (for an array: element type, count, elements). */
size_t gguf_kv_count(const GgufFile *f);
const char *gguf_kv_key(const GgufFile *f, size_t i);
int gguf_kv_raw(const GgufFile *f, size_t i, GgufValueType *type, const void **bytes, size_t *len);

int gguf_tensor_count(const GgufFile *f);
const GgufTensor *gguf_tensor_at(const GgufFile *f, int i);
const GgufTensor *gguf_find_tensor(const GgufFile *f, const char *name); /* NULL if absent */

/* Block geometry of a ggml type: elements per block and bytes per block; 0 if the type is not one of
 * GgmlType. */
int ggml_type_block(int type, int *block_elems, size_t *block_bytes);
/* The IR type of a ggml block format (ir/dtype.h) and back; 0 / -1 when there is none. */
int ggml_type_dtype(int type, DType *out);
int ggml_type_of_dtype(DType t);
/* nblocks random blocks of a block format: random bits with scales (and minimums) chosen so that the
 * values lie within about [-1, 1] (random inputs of a quantized type, tests). */
void ggml_random_blocks(int type, void *dst, int64_t nblocks, uint64_t *state);
/* Dequantizes n consecutive elements (n a multiple of the type's block size) of a tensor's data to f32. */
int ggml_dequantize(int type, const void *src, float *dst, int64_t n, Diag *d);
#endif
