/* The Llama-family builder (Llama 2/3, Mistral, Qwen2/2.5, Qwen3, SmolLM2): emits a graph-stage program
 * for one forward step from a ModelConfig. The same program serves prefill chunks and decode steps:
 * `seq` (tokens in this step) and `past` (tokens already in the KV cache) are symbolic.
 *
 * Inputs, by name: "ids" i32[1, seq], "pos" i32[seq] (past .. past+seq-1), "rope.inv_freq"
 * f32[head_dim/2], every weight under its Hugging Face name, and per layer the KV caches
 * "cache.k.N" / "cache.v.N" [1, kv_heads, max_ctx, head_dim] (state, updated in place).
 * Output: "logits" f32[1, 1, vocab] for the last position of the step. */
#ifndef LATHE_LLAMA_H
#define LATHE_LLAMA_H
#include "../graph/graph.h"
#include "config.h"

typedef struct ModelBuildOptions {
  int max_ctx;        /* KV cache positions */
  DType weight_dtype; /* dtype of the weight inputs (f32, f16, bf16) */
  DType cache_dtype;  /* dtype of the KV caches */
} ModelBuildOptions;

Graph *llama_build(const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d);
/* Inverse RoPE frequencies as Hugging Face computes them (incl. Llama 3 scaling), head_dim/2 floats. */
void llama_rope_inv_freq(const ModelConfig *c, float *out);
#endif
