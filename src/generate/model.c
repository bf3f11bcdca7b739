#include "model.h"
#include "../base/settings.h"
#include "../base/notice.h"
#include "../base/mem.h"
#include "../base/clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../model/gguf.h"
#include "../model/model_check.h"

DType model_weight_dtype(WeightStore *w, const ModelLoadOptions *o) {
  if (o->weight_dtype_set) return o->weight_dtype;
  WeightInfo wi;
  if (weights_has(w, "model.embed_tokens.weight", &wi) && (wi.dtype == DT_BF16 || wi.dtype == DT_F16)) return wi.dtype;
  return DT_F32;
}

static int has_quantized_tensor(const WeightStore *w) {
  WeightInfo wi;
  for (int i = 0; i < weights_count(w); i++)
    if (weights_name_at(w, i, &wi) && dtype_is_quant(wi.native)) return 1;
  return 0;
}

int model_reads_blocks(WeightStore *w, const ModelLoadOptions *o) {
  if (!weights_gguf(w) || !has_quantized_tensor(w)) return 0;
  return o->weights_native || !o->weight_dtype_set;
}

/* A 2-D quantized tensor of the file keeps its block format in the graph. */
static DType native_weight_type(void *ctx, const char *name, int rank, int64_t row_len, DType fallback) {
  (void)row_len;
  WeightInfo wi;
  if (rank == 2 && weights_has(ctx, name, &wi) && dtype_is_quant(wi.native)) return wi.native;
  return fallback;
}

int model_build_weights(ModelBuildOptions *bo, WeightStore *w, const ModelLoadOptions *o) {
  bo->weight_dtype = model_weight_dtype(w, o);
  if (!model_reads_blocks(w, o)) return 0;
  bo->weight_type = native_weight_type;
  bo->weight_type_ctx = w;
  return 1;
}

/* The file's blocks of quantized tensor `name`, which must be `bytes` long: *data, and in *owned a copy to free
 * (a re-permuted tensor) or NULL (a pointer into the mapping). */
static int native_blocks(Model *m, const char *name, size_t bytes, const void **data, void **owned, Diag *d) {
  size_t have;
  if (!weights_native(m->weights, name, data, &have, owned, d)) return 0;
  if (have == bytes) return 1;
  diag_error(d, 0, 0, "tensor '%s' has %zu bytes of blocks, the config implies %zu", name, have, bytes);
  free(*owned);
  return 0;
}

/* The type random weights of tensor `name` take: t itself, or for the dequantized reference of a quantized benchmark
 * the block type the rule gives the tensor (its values are that type's, dequantized). */
static DType random_type(Model *m, const char *name, int rank, int64_t row_len, DType t) {
  if (!m->random_quant.cfg || dtype_is_quant(t)) return t;
  return random_quant_weight_type(&m->random_quant, name, rank, row_len, t);
}

/* A quantized weight bound as the file's blocks: on the CPU the plan reads the mapping itself. */
static int bind_native(Model *m, int pi, const char *name, size_t bytes, const SymEnv *env, Diag *d) {
  const void *data;
  void *owned;
  if (!native_blocks(m, name, bytes, &data, &owned, d)) return 0;
  /* a re-permuted copy is uploaded (the plan must not keep a pointer into memory freed here) */
  int ok = owned ? plan_bind_input(m->plan, pi, data, env, d) : plan_bind_input_host(m->plan, pi, data, bytes, env, d);
  free(owned);
  return ok;
}

/* A file's tensor `name` as `t` into dst, which holds numel elements. */
static int read_tensor(Model *m, const char *name, DType t, void *dst, int64_t numel, Diag *d) {
  WeightInfo wi;
  if (!weights_has(m->weights, name, &wi)) {
    diag_error(d, 0, 0, "the model file has no tensor '%s' (needed by the %s architecture)", name, m->cfg.arch_name);
    return 0;
  }
  int64_t want = 1;
  for (int k = 0; k < wi.rank; k++) want *= wi.dims[k];
  if (want != numel) {
    diag_error(d, 0, 0, "tensor '%s' has %lld elements, the config implies %lld", name, (long long)want,
               (long long)numel);
    return 0;
  }
  return weights_read(m->weights, name, t, dst, d);
}

