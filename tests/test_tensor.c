/* Tensor stage: builders, graph -> tensor lowering (structure, printed form, and values checked by a
 * small evaluator of the tensor program against naive float64 formulas), and the printer. */
#include "testutil.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "tensor/tensor.h"

/* ---- graphs built by filling the structs directly (independent of the graph builder) ---- */

static Graph *tg_new(Arena *a) {
  Graph *g = ARENA_NEW(a, Graph);
  g->arena = a;
  g->pool = expr_pool_new(a);
  g->cap = 64;
  g->nodes = ARENA_ARRAY(a, GNode, g->cap);
  return g;
}

static Shape tg_shape(Graph *g, int rank, const int64_t *dims) {
  Shape s = {rank};
  for (int i = 0; i < rank; i++) s.dim[i] = ex_int(g->pool, dims[i]);
  return s;
}
#define SH(g, ...) tg_shape((g), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static int tg_node(Graph *g, GOp op, DType t, Shape s) {
  GNode *n = &g->nodes[g->n];
  memset(n, 0, sizeof *n);
  n->id = g->n++;
  n->op = op;
  n->dtype = t;
  n->shape = s;
  return n->id;
}

static int tg_in(Graph *g, const char *name, DType t, Shape s) {
  int id = tg_node(g, G_INPUT, t, s);
  g->nodes[id].name = name;
  g->inputs[g->ninputs++] = id;
  return id;
}

static int tg_const(Graph *g, double v) {
  int id = tg_node(g, G_CONST, DT_F32, (Shape){0});
  g->nodes[id].attr.value = v;
  return id;
}

static int tg_op(Graph *g, GOp op, DType t, Shape s, const char *name, int nin, int i0, int i1, int i2) {
  int id = tg_node(g, op, t, s);
  GNode *n = &g->nodes[id];
  n->nin = nin;
  n->in[0] = i0;
  n->in[1] = i1;
  n->in[2] = i2;
  n->name = name;
  return id;
}

static GAttr *attr(Graph *g, int id) { return &g->nodes[id].attr; }
static void tg_out(Graph *g, int id) { g->outputs[g->noutputs++] = id; }

/* ---- a float64 evaluator of tensor programs with constant shapes ---- */

static int64_t numel(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i]->ival;
  return n;
}

static void unravel(const Shape *s, int64_t lin, int64_t *idx) {
  for (int d = s->rank - 1; d >= 0; d--) {
    idx[d] = lin % s->dim[d]->ival;
    lin /= s->dim[d]->ival;
  }
}

static int64_t ravel(const Shape *s, const int64_t *idx) {
  int64_t lin = 0;
  for (int d = 0; d < s->rank; d++) lin = lin * s->dim[d]->ival + idx[d];
  return lin;
}

static double ev(const Expr *e, const int64_t *vars, const double *args) {
  double a = e->n > 0 ? ev(e->a[0], vars, args) : 0, b = e->n > 1 ? ev(e->a[1], vars, args) : 0;
  int isint = !dtype_is_float(e->dtype);
  switch (e->op) {
  case X_CONST: return dtype_is_float(e->dtype) ? e->fval : (double)e->ival;
  case X_VAR: return (double)vars[e->ival];
  case X_ARG: return args[e->ival];
  case X_NEG: return -a;
  case X_NOT: return !a;
  case X_EXP: return exp(a);
  case X_LOG: return log(a);
  case X_SQRT: return sqrt(a);
  case X_RSQRT: return 1 / sqrt(a);
  case X_TANH: return tanh(a);
  case X_SIGMOID: return 1 / (1 + exp(-a));
  case X_ABS: return fabs(a);
  case X_ERF: return erf(a);
  case X_SIN: return sin(a);
  case X_COS: return cos(a);
  case X_CAST: return dtype_is_float(e->dtype) ? dtype_round(e->dtype, a) : dtype_round(e->dtype, trunc(a));
  case X_ADD: return a + b;
  case X_SUB: return a - b;
  case X_MUL: return a * b;
  case X_DIV: return isint ? trunc(a / b) : a / b;
  case X_MAX: return a > b ? a : b;
  case X_MIN: return a < b ? a : b;
  case X_POW: return pow(a, b);
  case X_IDIV: return (double)((int64_t)a / (int64_t)b);
  case X_MOD: return (double)((int64_t)a % (int64_t)b);
  case X_LT: return a < b;
  case X_LE: return a <= b;
  case X_EQ: return a == b;
  case X_NE: return a != b;
  case X_AND: return a && b;
  case X_OR: return a || b;
  case X_SELECT: return a ? b : ev(e->a[2], vars, args);
  default: fail_msg("unexpected expr op %s", ex_op_name(e->op)); return 0;
  }
}

