/* Decoder building blocks over one graph (blocks.h). */
#include "blocks.h"
#include <stdio.h>
#include <string.h>

const TensorNamePair LLAMA_TOP_TENSORS[] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                            {"output_norm.weight", "model.norm.weight"},
                                            {"output.weight", "lm_head.weight"},
                                            {NULL, NULL}};
const TensorNamePair LLAMA_LAYER_TENSORS[] = {
    {"attn_norm", "input_layernorm"},    {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},       {NULL, NULL}};

int llama_family_ignored_tensor(const char *name, const ModelConfig *c) {
  size_t n = strlen(name);
  return !strcmp(name, "rope_freqs.weight") || (n > 21 && !strcmp(name + n - 21, ".rotary_emb.inv_freq")) ||
         (c->tied_embeddings && !strcmp(name, "lm_head.weight"));
}

static int input(ModelBuilder *b, const char *name, DType t, int rank, Expr *const *dims) {
  if (b->fail) return -1;
  Shape s = {rank, {0}};
  for (int i = 0; i < rank; i++) s.dim[i] = dims[i];
  int id = graph_input(b->g, name, t, &s, 0, 0, b->d);
  if (id < 0) b->fail = 1;
  return id;
}

static Expr *n(ModelBuilder *b, int64_t v) { return ex_int(b->g->pool, v); }

int mb_weight(ModelBuilder *b, const char *name, int64_t d0, int64_t d1) {
  Expr *dims[2] = {n(b, d0), n(b, d1)};
  int rank = d1 ? 2 : 1;
  DType t = b->o->weight_dtype;
  if (b->o->weight_type) t = b->o->weight_type(b->o->weight_type_ctx, name, rank, d1 ? d1 : d0, t);
  return input(b, name, t, rank, dims);
}

static int op_n(ModelBuilder *b, GOp o, const int *in, int nin, const GAttr *attr) {
  if (b->fail) return -1;
  int id = graph_op(b->g, o, in, nin, attr, 0, 0, b->d);
  if (id < 0) b->fail = 1;
  return id;
}

static int op(ModelBuilder *b, GOp o, int x, int y, int z, const GAttr *attr) {
  int in[3] = {x, y, z};
  return op_n(b, o, in, z >= 0 ? 3 : y >= 0 ? 2 : 1, attr);
}

int mb_rms_norm(ModelBuilder *b, int x, int w) {
  GAttr a = {.eps = b->c->rms_eps};
  return op(b, G_RMS_NORM, x, w, -1, &a);
}

int mb_linear(ModelBuilder *b, int x, const char *prefix, int64_t out, int64_t in, int bias) {
  char name[256];
  snprintf(name, sizeof name, "%s.weight", prefix);
  int w = mb_weight(b, name, out, in), bb = -1;
  if (bias) {
    snprintf(name, sizeof name, "%s.bias", prefix);
    bb = mb_weight(b, name, out, 0);
  }
  return op(b, G_LINEAR, x, w, bb, NULL);
}

/* Stacked weights (ModelBuildOptions.fuse_projections): the stacked name's suffix and its parts' names. */
enum { ROWS_Q, ROWS_KV, ROWS_FFN };
static const struct {
  const char *stacked;
  const char *parts[3];
  int rows[3];
} STACKED[] = {
    {".self_attn.qkv_proj.weight",
     {".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight"},
     {ROWS_Q, ROWS_KV, ROWS_KV}},
    {".self_attn.qkv_proj.bias",
     {".self_attn.q_proj.bias", ".self_attn.k_proj.bias", ".self_attn.v_proj.bias"},
     {ROWS_Q, ROWS_KV, ROWS_KV}},
    {".mlp.gate_up_proj.weight", {".mlp.gate_proj.weight", ".mlp.up_proj.weight", NULL}, {ROWS_FFN, ROWS_FFN}}};

