/* Benchmark weights for a built-in configuration: a fixed pseudo-random pattern, as floats or quantized
 * at load into ggml blocks under one of `lathe quantize`'s schemes (the same per-tensor type rule). */
#ifndef LATHE_RANDOM_WEIGHTS_H
#define LATHE_RANDOM_WEIGHTS_H
#include <stdint.h>
#include "../base/diag.h"
#include "../ir/dtype.h"
#include "../model/config.h"

/* The context of random_quant_weight_type: a configuration and a QuantScheme (model/quantize.h). */
typedef struct RandomQuant {
  const ModelConfig *cfg;
  int scheme;
} RandomQuant;

/* ModelBuildOptions.weight_type for random weights quantized under ctx's scheme: the block type that
 * `lathe quantize` would give the Hugging Face tensor `name` (rank, row_len = its last dimension), or
 * fallback where the rule keeps it unquantized (1-D tensors, rows no block divides). */
DType random_quant_weight_type(void *ctx, const char *name, int rank, int64_t row_len, DType fallback);

/* Fills n elements of tensor `name` stored as `store`: uniform values of standard deviation 0.02 (norm
 * weights 1), tiled from a fixed block (fast even for 8B parameters). With quant a block type, the values
 * are first quantized to it: stored as its blocks (store == quant) or dequantized to store (f32, bf16
 * or f16: the reference the native kernels are checked against). quant 0 (DT_F32 or any float type):
 * the values themselves. Equal to ggml_quantize of the float values, block for block. */
int random_weights_fill(const char *name, DType store, DType quant, void *dst, int64_t n, Diag *d);

/* Value i of the float pattern of a non-norm tensor (for tests). */
float random_weight_value(int64_t i);
#endif
