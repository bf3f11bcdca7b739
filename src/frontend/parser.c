/* Parser of the program language: statements (inputs, assignments, return) and expressions, building
 * the graph directly. Shape and dtype checks happen in graph_op; this file checks the syntax and the
 * arguments of each call (count, names, kinds) and reports the first error with its position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frontend.h"
#include "lexer.h"
#include "../base/hash.h"

#define MAX_DEPTH 200
#define DTYPES_EXPECTED                                                                                                \
  "expected one of f32, f16, bf16, i32, i64; an input may also be q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k"

/* What an expression evaluates to before it is known how it is used. Literals stay numbers until a
 * tensor is needed, so `sum(x, 1)` does not add a constant node for the axis. */
typedef enum VKind { V_TENSOR, V_NUM, V_NAME, V_LIST, V_BOOL } VKind;

typedef struct ListItem {
  int64_t v;
  const char *sym; /* a size name instead of an integer */
  int line, col;
} ListItem;

typedef struct Value {
  VKind kind;
  int node;         /* V_TENSOR */
  int is_int;       /* V_NUM */
  int64_t ival;     /* V_NUM (is_int), V_BOOL */
  double fval;      /* V_NUM */
  const char *name; /* bare identifier text (V_NAME, or V_TENSOR read from a variable) */
  int nitems;       /* V_LIST */
  ListItem items[LT_MAX_RANK];
  int line, col;
} Value;

typedef struct Binding {
  const char *name;
  int node;
} Binding;

typedef struct Parser {
  Token *t;
  int pos;
  Graph *g;
  Arena *arena;
  Diag *d;
  Binding *vars;
  int nvars, capvars;
  int depth;
  int last_assigned;
  int returned;
  int *var_index; /* open addressing over vars by name hash (-1: empty), so long programs bind in linear time */
  int index_cap;
} Parser;

static Token *peek(Parser *p) { return &p->t[p->pos]; }
static Token *peek2(Parser *p) { return p->t[p->pos].kind == TK_EOF ? &p->t[p->pos] : &p->t[p->pos + 1]; }
static Token *next(Parser *p) {
  Token *t = &p->t[p->pos];
  if (t->kind != TK_EOF) p->pos++;
  return t;
}
static int is_punct(const Token *t, char c) { return t->kind == TK_PUNCT && t->punct == c; }
static int is_ident(const Token *t, const char *s) { return t->kind == TK_IDENT && !strcmp(t->text, s); }
static const char *desc(Parser *p, const Token *t) { return token_desc(t, p->arena); }

#define ERR(p, tok, ...) (diag_error((p)->d, (tok)->line, (tok)->col, __VA_ARGS__), -1)
#define ERRV(p, v, ...) (diag_error((p)->d, (v)->line, (v)->col, __VA_ARGS__), -1)

static int is_dtype_name(const char *s, DType *t) {
  DType x;
  if (!dtype_parse(s, &x) || x == DT_BOOL) return 0;
  if (t) *t = x;
  return 1;
}

static int is_reserved(const char *s) {
  return !strcmp(s, "return") || !strcmp(s, "true") || !strcmp(s, "false") || is_dtype_name(s, NULL);
}

static int *var_slot(Parser *p, const char *name) {
  for (size_t i = hash_str(HASH_SEED, name) & (size_t)(p->index_cap - 1);; i = (i + 1) & (size_t)(p->index_cap - 1))
    if (p->var_index[i] < 0 || !strcmp(p->vars[p->var_index[i]].name, name)) return &p->var_index[i];
}

static int lookup(Parser *p, const char *name) {
  if (!p->index_cap) return -1;
  int i = *var_slot(p, name);
  return i >= 0 ? p->vars[i].node : -1;
}

static void bind(Parser *p, const char *name, int node) {
  if (p->index_cap) {
    int i = *var_slot(p, name);
    if (i >= 0) {
      p->vars[i].node = node;
      return;
    }
  }
  if (p->nvars == p->capvars) {
    int cap = p->capvars ? p->capvars * 2 : 32;
    Binding *b = ARENA_ARRAY(p->arena, Binding, cap);
    if (p->nvars) memcpy(b, p->vars, sizeof(Binding) * (size_t)p->nvars);
    p->vars = b;
    p->capvars = cap;
    p->index_cap = cap * 2;
    p->var_index = ARENA_ARRAY(p->arena, int, p->index_cap);
    for (int k = 0; k < p->index_cap; k++) p->var_index[k] = -1;
    for (int k = 0; k < p->nvars; k++) *var_slot(p, p->vars[k].name) = k;
  }
  *var_slot(p, name) = p->nvars;
  p->vars[p->nvars].name = name;
  p->vars[p->nvars++].node = node;
}