int model_fused_parts(const ModelConfig *c, const char *name, char (*parts)[256], int64_t *rows, int max) {
  size_t n = strlen(name);
  for (size_t i = 0; i < sizeof STACKED / sizeof STACKED[0]; i++) {
    size_t sn = strlen(STACKED[i].stacked);
    if (n <= sn || strcmp(name + n - sn, STACKED[i].stacked)) continue;
    int k = 0;
    for (; k < 3 && k < max && STACKED[i].parts[k]; k++) {
      snprintf(parts[k], sizeof parts[k], "%.*s%s", (int)(n - sn), name, STACKED[i].parts[k]);
      int r = STACKED[i].rows[k];
      rows[k] = r == ROWS_FFN ? c->intermediate : (int64_t)(r == ROWS_Q ? c->heads : c->kv_heads) * c->head_dim;
    }
    return k;
  }
  return 0;
}

/* The type of `prefix` + `stacked` (in: the row length; 0 for a bias): its parts' common type, or 0 when they differ
 * (each is then read on its own). */
static int stacked_type(ModelBuilder *b, const char *prefix, const char *stacked, int nparts, int64_t in, DType *t) {
  char name[256], parts[3][256];
  int64_t rows[3];
  snprintf(name, sizeof name, "%s%s", prefix, stacked);
  if (model_fused_parts(b->c, name, parts, rows, 3) != nparts) return 0;
  *t = b->o->weight_dtype;
  for (int i = 0; i < nparts && b->o->weight_type; i++) {
    DType pt = b->o->weight_type(b->o->weight_type_ctx, parts[i], in ? 2 : 1, in ? in : rows[i], b->o->weight_dtype);
    if (i && pt != *t) return 0;
    *t = pt;
  }
  return 1;
}

/* The stacked input `prefix` + `stacked` of type t: the parts' rows one after another (in = 0: a bias). */
static int stacked_input(ModelBuilder *b, const char *prefix, const char *stacked, DType t, const int64_t *rows,
                         int nparts, int64_t in) {
  char name[256];
  snprintf(name, sizeof name, "%s%s", prefix, stacked);
  int64_t total = 0;
  for (int i = 0; i < nparts; i++) total += rows[i];
  Expr *dims[2] = {n(b, total), n(b, in)};
  return input(b, name, t, in ? 2 : 1, dims);
}

/* x @ W^T (+ bias) over a stacked weight, cut back into its parts along the last axis: out[i]; or 0 when the
 * parts' types differ (the caller projects them one by one). */
static int stacked_linear(ModelBuilder *b, int x, const char *prefix, const char *stacked, const char *bias,
                          const int64_t *rows, int nparts, int64_t in, int *out) {
  DType wt, bt = DT_F32;
  if (!stacked_type(b, prefix, stacked, nparts, in, &wt) || (bias && !stacked_type(b, prefix, bias, nparts, 0, &bt)))
    return 0;
  int w = stacked_input(b, prefix, stacked, wt, rows, nparts, in);
  int bb = bias ? stacked_input(b, prefix, bias, bt, rows, nparts, 0) : -1;
  int y = op(b, G_LINEAR, x, w, bb, NULL);
  int64_t at = 0;
  for (int i = 0; i < nparts; i++) {
    GAttr sl = {.axis = 2, .start = n(b, at), .end = n(b, at + rows[i])};
    out[i] = op(b, G_SLICE, y, -1, -1, &sl);
    at += rows[i];
  }
  return !b->fail;
}

static int reshape(ModelBuilder *b, int x, int rank, Expr *const *dims) {
  GAttr a = {0};
  a.shape.rank = rank;
  for (int i = 0; i < rank; i++) a.shape.dim[i] = dims[i];
  return op(b, G_RESHAPE, x, -1, -1, &a);
}

static int permute(ModelBuilder *b, int x, int a0, int a1, int a2, int a3) {
  GAttr a = {.naxes = 4, .axes = {a0, a1, a2, a3}};
  return op(b, G_PERMUTE, x, -1, -1, &a);
}

static int permute0213(ModelBuilder *b, int x) { return permute(b, x, 0, 2, 1, 3); }

/* [1, seq, heads*hd] -> [1, heads, seq, hd] */
static int split_heads(ModelBuilder *b, int x, int heads) {
  Expr *dims[4] = {n(b, 1), b->seq, n(b, heads), n(b, b->c->head_dim)};
  return permute0213(b, reshape(b, x, 4, dims));
}