/* One part of a stacked weight into dst (pn elements of rows of `cols`, pb bytes): the file's blocks or values, or
 * random ones (quantized by the type rule for the part itself, as when it is not stacked). */
static int read_part(Model *m, const char *part, DType t, void *dst, int64_t pn, int64_t cols, size_t pb, Diag *d) {
  if (!m->weights) return random_weights_fill(part, t, random_type(m, part, 2, cols, t), dst, pn, d);
  if (!dtype_is_quant(t)) return read_tensor(m, part, t, dst, pn, d);
  const void *data;
  void *owned;
  if (!native_blocks(m, part, pb, &data, &owned, d)) return 0;
  memcpy(dst, data, pb);
  free(owned);
  return 1;
}

/* A stacked weight (ModelBuildOptions.fuse_projections): its parts' rows one after another, uploaded as one. */
static int bind_stacked(Model *m, int pi, const GNode *n, size_t bytes, const SymEnv *env, Diag *d) {
  char parts[3][256];
  int64_t rows[3], total = 0;
  int np = model_fused_parts(&m->cfg, n->name, parts, rows, 3);
  for (int i = 0; i < np; i++) total += rows[i];
  int64_t numel = shape_numel_eval(&n->shape, env), cols = total > 0 ? numel / total : 0;
  uint8_t *buf = mem_alloc(d, bytes, n->name);
  size_t at = 0;
  int ok = buf && total > 0 && cols * total == numel;
  for (int i = 0; ok && i < np; i++) {
    size_t pb;
    ok = dtype_bytes(n->dtype, rows[i] * cols, &pb) && at + pb <= bytes &&
         read_part(m, parts[i], n->dtype, buf + at, rows[i] * cols, cols, pb, d);
    at += pb;
  }
  if (ok && at != bytes) ok = 0;
  if (!ok && buf) diag_error(d, 0, 0, "stacked weight '%s': its parts do not fill it", n->name);
  ok = ok && plan_bind_input(m->plan, pi, buf, env, d);
  free(buf);
  return ok;
}

/* Inputs given anew at every step (not weights, caches or frequencies). */
static int model_step_input(const char *name) {
  static const char *const step[] = {"ids", "pos", "seq", "slot", "block_table", "out_rows"};
  for (size_t i = 0; i < sizeof step / sizeof step[0]; i++)
    if (!strcmp(name, step[i])) return 1;
  return 0;
}

static int bind_weights(Model *m, const SymEnv *env, int quiet, Diag *d) {
  const Graph *g = m->comp->graph;
  size_t cap = 0;
  void *host = NULL;
  int nweights = 0, done = 0;
  for (int i = 0; i < g->ninputs; i++)
    nweights +=
        !strncmp(g->nodes[g->inputs[i]].name, "model.", 6) || !strcmp(g->nodes[g->inputs[i]].name, "lm_head.weight");
  for (int i = 0; i < g->ninputs; i++) {
    const GNode *n = &g->nodes[g->inputs[i]];
    const char *name = n->name;
    int pi = plan_input_index(m->plan, name);
    if (pi < 0) continue; /* not used by the compiled program */
    if (model_step_input(name)) continue;
    int64_t numel = shape_numel_eval(&n->shape, env);
    if (numel < 0) {
      diag_error(d, 0, 0, "model input '%s' would have more than 2^56 elements", name);
      goto fail;
    }
    size_t bytes;
    if (!dtype_bytes(n->dtype, numel, &bytes)) {
      diag_error(d, 0, 0, "model input '%s' is not whole %s blocks", name, dtype_name(n->dtype));
      goto fail;
    }
    if (!strcmp(name, "model.embed_tokens.weight")) m->embed_dtype = n->dtype;
    char parts[1][256];
    int64_t part_rows[1];
    int stacked = model_fused_parts(&m->cfg, name, parts, part_rows, 1) > 0;
    if (stacked || (dtype_is_quant(n->dtype) && m->weights)) {
      if (!(stacked ? bind_stacked(m, pi, n, bytes, env, d) : bind_native(m, pi, name, bytes, env, d))) goto fail;
      m->weight_bytes += bytes;
      done++;
      if (!quiet && (done % 16 == 0 || done == nweights)) notice_progress("loading weights", done, nweights);
      continue;
    }
    if (!strncmp(name, "cache.", 6)) {
      if (!plan_bind_input(m->plan, pi, NULL, env, d)) goto fail;
      m->cache_bytes += bytes;
      continue;
    }
    if (bytes > cap) {
      free(host);
      cap = bytes;
      if (!(host = mem_alloc(d, cap, name))) { return 0; }
    }
    if (!strcmp(name, "rope.inv_freq")) {
      model_rope_inv_freq(&m->cfg, host);
    } else if (!m->weights) {
      int64_t row = 0;
      if (!ex_eval_int(n->shape.dim[n->shape.rank - 1], env, &row)) row = 0;
      DType quant = random_type(m, name, n->shape.rank, row, n->dtype);
      if (!random_weights_fill(name, n->dtype, quant, host, numel, d)) goto fail;
      m->weight_bytes += bytes;
      done++;
    } else {
      if (!read_tensor(m, name, n->dtype, host, numel, d)) goto fail;
      m->weight_bytes += bytes;
      done++;
    }
    if (!quiet && (done % 16 == 0 || done == nweights) && strcmp(name, "rope.inv_freq"))
      notice_progress("loading weights", done, nweights);
    if (!plan_bind_input(m->plan, pi, host, env, d)) goto fail;
  }
  if (!quiet && nweights) notice(NOTICE_PROGRESS_END, "loading weights");
  free(host);
  return 1;
fail:
  if (!quiet && done) notice(NOTICE_PROGRESS_END, "loading weights");
  free(host);
  return 0;
}

