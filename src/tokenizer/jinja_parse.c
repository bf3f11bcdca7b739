/* Jinja parser: tokens into statement and expression nodes, with Jinja2's precedence (conditional,
 * or, and, not, comparisons and in, + -, ~, * / // %, **, unary - +, then postfix . [] () and the
 * filter / test chain). */
#include <string.h>
#include "jinja.h"

typedef struct Parser {
  JCtx *c;
  JToken *t;
  int n, i;
  int loops; /* for-loop bodies around the statement being parsed: break / continue need one */
} Parser;

static JToken *cur(Parser *P) { return &P->t[P->i]; }
static JToken *next(Parser *P) {
  JToken *k = &P->t[P->i];
  if (P->i < P->n - 1) P->i++;
  return k;
}
static int is_op(Parser *P, const char *op) { return cur(P)->t == JT_OP && strcmp(cur(P)->s, op) == 0; }
static int is_name(Parser *P, const char *name) { return cur(P)->t == JT_NAME && strcmp(cur(P)->s, name) == 0; }

static _Noreturn void perr(Parser *P, const char *what) {
  JToken *k = cur(P);
  const char *got = k->t == JT_EOF                       ? "the end of the template"
                    : k->t == JT_BLOCK_END               ? "'%}'"
                    : k->t == JT_VAR_END                 ? "'}}'"
                    : k->t == JT_TEXT                    ? "template text"
                    : k->t == JT_STRING                  ? "a string"
                    : k->t == JT_INT || k->t == JT_FLOAT ? "a number"
                                                         : k->s;
  jfail(P->c, k->line, k->col, "syntax error: expected %s, got %s", what, got);
}

static void expect_op(Parser *P, const char *op) {
  if (!is_op(P, op)) {
    char what[16] = "'";
    strcat(strncat(what, op, 4), "'");
    perr(P, what);
  }
  next(P);
}

static const char *expect_name(Parser *P) {
  if (cur(P)->t != JT_NAME) perr(P, "a name");
  return next(P)->s;
}

static JNode *node(Parser *P, JKind k, const JToken *at) {
  JNode *e = jalloc(P->c, sizeof *e);
  e->k = k, e->line = at->line, e->col = at->col;
  return e;
}

static void add(Parser *P, JNodes *l, JNode *e) {
  if ((l->n & (l->n - 1)) == 0) { /* grow at powers of two */
    JNode **v = jalloc(P->c, sizeof *v * (size_t)(l->n ? 2 * l->n : 1));
    if (l->n) memcpy(v, l->v, sizeof *v * (size_t)l->n);
    l->v = v;
  }
  l->v[l->n++] = e;
}

static void add_name(Parser *P, JNode *e, const char *name) {
  const char **v = jalloc(P->c, sizeof *v * (size_t)(e->nnames + 1));
  if (e->nnames) memcpy(v, e->names, sizeof *v * (size_t)e->nnames);
  v[e->nnames++] = name;
  e->names = v;
}

static JNode *expr(Parser *P);
static JNode *unary(Parser *P, int with_filter);

/* (args): positional then name=value arguments into e->items / e->names + e->vals. */
static void call_args(Parser *P, JNode *e) {
  expect_op(P, "(");
  while (!is_op(P, ")")) {
    if (e->items.n + e->nnames) expect_op(P, ",");
    if (is_op(P, ")")) break;
    if (cur(P)->t == JT_NAME && P->t[P->i + 1].t == JT_OP && strcmp(P->t[P->i + 1].s, "=") == 0) {
      add_name(P, e, next(P)->s);
      next(P);
      add(P, &e->vals, expr(P));
    } else {
      if (e->nnames) perr(P, "a keyword argument (positional arguments come first)");
      add(P, &e->items, expr(P));
    }
  }
  next(P);
}

static JNode *literal(Parser *P, const JToken *at, JValue v) {
  JNode *e = node(P, JN_LIT, at);
  e->lit = v;
  return e;
}