static int h_plus_o_proj(ModelBuilder *b, int h, int a, const char *o_name) {
  const ModelConfig *c = b->c;
  return op(b, G_ADD, h, mb_linear(b, a, o_name, c->hidden, (int64_t)c->heads * c->head_dim, 0), -1, NULL);
}

/* q [1, heads, tok, hd], k and v [1, kv_heads, tok, hd] -> [1, tok, heads * hd]: k and v go to their slots in
 * the layer's pools, and each token attends over its sequence's keys through the block table. */
static int paged_attention(ModelBuilder *b, int q, int k, int v, int layer) {
  const ModelConfig *c = b->c;
  char name[64];
  int hd = c->head_dim;
  Expr *pdims[4] = {graph_symbol(b->g, "blocks"), n(b, b->o->paged_block), n(b, c->kv_heads), n(b, hd)};
  Expr *rows[3] = {b->seq, n(b, c->kv_heads), n(b, hd)};
  int pool[2];
  for (int i = 0; i < 2; i++) {
    snprintf(name, sizeof name, "cache.%c.%d", i ? 'v' : 'k', layer);
    int x = reshape(b, permute(b, i ? v : k, 2, 1, 0, 3), 3, rows); /* [tok, kv_heads, hd] */
    int scattered = op(b, G_CACHE_SCATTER, input(b, name, b->o->cache_dtype, 4, pdims), x, b->slots, NULL);
    GAttr len = {.end = b->ctx};
    /* [tok, ctx, kv_heads, hd] -> [tok, kv_heads, ctx, hd] */
    pool[i] = permute(b, op(b, G_PAGED_GATHER, scattered, b->table, b->seq_of, &len), 0, 2, 1, 3);
  }
  if (b->fail) return -1;
  int in[4] = {permute(b, q, 2, 1, 0, 3), pool[0], pool[1], b->kv_len};
  int a = op_n(b, G_ATTENTION, in, 4, NULL); /* [tok, heads, 1, hd] */
  Expr *odims[3] = {n(b, 1), b->seq, n(b, (int64_t)c->heads * hd)};
  return reshape(b, permute(b, a, 2, 0, 1, 3), 3, odims);
}