/* Returns one malloc'd buffer per node (caller frees with free_bufs); inputs[i] feeds p->inputs[i]. */
static double **eval_tprog(const TProgram *p, double *const *inputs) {
  double **buf = calloc((size_t)p->n, sizeof *buf);
  for (int i = 0; i < p->n; i++) {
    const TNode *t = &p->nodes[i];
    int64_t n = numel(&t->shape), idx[LT_MAX_RANK], si[LT_MAX_RANK];
    double *o = buf[i] = calloc((size_t)(n ? n : 1), sizeof(double));
    if (t->kind == T_INPUT) {
      for (int j = 0; j < p->ninputs; j++)
        if (p->inputs[j] == i) memcpy(o, inputs[j], sizeof(double) * (size_t)n);
      continue;
    }
    if (t->kind == T_REDUCE || t->kind == T_CONTRACT) {
      const Shape *ss = &p->nodes[t->src[0]].shape;
      double init = t->kind == T_CONTRACT || t->rop == RED_ADD ? 0 : t->rop == RED_MAX ? -INFINITY : INFINITY;
      for (int64_t j = 0; j < n; j++) o[j] = init;
      for (int64_t j = 0; j < numel(ss); j++) {
        unravel(ss, j, idx);
        double v = buf[t->src[0]][j];
        if (t->kind == T_CONTRACT) v *= buf[t->src[1]][j];
        for (int d = 0; d < ss->rank; d++)
          if (t->axes & (1u << d)) idx[d] = 0;
        double *r = &o[ravel(&t->shape, idx)];
        *r = t->kind == T_CONTRACT || t->rop == RED_ADD ? *r + v : t->rop == RED_MAX ? fmax(*r, v) : fmin(*r, v);
      }
      continue;
    }
    for (int64_t j = 0; j < n; j++) {
      unravel(&t->shape, j, idx);
      if (t->kind == T_MAP) {
        double args[T_MAX_SRC];
        for (int s = 0; s < t->nsrc; s++) args[s] = buf[t->src[s]][j];
        o[j] = ev(t->fn, idx, args);
      } else if (t->kind == T_VIEW) {
        const Shape *ss = &p->nodes[t->src[0]].shape;
        if (t->valid && !ev(t->valid, idx, NULL)) continue;
        for (int d = 0; d < ss->rank; d++) {
          si[d] = (int64_t)ev(t->idx[d], idx, NULL);
          assert_true(si[d] >= 0 && si[d] < ss->dim[d]->ival);
        }
        o[j] = buf[t->src[0]][ravel(ss, si)];
      } else if (t->kind == T_GATHER) {
        const TNode *tb = &p->nodes[t->src[0]], *ids = &p->nodes[t->src[1]];
        int ri = ids->shape.rank;
        int64_t row = (int64_t)buf[ids->id][ravel(&ids->shape, idx)];
        si[0] = row;
        for (int d = 1; d < tb->shape.rank; d++) si[d] = idx[ri + d - 1];
        o[j] = buf[tb->id][ravel(&tb->shape, si)];
      }
    }
  }
  return buf;
}

static void free_bufs(const TProgram *p, double **buf) {
  for (int i = 0; i < p->n; i++) free(buf[i]);
  free(buf);
}

/* Deterministic pseudo-random test data in [-1, 1). */
static double *rnd(int64_t n, unsigned seed) {
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    v[i] = ((seed >> 8) & 0xffff) / 32768.0 - 1.0;
  }
  return v;
}

static void assert_close(const double *got, const double *want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("element %lld: got %.9g want %.9g", (long long)i, got[i], want[i]);
}

/* ---- fixtures ---- */

typedef struct Fx {
  Arena *a;
  Graph *g;
  TProgram *p;
  StrBuf sb;
  Diag d;
} Fx;

static int setup(void **state) {
  Fx *f = calloc(1, sizeof *f);
  f->a = arena_new();
  f->g = tg_new(f->a);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  Fx *f = *state;
  sb_free(&f->sb);
  arena_free(f->a);
  free(f);
  return 0;
}

static const char *lower(Fx *f) {
  f->p = tensor_from_graph(f->g, &f->d);
  if (!f->p) fail_msg("lowering failed: %s", f->d.msg);
  f->sb.len = 0;
  if (f->sb.data) f->sb.data[0] = 0;
  tensor_print(&f->sb, f->p);
  return sb_str(&f->sb);
}

static const TNode *out_node(Fx *f, int j) { return &f->p->nodes[f->p->outputs[j]]; }

static int count_kind(const TProgram *p, TKind k) {
  int c = 0;
  for (int i = 0; i < p->n; i++) c += p->nodes[i].kind == k;
  return c;
}

/* Every map's srcs have exactly the map's shape, and only the last node of an op is non-f32. */
static void check_invariants(const TProgram *p) {
  for (int i = 0; i < p->n; i++) {
    const TNode *t = &p->nodes[i];
    for (int s = 0; s < t->nsrc; s++) assert_true(t->src[s] < i);
    if (t->kind == T_MAP) {
      assert_int_equal(t->fn->dtype, t->dtype);
      for (int s = 0; s < t->nsrc; s++) assert_true(shape_equal(&p->nodes[t->src[s]].shape, &t->shape));
    }
    if (t->kind == T_CONTRACT) assert_true(shape_equal(&p->nodes[t->src[0]].shape, &p->nodes[t->src[1]].shape));
    if (t->kind != T_INPUT) assert_non_null(t->origin);
  }
}

/* ---- tests ---- */