static int model_finish(Model *m, DType wdt, const ModelLoadOptions *o, double t0, Diag *d);

Model *model_load(const char *path, Backend *b, const ModelLoadOptions *o, Diag *d) {
  Model *m = xcalloc(1, sizeof *m, "a model");
  m->backend = b;
  double t0 = now_ms();
  if (!(m->weights = model_weights_open(path, &m->cfg, d))) goto fail;
  const char *tok_model;
  if (weights_gguf(m->weights)) {
    /* A GGUF without tokenizer.ggml.* (lathe quantize from a directory without tokenizer.json) runs on
     * token ids, as such a directory does. */
    if (gguf_get_str(weights_gguf(m->weights), "tokenizer.ggml.model", &tok_model) &&
        !(m->tok = tokenizer_from_gguf(weights_gguf(m->weights), d)))
      goto fail;
  } else {
    /* A directory without tokenizer.json still runs on token ids (--prompt-tokens). */
    char tj[4096];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", weights_dir(m->weights));
    if (access(tj, R_OK) == 0 && !(m->tok = tokenizer_from_hf_dir(weights_dir(m->weights), d))) goto fail;
  }
  if (!model_finish(m, model_weight_dtype(m->weights, o), o, t0, d)) goto fail;
  return m;
fail:
  model_free(m);
  return NULL;
}

Model *model_new_random(const ModelConfig *cfg, DType wdt, Backend *b, const ModelLoadOptions *o, Diag *d) {
  Model *m = xcalloc(1, sizeof *m, "a model");
  m->backend = b;
  m->cfg = *cfg;
  if (!model_finish(m, wdt, o, now_ms(), d)) {
    model_free(m);
    return NULL;
  }
  return m;
}

int model_fuse_projections(int paged, Target target) {
  return paged && setting_bool(SET_FUSE_PROJ, target == TARGET_CUDA);
}

Compilation *model_compilation_new(const ModelLoadOptions *o) {
  FusionPolicy pol = fusion_policy_for(o->target);
  pol.allow_recompute = o->fuse_recompute;
  Compilation *c = compilation_new(o->target, &pol);
  c->matmul = o->matmul;
  c->batch_invariant = o->batch_invariant;
  c->schedules = o->schedules;
  return c;
}

/* KV cache bytes per position in the model's cache dtype (model_kv_bytes_per_position counts f32). */
static double kv_position_bytes(const Model *m) {
  return (double)model_kv_bytes_per_position(&m->cfg) / sizeof(float) * dtype_size(m->kv_dtype);
}

