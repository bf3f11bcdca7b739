/* A loaded model ready to run: weights bound to a compiled plan of the Llama-family graph, KV caches
 * on the device, and a tokenizer. One plan serves prefill chunks and decode steps (`seq` and `past`
 * are run-time symbols). */
#ifndef LATHE_MODEL_H
#define LATHE_MODEL_H
#include "../driver/pipeline.h"
#include "../model/config.h"
#include "../model/weights.h"
#include "../runtime/plan.h"
#include "../tokenizer/tokenizer.h"
#include "random_weights.h"
#include "sampler_device.h"

typedef struct Model {
  ModelConfig cfg;
  WeightStore *weights; /* NULL for random weights */
  Tokenizer *tok;       /* NULL if the model has no tokenizer */
  Backend *backend;
  Compilation *comp;
  Plan *plan;
  int max_ctx;
  int in_ids, in_pos; /* program input indices */
  /* A batched model (ModelLoadOptions.kv_block): the paged pool's blocks and the other step inputs. */
  int kv_block, kv_blocks, blocks_per_seq;
  DType kv_dtype;
  int in_seq, in_slot, in_table, in_rows;
  int hidden_output;      /* the batched step also gives the rows' final hidden states (model_step_batch_hidden) */
  float *logits;          /* vocab floats, the last step's output */
  DeviceSampler *sampler; /* CUDA: sampling on the device, made at the first sampled step */
  double compile_ms, load_ms;
  size_t weight_bytes, cache_bytes;
  DType weight_dtype;       /* of the weight inputs: the file's float type, or f32 for dequantized tensors */
  int weights_native;       /* quantized tensors are read as their blocks (model_reads_blocks) */
  DType embed_dtype;        /* of model.embed_tokens.weight (a block type when it is read quantized) */
  RandomQuant random_quant; /* model_new_random with ModelLoadOptions.random_quant: the type rule's context */
  ModelBuildOptions build;  /* what the graph was built with (a warm compile rebuilds it) */
} Model;

typedef struct ModelLoadOptions {
  Target target;
  int max_ctx; /* 0: min(config max, 4096) */
  int quiet;   /* no progress output on stderr */
  /* Storage type of the weights on the device: 0 = auto (a GGUF's quantized tensors as their blocks, see
   * model_reads_blocks; else the file's f16/bf16 type, else f32); else weight_dtype for every tensor, quantized
   * ones dequantized exactly (bf16 halves an f32 model's bytes per token at a rounding of 2^-9 relative). */
  int weight_dtype_set;
  DType weight_dtype;
  /* Quantized GGUF tensors keep their block format (--weights native) on every target: kernels decode them,
   * and on the CPU they are read where the file is mapped (no copy); other tensors as above. */
  int weights_native;
  /* model_new_random only: > 0, the matrices are random values quantized under QuantScheme random_quant - 1
   * (model/quantize.h, the type rule of `lathe quantize`) and read as their blocks; with random_dequantized
   * the same quantized values are given as wdt instead (the reference the native kernels are checked against). */
  int random_quant, random_dequantized;
  MatmulPrecision matmul; /* tensor-core GEMMs of a prefill on CUDA (tile.h) */
  int fuse_recompute;     /* fusion may recompute a reduction per consumer point (loop.h, allow_recompute) */
  /* > 0: the batched step (model_step_batch) over a paged KV cache of kv_blocks blocks of kv_block positions,
   * instead of one sequence's step over a contiguous cache of max_ctx positions (max_ctx is then the
   * longest sequence). */
  int kv_block, kv_blocks;
  /* kv_blocks = 0: the pool takes kv_memory bytes, or else kv_fraction (default 0.9 on a GPU, 0.25 on the CPU
   * up to 4 GB) of the memory left free after the weights. */
  size_t kv_memory;
  double kv_fraction;
  DType kv_dtype; /* the paged pool's element type: f32 (0, the default) or bf16 (half the bytes a step reads) */
  int kv_seqs;    /* kv_blocks = 0 and no kv_memory: at most what this many sequences of max_ctx need (0: no cap) */
  int batch_invariant; /* tile_from_loop's batch-invariant schedules: a row's results do not depend on the batch */
  const struct ScheduleSource *schedules; /* measured schedules (the tuning database); NULL: the defaults */
  int hidden_output;                      /* a batched model's step also outputs the final hidden states (embeddings) */
} ModelLoadOptions;

/* The type of w's unquantized weights under o (--weights): o's weight_dtype when set, else the file's f16/bf16
 * type, else f32 (quantized tensors that are not read as blocks are dequantized to it exactly). */
DType model_weight_dtype(WeightStore *w, const ModelLoadOptions *o);
/* Whether w's quantized tensors keep their block format (the kernels decode them; on the CPU they are read
 * where the file is mapped): --weights native, and by default (no weight_dtype_set) on the CPU, where they
 * load at the speed of the disk into a third of the memory and decode faster; CUDA dequantizes them by
 * default. 0 for a file without quantized tensors. */