static int is_symbol(Parser *p, const char *name) {
  for (int i = 0; i < p->g->nsymbols; i++)
    if (!strcmp(p->g->symbols[i], name)) return 1;
  return 0;
}

static const char *kind_desc(Parser *p, const Value *v) {
  switch (v->kind) {
  case V_TENSOR: return "a tensor";
  case V_NUM: return "a number";
  case V_NAME: return arena_printf(p->arena, "'%s'", v->name);
  case V_LIST: return "a list";
  case V_BOOL: return v->ival ? "'true'" : "'false'";
  }
  return "?";
}

/* Makes a graph node of a value used as a tensor operand. */
static int to_tensor(Parser *p, Value *v, const char *what) {
  switch (v->kind) {
  case V_TENSOR: return 0;
  case V_NUM: {
    int id = v->is_int ? graph_const_int(p->g, v->ival, v->line, v->col) : graph_const(p->g, v->fval, v->line, v->col);
    p->g->nodes[id].dtype = v->is_int ? DT_I64 : DT_F32;
    v->kind = V_TENSOR;
    v->node = id;
    return 0;
  }
  case V_NAME: return ERRV(p, v, "undefined name '%s'", v->name);
  default: return ERRV(p, v, "%s must be a tensor, got %s", what, kind_desc(p, v));
  }
}

/* ---- expressions ---- */

static int parse_expr(Parser *p, Value *out);

static int parse_list(Parser *p, Value *out) {
  Token *open = next(p);
  memset(out, 0, sizeof *out);
  out->kind = V_LIST;
  out->line = open->line;
  out->col = open->col;
  while (!is_punct(peek(p), ']')) {
    Token *t = peek(p);
    if (out->nitems == LT_MAX_RANK) return ERR(p, t, "too many items in list (at most %d)", LT_MAX_RANK);
    ListItem *it = &out->items[out->nitems++];
    it->line = t->line;
    it->col = t->col;
    int neg = 0;
    if (is_punct(t, '-')) {
      neg = 1;
      next(p);
      t = peek(p);
    }
    if (t->kind == TK_INT) it->v = neg ? -t->ival : t->ival;
    else if (t->kind == TK_IDENT && !neg) it->sym = t->text;
    else return ERR(p, t, "expected an integer or a size name in list, got %s", desc(p, t));
    next(p);
    if (is_punct(peek(p), ',')) next(p);
    else if (!is_punct(peek(p), ']')) return ERR(p, peek(p), "expected ',' or ']' in list, got %s", desc(p, peek(p)));
  }
  next(p);
  return 0;
}

/* Calls are ops of the graph's op table (ops.def), plus syntax sugar that builds one of them. */
static const GOpInfo transpose_info = {
    "transpose", 1, 1, 3, {{"x", GP_TENSOR, 0, 0, 0}, {"d0", GP_SWAP, 0, 0, 0}, {"d1", GP_SWAP, 0, 0, 0}}};

typedef struct OpSpec {
  const char *name;
  GOp op;
  const GOpInfo *info;
  int min, max; /* arguments in a call */
} OpSpec;

static int find_op(const char *name, OpSpec *s) {
  const GOpInfo *info = NULL;
  GOp op = G_OP_COUNT;
  if (!strcmp(name, transpose_info.name)) info = &transpose_info, op = G_PERMUTE;
  for (int o = 0; !info && o < G_OP_COUNT; o++) {
    const GOpInfo *i = gop_info((GOp)o);
    if (i->nparams && !strcmp(i->name, name)) info = i, op = (GOp)o;
  }
  if (!info) return 0;
  s->name = info->name;
  s->op = op;
  s->info = info;
  s->max = info->nparams;
  for (s->min = 0; s->min < info->nparams && gparam_required(info, s->min); s->min++) {}
  return 1;
}

static const char *param_name(const OpSpec *s, int i) { return s->info->params[i].name; }