/* The weights' bytes on the device: the file's blocks where they are read as such, else wdt's elements. */
static double weights_estimate(const Model *m, DType wdt) {
  if (!m->weights_native || !m->weights) return (double)model_param_count(&m->cfg) * (double)dtype_size(wdt);
  double bytes = 0;
  WeightInfo wi;
  for (int i = 0; i < weights_count(m->weights); i++) {
    if (!weights_name_at(m->weights, i, &wi)) continue;
    int64_t numel = 1;
    for (int k = 0; k < wi.rank; k++) numel *= wi.dims[k];
    size_t b = 0;
    if (dtype_is_quant(wi.native) && wi.rank == 2 && dtype_bytes(wi.native, numel, &b)) bytes += (double)b;
    else bytes += (double)numel * (double)dtype_size(wdt);
  }
  return bytes;
}

/* The weights and a KV cache of m->max_ctx positions must fit the backend's free memory: say what they
 * need and what context fits rather than fail an allocation later (or, on the CPU, be killed). */
static int memory_fits(const Model *m, DType wdt, Diag *d) {
  size_t avail = m->backend->ops->memory_free ? m->backend->ops->memory_free(m->backend) : 0;
  if (!avail) return 1;
  double per = kv_position_bytes(m);
  double kv = per * (m->kv_block ? (double)m->kv_blocks * m->kv_block : m->max_ctx);
  double weights = weights_estimate(m, wdt);
  if (kv + weights <= (double)avail) return 1;
  double fit = weights < (double)avail ? ((double)avail - weights) / per : 0;
  char tail[128];
  if (fit >= 8) snprintf(tail, sizeof tail, "a context of up to %.0f positions fits (--ctx %.0f)", fit, fit);
  else snprintf(tail, sizeof tail, "not even the weights fit");
  diag_error(d, 0, 0,
             "a context of %d positions needs %.2f GB (KV cache %.2f GB at %.1f KB per position, weights "
             "%.2f GB), but the %s has %.2f GB free; %s",
             m->max_ctx, (kv + weights) / 1e9, kv / 1e9, per / 1e3, weights / 1e9, m->backend->ops->name,
             (double)avail / 1e9, tail);
  return 0;
}

/* The paged pool's blocks: kv_memory bytes, or a fraction of the memory the weights leave free. */
static int pool_blocks(const Model *m, DType wdt, const ModelLoadOptions *o, Diag *d) {
  double per_block = kv_position_bytes(m) * o->kv_block, bytes = (double)o->kv_memory;
  if (!o->kv_memory) {
    double avail = m->backend->ops->memory_free ? (double)m->backend->ops->memory_free(m->backend) : 0;
    double weights = weights_estimate(m, wdt);
    int gpu = m->backend->target.kind == TARGET_CUDA;
    double frac = o->kv_fraction > 0 ? o->kv_fraction : gpu ? 0.9 : 0.25;
    bytes = avail > weights ? (avail - weights) * frac : 0;
    if (!avail) bytes = 1e9; /* the backend cannot say: 1 GB */
    if (!gpu && o->kv_fraction <= 0 && bytes > 4e9) bytes = 4e9;
  }
  double blocks = bytes / per_block;
  double want = (double)o->kv_seqs * ((m->max_ctx + o->kv_block - 1) / o->kv_block);
  if (!o->kv_memory && o->kv_seqs > 0 && blocks > want) blocks = want;
  if (blocks > 1 << 30) blocks = 1 << 30;
  if (blocks < 1) {
    diag_error(d, 0, 0, "no room for a KV cache block (%.1f MB each) in %.2f GB", per_block / 1e6, bytes / 1e9);
    return 0;
  }
  return (int)blocks;
}