int mb_attention_block(ModelBuilder *b, int h, int layer, const AttnSpec *s) {
  const ModelConfig *c = b->c;
  char p[96], name[256];
  int hd = c->head_dim;
  snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", layer);
  int x = mb_rms_norm(b, h, mb_weight(b, name, c->hidden, 0));
  snprintf(p, sizeof p, "model.layers.%d.self_attn", layer);
  char q_name[128], k_name[128], v_name[128], o_name[128];
  snprintf(q_name, sizeof q_name, "%s.q_proj", p);
  snprintf(k_name, sizeof k_name, "%s.k_proj", p);
  snprintf(v_name, sizeof v_name, "%s.v_proj", p);
  snprintf(o_name, sizeof o_name, "%s.o_proj", p);
  int64_t rows[3] = {(int64_t)c->heads * hd, (int64_t)c->kv_heads * hd, (int64_t)c->kv_heads * hd};
  int qkv[3];
  if (!b->o->fuse_projections ||
      !stacked_linear(b, x, p, ".qkv_proj.weight", s->qkv_bias ? ".qkv_proj.bias" : NULL, rows, 3, c->hidden, qkv)) {
    qkv[0] = mb_linear(b, x, q_name, rows[0], c->hidden, s->qkv_bias);
    qkv[1] = mb_linear(b, x, k_name, rows[1], c->hidden, s->qkv_bias);
    qkv[2] = mb_linear(b, x, v_name, rows[2], c->hidden, s->qkv_bias);
  }
  int q = split_heads(b, qkv[0], c->heads), k = split_heads(b, qkv[1], c->kv_heads);
  int v = split_heads(b, qkv[2], c->kv_heads);
  if (s->qk_norm) {
    snprintf(name, sizeof name, "%s.q_norm.weight", p);
    q = mb_rms_norm(b, q, mb_weight(b, name, hd, 0));
    snprintf(name, sizeof name, "%s.k_norm.weight", p);
    k = mb_rms_norm(b, k, mb_weight(b, name, hd, 0));
  }
  q = op(b, G_ROPE, q, b->pos, b->inv_freq, NULL);
  k = op(b, G_ROPE, k, b->pos, b->inv_freq, NULL);
  if (b->o->paged_block) return h_plus_o_proj(b, h, paged_attention(b, q, k, v, layer), o_name);
  Expr *cdims[4] = {n(b, 1), n(b, c->kv_heads), n(b, b->o->max_ctx), n(b, hd)};
  snprintf(name, sizeof name, "cache.k.%d", layer);
  int kc = input(b, name, b->o->cache_dtype, 4, cdims);
  snprintf(name, sizeof name, "cache.v.%d", layer);
  int vc = input(b, name, b->o->cache_dtype, 4, cdims);
  GAttr w = {.axis = 2, .start = b->past};
  kc = op(b, G_CACHE_WRITE, kc, k, -1, &w);
  vc = op(b, G_CACHE_WRITE, vc, v, -1, &w);
  /* attend over the cached positions [0, past + seq) */
  GAttr sl = {.axis = 2, .start = n(b, 0), .end = ex_add(b->g->pool, b->past, b->seq)};
  int ks = op(b, G_SLICE, kc, -1, -1, &sl), vs = op(b, G_SLICE, vc, -1, -1, &sl);
  GAttr at = {.causal = 1};
  int a = permute0213(b, op(b, G_ATTENTION, q, ks, vs, &at));
  Expr *odims[3] = {n(b, 1), b->seq, n(b, (int64_t)c->heads * hd)};
  a = reshape(b, a, 3, odims);
  return h_plus_o_proj(b, h, a, o_name);
}

int mb_swiglu_mlp_block(ModelBuilder *b, int h, int layer) {
  const ModelConfig *c = b->c;
  char name[256], g[128], u[128], dn[128];
  snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", layer);
  int x = mb_rms_norm(b, h, mb_weight(b, name, c->hidden, 0));
  snprintf(g, sizeof g, "model.layers.%d.mlp.gate_proj", layer);
  snprintf(u, sizeof u, "model.layers.%d.mlp.up_proj", layer);
  snprintf(dn, sizeof dn, "model.layers.%d.mlp.down_proj", layer);
  int64_t rows[2] = {c->intermediate, c->intermediate};
  int gu[2];
  char layer_prefix[64];
  snprintf(layer_prefix, sizeof layer_prefix, "model.layers.%d", layer);
  if (!b->o->fuse_projections ||
      !stacked_linear(b, x, layer_prefix, ".mlp.gate_up_proj.weight", NULL, rows, 2, c->hidden, gu)) {
    gu[0] = mb_linear(b, x, g, c->intermediate, c->hidden, 0);
    gu[1] = mb_linear(b, x, u, c->intermediate, c->hidden, 0);
  }
  int act = op(b, G_MUL, op(b, G_SILU, gu[0], -1, -1, NULL), gu[1], -1, NULL);
  return op(b, G_ADD, h, mb_linear(b, act, dn, c->hidden, c->intermediate, 0), -1, NULL);
}