static void test_rms_norm(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F32, SH(g, 1, 4, 8)), w = tg_in(g, "w", DT_F32, SH(g, 8));
  int y = tg_op(g, G_RMS_NORM, DT_F32, SH(g, 1, 4, 8), "y", 2, x, w, 0);
  attr(g, y)->eps = 1e-6;
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "x = input : f32[1,4,8]\n");
  assert_contains(s, "t2 = map(a0*a0, x) : f32[1,4,8]  # rms_norm\n");
  assert_contains(s, "t3 = reduce(add, t2, axes=[2]) : f32[1,4,1]  # rms_norm\n");
  assert_contains(s, "t4 = view(t3, [i0, i1, 0]) : f32[1,4,8]  # rms_norm\n");
  assert_contains(s, "t5 = view(w, [i2]) : f32[1,4,8]  # rms_norm\n");
  assert_contains(s, "y = map(a0*rsqrt(a1/8.0 + 9.99999997e-07)*a2, x, t4, t5) : f32[1,4,8]  # rms_norm\n");
  assert_contains(s, "return y\n");
  check_invariants(f->p);
  assert_string_equal(f->p->output_names[0], "y");

  double *xv = rnd(32, 1), *wv = rnd(8, 2), want[32];
  for (int r = 0; r < 4; r++) {
    double ss = 0;
    for (int j = 0; j < 8; j++) ss += xv[r * 8 + j] * xv[r * 8 + j];
    for (int j = 0; j < 8; j++) want[r * 8 + j] = xv[r * 8 + j] / sqrt(ss / 8 + 1e-6) * wv[j];
  }
  double *in[2] = {xv, wv}, **b = eval_tprog(f->p, in);
  assert_close(b[f->p->outputs[0]], want, 32, 1e-9);
  free_bufs(f->p, b);
  free(xv);
  free(wv);
}

static void test_softmax(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F32, SH(g, 3, 5));
  int y = tg_op(g, G_SOFTMAX, DT_F32, SH(g, 3, 5), NULL, 1, x, 0, 0);
  attr(g, y)->axis = 0; /* not the last axis, to check the general case */
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "t1 = reduce(max, x, axes=[0]) : f32[1,5]  # softmax\n");
  assert_contains(s, "t2 = view(t1, [0, i1]) : f32[3,5]  # softmax\n");
  assert_contains(s, "t3 = map(exp(a0 - a1), x, t2) : f32[3,5]  # softmax\n");
  assert_contains(s, "t4 = reduce(add, t3, axes=[0]) : f32[1,5]  # softmax\n");
  assert_contains(s, "t6 = map(a0/a1, t3, t5) : f32[3,5]  # softmax\n");
  assert_contains(s, "return t6\n");
  assert_string_equal(f->p->output_names[0], "out0");
  check_invariants(f->p);

  double *xv = rnd(15, 3), want[15];
  for (int c = 0; c < 5; c++) {
    double z = 0;
    for (int r = 0; r < 3; r++) z += exp(xv[r * 5 + c]);
    for (int r = 0; r < 3; r++) want[r * 5 + c] = exp(xv[r * 5 + c]) / z;
  }
  double **b = eval_tprog(f->p, &xv);
  assert_close(b[f->p->outputs[0]], want, 15, 1e-12);
  free_bufs(f->p, b);
  free(xv);
}

static void test_layer_norm(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F32, SH(g, 2, 6)), w = tg_in(g, "w", DT_F32, SH(g, 6)), bb = tg_in(g, "b", DT_F32, SH(g, 6));
  int y = tg_op(g, G_LAYER_NORM, DT_F32, SH(g, 2, 6), "y", 3, x, w, bb);
  attr(g, y)->eps = 1e-5;
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "t3 = reduce(add, x, axes=[1]) : f32[2,1]  # layer_norm\n");
  assert_contains(s, "t4 = map(a0/6.0, t3) : f32[2,1]  # layer_norm\n");
  assert_contains(s, "y = map(a0*rsqrt(a1 + 9.99999975e-06)*a2 + a3, t6, t10, t11, t12) : f32[2,6]  # layer_norm\n");
  assert_int_equal(count_kind(f->p, T_REDUCE), 2);
  check_invariants(f->p);

  double *xv = rnd(12, 4), *wv = rnd(6, 5), *bv = rnd(6, 6), want[12];
  for (int r = 0; r < 2; r++) {
    double m = 0, v = 0;
    for (int j = 0; j < 6; j++) m += xv[r * 6 + j] / 6;
    for (int j = 0; j < 6; j++) v += (xv[r * 6 + j] - m) * (xv[r * 6 + j] - m) / 6;
    for (int j = 0; j < 6; j++) want[r * 6 + j] = (xv[r * 6 + j] - m) / sqrt(v + 1e-5) * wv[j] + bv[j];
  }
  double *in[3] = {xv, wv, bv}, **b = eval_tprog(f->p, in);
  assert_close(b[f->p->outputs[0]], want, 12, 1e-9);
  free_bufs(f->p, b);
  free(xv);
  free(wv);
  free(bv);
}

/* naive batched matmul of a[ab?, m, k] @ b[k, n] with a's batch broadcast over nb batches */
static void test_matmul_batched_broadcast(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int a = tg_in(g, "a", DT_F32, SH(g, 2, 1, 3, 4)), b = tg_in(g, "b", DT_F32, SH(g, 5, 4, 6));
  int y = tg_op(g, G_MATMUL, DT_F32, SH(g, 2, 5, 3, 6), "y", 2, a, b, 0);
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "t2 = view(a, [i0, 0, i2, i4]) : f32[2,5,3,6,4]  # matmul\n");
  assert_contains(s, "t3 = view(b, [i1, i4, i3]) : f32[2,5,3,6,4]  # matmul\n");
  assert_contains(s, "t4 = contract(t2, t3, axes=[4]) : f32[2,5,3,6,1]  # matmul\n");
  assert_contains(s, "y = view(t4, [i0, i1, i2, i3, 0]) : f32[2,5,3,6]  # matmul\n");
  check_invariants(f->p);

  double *av = rnd(24, 7), *bv = rnd(120, 8), want[180];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 5; j++)
      for (int m = 0; m < 3; m++)
        for (int n = 0; n < 6; n++) {
          double acc = 0;
          for (int k = 0; k < 4; k++) acc += av[(i * 3 + m) * 4 + k] * bv[(j * 4 + k) * 6 + n];
          want[((i * 5 + j) * 3 + m) * 6 + n] = acc;
        }
  double *in[2] = {av, bv}, **r = eval_tprog(f->p, in);
  assert_close(r[f->p->outputs[0]], want, 180, 1e-12);
  free_bufs(f->p, r);
  free(av);
  free(bv);
}