static JNode *primary(Parser *P) {
  JToken *k = cur(P);
  jdepth_enter(P->c, k->line, k->col);
  JNode *e;
  if (k->t == JT_NAME) {
    next(P);
    if (!strcmp(k->s, "true") || !strcmp(k->s, "True")) e = literal(P, k, jv_bool(1));
    else if (!strcmp(k->s, "false") || !strcmp(k->s, "False")) e = literal(P, k, jv_bool(0));
    else if (!strcmp(k->s, "none") || !strcmp(k->s, "None")) e = literal(P, k, jv_none());
    else e = node(P, JN_NAME, k), e->name = k->s;
  } else if (k->t == JT_STRING) {
    next(P);
    JValue v = jv_cstr(k->s);
    v.n = k->n;
    while (cur(P)->t == JT_STRING) { /* adjacent literals concatenate */
      JToken *m = next(P);
      char *s = jalloc(P->c, v.n + m->n + 1);
      memcpy(s, v.u.s, v.n), memcpy(s + v.n, m->s, m->n);
      v.u.s = s, v.n += m->n;
    }
    e = literal(P, k, v);
  } else if (k->t == JT_INT) {
    next(P);
    e = literal(P, k, jv_int(k->i));
  } else if (k->t == JT_FLOAT) {
    next(P);
    e = literal(P, k, jv_float(k->f));
  } else if (is_op(P, "(")) {
    next(P);
    if (is_op(P, ")")) { /* () is the empty tuple */
      next(P);
      e = node(P, JN_LIST, k);
      e->negate = 1;
    } else {
      e = expr(P);
      if (is_op(P, ",")) {
        JNode *t = node(P, JN_LIST, k);
        t->negate = 1;
        add(P, &t->items, e);
        while (is_op(P, ",")) {
          next(P);
          if (is_op(P, ")")) break;
          add(P, &t->items, expr(P));
        }
        e = t;
      }
      expect_op(P, ")");
    }
  } else if (is_op(P, "[")) {
    next(P);
    e = node(P, JN_LIST, k);
    while (!is_op(P, "]")) {
      if (e->items.n) expect_op(P, ",");
      if (is_op(P, "]")) break;
      add(P, &e->items, expr(P));
    }
    next(P);
  } else if (is_op(P, "{")) {
    next(P);
    e = node(P, JN_DICT, k);
    while (!is_op(P, "}")) {
      if (e->items.n) expect_op(P, ",");
      if (is_op(P, "}")) break;
      add(P, &e->items, expr(P));
      expect_op(P, ":");
      add(P, &e->vals, expr(P));
    }
    next(P);
  } else {
    perr(P, "an expression");
  }
  P->c->depth--;
  return e;
}

static JNode *postfix(Parser *P, JNode *e) {
  for (;;) {
    JToken *k = cur(P);
    if (is_op(P, ".")) {
      next(P);
      JNode *a = node(P, JN_ATTR, k);
      a->a = e;
      if (cur(P)->t == JT_INT) { /* x.0 is x[0] */
        a->k = JN_ITEM;
        a->b = literal(P, cur(P), jv_int(next(P)->i));
      } else {
        a->name = expect_name(P);
      }
      e = a;
    } else if (is_op(P, "[")) {
      next(P);
      JNode *parts[3] = {NULL, NULL, NULL};
      int np = 0, slice = 0;
      for (;;) {
        if (!is_op(P, ":") && !is_op(P, "]")) parts[np] = expr(P);
        if (!is_op(P, ":")) break;
        slice = 1;
        next(P);
        if (++np == 3) perr(P, "']'");
      }
      expect_op(P, "]");
      JNode *s = node(P, slice ? JN_SLICE : JN_ITEM, k);
      s->a = e;
      if (slice) {
        for (int j = 0; j < 3; j++) add(P, &s->items, parts[j]);
      } else {
        if (!parts[0]) perr(P, "a subscript");
        s->b = parts[0];
      }
      e = s;
    } else if (is_op(P, "(")) {
      JNode *call = node(P, JN_CALL, k);
      call->a = e;
      call_args(P, call);
      e = call;
    } else {
      return e;
    }
  }
}