typedef struct Call {
  const OpSpec *spec;
  const Token *at; /* the op name */
  Value args[GOP_MAX_PARAMS];
  int given[GOP_MAX_PARAMS];
} Call;

static int get_tensor(Parser *p, Call *c, int i, int *node) {
  char what[64];
  snprintf(what, sizeof what, "%s: argument '%s'", c->spec->name, param_name(c->spec, i));
  if (to_tensor(p, &c->args[i], what)) return -1;
  *node = c->args[i].node;
  return 0;
}

static int get_int(Parser *p, Call *c, int i, int64_t *v) {
  Value *a = &c->args[i];
  if (a->kind != V_NUM || !a->is_int)
    return ERRV(p, a, "%s: argument '%s' must be an integer, got %s", c->spec->name, param_name(c->spec, i),
                kind_desc(p, a));
  *v = a->ival;
  return 0;
}

/* An axis of a tensor of rank `rank`, in [-rank, rank). */
static int get_axis(Parser *p, Call *c, int i, int rank, int *axis) {
  int64_t v;
  if (get_int(p, c, i, &v)) return -1;
  if (v < -rank || v >= rank)
    return ERRV(p, &c->args[i], "%s: axis %lld out of range for a tensor of rank %d", c->spec->name, (long long)v,
                rank);
  *axis = (int)v;
  return 0;
}

static int get_float(Parser *p, Call *c, int i, double *v) {
  Value *a = &c->args[i];
  if (a->kind != V_NUM)
    return ERRV(p, a, "%s: argument '%s' must be a number, got %s", c->spec->name, param_name(c->spec, i),
                kind_desc(p, a));
  *v = a->is_int ? (double)a->ival : a->fval;
  return 0;
}

static int get_bool(Parser *p, Call *c, int i, int *v) {
  Value *a = &c->args[i];
  if (a->kind != V_BOOL)
    return ERRV(p, a, "%s: argument '%s' must be true or false, got %s", c->spec->name, param_name(c->spec, i),
                kind_desc(p, a));
  *v = (int)a->ival;
  return 0;
}

/* A list of integers (axes, permutation); `single` also accepts one integer. */
static int get_ints(Parser *p, Call *c, int i, int rank, int single, int *out, int *n) {
  Value *a = &c->args[i];
  if (single && a->kind == V_NUM) {
    *n = 1;
    return get_axis(p, c, i, rank, &out[0]);
  }
  if (a->kind != V_LIST)
    return ERRV(p, a, "%s: argument '%s' must be %s, got %s", c->spec->name, param_name(c->spec, i),
                single ? "an integer or a list of integers" : "a list of integers", kind_desc(p, a));
  for (int k = 0; k < a->nitems; k++) {
    ListItem *it = &a->items[k];
    if (it->sym)
      return ERR(p, it, "%s: expected an integer in '%s', got '%s'", c->spec->name, param_name(c->spec, i), it->sym);
    if (it->v < -rank || it->v >= rank)
      return ERR(p, it, "%s: axis %lld out of range for a tensor of rank %d", c->spec->name, (long long)it->v, rank);
    out[k] = (int)it->v;
  }
  *n = a->nitems;
  return 0;
}

static int get_dtype(Parser *p, Call *c, int i, DType *t) {
  Value *a = &c->args[i];
  if (a->name && is_dtype_name(a->name, t)) return 0;
  if (a->kind == V_NAME) return ERRV(p, a, "unknown dtype '%s' (" DTYPES_EXPECTED ")", a->name);
  return ERRV(p, a, "%s: argument '%s' must be a dtype (" DTYPES_EXPECTED "), got %s", c->spec->name,
              param_name(c->spec, i), a->name ? arena_printf(p->arena, "'%s'", a->name) : kind_desc(p, a));
}

static int get_shape(Parser *p, Call *c, int i, Shape *s) {
  Value *a = &c->args[i];
  if (a->kind != V_LIST)
    return ERRV(p, a, "%s: argument '%s' must be a list of sizes, got %s", c->spec->name, param_name(c->spec, i),
                kind_desc(p, a));
  s->rank = a->nitems;
  for (int k = 0; k < a->nitems; k++) {
    ListItem *it = &a->items[k];
    if (it->sym) {
      if (!is_symbol(p, it->sym))
        return ERR(p, it, "%s: unknown size name '%s' (size names are declared in input shapes)", c->spec->name,
                   it->sym);
      s->dim[k] = graph_symbol(p->g, it->sym);
    } else {
      if (it->v <= 0 && it->v != -1)
        return ERR(p, it, "%s: dimension %lld must be positive or -1", c->spec->name, (long long)it->v);
      s->dim[k] = ex_int(p->g->pool, it->v);
    }
  }
  return 0;
}

