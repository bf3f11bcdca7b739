/* f32 → ggml blocks (the inverse of ggml_dequantize in gguf.h), round-to-nearest with each format's
 * standard scale choice, and `lathe quantize`: a model (Hugging Face directory or GGUF) rewritten as a
 * GGUF v3 file with a llama.cpp-style mixture of block types. */
#ifndef LATHE_QUANTIZE_H
#define LATHE_QUANTIZE_H
#include <stddef.h>
#include <stdint.h>
#include "../base/diag.h"

/* Quantizes n floats (a multiple of the type's block size) to `type` (any GgmlType: f32, f16 and
 * bf16 convert). dst holds n / block_elems * block_bytes bytes. */
int ggml_quantize(int type, const float *src, void *dst, int64_t n, Diag *d);

/* The mixtures `lathe quantize --type` offers, named as llama-quantize's: the block schemes, then the float types
 * every matrix is converted to (QUANT_F16 and after). */
typedef enum QuantScheme {
  QUANT_Q8_0,
  QUANT_Q4_0,
  QUANT_Q4_1,
  QUANT_Q4_K_M,
  QUANT_Q5_K_M,
  QUANT_Q6_K,
  QUANT_F16,
  QUANT_BF16,
  QUANT_F32
} QuantScheme;
/* A block scheme by name (what `--weights QUANT` of bench and compile takes); 0 for an unknown name. */
int quant_scheme_from_name(const char *name, QuantScheme *out);
/* Any scheme `lathe quantize --type` writes: the block schemes and f16, bf16, f32. */
int quant_output_from_name(const char *name, QuantScheme *out);
const char *quant_scheme_name(QuantScheme s);
/* The names quant_scheme_from_name and quant_output_from_name accept, for messages: "q8_0, q4_0, ...". */
const char *quant_scheme_names(void);
const char *quant_output_names(void);

/* The ggml type a tensor gets under a scheme (see quantize_model.c for the rule): name is the GGUF
 * name ("blk.3.attn_v.weight"), n_dims its rank, row_len its ne[0], layer its block index (-1 outside
 * a block), n_layers the block count, is_output 1 for the LM head (output.weight, or token_embd.weight
 * when the embeddings are tied). *fallback is set to 1 when the row length forced another type. */
int quant_tensor_type(QuantScheme s, const char *name, int n_dims, int64_t row_len, int layer, int n_layers,
                      int is_output, int *fallback);

typedef struct QuantReport {
  int n_tensors;
  int n_fallback;        /* tensors whose row length forced a fallback type */
  int64_t n_by_type[32]; /* tensors written per ggml type */
  int64_t in_params;
  size_t out_bytes; /* size of the written file */
  int tokenizer;    /* 1 if the tokenizer was written */
} QuantReport;

/* Reads the model at `in` (a Hugging Face directory or a .gguf), writes `out` (GGUF v3). Progress goes
 * out as notices (base/notice.h), one step per tensor. */
int quantize_model(const char *in, const char *out, QuantScheme s, QuantReport *rep, Diag *d);
#endif