/* `| name(args)` and `is [not] name [arg]` after an operand. */
static JNode *filters(Parser *P, JNode *e) {
  for (;;) {
    JToken *k = cur(P);
    if (is_op(P, "|")) {
      next(P);
      JNode *f = node(P, JN_FILTER, k);
      f->a = e;
      f->name = expect_name(P);
      if (is_op(P, "(")) call_args(P, f);
      e = f;
    } else if (is_name(P, "is")) {
      next(P);
      JNode *t = node(P, JN_TEST, k);
      t->a = e;
      if (is_name(P, "not")) next(P), t->negate = 1;
      t->name = expect_name(P);
      JToken *a = cur(P);
      if (is_op(P, "(")) {
        call_args(P, t);
      } else if ((a->t == JT_NAME || a->t == JT_STRING || a->t == JT_INT || a->t == JT_FLOAT || is_op(P, "[") ||
                  is_op(P, "{")) &&
                 !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") && !is_name(P, "is")) {
        add(P, &t->items, postfix(P, primary(P)));
      }
      e = t;
    } else if (is_op(P, "(")) {
      JNode *call = node(P, JN_CALL, k);
      call->a = e;
      call_args(P, call);
      e = call;
    } else {
      return e;
    }
  }
}

static JNode *unary(Parser *P, int with_filter) {
  JToken *k = cur(P);
  JNode *e;
  if (is_op(P, "-") || is_op(P, "+")) {
    next(P);
    e = node(P, k->s[0] == '-' ? JN_NEG : JN_POS, k);
    jdepth_enter(P->c, k->line, k->col);
    e->a = unary(P, 0);
    P->c->depth--;
  } else {
    e = primary(P);
  }
  e = postfix(P, e);
  return with_filter ? filters(P, e) : e;
}

static JNode *binary(Parser *P, JToken *k, const char *op, JNode *a, JNode *b) {
  JNode *e = node(P, JN_BIN, k);
  e->name = op, e->a = a, e->b = b;
  return e;
}

static JNode *power(Parser *P) {
  JNode *e = unary(P, 1);
  while (is_op(P, "**")) {
    JToken *k = next(P);
    e = binary(P, k, "**", e, unary(P, 1));
  }
  return e;
}

static JNode *product(Parser *P) {
  JNode *e = power(P);
  while (is_op(P, "*") || is_op(P, "/") || is_op(P, "//") || is_op(P, "%")) {
    JToken *k = next(P);
    e = binary(P, k, k->s, e, power(P));
  }
  return e;
}

static JNode *concat(Parser *P) {
  JNode *e = product(P);
  while (is_op(P, "~")) {
    JToken *k = next(P);
    e = binary(P, k, "~", e, product(P));
  }
  return e;
}

static JNode *sum(Parser *P) {
  JNode *e = concat(P);
  while (is_op(P, "+") || is_op(P, "-")) {
    JToken *k = next(P);
    e = binary(P, k, k->s, e, concat(P));
  }
  return e;
}

static JNode *compare(Parser *P) {
  JToken *k = cur(P);
  JNode *e = sum(P), *chain = NULL;
  for (;;) {
    const char *op = NULL;
    if (is_op(P, "==") || is_op(P, "!=") || is_op(P, "<") || is_op(P, "<=") || is_op(P, ">") || is_op(P, ">="))
      op = next(P)->s;
    else if (is_name(P, "in")) next(P), op = "in";
    else if (is_name(P, "not") && P->t[P->i + 1].t == JT_NAME && !strcmp(P->t[P->i + 1].s, "in"))
      next(P), next(P), op = "not in";
    if (!op) break;
    if (!chain) {
      chain = node(P, JN_CMP, k);
      add(P, &chain->items, e);
    }
    const char **ops = jalloc(P->c, sizeof *ops * (size_t)chain->items.n);
    if (chain->items.n > 1) memcpy(ops, chain->ops, sizeof *ops * (size_t)(chain->items.n - 1));
    ops[chain->items.n - 1] = op;
    chain->ops = ops;
    add(P, &chain->items, sum(P));
  }
  return chain ? chain : e;
}

static JNode *not_expr(Parser *P) {
  if (is_name(P, "not")) {
    JToken *k = next(P);
    JNode *e = node(P, JN_NOT, k);
    jdepth_enter(P->c, k->line, k->col);
    e->a = not_expr(P);
    P->c->depth--;
    return e;
  }
  return compare(P);
}