int mb_begin(ModelBuilder *b, const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d) {
  if (c->heads <= 0 || c->kv_heads <= 0 || c->head_dim <= 0 || c->head_dim % 2 || c->heads % c->kv_heads ||
      c->hidden <= 0 || c->layers <= 0 || c->vocab <= 0 || c->intermediate <= 0 || o->max_ctx <= 0) {
    diag_error(d, 0, 0, "model config is inconsistent (heads %d, kv_heads %d, head_dim %d, hidden %d, layers %d)",
               c->heads, c->kv_heads, c->head_dim, c->hidden, c->layers);
    return -1;
  }
  *b = (ModelBuilder){
      .g = graph_new(arena, pool), .c = c, .o = o, .d = d, .pos = -1, .inv_freq = -1, .embed = -1, .table = -1};
  int paged = o->paged_block > 0;
  b->seq = graph_symbol(b->g, paged ? "tok" : "seq");
  b->past = paged ? NULL : graph_symbol(b->g, "past");
  Expr *idims[2] = {n(b, 1), b->seq};
  int ids = input(b, "ids", DT_I32, 2, idims);
  b->pos = input(b, "pos", DT_I32, 1, &b->seq);
  if (paged) {
    b->seq_of = input(b, "seq", DT_I32, 1, &b->seq);
    b->slots = input(b, "slot", DT_I32, 1, &b->seq);
    Expr *tdims[2] = {graph_symbol(b->g, "seqs"), n(b, (o->max_ctx + o->paged_block - 1) / o->paged_block)};
    b->table = input(b, "block_table", DT_I32, 2, tdims);
    b->ctx = graph_symbol(b->g, "ctx");
    b->kv_len = op(b, G_ADD, b->pos, graph_const_int(b->g, 1, 0, 0), -1, NULL);
  }
  Expr *fd = n(b, c->head_dim / 2);
  b->inv_freq = input(b, "rope.inv_freq", DT_F32, 1, &fd);
  b->embed = mb_weight(b, "model.embed_tokens.weight", c->vocab, c->hidden);
  GAttr cast = {.dtype = DT_F32};
  return op(b, G_CAST, op(b, G_EMBEDDING, ids, b->embed, -1, NULL), -1, -1, &cast);
}

Graph *mb_llama_decoder(const ModelConfig *c, const ModelBuildOptions *o, const AttnSpec *s, Arena *arena,
                        ExprPool *pool, Diag *d) {
  ModelBuilder b;
  int h = mb_begin(&b, c, o, arena, pool, d);
  if (h < 0) return NULL;
  for (int l = 0; l < c->layers && !b.fail; l++) {
    h = mb_attention_block(&b, h, l, s);
    h = mb_swiglu_mlp_block(&b, h, l);
  }
  return mb_finish(&b, h);
}

Graph *mb_finish(ModelBuilder *b, int h) {
  const ModelConfig *c = b->c;
  int hidden = -1, norm;
  if (b->o->paged_block) { /* the logits of the out_rows tokens: [rows, hidden] */
    Expr *flat[2] = {b->seq, n(b, c->hidden)}, *rows = graph_symbol(b->g, "rows");
    int all = reshape(b, h, 2, flat), out_rows = input(b, "out_rows", DT_I32, 1, &rows);
    h = op(b, G_EMBEDDING, out_rows, all, -1, NULL);
    norm = mb_weight(b, "model.norm.weight", c->hidden, 0);
    if (b->o->hidden_output) hidden = mb_rms_norm(b, all, norm); /* every token's, for embeddings */
  } else {                                                       /* only the last position's logits are needed */
    GAttr last = {.axis = 1, .start = ex_add(b->g->pool, b->seq, n(b, -1)), .end = b->seq};
    h = op(b, G_SLICE, h, -1, -1, &last);
    norm = mb_weight(b, "model.norm.weight", c->hidden, 0);
  }
  h = mb_rms_norm(b, h, norm);
  int head = c->tied_embeddings ? b->embed : mb_weight(b, "lm_head.weight", c->vocab, c->hidden);
  GAttr cast = {.dtype = DT_F32};
  int logits = op(b, G_CAST, op(b, G_LINEAR, h, head, -1, NULL), -1, -1, &cast);
  /* The greedy choice on the device: a decode step then copies back 8 bytes instead of the logits. */
  GAttr last_axis = {.naxes = 1, .axes = {-1}};
  int next = op(b, G_ARGMAX, logits, -1, -1, &last_axis);
  if (b->fail) return NULL;
  graph_set_name(b->g, logits, "logits");
  graph_set_name(b->g, next, "next_token");
  graph_add_output(b->g, logits);
  graph_add_output(b->g, next);
  if (hidden >= 0) {
    graph_set_name(b->g, hidden, "hidden");
    graph_add_output(b->g, hidden);
  }
  return b->g;
}