static void test_matmul_vectors_and_bf16(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int v = tg_in(g, "v", DT_BF16, SH(g, 4)), m = tg_in(g, "m", DT_BF16, SH(g, 4, 3));
  int y = tg_op(g, G_MATMUL, DT_BF16, SH(g, 3), "y", 2, v, m, 0); /* [4] @ [4,3] -> [3] */
  int z =
      tg_op(g, G_MATMUL, DT_F32, SH(g, 3), "z", 2, tg_op(g, G_PERMUTE, DT_BF16, SH(g, 3, 4), NULL, 1, m, 0, 0), v, 0);
  attr(g, 3)->naxes = 2;
  attr(g, 3)->axes[0] = 1;
  attr(g, 3)->axes[1] = 0;
  tg_out(g, y);
  tg_out(g, z);
  const char *s = lower(f);
  assert_contains(s, "view(v, [i2]) : bf16[1,3,4]  # matmul\n");
  assert_contains(s, "view(m, [i2, i1]) : bf16[1,3,4]  # matmul\n");
  assert_contains(s, "contract(t2, t3, axes=[2]) : f32[1,3,1]  # matmul\n");
  assert_contains(s, "view(t4, [0, i0, 0]) : f32[3]  # matmul\n");
  assert_contains(s, "y = map(bf16(a0), t5) : bf16[3]  # matmul\n");
  assert_contains(s, "view(v, [i2]) : bf16[3,1,4]  # matmul\n"); /* [3,4] @ [4] -> [3] */
  const TNode *yn = out_node(f, 0), *zn = out_node(f, 1);
  assert_int_equal(yn->kind, T_MAP);
  assert_int_equal(yn->dtype, DT_BF16);
  assert_int_equal(zn->kind, T_VIEW); /* f32 result: no cast */
  assert_int_equal(zn->dtype, DT_F32);
  check_invariants(f->p);

  double vv[4] = {1, 2, -1, 0.5}, mv[12], want[3], wantz[3];
  for (int i = 0; i < 12; i++) mv[i] = (i % 5) - 2;
  for (int n = 0; n < 3; n++) {
    want[n] = 0;
    for (int k = 0; k < 4; k++) want[n] += vv[k] * mv[k * 3 + n];
    wantz[n] = want[n];
  }
  double *in[2] = {vv, mv}, **r = eval_tprog(f->p, in);
  assert_close(r[f->p->outputs[0]], want, 3, 1e-12);
  assert_close(r[f->p->outputs[1]], wantz, 3, 1e-12);
  free_bufs(f->p, r);
}

static void test_linear_bias(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F16, SH(g, 2, 3, 4)), w = tg_in(g, "w", DT_F16, SH(g, 5, 4)),
      bb = tg_in(g, "b", DT_F16, SH(g, 5));
  int y = tg_op(g, G_LINEAR, DT_F16, SH(g, 2, 3, 5), "y", 3, x, w, bb);
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "t3 = view(x, [i0, i1, i3]) : f16[2,3,5,4]  # linear\n");
  assert_contains(s, "t4 = view(w, [i2, i3]) : f16[2,3,5,4]  # linear\n");
  assert_contains(s, "t5 = contract(t3, t4, axes=[3]) : f32[2,3,5,1]  # linear\n");
  assert_contains(s, "t6 = view(t5, [i0, i1, i2, 0]) : f32[2,3,5]  # linear\n");
  assert_contains(s, "t7 = view(b, [i2]) : f16[2,3,5]  # linear\n");
  assert_contains(s, "y = map(f16(a0 + f32(a1)), t6, t7) : f16[2,3,5]  # linear\n");
  assert_int_equal(f->p->n, 9);
  check_invariants(f->p);

  double xv[24], wv[20], bv[5], want[30];
  for (int i = 0; i < 24; i++) xv[i] = (i % 7) * 0.25 - 0.75;
  for (int i = 0; i < 20; i++) wv[i] = (i % 3) * 0.5 - 0.5;
  for (int i = 0; i < 5; i++) bv[i] = i * 0.125;
  for (int r = 0; r < 6; r++)
    for (int o = 0; o < 5; o++) {
      double acc = bv[o];
      for (int k = 0; k < 4; k++) acc += xv[r * 4 + k] * wv[o * 4 + k];
      want[r * 5 + o] = dtype_round(DT_F16, acc);
    }
  double *in[3] = {xv, wv, bv}, **r = eval_tprog(f->p, in);
  assert_close(r[f->p->outputs[0]], want, 30, 0);
  free_bufs(f->p, r);
}