static int rank_of(Parser *p, int node) { return p->g->nodes[node].shape.rank; }

/* Binds argument i of a call to the attribute its parameter names. in[0] is already a tensor. */
static int bind_param(Parser *p, Call *c, int i, const int *in, GAttr *at, int *swap, int *nswap) {
  const GParam *prm = &c->spec->info->params[i];
  void *field = (char *)at + prm->offset;
  switch (prm->kind) {
  case GP_TENSOR: return 0;
  case GP_AXES:
    if (get_ints(p, c, i, rank_of(p, in[0]), 1, at->axes, &at->naxes)) return -1;
    if (at->naxes == 0) return ERRV(p, &c->args[i], "%s: axis list is empty", c->spec->name);
    return 0;
  case GP_PERM: return get_ints(p, c, i, rank_of(p, in[0]), 0, at->axes, &at->naxes);
  case GP_AXIS: return get_axis(p, c, i, rank_of(p, in[0]), (int *)field);
  case GP_SWAP: return get_axis(p, c, i, rank_of(p, in[0]), &swap[(*nswap)++]);
  case GP_NUM: return get_float(p, c, i, (double *)field);
  case GP_FLAG: return get_bool(p, c, i, (int *)field);
  case GP_SHAPE: return get_shape(p, c, i, (Shape *)field);
  case GP_DTYPE: return get_dtype(p, c, i, (DType *)field);
  case GP_POSITION:
    /* an integer, or the name of a symbolic size (e.g. the number of positions already cached) */
    if (c->args[i].kind == V_NAME) {
      *(Expr **)field = graph_symbol(p->g, c->args[i].name);
      return 0;
    }
    /* fall through */
  case GP_INDEX: {
    int64_t v;
    if (get_int(p, c, i, &v)) return -1;
    *(Expr **)field = ex_int(p->g->pool, v);
    return 0;
  }
  }
  return -1;
}

/* Builds the node of a call whose arguments are bound to c->args: operands first (in order), then
 * every given attribute over the op's defaults. */
static int build_call(Parser *p, Call *c, Value *out) {
  const OpSpec *s = c->spec;
  GAttr at = gop_default_attr(s->op);
  int in[G_MAX_IN], nin = 0, line = c->at->line, col = c->at->col, swap[2], nswap = 0;
  for (int i = 0; i < s->max; i++)
    if (c->given[i] && s->info->params[i].kind == GP_TENSOR && get_tensor(p, c, i, &in[nin++])) return -1;
  for (int i = 0; i < s->max; i++)
    if (c->given[i] && bind_param(p, c, i, in, &at, swap, &nswap)) return -1;
  if (nswap == 2) { /* transpose: the identity permutation with two axes exchanged */
    int r = rank_of(p, in[0]);
    at.naxes = r;
    for (int i = 0; i < r; i++) at.axes[i] = i;
    for (int k = 0; k < 2; k++) swap[k] = swap[k] < 0 ? swap[k] + r : swap[k];
    at.axes[swap[0]] = swap[1];
    at.axes[swap[1]] = swap[0];
  }
  int id = graph_op(p->g, s->op, in, nin, &at, line, col, p->d);
  if (id < 0) return -1;
  memset(out, 0, sizeof *out);
  out->kind = V_TENSOR;
  out->node = id;
  out->line = line;
  out->col = col;
  return 0;
}

static const char *count_desc(Parser *p, const OpSpec *s) {
  if (s->min == s->max) return arena_printf(p->arena, "%d argument%s", s->min, s->min == 1 ? "" : "s");
  if (s->max == s->min + 1) return arena_printf(p->arena, "%d or %d arguments", s->min, s->max);
  return arena_printf(p->arena, "%d to %d arguments", s->min, s->max);
}

static const char *param_list(Parser *p, const OpSpec *s) {
  const char *r = param_name(s, 0);
  for (int i = 1; i < s->max; i++) r = arena_printf(p->arena, "%s, %s", r, param_name(s, i));
  return r;
}

