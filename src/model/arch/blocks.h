/* Shared building blocks of the decoder architectures: a builder over one graph, and the pieces a
 * decoder layer is made of (RMSNorm, linear projections, grouped-query attention with RoPE and a KV cache,
 * the SwiGLU MLP), the embedding and the LM head, and the Llama-family tensor names. An architecture's
 * build function (arch/<name>.c) composes them; the weights are graph inputs under Hugging Face names. */
#ifndef LATHE_MODEL_ARCH_BLOCKS_H
#define LATHE_MODEL_ARCH_BLOCKS_H
#include "../config.h"
#include "arch.h"

typedef struct ModelBuilder {
  Graph *g;
  const ModelConfig *c;
  const ModelBuildOptions *o;
  Diag *d;
  Expr *seq, *past;                 /* paged: seq is "tok", the batch's tokens; past is unused */
  int pos, inv_freq;                /* the "pos" and "rope.inv_freq" inputs */
  int seq_of, slots, table, kv_len; /* paged: the tokens' block-table rows and cache slots, the tables, pos + 1 */
  Expr *ctx;                        /* paged: keys each token's attention spans (at least its pos + 1) */
  int embed;                        /* the token embedding (also the tied LM head) */
  int fail;
} ModelBuilder;

/* Checks the sizes, makes the graph, the seq/past symbols and the ids/pos/frequency inputs; returns the
 * embedded tokens h [1, seq, hidden] in f32, or -1.
 * With o->paged_block (a ragged batch), the step's inputs are, for its `tok` tokens: ids, pos, seq (the
 * token's row of the block table) and slot (where its K and V go: block * block_size + pos % block_size);
 * block_table [seqs, ceil(max_ctx / block)] and out_rows [rows] (the tokens whose logits are wanted). Each
 * layer's caches are pools cache.k.L / cache.v.L [blocks, block, kv_heads, head_dim]; attention spans `ctx`
 * keys (at least the largest pos + 1 of the step), masked from pos + 1 on per token. */
int mb_begin(ModelBuilder *b, const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d);
/* Final RMSNorm of the last position (paged: of the out_rows tokens), the LM head (tied or lm_head.weight), the logits
 * and their argmax as outputs. */
Graph *mb_finish(ModelBuilder *b, int h);

int mb_weight(ModelBuilder *b, const char *name, int64_t d0, int64_t d1); /* d1 = 0: rank 1 */
int mb_rms_norm(ModelBuilder *b, int x, int w);
/* x @ <prefix>.weight^T (+ <prefix>.bias) */
int mb_linear(ModelBuilder *b, int x, const char *prefix, int64_t out, int64_t in, int bias);

typedef struct AttnSpec {
  int qkv_bias; /* biases on the q/k/v projections (Qwen2) */
  int qk_norm;  /* RMSNorm over each head's q and k before RoPE (Qwen3) */
} AttnSpec;

/* h + o_proj(attention(rope(q), rope(k), v)) over the KV cache of `layer`, pre-normed by input_layernorm. */
int mb_attention_block(ModelBuilder *b, int h, int layer, const AttnSpec *s);
/* h + down_proj(silu(gate_proj(x)) * up_proj(x)), pre-normed by post_attention_layernorm. */
int mb_swiglu_mlp_block(ModelBuilder *b, int h, int layer);

/* The Llama decoder every architecture here builds: embedding; per layer h += attention(rms_norm(h)),
 * h += swiglu(rms_norm(h)); final norm; LM head. The architectures differ in their attention (s). */
Graph *mb_llama_decoder(const ModelConfig *c, const ModelBuildOptions *o, const AttnSpec *s, Arena *arena,
                        ExprPool *pool, Diag *d);

/* The Llama-family tensor names (Llama, Mistral, Qwen2, Qwen3 share them). */
extern const TensorNamePair LLAMA_TOP_TENSORS[];
extern const TensorNamePair LLAMA_LAYER_TENSORS[];
/* Tensors a Llama-family file may hold unread: rope_freqs.weight (read into the config by rope.c), old
 * checkpoints' rotary_emb.inv_freq buffers (recomputed), and lm_head.weight of a tied model (transformers
 * ignores it too). */
int llama_family_ignored_tensor(const char *name, const ModelConfig *c);
#endif