static void test_attention_gqa_causal(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  enum { B = 1, H = 4, KH = 2, S = 3, T = 5, D = 4 };
  int q = tg_in(g, "q", DT_F32, SH(g, B, H, S, D)), k = tg_in(g, "k", DT_F32, SH(g, B, KH, T, D)),
      v = tg_in(g, "v", DT_F32, SH(g, B, KH, T, D));
  int y = tg_op(g, G_ATTENTION, DT_F32, SH(g, B, H, S, D), "o", 3, q, k, v);
  attr(g, y)->causal = 1;
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "t3 = view(q, [i0, i1, i2, i4]) : f32[1,4,3,5,4]  # attention\n");
  assert_contains(s, "t4 = view(k, [i0, i1 // 2, i3, i4]) : f32[1,4,3,5,4]  # attention\n");
  assert_contains(s, "t5 = contract(t3, t4, axes=[4]) : f32[1,4,3,5,1]  # attention\n");
  assert_contains(s, "map(i2 + 2 < i3 ? -inf : a0*0.5, t6) : f32[1,4,3,5]  # attention\n");
  assert_contains(s, "view(v, [i0, i1 // 2, i4, i3]) : f32[1,4,3,4,5]  # attention\n");
  assert_contains(s, "return o\n");
  assert_int_equal(count_kind(f->p, T_CONTRACT), 2);
  assert_int_equal(count_kind(f->p, T_REDUCE), 2);
  check_invariants(f->p);

  double *qv = rnd(B * H * S * D, 11), *kv = rnd(B * KH * T * D, 12), *vv = rnd(B * KH * T * D, 13);
  double want[B * H * S * D];
  for (int h = 0; h < H; h++)
    for (int i = 0; i < S; i++) {
      double sc[T], m = -INFINITY, z = 0;
      int kh = h / (H / KH);
      for (int t = 0; t < T; t++) {
        double acc = 0;
        for (int d = 0; d < D; d++) acc += qv[(h * S + i) * D + d] * kv[(kh * T + t) * D + d];
        sc[t] = t > i + (T - S) ? -INFINITY : acc / sqrt(D);
        m = fmax(m, sc[t]);
      }
      for (int t = 0; t < T; t++) z += exp(sc[t] - m);
      for (int d = 0; d < D; d++) {
        double acc = 0;
        for (int t = 0; t < T; t++) acc += exp(sc[t] - m) / z * vv[(kh * T + t) * D + d];
        want[(h * S + i) * D + d] = acc;
      }
    }
  double *in[3] = {qv, kv, vv}, **r = eval_tprog(f->p, in);
  assert_close(r[f->p->outputs[0]], want, B * H * S * D, 1e-7);
  free_bufs(f->p, r);
  free(qv);
  free(kv);
  free(vv);
}

static void test_rope(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F32, SH(g, 2, 3, 6)), pos = tg_in(g, "pos", DT_I32, SH(g, 3));
  int y = tg_op(g, G_ROPE, DT_F32, SH(g, 2, 3, 6), "y", 2, x, pos, 0);
  attr(g, y)->theta = 10000;
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "t2 = view(x, [i0, i1, (i2 + 3) % 6]) : f32[2,3,6]  # rope\n");
  assert_contains(s, "t3 = view(pos, [i1]) : i32[2,3,6]  # rope\n");
  assert_contains(s, "y = map(");
  assert_int_equal(out_node(f, 0)->nsrc, 3);
  check_invariants(f->p);

  double *xv = rnd(36, 21), pv[3] = {0, 5, 17}, want[36];
  for (int h = 0; h < 2; h++)
    for (int t = 0; t < 3; t++)
      for (int j = 0; j < 6; j++) {
        double ang = pv[t] * pow(10000.0, -2.0 * (j % 3) / 6), *row = &xv[(h * 3 + t) * 6];
        double rot = j < 3 ? -row[j + 3] : row[j - 3];
        want[(h * 3 + t) * 6 + j] = row[j] * cos(ang) + rot * sin(ang);
      }
  double *in[2] = {xv, pv}, **r = eval_tprog(f->p, in);
  assert_close(r[f->p->outputs[0]], want, 36, 1e-6); /* theta rounded to f32 inside the fn */
  free_bufs(f->p, r);
  free(xv);
}

static void test_embedding(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int ids = tg_in(g, "ids", DT_I32, SH(g, 2, 3)), tab = tg_in(g, "tab", DT_F32, SH(g, 10, 4));
  int y = tg_op(g, G_EMBEDDING, DT_F32, SH(g, 2, 3, 4), "e", 2, ids, tab, 0);
  tg_out(g, y);
  const char *s = lower(f);
  assert_contains(s, "e = gather(tab, ids) : f32[2,3,4]  # embedding\n");
  assert_int_equal(f->p->n, 3);
  double iv[6] = {3, 0, 9, 9, 1, 2}, *tv = rnd(40, 31), want[24];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) want[i * 4 + j] = tv[(int)iv[i] * 4 + j];
  double *in[2] = {iv, tv}, **r = eval_tprog(f->p, in);
  assert_close(r[f->p->outputs[0]], want, 24, 0);
  free_bufs(f->p, r);
  free(tv);
}

static void test_reshape(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F32, SH(g, 2, 3, 4));
  int a = tg_op(g, G_RESHAPE, DT_F32, SH(g, 2, 12), "a", 1, x, 0, 0);
  int b = tg_op(g, G_RESHAPE, DT_F32, SH(g, 6, 2, 2), "b", 1, x, 0, 0);
  int c = tg_op(g, G_RESHAPE, DT_F32, SH(g, 2, 3, 4), "c", 1, a, 0, 0);
  int d = tg_op(g, G_RESHAPE, DT_F32, SH(g, 2, 3, 4), "d", 1, x, 0, 0); /* identity: no node */
  tg_out(g, a);
  tg_out(g, b);
  tg_out(g, c);
  tg_out(g, d);
  const char *s = lower(f);
  assert_contains(s, "a = view(x, [i0, i1 // 4, i1 % 4]) : f32[2,12]  # reshape\n");
  assert_contains(s, "b = view(x, [i0 // 3, i0 % 3, i1*2 + i2]) : f32[6,2,2]  # reshape\n");
  assert_contains(s, "c = view(a, [i0, i1*4 + i2]) : f32[2,3,4]  # reshape\n");
  assert_int_equal(f->p->n, 4);
  assert_int_equal(f->p->outputs[3], f->p->inputs[0]); /* an output that is an input stays listed */
  assert_string_equal(f->p->output_names[3], "d");
  assert_contains(s, "return a, b, c, x\n");
  double *xv = rnd(24, 41), **r = eval_tprog(f->p, &xv);
  for (int j = 0; j < 4; j++) assert_close(r[f->p->outputs[j]], xv, 24, 0); /* row-major data unchanged */
  free_bufs(f->p, r);
  free(xv);
}

