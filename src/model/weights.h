/* A model's tensors by Hugging Face name ("model.layers.0.self_attn.q_proj.weight"), from a
 * safetensors directory (single file or sharded with model.safetensors.index.json) or a GGUF file
 * (names mapped from blk.N.*; quantized tensors dequantized; llama.cpp's q/k row permutation undone so
 * the weights suit rotate-half RoPE). Files are memory-mapped. */
#ifndef LATHE_WEIGHTS_H
#define LATHE_WEIGHTS_H
#include <stdint.h>
#include "../ir/dtype.h"
#include "config.h"

typedef struct WeightStore WeightStore;

typedef struct WeightInfo {
  int rank;
  int64_t dims[4]; /* PyTorch order: [out, in] for a linear weight */
  DType dtype;     /* stored type (f32/f16/bf16); quantized GGUF tensors report f32 */
  DType native;    /* the file's own type: a block format (q4_1, ...) for a quantized GGUF tensor, else dtype */
} WeightInfo;

/* path: a directory with config.json, or a .gguf file. Fills cfg. */
WeightStore *weights_open(const char *path, ModelConfig *cfg, Diag *d);
void weights_close(WeightStore *w);
/* 1 if present (fills info), 0 if absent (no diag). */
int weights_has(WeightStore *w, const char *name, WeightInfo *info);
/* Converts the whole tensor into dst (row-major, PyTorch order) as dtype `want` (f32, f16 or bf16). */
int weights_read(WeightStore *w, const char *name, DType want, void *dst, Diag *d);
/* A quantized tensor as the file stores it (info.native's blocks, rows in PyTorch order): *data points into
 * the mapping (it lives as long as the store), *owned is NULL; for a q/k tensor whose rows llama.cpp
 * permuted, the rows (whole blocks) are moved back into a malloc'ed copy, *data == *owned, which the
 * caller frees. */
int weights_native(WeightStore *w, const char *name, const void **data, size_t *bytes, void **owned, Diag *d);
/* The file the model's tensors are listed in: the .gguf, model.safetensors or model.safetensors.index.json. */
const char *weights_source(const WeightStore *w);
/* The tensors in file order, by Hugging Face name where one applies (i in [0, weights_count)). */
int weights_count(const WeightStore *w);
const char *weights_name_at(const WeightStore *w, int i, WeightInfo *info);
/* A tensor's name as the file spells it (the GGUF name), and the file (shard) holding it. */
const char *weights_stored_name(const WeightStore *w, const char *name);
const char *weights_file_of(const WeightStore *w, const char *name);
/* The GGUF file behind the store (for its tokenizer), or NULL for a safetensors directory. */
struct GgufFile *weights_gguf(WeightStore *w);
/* The directory behind the store (for tokenizer.json), or NULL for GGUF. */
const char *weights_dir(WeightStore *w);
#endif