static JNode *and_expr(Parser *P) {
  JNode *e = not_expr(P);
  while (is_name(P, "and")) {
    JToken *k = next(P);
    JNode *a = node(P, JN_AND, k);
    a->a = e, a->b = not_expr(P);
    e = a;
  }
  return e;
}

static JNode *or_expr(Parser *P) {
  JNode *e = and_expr(P);
  while (is_name(P, "or")) {
    JToken *k = next(P);
    JNode *o = node(P, JN_OR, k);
    o->a = e, o->b = and_expr(P);
    e = o;
  }
  return e;
}

static JNode *expr(Parser *P) {
  JToken *k = cur(P);
  jdepth_enter(P->c, k->line, k->col);
  JNode *e = or_expr(P);
  while (is_name(P, "if")) {
    JToken *at = next(P);
    JNode *c = node(P, JN_COND, at);
    c->a = e, c->b = or_expr(P);
    if (is_name(P, "else")) {
      next(P);
      c->c = expr(P);
    }
    e = c;
  }
  P->c->depth--;
  return e;
}

/* Statements. `end` lists the block names that close the body being parsed ("endif", "elif", ...). */
static JNodes body(Parser *P, const char *const *end, const char **which);

static void end_tag(Parser *P) {
  if (cur(P)->t != JT_BLOCK_END) perr(P, "'%}'");
  next(P);
}

/* A for / set target: a name, or names separated by commas (unpacking); set also takes ns.attr. */
static void targets(Parser *P, JNode *st) {
  do {
    if (st->nnames) next(P);
    add_name(P, st, expect_name(P));
  } while (is_op(P, ","));
}

/* After `if` (or `elif`): the condition, the body and what follows up to the endif. */
static JNode *if_rest(Parser *P, JToken *k) {
  static const char *const ends[] = {"elif", "else", "endif", NULL}, *const endif[] = {"endif", NULL};
  const char *which;
  JNode *s = node(P, JN_IF, k);
  s->a = expr(P);
  end_tag(P);
  s->body = body(P, ends, &which);
  if (!strcmp(which, "elif")) { /* the nested if ends at the same endif */
    add(P, &s->orelse, if_rest(P, &P->t[P->i - 1]));
    return s;
  }
  if (!strcmp(which, "else")) {
    end_tag(P);
    s->orelse = body(P, endif, &which);
  }
  end_tag(P);
  return s;
}