static void test_permute_slice_concat(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F32, SH(g, 2, 3, 4)), y = tg_in(g, "y", DT_F32, SH(g, 2, 2, 4));
  int p = tg_op(g, G_PERMUTE, DT_F32, SH(g, 4, 2, 3), "p", 1, x, 0, 0);
  attr(g, p)->naxes = 3;
  attr(g, p)->axes[0] = 2;
  attr(g, p)->axes[1] = 0;
  attr(g, p)->axes[2] = 1;
  int sl = tg_op(g, G_SLICE, DT_F32, SH(g, 2, 2, 4), "s", 1, x, 0, 0);
  attr(g, sl)->axis = 1;
  attr(g, sl)->start = ex_int(g->pool, 1);
  attr(g, sl)->end = ex_int(g->pool, 3);
  int c = tg_op(g, G_CONCAT, DT_F32, SH(g, 2, 5, 4), "c", 2, x, y, 0);
  attr(g, c)->axis = 1;
  tg_out(g, p);
  tg_out(g, sl);
  tg_out(g, c);
  const char *s = lower(f);
  assert_contains(s, "p = view(x, [i1, i2, i0]) : f32[4,2,3]  # permute\n");
  assert_contains(s, "s = view(x, [i0, i1 + 1, i2]) : f32[2,2,4]  # slice\n");
  assert_contains(s, "t4 = view(x, [i0, i1, i2] if i1 < 3) : f32[2,5,4]  # concat\n");
  assert_contains(s, "t5 = view(y, [i0, i1 + -3, i2] if 3 <= i1) : f32[2,5,4]  # concat\n");
  assert_contains(s, "c = map(a0 + a1, t4, t5) : f32[2,5,4]  # concat\n");
  check_invariants(f->p);

  double *xv = rnd(24, 51), *yv = rnd(16, 52), wp[24], ws[16], wc[40];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++) wp[(k * 2 + i) * 3 + j] = xv[(i * 3 + j) * 4 + k];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 4; k++) ws[(i * 2 + j) * 4 + k] = xv[(i * 3 + j + 1) * 4 + k];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 5; j++)
      for (int k = 0; k < 4; k++)
        wc[(i * 5 + j) * 4 + k] = j < 3 ? xv[(i * 3 + j) * 4 + k] : yv[(i * 2 + j - 3) * 4 + k];
  double *in[2] = {xv, yv}, **r = eval_tprog(f->p, in);
  assert_close(r[f->p->outputs[0]], wp, 24, 0);
  assert_close(r[f->p->outputs[1]], ws, 16, 0);
  assert_close(r[f->p->outputs[2]], wc, 40, 0);
  free_bufs(f->p, r);
  free(xv);
  free(yv);
}

static void test_mean_keepdim(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F32, SH(g, 2, 3, 4));
  int m1 = tg_op(g, G_MEAN, DT_F32, SH(g, 2, 1, 1), "m1", 1, x, 0, 0);
  attr(g, m1)->naxes = 2;
  attr(g, m1)->axes[0] = 1;
  attr(g, m1)->axes[1] = 2;
  attr(g, m1)->keepdim = 1;
  int m2 = tg_op(g, G_MEAN, DT_F32, SH(g, 3), "m2", 1, x, 0, 0);
  attr(g, m2)->naxes = 2;
  attr(g, m2)->axes[0] = 0;
  attr(g, m2)->axes[1] = 2;
  tg_out(g, m1);
  tg_out(g, m2);
  const char *s = lower(f);
  assert_contains(s, "t1 = reduce(add, x, axes=[1,2]) : f32[2,1,1]  # mean\n");
  assert_contains(s, "m1 = map(a0/12.0, t1) : f32[2,1,1]  # mean\n");
  assert_contains(s, "t3 = reduce(add, x, axes=[0,2]) : f32[1,3,1]  # mean\n");
  assert_contains(s, "t4 = map(a0/8.0, t3) : f32[1,3,1]  # mean\n");
  assert_contains(s, "m2 = view(t4, [0, i0, 0]) : f32[3]  # mean\n");
  double *xv = rnd(24, 61), w1[2] = {0}, w2[3] = {0};
  for (int i = 0; i < 24; i++) {
    w1[i / 12] += xv[i] / 12;
    w2[(i / 4) % 3] += xv[i] / 8;
  }
  double **r = eval_tprog(f->p, &xv);
  assert_close(r[f->p->outputs[0]], w1, 2, 1e-12);
  assert_close(r[f->p->outputs[1]], w2, 3, 1e-12);
  free_bufs(f->p, r);
  free(xv);
}

