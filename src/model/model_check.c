/* Tensors against hyperparameters (model_check.h). */
#include "model_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/arena.h"
#include "gguf.h"

/* Layer number of "model.layers.N.*", or -1. */
static long layer_of(const char *name) {
  const char *p = "model.layers.";
  if (strncmp(name, p, strlen(p)) != 0) return -1;
  char *end;
  long n = strtol(name + strlen(p), &end, 10);
  return end != name + strlen(p) && *end == '.' && n >= 0 ? n : -1;
}

/* "'llama.block_count' = 30" or "'num_hidden_layers' = 30 in DIR/config.json" */
static void layers_key(char *out, size_t n, WeightStore *w, const ModelConfig *c) {
  if (weights_gguf(w)) snprintf(out, n, "'%s.block_count' = %d", c->arch_name, c->layers);
  else snprintf(out, n, "'num_hidden_layers' = %d in %s/config.json", c->layers, weights_dir(w));
}

static void dims_text(char *out, size_t n, int rank, const int64_t *dims) {
  size_t at = (size_t)snprintf(out, n, "[");
  for (int i = 0; i < rank && at < n; i++)
    at += (size_t)snprintf(out + at, n - at, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (at < n) snprintf(out + at, n - at, "]");
}

static int graph_reads(const Graph *g, const char *name) {
  for (int i = 0; i < g->ninputs; i++)
    if (!strcmp(g->nodes[g->inputs[i]].name, name)) return 1;
  return 0;
}

/* Every weight input of g is in w with its shape. */
static int check_present(const Graph *g, WeightStore *w, const ModelConfig *c, Diag *d) {
  char key[4200], have[128], want[128];
  for (int i = 0; i < g->ninputs; i++) {
    const GNode *n = &g->nodes[g->inputs[i]];
    if (!model_input_is_weight(n->name)) continue;
    int64_t dims[4] = {0};
    SymEnv none = {0};
    for (int k = 0; k < n->shape.rank; k++) /* constants: the hyperparameters */
      if (!ex_eval_int(n->shape.dim[k], &none, &dims[k])) dims[k] = -1;
    WeightInfo wi;
    if (!weights_has(w, n->name, &wi)) {
      Arena *a = arena_new();
      const char *gname = weights_gguf(w) ? arch_hf_to_gguf(arch_get(c->arch), a, n->name) : NULL;
      long layer = layer_of(n->name);
      layers_key(key, sizeof key, w, c);
      if (layer >= 0)
        diag_error(d, 0, 0, "%s: no tensor '%s' for layer %ld, which %s implies", weights_source(w),
                   gname ? gname : n->name, layer, key);
      else
        diag_error(d, 0, 0, "%s: no tensor '%s', which a %s model with this configuration reads", weights_source(w),
                   gname ? gname : n->name, c->arch_name);
      arena_free(a);
      return 0;
    }
    int same = wi.rank == n->shape.rank;
    for (int k = 0; same && k < wi.rank; k++) same = wi.dims[k] == dims[k];
    if (!same) {
      dims_text(have, sizeof have, wi.rank, wi.dims);
      dims_text(want, sizeof want, n->shape.rank, dims);
      diag_error(d, 0, 0, "%s: tensor '%s' has shape %s, but the model's hyperparameters give %s",
                 weights_file_of(w, n->name), weights_stored_name(w, n->name), have, want);
      return 0;
    }
  }
  return 1;
}

/* Every tensor of w is read by g or skipped knowingly by the architecture. */
static int check_used(const Graph *g, WeightStore *w, const ModelConfig *c, Diag *d) {
  const ArchDesc *a = arch_get(c->arch);
  char key[4200];
  for (int i = 0; i < weights_count(w); i++) {
    const char *name = weights_name_at(w, i, NULL);
    if (graph_reads(g, name) || a->ignored_tensor(name, c)) continue;
    long layer = layer_of(name);
    layers_key(key, sizeof key, w, c);
    if (layer >= c->layers)
      diag_error(d, 0, 0, "%s: tensor '%s' is for layer %ld, but %s: the metadata and the tensors disagree",
                 weights_file_of(w, name), weights_stored_name(w, name), layer, key);
    else
      diag_error(d, 0, 0,
                 "%s: tensor '%s' is not read by a %s model with this configuration: the metadata and the tensors "
                 "disagree",
                 weights_file_of(w, name), weights_stored_name(w, name), c->arch_name);
    return 0;
  }
  return 1;
}

int model_check_weights(WeightStore *w, const ModelConfig *c, Diag *d) {
  Arena *arena = arena_new();
  ModelBuildOptions bo = {1, DT_F32, DT_F32}; /* the weights' shapes do not depend on these */
  const Graph *g = model_build(c, &bo, arena, expr_pool_new(arena), d);
  int ok = g && check_used(g, w, c, d) && check_present(g, w, c, d);
  arena_free(arena);
  return ok;
}

WeightStore *model_weights_open(const char *path, ModelConfig *c, Diag *d) {
  WeightStore *w = weights_open(path, c, d);
  if (w && !model_check_weights(w, c, d)) {
    weights_close(w);
    return NULL;
  }
  return w;
}