static int parse_call(Parser *p, Value *out) {
  Token *name = next(p);
  OpSpec spec_buf;
  if (!find_op(name->text, &spec_buf)) return ERR(p, name, "unknown op '%s'", name->text);
  const OpSpec *spec = &spec_buf;
  next(p); /* ( */
  Call c = {spec, name, {{0}}, {0}};
  int np = spec->max, count = 0, seen_kw = 0;
  while (!is_punct(peek(p), ')')) {
    Token *t = peek(p);
    int slot;
    if (t->kind == TK_IDENT && is_punct(peek2(p), '=')) {
      for (slot = 0; slot < np && strcmp(param_name(spec, slot), t->text); slot++) {}
      if (slot == np)
        return ERR(p, t, "%s has no argument '%s' (arguments: %s)", spec->name, t->text, param_list(p, spec));
      if (c.given[slot]) return ERR(p, t, "%s: argument '%s' given twice", spec->name, t->text);
      next(p);
      next(p);
      seen_kw = 1;
    } else {
      if (seen_kw) return ERR(p, t, "%s: positional argument after keyword arguments", spec->name);
      slot = count < np ? count : -1;
    }
    Value v;
    if (parse_expr(p, &v)) return -1;
    count++;
    if (slot >= 0) {
      c.args[slot] = v;
      c.given[slot] = 1;
    }
    if (is_punct(peek(p), ',')) next(p);
    else if (!is_punct(peek(p), ')')) return ERR(p, peek(p), "expected ')' after arguments, got %s", desc(p, peek(p)));
  }
  next(p); /* ) */
  if (count < spec->min || count > spec->max)
    return ERR(p, name, "%s takes %s (%s), got %d", spec->name, count_desc(p, spec), param_list(p, spec), count);
  for (int i = 0; i < spec->min; i++)
    if (!c.given[i]) return ERR(p, name, "%s: missing argument '%s'", spec->name, param_name(spec, i));
  return build_call(p, &c, out);
}

static int parse_primary(Parser *p, Value *out) {
  Token *t = peek(p);
  memset(out, 0, sizeof *out);
  out->line = t->line;
  out->col = t->col;
  if (t->kind == TK_INT && t->int64_min) return ERR(p, t, "integer literal '%s' is too large", t->text);
  if (t->kind == TK_INT || t->kind == TK_FLOAT) {
    next(p);
    out->kind = V_NUM;
    out->is_int = t->kind == TK_INT;
    out->ival = t->ival;
    out->fval = t->fval;
    return 0;
  }
  if (t->kind == TK_IDENT) {
    if (is_ident(t, "true") || is_ident(t, "false")) {
      next(p);
      out->kind = V_BOOL;
      out->ival = is_ident(t, "true");
      return 0;
    }
    if (is_punct(peek2(p), '(')) return parse_call(p, out);
    next(p);
    out->name = t->text;
    int node = lookup(p, t->text);
    out->kind = node >= 0 ? V_TENSOR : V_NAME;
    out->node = node;
    return 0;
  }
  if (is_punct(t, '(')) {
    next(p);
    if (parse_expr(p, out)) return -1;
    if (!is_punct(peek(p), ')')) return ERR(p, peek(p), "expected ')' to close '(', got %s", desc(p, peek(p)));
    next(p);
    out->name = NULL; /* (f32) is an expression, not a dtype name */
    return 0;
  }
  if (is_punct(t, '[')) return parse_list(p, out);
  return ERR(p, t, "expected an expression, got %s", desc(p, t));
}