static JNode *statement(Parser *P) {
  JToken *k = cur(P);
  const char *kw = expect_name(P);
  const char *which;
  if (!strcmp(kw, "if")) return if_rest(P, k);
  if (!strcmp(kw, "for")) {
    static const char *const ends[] = {"else", "endfor", NULL};
    JNode *s = node(P, JN_FOR, k);
    targets(P, s);
    if (!is_name(P, "in")) perr(P, "'in'");
    next(P);
    JToken *it = cur(P);
    s->a = or_expr(P);
    if (is_op(P, ",")) { /* for x in a, b */
      JNode *t = node(P, JN_LIST, it);
      t->negate = 1;
      add(P, &t->items, s->a);
      while (is_op(P, ",")) next(P), add(P, &t->items, or_expr(P));
      s->a = t;
    }
    if (is_name(P, "if")) next(P), s->b = expr(P);
    if (is_name(P, "recursive")) perr(P, "a loop without 'recursive' (not supported)");
    end_tag(P);
    P->loops++;
    s->body = body(P, ends, &which);
    P->loops--;
    if (!strcmp(which, "else")) {
      static const char *const endfor[] = {"endfor", NULL};
      end_tag(P);
      s->orelse = body(P, endfor, &which);
    }
    end_tag(P);
    return s;
  }
  if (!strcmp(kw, "set")) {
    JNode *s = node(P, JN_SET, k);
    JToken *t = cur(P);
    if (t->t == JT_NAME && P->t[P->i + 1].t == JT_OP && !strcmp(P->t[P->i + 1].s, ".")) {
      s->a = node(P, JN_ATTR, t); /* set ns.attr = value */
      s->a->a = node(P, JN_NAME, t);
      s->a->a->name = next(P)->s;
      next(P);
      s->a->name = expect_name(P);
    } else {
      targets(P, s);
    }
    if (!is_op(P, "=")) {
      static const char *const endset[] = {"endset", NULL};
      if (s->a || s->nnames != 1) perr(P, "'='");
      end_tag(P);
      s->k = JN_SET_BLOCK;
      s->body = body(P, endset, &which);
      end_tag(P);
      return s;
    }
    next(P);
    JToken *v = cur(P);
    s->b = expr(P);
    if (is_op(P, ",")) { /* set a = 1, 2 */
      JNode *l = node(P, JN_LIST, v);
      l->negate = 1;
      add(P, &l->items, s->b);
      while (is_op(P, ",")) next(P), add(P, &l->items, expr(P));
      s->b = l;
    }
    end_tag(P);
    return s;
  }
  if (!strcmp(kw, "macro")) {
    static const char *const ends[] = {"endmacro", NULL};
    JNode *s = node(P, JN_MACRO, k);
    s->name = expect_name(P);
    expect_op(P, "(");
    while (!is_op(P, ")")) {
      if (s->nnames) expect_op(P, ",");
      add_name(P, s, expect_name(P));
      JNode *def = NULL;
      if (is_op(P, "=")) next(P), def = expr(P);
      add(P, &s->vals, def);
    }
    next(P);
    end_tag(P);
    int loops = P->loops; /* a macro's body is outside any loop */
    P->loops = 0;
    s->body = body(P, ends, &which);
    P->loops = loops;
    end_tag(P);
    return s;
  }
  if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
    if (!P->loops) jfail(P->c, k->line, k->col, "'%s' outside a for loop", kw);
    end_tag(P);
    return node(P, kw[0] == 'b' ? JN_BREAK : JN_CONTINUE, k);
  }
  if (!strcmp(kw, "generation")) { /* transformers' assistant-mask marker: renders its body */
    static const char *const ends[] = {"endgeneration", NULL};
    JNode *s = node(P, JN_BODY, k);
    end_tag(P);
    s->body = body(P, ends, &which);
    end_tag(P);
    return s;
  }
  P->i--;
  perr(P, "a statement (if, for, set, macro, break, continue)");
}

static JNodes body(Parser *P, const char *const *end, const char **which) {
  JNodes out = {NULL, 0};
  jdepth_enter(P->c, cur(P)->line, cur(P)->col);
  for (;;) {
    JToken *k = cur(P);
    if (k->t == JT_EOF) {
      if (!end) break;
      int last = 0;
      while (end[last + 1]) last++;
      char what[64] = "'{% ";
      strcat(strncat(what, end[last], 40), " %}'");
      perr(P, what);
    }
    if (k->t == JT_TEXT) {
      JNode *t = node(P, JN_TEXT, k);
      t->lit = jv_cstr(k->s);
      t->lit.n = k->n;
      add(P, &out, t);
      next(P);
    } else if (k->t == JT_VAR_BEGIN) {
      next(P);
      JNode *o = node(P, JN_OUTPUT, k);
      o->a = expr(P);
      if (cur(P)->t != JT_VAR_END) perr(P, "'}}'");
      next(P);
      add(P, &out, o);
    } else if (k->t == JT_BLOCK_BEGIN) {
      next(P);
      for (int j = 0; end && end[j]; j++) {
        if (is_name(P, end[j])) {
          *which = next(P)->s;
          P->c->depth--;
          return out;
        }
      }
      if ((cur(P)->t == JT_NAME && !strncmp(cur(P)->s, "end", 3)) || is_name(P, "elif") || is_name(P, "else"))
        perr(P, end ? "the end of the block" : "a statement");
      add(P, &out, statement(P));
    } else {
      perr(P, "template text or a tag");
    }
  }
  P->c->depth--;
  return out;
}

JNodes jinja_parse(JCtx *c, JToken *toks, int ntok) {
  Parser P = {c, toks, ntok, 0, 0};
  return body(&P, NULL, NULL);
}