/* Builds and compiles the forward step and binds weights, caches and frequencies. */
static int model_finish(Model *m, DType wdt, const ModelLoadOptions *o, double t0, Diag *d) {
  /* Within its sliding window, a sliding-window model's attention is full attention: the window caps the context. */
  int window = m->cfg.sliding_window, trained = m->cfg.max_ctx;
  if (window > 0 && window < trained) trained = window;
  m->max_ctx = o->max_ctx > 0 ? o->max_ctx : (trained > 0 && trained < 4096 ? trained : 4096);
  if (window > 0 && m->max_ctx > window) {
    diag_error(d, 0, 0, "a context of %d exceeds the model's sliding window of %d, which lathe does not implement",
               m->max_ctx, window);
    return 0;
  }
  if (o->kv_block < 0 || o->kv_block > 1024 || o->kv_blocks < 0) {
    diag_error(d, 0, 0, "a paged KV cache needs blocks of 1 to 1024 positions and at least one block (got %d x %d)",
               o->kv_blocks, o->kv_block);
    return 0;
  }
  if (o->kv_dtype != DT_F32 && (o->kv_dtype != DT_BF16 || !o->kv_block)) {
    diag_error(d, 0, 0, "the KV cache holds f32, or bf16 in a paged pool (got %s)", dtype_name(o->kv_dtype));
    return 0;
  }
  m->kv_dtype = o->kv_dtype;
  m->weights_native = m->weights && model_reads_blocks(m->weights, o);
  m->kv_block = o->kv_block;
  m->kv_blocks = o->kv_block ? o->kv_blocks : 0;
  if (o->kv_block && !m->kv_blocks && !(m->kv_blocks = pool_blocks(m, wdt, o, d))) return 0;
  m->blocks_per_seq = o->kv_block ? (m->max_ctx + o->kv_block - 1) / o->kv_block : 0;
  ModelBuildOptions bo = {m->max_ctx, wdt, m->kv_dtype, o->kv_block, o->kv_block && o->hidden_output, NULL, NULL};
  m->hidden_output = bo.hidden_output;
  bo.fuse_projections = model_fuse_projections(o->kv_block > 0, o->target);
  if (m->weights) model_build_weights(&bo, m->weights, o);
  if (o->random_quant > 0 && !m->weights) {
    m->random_quant = (RandomQuant){&m->cfg, o->random_quant - 1};
    if (!o->random_dequantized) {
      bo.weight_type = random_quant_weight_type;
      bo.weight_type_ctx = &m->random_quant;
      m->weights_native = 1;
    }
  }
  m->build = bo;
  m->embed_dtype = wdt;
  m->weight_dtype = wdt;
  if (!memory_fits(m, wdt, d)) return 0;
  m->comp = model_compilation_new(o);
  m->comp->device = m->backend->target; /* schedules for the device the plan runs on */
  if (!(m->comp->graph = model_build(&m->cfg, &bo, m->comp->arena, m->comp->pool, d))) return 0;
  double t1 = now_ms();
  if (!compile_graph(m->comp, ST_CODE, d)) return 0;
  if (!(m->plan = plan_new(m->comp->launch, sb_str(&m->comp->code), m->backend, d))) return 0;
  m->compile_ms = now_ms() - t1;
  m->in_ids = plan_input_index(m->plan, "ids");
  m->in_pos = plan_input_index(m->plan, "pos");
  m->in_seq = plan_input_index(m->plan, "seq");
  m->in_slot = plan_input_index(m->plan, "slot");
  m->in_table = plan_input_index(m->plan, "block_table");
  m->in_rows = plan_input_index(m->plan, "out_rows");
  /* decode steps; a batched model's small steps (few sequences decoding, where launching ~10 kernels a layer
   * one by one costs more than the GEMMs) */
  if (setting_bool(SET_CUDA_GRAPHS, 1)) {
    int ok = 1, upto = (int)setting_int(SET_BATCH_GRAPHS, 4096, &ok);
    if (m->kv_block && ok && upto > 0) plan_use_graphs_upto(m->plan, "tok", upto);
    else if (!m->kv_block) plan_use_graphs(m->plan, "seq", 1);
  }
  SymEnv env = {0};
  symenv_set(&env, "seq", 1);
  symenv_set(&env, "past", 0);
  symenv_set(&env, "blocks", m->kv_blocks);
  if (!bind_weights(m, &env, o->quiet, d)) return 0;
  m->logits = xmalloc(sizeof(float) * (size_t)m->cfg.vocab, "the logits");
  m->load_ms = now_ms() - t0;
  return 1;
}

const char *model_weights_form(const Model *m) { return m->weights_native ? "native" : dtype_name(m->weight_dtype); }