static int parse_unary(Parser *p, Value *out) {
  if (++p->depth > MAX_DEPTH) return ERR(p, peek(p), "expression nested too deeply (at most %d levels)", MAX_DEPTH);
  int rc;
  Token *t = peek(p);
  if (is_punct(t, '-') && peek2(p)->kind == TK_INT && peek2(p)->int64_min) {
    /* -9223372036854775808: the one literal whose magnitude is not an int64 */
    next(p);
    next(p);
    memset(out, 0, sizeof *out);
    out->kind = V_NUM;
    out->is_int = 1;
    out->ival = INT64_MIN;
    out->fval = (double)INT64_MIN;
    out->line = t->line;
    out->col = t->col;
    rc = 0;
  } else if (is_punct(t, '-')) {
    next(p);
    rc = parse_unary(p, out);
    if (!rc && out->kind == V_NUM) {
      if (out->is_int && out->ival == INT64_MIN) rc = ERR(p, t, "integer overflow in constant expression");
      out->ival = rc ? 0 : -out->ival;
      out->fval = -out->fval;
    } else if (!rc) {
      rc = to_tensor(p, out, "operand of '-'");
      int id = rc ? -1 : graph_op(p->g, G_NEG, &out->node, 1, NULL, t->line, t->col, p->d);
      if (id < 0) rc = -1;
      else out->node = id, out->name = NULL;
    }
    out->line = t->line;
    out->col = t->col;
  } else {
    rc = parse_primary(p, out);
  }
  p->depth--;
  return rc;
}

/* Folds arithmetic on two literals so `-2 * 3` stays a weak literal. */
static int fold(Parser *p, const Token *op, Value *a, const Value *b) {
  char c = op->punct;
  if (a->is_int && b->is_int && c != '/') {
    int64_t r;
    int ovf = c == '+'   ? __builtin_add_overflow(a->ival, b->ival, &r)
              : c == '-' ? __builtin_sub_overflow(a->ival, b->ival, &r)
                         : __builtin_mul_overflow(a->ival, b->ival, &r);
    if (ovf) return ERR(p, op, "integer overflow in constant expression");
    a->ival = r;
    a->fval = (double)r;
    return 0;
  }
  double x = a->is_int ? (double)a->ival : a->fval, y = b->is_int ? (double)b->ival : b->fval;
  a->fval = c == '+' ? x + y : c == '-' ? x - y : c == '*' ? x * y : x / y;
  a->is_int = 0;
  return 0;
}

static int binary(Parser *p, const Token *op, Value *a, Value *b) {
  if (a->kind == V_NUM && b->kind == V_NUM) return fold(p, op, a, b);
  static const char opch[] = "+-*/";
  static const GOp gops[] = {G_ADD, G_SUB, G_MUL, G_DIV};
  GOp g = gops[strchr(opch, op->punct) - opch];
  char what[48];
  snprintf(what, sizeof what, "operand of '%c'", op->punct);
  if (to_tensor(p, a, what) || to_tensor(p, b, what)) return -1;
  int in[2] = {a->node, b->node};
  int id = graph_op(p->g, g, in, 2, NULL, op->line, op->col, p->d);
  if (id < 0) return -1;
  a->node = id;
  a->name = NULL;
  return 0;
}

static int parse_term(Parser *p, Value *out) {
  if (parse_unary(p, out)) return -1;
  while (is_punct(peek(p), '*') || is_punct(peek(p), '/')) {
    Token *op = next(p);
    Value rhs;
    if (parse_unary(p, &rhs) || binary(p, op, out, &rhs)) return -1;
  }
  return 0;
}

static int parse_expr(Parser *p, Value *out) {
  if (parse_term(p, out)) return -1;
  while (is_punct(peek(p), '+') || is_punct(peek(p), '-')) {
    Token *op = next(p);
    Value rhs;
    if (parse_term(p, &rhs) || binary(p, op, out, &rhs)) return -1;
  }
  return 0;
}

/* ---- statements ---- */