/* f16 / bf16 programs: intermediates are f32; only each op's last node is in the graph's dtype. */
static void test_half_cast_placement(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int x = tg_in(g, "x", DT_F16, SH(g, 2, 8)), w = tg_in(g, "w", DT_F16, SH(g, 8));
  int n = tg_op(g, G_RMS_NORM, DT_F16, SH(g, 2, 8), "n", 2, x, w, 0);
  attr(g, n)->eps = 1e-5;
  int sm = tg_op(g, G_SUM, DT_F16, SH(g, 2), "s", 1, n, 0, 0);
  attr(g, sm)->naxes = 1;
  attr(g, sm)->axes[0] = 1;
  int c = tg_op(g, G_CAST, DT_BF16, SH(g, 2), "c", 1, sm, 0, 0);
  attr(g, c)->dtype = DT_BF16;
  int e = tg_op(g, G_MUL, DT_BF16, SH(g, 2), "e", 2, c, tg_const(g, 3.0), 0);
  tg_out(g, e);
  const char *s = lower(f);
  assert_contains(s, "t2 = map(f32(a0)*f32(a0), x) : f32[2,8]  # rms_norm\n");
  assert_contains(s,
                  "n = map(f16(f32(a0)*rsqrt(a1/8.0 + 9.99999975e-06)*f32(a2)), x, t4, t5) : f16[2,8]  # rms_norm\n");
  assert_contains(s, "t7 = reduce(add, n, axes=[1]) : f32[2,1]  # sum\n");
  assert_contains(s, "t8 = view(t7, [i0, 0]) : f32[2]  # sum\n");
  assert_contains(s, "s = map(f16(a0), t8) : f16[2]  # sum\n");
  assert_contains(s, "c = map(bf16(a0), s) : bf16[2]  # cast\n");
  assert_contains(s, "e = map(bf16(f32(a0)*3.0), c) : bf16[2]  # mul\n"); /* constant folded, not a node */
  check_invariants(f->p);
  for (int i = 0; i < f->p->n; i++) {
    const TNode *t = &f->p->nodes[i];
    if (t->kind == T_REDUCE || t->kind == T_CONTRACT) assert_int_equal(t->dtype, DT_F32);
    if (t->kind == T_MAP && t->dtype != DT_F32) assert_int_equal(t->fn->op, X_CAST);
  }
}

static void test_elementwise_broadcast(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  int a = tg_in(g, "a", DT_F32, SH(g, 2, 3)), b = tg_in(g, "b", DT_F32, SH(g, 3)),
      c = tg_in(g, "c", DT_F32, SH(g, 2, 1)), k = tg_in(g, "k", DT_I32, SH(g, 2, 3));
  int s = tg_op(g, G_ADD, DT_F32, SH(g, 2, 3), "s", 2, a, b, 0);
  int m = tg_op(g, G_MAXIMUM, DT_F32, SH(g, 2, 3), "m", 2, s, c, 0);
  int u = tg_op(g, G_SILU, DT_F32, SH(g, 2, 3), "u", 1, m, 0, 0);
  int d = tg_op(g, G_DIV, DT_F32, SH(g, 2, 3), "d", 2, k, tg_const(g, 2), 0);
  int r = tg_op(g, G_RELU, DT_F32, SH(g, 2, 3), "r", 1, u, 0, 0);
  int gl = tg_op(g, G_GELU, DT_F32, SH(g, 2, 3), "gl", 1, r, 0, 0);
  tg_out(g, tg_op(g, G_MUL, DT_F32, SH(g, 2, 3), "sq", 2, a, a, 0));
  tg_out(g, d);
  tg_out(g, gl);
  const char *str = lower(f);
  assert_contains(str, "t4 = view(b, [i1]) : f32[2,3]  # add\n");
  assert_contains(str, "s = map(a0 + a1, a, t4) : f32[2,3]  # add\n");
  assert_contains(str, "t6 = view(c, [i0, 0]) : f32[2,3]  # maximum\n");
  assert_contains(str, "m = map(max(a0, a1), s, t6) : f32[2,3]  # maximum\n");
  assert_contains(str, "u = map(a0*sigmoid(a0), m) : f32[2,3]  # silu\n");
  assert_contains(str, "d = map(f32(a0)/2.0, k) : f32[2,3]  # div\n");
  assert_contains(str, "r = map(max(a0, 0.0), u) : f32[2,3]  # relu\n");
  assert_contains(str, "sq = map(a0*a0, a) : f32[2,3]  # mul\n");
  check_invariants(f->p);
  double av[6] = {-2, -1, 0, 1, 2, 3}, bv[3] = {0.5, -0.5, 1}, cv[2] = {0, 1}, kv[6] = {1, 2, 3, 4, 5, 7}, wd[6], wg[6];
  for (int i = 0; i < 6; i++) {
    double v = fmax(av[i] + bv[i % 3], cv[i / 3]);
    v = v / (1 + exp(-v));
    v = fmax(v, 0);
    wg[i] = 0.5 * v * (1 + erf(v / sqrt(2)));
    wd[i] = kv[i] / 2;
  }
  double *in[4] = {av, bv, cv, kv}, **rb = eval_tprog(f->p, in);
  assert_close(rb[f->p->outputs[1]], wd, 6, 0);
  assert_close(rb[f->p->outputs[2]], wg, 6, 1e-7);
  free_bufs(f->p, rb);
}