void model_memory(const Model *m, size_t *weights, size_t *kv_cache, size_t *workspace) {
  *weights = m->weight_bytes;
  *kv_cache = m->cache_bytes;
  *workspace = plan_workspace_bytes(m->plan);
}

int64_t model_param_count(const ModelConfig *c) {
  int64_t h = c->hidden, hd = c->head_dim, q = (int64_t)c->heads * hd, kv = (int64_t)c->kv_heads * hd;
  int64_t layer = h * q + 2 * h * kv + q * h + 3 * h * c->intermediate + 2 * h;
  if (c->qkv_bias) layer += q + 2 * kv;
  if (c->qk_norm) layer += 2 * hd;
  int64_t embed = (int64_t)c->vocab * h;
  return embed + c->layers * layer + h + (c->tied_embeddings ? 0 : embed);
}

size_t model_kv_bytes_per_position(const ModelConfig *c) {
  return (size_t)c->layers * 2 * (size_t)c->kv_heads * (size_t)c->head_dim * sizeof(float);
}

size_t model_step_read_bytes(const ModelConfig *c, size_t weight_bytes, DType embed) {
  if (c->tied_embeddings) return weight_bytes; /* the lm_head reads the whole table */
  size_t table = 0, row = 0;
  if (!dtype_bytes(embed, (int64_t)c->vocab * c->hidden, &table) || !dtype_bytes(embed, c->hidden, &row))
    return weight_bytes;
  return weight_bytes > table ? weight_bytes - table + row : weight_bytes;
}

void model_free(Model *m) {
  if (!m) return;
  plan_free(m->plan);
  compilation_free(m->comp);
  tokenizer_free(m->tok);
  weights_close(m->weights);
  free(m->logits);
  device_sampler_free(m->sampler);
  free(m);
}

static int ids_in_vocab(const Model *m, const int32_t *ids, int n, Diag *d) {
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= m->cfg.vocab) {
      diag_error(d, 0, 0, "token id %d is outside the vocabulary [0, %d)", ids[i], m->cfg.vocab);
      return 0;
    }
  return 1;
}

/* The device's argmax as a token id, checked. */
static int greedy_token(const Model *m, int64_t v, int32_t *out, Diag *d) {
  if (v < 0 || v >= m->cfg.vocab) {
    diag_error(d, 0, 0, "the device's greedy token %lld is outside the vocabulary", (long long)v);
    return 0;
  }
  *out = (int32_t)v;
  return 1;
}

/* Runs n tokens; copies back the logits (into logits, when not NULL) and the greedy token (next). */
static int step(Model *m, const int32_t *ids, int n, int past, float *logits, int32_t *next, Diag *d) {
  if (n <= 0 || past < 0 || past + n > m->max_ctx) {
    diag_error(d, 0, 0, "context full: %d cached + %d new tokens exceed the context of %d", past, n, m->max_ctx);
    return 0;
  }
  if (!ids_in_vocab(m, ids, n, d)) return 0;
  SymEnv env = {0};
  symenv_set(&env, "seq", n);
  symenv_set(&env, "past", past);
  int32_t *pos = xmalloc(sizeof(int32_t) * (size_t)n, "the positions");
  for (int i = 0; i < n; i++) pos[i] = past + i;
  void *inputs[LT_MAX_INPUTS] = {0};
  inputs[m->in_ids] = (void *)ids;
  if (m->in_pos >= 0) inputs[m->in_pos] = pos;
  int64_t next64 = -1;
  void *outputs[2] = {logits, next ? &next64 : NULL};
  int ok = plan_run(m->plan, &env, inputs, outputs, d);
  free(pos);
  return ok && (!next || greedy_token(m, next64, next, d));
}

int model_step(Model *m, const int32_t *ids, int n, int past, Diag *d) {
  return step(m, ids, n, past, m->logits, NULL, d);
}

int model_step_greedy(Model *m, const int32_t *ids, int n, int past, int32_t *next, Diag *d) {
  return step(m, ids, n, past, NULL, next, d);
}