static int parse_input(Parser *p, Token *name) {
  next(p); /* : */
  Token *dt = peek(p);
  DType t;
  if (dt->kind != TK_IDENT) return ERR(p, dt, "expected a dtype after ':' (" DTYPES_EXPECTED "), got %s", desc(p, dt));
  if (!is_dtype_name(dt->text, &t)) return ERR(p, dt, "unknown dtype '%s' (" DTYPES_EXPECTED ")", dt->text);
  next(p);
  if (!is_punct(peek(p), '['))
    return ERR(p, peek(p), "expected '[' after dtype %s (e.g. %s[2, seq]), got %s", dt->text, dt->text,
               desc(p, peek(p)));
  next(p);
  Shape s = {0};
  while (!is_punct(peek(p), ']')) {
    Token *d = peek(p);
    if (s.rank == LT_MAX_RANK) return ERR(p, d, "too many dimensions (at most %d)", LT_MAX_RANK);
    if (d->kind == TK_INT) {
      if (d->ival <= 0) return ERR(p, d, "dimension must be a positive integer, got %lld", (long long)d->ival);
      if (d->ival > ((int64_t)1 << 40))
        return ERR(p, d, "dimension %lld is too large (at most 2^40)", (long long)d->ival);
      s.dim[s.rank++] = ex_int(p->g->pool, d->ival);
    } else if (d->kind == TK_IDENT && !is_reserved(d->text)) {
      if (!is_symbol(p, d->text) && p->g->nsymbols >= (int)(sizeof p->g->symbols / sizeof p->g->symbols[0]))
        return ERR(p, d, "too many size names (at most %d)", (int)(sizeof p->g->symbols / sizeof p->g->symbols[0]));
      s.dim[s.rank++] = graph_symbol(p->g, d->text);
    } else {
      return ERR(p, d, "expected a dimension (a positive integer or a size name), got %s", desc(p, d));
    }
    next(p);
    if (is_punct(peek(p), ',')) next(p);
    else if (!is_punct(peek(p), ']')) return ERR(p, peek(p), "expected ',' or ']' in shape, got %s", desc(p, peek(p)));
  }
  next(p);
  int id = graph_input(p->g, name->text, t, &s, name->line, name->col, p->d);
  if (id < 0) return -1;
  bind(p, name->text, id);
  return 0;
}

static int parse_return(Parser *p, Token *kw) {
  if (p->returned) return ERR(p, kw, "only one 'return' statement is allowed");
  p->returned = 1;
  Token *t = peek(p);
  if (t->kind == TK_NEWLINE || t->kind == TK_EOF) return ERR(p, t, "expected an expression after 'return'");
  for (;;) {
    Value v;
    if (parse_expr(p, &v) || to_tensor(p, &v, "return value")) return -1;
    if (graph_add_output(p->g, v.node) < 0) return ERRV(p, &v, "too many outputs (at most 64)");
    if (!is_punct(peek(p), ',')) return 0;
    next(p);
  }
}

static int parse_statement(Parser *p) {
  Token *t = peek(p);
  if (is_ident(t, "return")) {
    next(p);
    return parse_return(p, t);
  }
  if (t->kind != TK_IDENT)
    return ERR(p, t, "expected a statement ('name: dtype[dims]', 'name = expr' or 'return ...'), got %s", desc(p, t));
  Token *t2 = peek2(p);
  if (!is_punct(t2, ':') && !is_punct(t2, '='))
    return ERR(p, t2, "expected ':' (input) or '=' (assignment) after '%s', got %s", t->text, desc(p, t2));
  if (is_reserved(t->text)) return ERR(p, t, "'%s' is a reserved word and cannot be a name", t->text);
  next(p);
  if (is_punct(t2, ':')) return parse_input(p, t);
  next(p); /* = */
  Value v;
  if (parse_expr(p, &v) || to_tensor(p, &v, "assigned value")) return -1;
  GNode *n = &p->g->nodes[v.node];
  /* `b = a` only binds another name to a's node; a fresh node takes the name it is assigned to. */
  if (!n->name && n->op != G_CONST) graph_set_name(p->g, v.node, t->text);
  bind(p, t->text, v.node);
  p->last_assigned = v.node;
  return 0;
}

Graph *parse_program(const char *src, Arena *arena, ExprPool *pool, Diag *d) {
  int ntok;
  Token *toks = lex(src, arena, &ntok, d);
  if (!toks) return NULL;
  Parser p = {toks, 0, graph_new(arena, pool), arena, d, NULL, 0, 0, 0, -1, 0};
  for (;;) {
    while (peek(&p)->kind == TK_NEWLINE) next(&p);
    if (peek(&p)->kind == TK_EOF) break;
    if (parse_statement(&p)) return NULL;
    Token *t = peek(&p);
    if (t->kind != TK_NEWLINE && t->kind != TK_EOF)
      return diag_error(d, t->line, t->col, "expected end of statement (newline or ';'), got %s", desc(&p, t)), NULL;
  }
  if (!p.returned) {
    if (p.last_assigned < 0) {
      Token *eof = peek(&p);
      diag_error(d, eof->line, eof->col, "program has no output (add an assignment or 'return')");
      return NULL;
    }
    graph_add_output(p.g, p.last_assigned);
  }
  return p.g;
}
