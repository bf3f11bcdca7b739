/* The model architectures, one file each (llama.c, mistral.c, qwen2.c, qwen3.c) over the shared blocks of
 * blocks.h, and the one registry (registry.c) that config loading, weight binding and the graph builder
 * consult. An architecture says which config.json / GGUF metadata keys it reads beyond the common ones (and
 * their defaults), how its GGUF tensor names map to Hugging Face names, and how its forward step is built.
 *
 * The built program serves prefill chunks and decode steps: `seq` (tokens in this step) and `past` (tokens
 * already in the KV cache) are symbolic. Inputs, by name: "ids" i32[1, seq], "pos" i32[seq]
 * (past .. past+seq-1), "rope.inv_freq" f32[head_dim/2], every weight under its Hugging Face name, and per
 * layer the KV caches "cache.k.N" / "cache.v.N" [1, kv_heads, max_ctx, head_dim] (state, updated in place).
 * Outputs: "logits" f32[1, 1, vocab] for the last position of the step, and "next_token" (its argmax). */
#ifndef LATHE_MODEL_ARCH_H
#define LATHE_MODEL_ARCH_H
#include "../../graph/graph.h"

/* Registry indices; ModelConfig.arch is one of them. */
typedef enum ModelArch { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_MISTRAL, ARCH_COUNT } ModelArch;

struct ModelConfig;
struct GgufFile;
struct HfObj;

typedef struct ModelBuildOptions {
  int max_ctx;        /* KV cache positions */
  DType weight_dtype; /* dtype of the weight inputs (f32, f16, bf16) */
  DType cache_dtype;  /* dtype of the KV caches */
  /* 0: one sequence, `seq` tokens after `past`, contiguous caches cache.k.L [1, kv_heads, max_ctx, head_dim].
   * > 0: a ragged batch over a paged cache of blocks of this many positions (see mb_begin). */
  int paged_block;
  /* paged only: a third output, "hidden" f32[tok, hidden]: every token's final hidden state (after the final
   * norm: what the LM head would read), for embeddings */
  int hidden_output;
  /* When set, the type of weight `name` of this rank and row length (its last dimension): a file's block
   * format, to read it quantized; else fallback, weight_dtype. */
  DType (*weight_type)(void *ctx, const char *name, int rank, int64_t row_len, DType fallback);
  void *weight_type_ctx;
  /* q/k/v and gate/up each as one projection over their weights stacked by rows (inputs named
   * ...self_attn.qkv_proj.* and ...mlp.gate_up_proj.weight, see model_fused_parts), where the parts share a type:
   * one GEMM instead of three and two */
  int fuse_projections;
} ModelBuildOptions;

/* The parts of a stacked weight the builder makes with fuse_projections, in row order: up to `max` Hugging Face
 * names into parts and their row counts under config c into rows; returns how many, or 0 when `name` is not a
 * stacked weight. */
int model_fused_parts(const struct ModelConfig *c, const char *name, char (*parts)[256], int64_t *rows, int max);

/* A GGUF tensor-name part and its Hugging Face counterpart ("attn_q" <-> "self_attn.q_proj"). */
typedef struct TensorNamePair {
  const char *gguf, *hf;
} TensorNamePair;

typedef struct ArchDesc {
  ModelArch id;
  const char *name;            /* GGUF general.architecture, HF model_type */
  const char *hf_class;        /* HF architectures[0] */
  int gguf_qk_permuted;        /* llama.cpp permuted q/k rows for rotate-half RoPE in its converter */
  const TensorNamePair *top;   /* whole-model tensors (full names), NULL-terminated */
  const TensorNamePair *layer; /* per-layer parts (blk.N.<gguf> <-> model.layers.N.<hf>), NULL-terminated */
  /* Tensors a file may hold that the graph does not read (consumed by the config, or recomputed). */
  int (*ignored_tensor)(const char *hf_name, const struct ModelConfig *c);
  /* The architecture's own keys, after the common ones are read (config.c). 0 with d set on error. */
  int (*hf_config)(const struct HfObj *root, struct ModelConfig *c, Diag *d);
  int (*gguf_config)(const struct GgufFile *f, struct ModelConfig *c, Diag *d);
  Graph *(*build)(const struct ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d);
} ArchDesc;

/* By HF class ("Qwen3ForCausalLM"), model_type or GGUF architecture ("qwen3"); NULL if unknown. */
const ArchDesc *arch_find(const char *name);
const ArchDesc *arch_get(ModelArch id);
/* "llama, mistral, qwen2, qwen3", for messages. */
const char *arch_supported(void);

/* The forward step of c's architecture. */
Graph *model_build(const struct ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d);
/* Inverse RoPE frequencies as Hugging Face computes them (incl. Llama 3 scaling), head_dim/2 floats. */
void model_rope_inv_freq(const struct ModelConfig *c, float *out);
/* 1 if a graph input of that name is a weight from the model file (not ids, pos, frequencies or a cache). */
int model_input_is_weight(const char *name);
/* The Hugging Face name of a GGUF tensor under architecture a (into arena), or NULL when it has none. */
const char *arch_gguf_to_hf(const ArchDesc *a, Arena *arena, const char *gguf_name);
/* The GGUF name of a Hugging Face tensor name (into arena), or NULL. */
const char *arch_hf_to_gguf(const ArchDesc *a, Arena *arena, const char *hf_name);
#endif