int model_step_sample(Model *m, const int32_t *ids, int n, int past, Sampler *s, int32_t *next, Diag *d) {
  if (sampler_is_greedy(&s->o)) return model_step_greedy(m, ids, n, past, next, d);
  float u = sampler_draw(s);
  if (!backend_cuda_arch(m->backend)) { /* the host samples the copied logits */
    if (!step(m, ids, n, past, m->logits, NULL, d)) return 0;
    *next = sampler_pick(s, u, m->logits, m->cfg.vocab);
    return 1;
  }
  if (!m->sampler && !(m->sampler = device_sampler_new(m->backend, d))) return 0;
  if (!step(m, ids, n, past, NULL, NULL, d)) return 0;
  return device_sampler_pick(m->sampler, &s->o, u, plan_output_device(m->plan, 0), m->cfg.vocab, next, d);
}

int model_step_batch(Model *m, const BatchStep *b, float *logits, int32_t *next, Diag *d) {
  return model_step_batch_hidden(m, b, logits, next, NULL, d);
}

int model_step_batch_hidden(Model *m, const BatchStep *b, float *logits, int32_t *next, float *hidden, Diag *d) {
  if (hidden && !m->hidden_output) {
    diag_error(d, 0, 0, "internal: hidden states asked of a model loaded without them");
    return 0;
  }
  if (!m->kv_block) {
    diag_error(d, 0, 0, "internal: a batched step on a model loaded for one sequence");
    return 0;
  }
  if (b->ntok <= 0 || b->nseqs <= 0 || b->nrows <= 0 || b->ctx <= 0 || b->ctx > m->max_ctx) {
    diag_error(d, 0, 0, "batched step: %d tokens of %d sequences, %d logit rows, %d keys (context %d)", b->ntok,
               b->nseqs, b->nrows, b->ctx, m->max_ctx);
    return 0;
  }
  int64_t slots = (int64_t)m->kv_blocks * m->kv_block;
  if (!ids_in_vocab(m, b->ids, b->ntok, d)) return 0;
  for (int i = 0; i < b->ntok; i++) {
    if (b->pos[i] < 0 || b->pos[i] >= b->ctx || b->seq[i] < 0 || b->seq[i] >= b->nseqs || b->slot[i] < 0 ||
        b->slot[i] >= slots) {
      diag_error(d, 0, 0, "batched step: token %d has position %d (keys %d), sequence %d of %d, slot %d of %lld", i,
                 b->pos[i], b->ctx, b->seq[i], b->nseqs, b->slot[i], (long long)slots);
      return 0;
    }
  }
  for (int i = 0; i < b->nrows; i++)
    if (b->rows[i] < 0 || b->rows[i] >= b->ntok) {
      diag_error(d, 0, 0, "batched step: logit row %d names token %d of %d", i, b->rows[i], b->ntok);
      return 0;
    }
  SymEnv env = {0};
  symenv_set(&env, "tok", b->ntok);
  symenv_set(&env, "seqs", b->nseqs);
  symenv_set(&env, "ctx", b->ctx);
  symenv_set(&env, "rows", b->nrows);
  symenv_set(&env, "blocks", m->kv_blocks);
  void *inputs[LT_MAX_INPUTS] = {0};
  inputs[m->in_ids] = (void *)b->ids;
  if (m->in_pos >= 0) inputs[m->in_pos] = (void *)b->pos;
  if (m->in_seq >= 0) inputs[m->in_seq] = (void *)b->seq;
  if (m->in_slot >= 0) inputs[m->in_slot] = (void *)b->slot;
  if (m->in_table >= 0) inputs[m->in_table] = (void *)b->block_table;
  if (m->in_rows >= 0) inputs[m->in_rows] = (void *)b->rows;
  int64_t *next64 = next ? xmalloc(sizeof(int64_t) * (size_t)b->nrows, "the greedy tokens") : NULL;
  void *outputs[3] = {logits, next64, hidden};
  int ok = plan_run(m->plan, &env, inputs, outputs, d);
  for (int i = 0; ok && next && i < b->nrows; i++) ok = greedy_token(m, next64[i], &next[i], d);
  free(next64);
  return ok;
}

int model_is_eos(const Model *m, int32_t id) {
  if (id == m->cfg.eos_id) return 1;
  for (int i = 0; i < m->cfg.n_eos; i++)
    if (m->cfg.eos_ids[i] == id) return 1;
  return m->tok && id == tokenizer_eos(m->tok);
}