int model_reads_blocks(WeightStore *w, const ModelLoadOptions *o);
/* bo's weight types for a step over w's tensors under o (model_weight_dtype, and model_reads_blocks' block
 * types, which look tensors up in w while the step is built): what model_load builds with, and lathe
 * compile and tune for a model file. Returns model_reads_blocks. */
int model_build_weights(ModelBuildOptions *bo, WeightStore *w, const ModelLoadOptions *o);
/* Whether a step built for `target` stacks q/k/v and gate/up (ModelBuildOptions.fuse_projections): batched
 * steps (paged) on CUDA, unless LATHE_FUSE_PROJECTIONS says otherwise. */
int model_fuse_projections(int paged, Target target);
/* An empty compilation for a model's step under o's target, fusion and matmul precision (what
 * model_load compiles with). */
Compilation *model_compilation_new(const ModelLoadOptions *o);
/* path: a Hugging Face model directory or a .gguf file. */
Model *model_load(const char *path, Backend *b, const ModelLoadOptions *o, Diag *d);
/* A model of the given configuration with random weights of dtype wdt (no tokenizer): for benchmarks. */
Model *model_new_random(const ModelConfig *cfg, DType wdt, Backend *b, const ModelLoadOptions *o, Diag *d);
/* How the weights are held, as --weights names it: "native" (the file's quantized blocks) or the type the rest
 * are given as ("f32", "bf16", "f16"). */
const char *model_weights_form(const Model *m);
/* Bytes of device memory the model's plan holds: weights, KV caches, and the activation workspace. */
void model_memory(const Model *m, size_t *weights, size_t *kv_cache, size_t *workspace);
void model_free(Model *m);
/* The parameters of a configuration's weights (embedding, layers, final norm, an untied lm_head). */
int64_t model_param_count(const ModelConfig *cfg);
/* KV cache bytes per context position (f32 caches: k and v of every layer). */
size_t model_kv_bytes_per_position(const ModelConfig *cfg);
/* The weight bytes one decode step reads, of weight_bytes with the embedding table held in type embed (a
 * float or block type): all of them, except that an untied embedding table is gathered one row per token
 * rather than read whole. */
size_t model_step_read_bytes(const ModelConfig *cfg, size_t weight_bytes, DType embed);
/* Runs n tokens (positions past .. past+n-1) through the model, updating the KV cache; fills
 * m->logits with the logits of the last of them. past + n must not exceed max_ctx. */
int model_step(Model *m, const int32_t *ids, int n, int past, Diag *d);
/* The same step, but only the greedy next token (the argmax of the last logits, computed on the
 * device) is copied back into *next; m->logits is left as it was. */
int model_step_greedy(Model *m, const int32_t *ids, int n, int past, int32_t *next, Diag *d);
/* The same step, and the next token chosen by sampler s (sampler.h's rule): the device's argmax when
 * greedy; on CUDA sampled on the device from the logits left there (4 bytes copied back); elsewhere
 * sampled on the host from the copied logits. m->logits is filled only in that last case. */
int model_step_sample(Model *m, const int32_t *ids, int n, int past, Sampler *s, int32_t *next, Diag *d);

/* Whether id ends a sequence: the config's end-of-sequence ids (generation_config may list several) or the
 * tokenizer's. */
int model_is_eos(const Model *m, int32_t id);

/* One step of a batched model: ntok tokens from nseqs sequences. Token i is ids[i] at position pos[i] of the
 * sequence whose block table is row seq[i] of block_table (nseqs rows of m->blocks_per_seq block ids); its K
 * and V go to pool slot slot[i] (block * kv_block + pos % kv_block); it attends over positions 0..pos[i] of
 * its sequence. ctx is at least every pos[i] + 1. The logits of the nrows tokens rows[] are computed. */
typedef struct BatchStep {
  int ntok, nseqs, nrows, ctx;
  const int32_t *ids, *pos, *seq, *slot, *block_table, *rows;
} BatchStep;
/* Runs one batched step. logits (nrows x vocab floats) and next (nrows greedy tokens) may each be NULL: what is
 * NULL stays on the device (plan_output_device(m->plan, 0) holds the logits for a device sampler). */
int model_step_batch(Model *m, const BatchStep *b, float *logits, int32_t *next, Diag *d);
/* The same, and hidden (when not NULL; ntok x cfg.hidden floats) gets every token's final hidden state: after the
 * final norm, what the LM head reads. Needs a model loaded with ModelLoadOptions.hidden_output. */
int model_step_batch_hidden(Model *m, const BatchStep *b, float *logits, int32_t *next, float *hidden, Diag *d);
#endif
