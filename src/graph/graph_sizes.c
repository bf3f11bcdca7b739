/* Run-time size checks of a graph: once the symbols have values, every node's element count must be
 * formed without overflow and stay within LT_MAX_NUMEL, and the ops that are undefined on empty
 * operands (argmax over an empty axis, attention without keys) are refused, with the op's position. */
#include <stdio.h>
#include "../base/checked.h"
#include "graph.h"

/* "seq=4096, past=7" (the symbols' values, for messages). */
static const char *env_str(char *buf, size_t n, const SymEnv *env) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; env && i < env->n && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s=%lld", i ? ", " : "", env->names[i], (long long)env->values[i]);
  return buf;
}

static const char *what(const GNode *n, char *buf, size_t len) {
  if (n->op == G_INPUT) snprintf(buf, len, "input '%s'", n->name ? n->name : "?");
  else snprintf(buf, len, "%s", gop_name(n->op));
  return buf;
}

int graph_check_sizes(const Graph *g, const SymEnv *env, Diag *d) {
  char ev[256], w[160];
  for (int i = 0; i < g->n; i++) {
    const GNode *n = &g->nodes[i];
    int64_t dims[LT_MAX_RANK], numel;
    StrBuf b = {0};
    shape_print(&b, &n->shape);
    int ok = 1;
    for (int k = 0; ok && k < n->shape.rank; k++) {
      if (!ex_eval_int(n->shape.dim[k], env, &dims[k])) {
        diag_error(d, n->line, n->col,
                   "%s: dimension %d of %s%s cannot be evaluated at %s (a symbol without a "
                   "value, or a size that overflows)",
                   what(n, w, sizeof w), k, dtype_name(n->dtype), sb_str(&b), env_str(ev, sizeof ev, env));
        ok = 0;
      } else if (dims[k] < 0) {
        diag_error(d, n->line, n->col, "%s: dimension %d of %s%s is %lld at %s", what(n, w, sizeof w), k,
                   dtype_name(n->dtype), sb_str(&b), (long long)dims[k], env_str(ev, sizeof ev, env));
        ok = 0;
      }
    }
    if (ok && !ck_numel(n->shape.rank, dims, &numel)) {
      diag_error(d, n->line, n->col, "%s: %s%s has more than 2^56 elements at %s", what(n, w, sizeof w),
                 dtype_name(n->dtype), sb_str(&b), env_str(ev, sizeof ev, env));
      ok = 0;
    }
    sb_free(&b);
    if (!ok) return 0;
    if (n->op == G_ARGMAX && n->nin == 1) {
      const GNode *x = &g->nodes[n->in[0]];
      int64_t len;
      int a = n->attr.axes[0];
      if (a >= 0 && a < x->shape.rank && ex_eval_int(x->shape.dim[a], env, &len) && len == 0) {
        diag_error(d, n->line, n->col, "argmax: axis %d is empty at %s (argmax of no elements is undefined)", a,
                   env_str(ev, sizeof ev, env));
        return 0;
      }
    }
    if (n->op == G_ATTENTION && n->nin == 3) {
      const GNode *k = &g->nodes[n->in[1]];
      int64_t len;
      if (k->shape.rank == 4 && ex_eval_int(k->shape.dim[2], env, &len) && len == 0) {
        diag_error(d, n->line, n->col, "attention: no keys (k and v have 0 positions at %s)",
                   env_str(ev, sizeof ev, env));
        return 0;
      }
    }
  }
  return 1;
}