static void test_symbols_and_symbolic_dims(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  Expr *seq = ex_sym(g->pool, "seq");
  g->symbols[g->nsymbols++] = "seq";
  Shape xs = {2, {seq, ex_int(g->pool, 8)}};
  int x = tg_in(g, "x", DT_F32, xs);
  int y = tg_op(g, G_SOFTMAX, DT_F32, xs, "y", 1, x, 0, 0);
  attr(g, y)->axis = 1;
  Shape ms = {1, {seq}};
  int m = tg_op(g, G_MEAN, DT_F32, ms, "m", 1, x, 0, 0);
  attr(g, m)->naxes = 1;
  attr(g, m)->axes[0] = 1;
  Shape cs = {1, {ex_int(g->pool, 8)}};
  int mc = tg_op(g, G_MEAN, DT_F32, cs, "mc", 1, x, 0, 0);
  attr(g, mc)->naxes = 1;
  attr(g, mc)->axes[0] = 0;
  tg_out(g, y);
  tg_out(g, m);
  tg_out(g, mc);
  const char *s = lower(f);
  assert_int_equal(f->p->nsymbols, 1);
  assert_string_equal(f->p->symbols[0], "seq");
  assert_contains(s, "x = input : f32[seq,8]\n");
  assert_contains(s, "y = map(a0/a1, t3, t5) : f32[seq,8]  # softmax\n");
  assert_contains(s, "t11 = map(a0/f32(seq), t10) : f32[1,8]  # mean\n");
}

static void test_symbolic_reshape_and_attention(void **state) {
  Fx *f = *state;
  Graph *g = f->g;
  ExprPool *x = g->pool;
  Expr *seq = ex_sym(x, "seq"), *ctx = ex_sym(x, "ctx"), *c8 = ex_int(x, 8);
  Shape xs = {2, {seq, c8}}, r1 = {3, {seq, ex_int(x, 2), ex_int(x, 4)}}, r2 = {1, {ex_mul(x, seq, c8)}};
  int in = tg_in(g, "x", DT_F32, xs);
  tg_out(g, tg_op(g, G_RESHAPE, DT_F32, r1, "a", 1, in, 0, 0));
  tg_out(g, tg_op(g, G_RESHAPE, DT_F32, r2, "b", 1, in, 0, 0));
  Shape qs = {4, {ex_int(x, 1), c8, seq, ex_int(x, 16)}}, ks = {4, {ex_int(x, 1), c8, ctx, ex_int(x, 16)}};
  int q = tg_in(g, "q", DT_F16, qs), k = tg_in(g, "k", DT_F16, ks), v = tg_in(g, "v", DT_F16, ks);
  int o = tg_op(g, G_ATTENTION, DT_F16, qs, "o", 3, q, k, v);
  attr(g, o)->causal = 1;
  tg_out(g, o);
  const char *s = lower(f);
  assert_contains(s, "a = view(x, [i0, i1*4 + i2]) : f32[seq,2,4]  # reshape\n");
  assert_contains(s, "b = view(x, [i0 // 8, i0 % 8]) : f32[seq*8]  # reshape\n");
  assert_contains(s, "view(k, [i0, i1, i3, i4]) : f16[1,8,seq,ctx,16]  # attention\n"); /* MHA: no // 1 */
  assert_contains(s, "map(i2 + (ctx - seq) < i3 ? -inf : a0*0.25, ");
  const TNode *on = out_node(f, 2);
  assert_int_equal(on->kind, T_MAP);
  assert_int_equal(on->dtype, DT_F16);
  check_invariants(f->p);
}

static void test_builders_and_errors(void **state) {
  Fx *f = *state;
  ExprPool *x = f->g->pool;
  TProgram *p = tprog_new(f->a, x);
  Shape s = {2, {ex_int(x, 3), ex_int(x, 4)}};
  int a = t_input(p, "a", DT_I32, &s);
  Expr *id[2] = {ex_var(x, 0), ex_var(x, 1)};
  assert_int_equal(t_view(p, a, &s, id, NULL), a);          /* identity view is the source */
  assert_int_equal(t_view(p, a, &s, id, ex_bool(x, 1)), a); /* so is an always-valid one */
  int r = t_reduce(p, RED_ADD, a, 2u);
  assert_int_equal(p->nodes[r].dtype, DT_I64); /* integer sums accumulate in i64 */
  assert_true(ex_is_int_const(p->nodes[r].shape.dim[1], 1));
  int mx = t_reduce(p, RED_MAX, a, 1u);
  assert_int_equal(p->nodes[mx].dtype, DT_I64);
  for (int i = 0; i < 100; i++) t_map(p, ex_arg(x, 0, DT_I32), DT_I32, &s, &a, 1); /* growth */
  assert_int_equal(p->n, 103);
  assert_int_equal(p->nodes[102].src[0], a);

  Graph *g = f->g;
  int in = tg_in(g, "x", DT_F32, SH(g, 2));
  int bad = tg_op(g, G_OP_COUNT, DT_F32, SH(g, 2), NULL, 1, in, 0, 0);
  g->nodes[bad].line = 7;
  g->nodes[bad].col = 3;
  Diag d = {0};
  assert_null(tensor_from_graph(g, &d));
  assert_true(d.set);
  assert_int_equal(d.line, 7);
  assert_contains(d.msg, "not supported");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_rms_norm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_layer_norm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matmul_batched_broadcast, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matmul_vectors_and_bf16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_linear_bias, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_gqa_causal, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rope, setup, teardown),
      cmocka_unit_test_setup_teardown(test_embedding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reshape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_permute_slice_concat, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mean_keepdim, setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_cast_placement, setup, teardown),
      cmocka_unit_test_setup_teardown(test_elementwise_broadcast, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symbols_and_symbolic_dims, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symbolic_reshape_and_attention, setup, teardown),
      cmocka_unit_test_setup_teardown(test_builders_and_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
