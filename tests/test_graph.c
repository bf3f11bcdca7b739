/* Graph builder API: inputs, constants, shape/dtype inference, attribute normalisation, errors, printing. */
#include "testutil.h"
#include <stdlib.h>
#include "graph/graph.h"

typedef struct Env {
  Arena *arena;
  ExprPool *p;
  Graph *g;
  Diag d;
} Env;

static int setup(void **state) {
  Env *e = calloc(1, sizeof *e);
  e->arena = arena_new();
  e->p = expr_pool_new(e->arena);
  e->g = graph_new(e->arena, e->p);
  *state = e;
  return 0;
}

static int teardown(void **state) {
  Env *e = *state;
  arena_free(e->arena);
  free(e);
  return 0;
}

static Shape shp(Env *e, int rank, const char *const *dims) {
  Shape s = {0};
  s.rank = rank;
  for (int i = 0; i < rank; i++) {
    char *end;
    long v = strtol(dims[i], &end, 10);
    s.dim[i] = *end ? graph_symbol(e->g, dims[i]) : ex_int(e->p, v);
  }
  return s;
}
#define SHAPE(e, ...)                                                                                                  \
  shp((e), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__})

static int input(Env *e, const char *name, DType t, Shape s) {
  int id = graph_input(e->g, name, t, &s, 0, 0, &e->d);
  if (id < 0) fail_msg("graph_input %s: %s", name, e->d.msg);
  return id;
}

static const char *shape_str(Env *e, int id) {
  StrBuf b = {0};
  sb_puts(&b, dtype_name(e->g->nodes[id].dtype));
  shape_print(&b, &e->g->nodes[id].shape);
  const char *r = arena_strdup(e->arena, sb_str(&b));
  sb_free(&b);
  return r;
}

static int op(Env *e, GOp o, int a, int b, const GAttr *at) {
  int in[2] = {a, b};
  int id = graph_op(e->g, o, in, b < 0 ? 1 : 2, at, 7, 3, &e->d);
  if (id < 0) fail_msg("graph_op %s: %s", gop_name(o), e->d.msg);
  return id;
}

/* Expects graph_op to fail with msg, at the position given, leaving the graph unchanged. */
static void op_fails(Env *e, GOp o, const int *in, int nin, const GAttr *at, const char *msg) {
  int n = e->g->n;
  Diag d = {0};
  assert_int_equal(graph_op(e->g, o, in, nin, at, 7, 3, &d), -1);
  assert_true(d.set);
  assert_int_equal(d.line, 7);
  assert_int_equal(d.col, 3);
  assert_contains(d.msg, msg);
  assert_int_equal(e->g->n, n);
}

static void test_inputs_and_symbols(void **state) {
  Env *e = *state;
  Expr *s1 = graph_symbol(e->g, "seq");
  assert_ptr_equal(graph_symbol(e->g, "seq"), s1);
  assert_int_equal(e->g->nsymbols, 1);
  int x = input(e, "x", DT_F16, SHAPE(e, "2", "seq"));
  assert_int_equal(x, 0);
  assert_int_equal(e->g->ninputs, 1);
  assert_int_equal(e->g->nodes[x].op, G_INPUT);
  assert_string_equal(shape_str(e, x), "f16[2,seq]");
  Diag d = {0};
  Shape s = SHAPE(e, "3");
  assert_int_equal(graph_input(e->g, "x", DT_F32, &s, 4, 5, &d), -1);
  assert_string_equal(d.msg, "duplicate input 'x'");
  assert_int_equal(d.line, 4);
  assert_int_equal(d.col, 5);
  Diag d2 = {0};
  s.dim[0] = ex_int(e->p, 0);
  assert_int_equal(graph_input(e->g, "y", DT_F32, &s, 1, 1, &d2), -1);
  assert_contains(d2.msg, "dimension 0 must be a positive integer");
  assert_int_equal(e->g->ninputs, 1);
  int c = graph_const(e->g, 3, 0, 0), f = graph_const(e->g, 0.25, 0, 0);
  assert_int_equal(e->g->nodes[c].dtype, DT_I64);
  assert_int_equal(e->g->nodes[f].dtype, DT_F32);
  assert_int_equal(e->g->nodes[f].shape.rank, 0);
  assert_true(e->g->nodes[f].attr.value == 0.25);
}

static void test_gop_names(void **state) {
  assert_string_equal(gop_name(G_RMS_NORM), "rms_norm");
  assert_string_equal(gop_name(G_ADD), "add");
  assert_string_equal(gop_name(G_SUM), "sum");
  assert_string_equal(gop_name(G_MAXIMUM), "maximum");
  assert_string_equal(gop_name(G_ATTENTION), "attention");
  for (int o = 0; o < G_OP_COUNT; o++) assert_string_not_equal(gop_name((GOp)o), "?");
  assert_string_equal(gop_name(G_OP_COUNT), "?");
}

/* The op table (ops.def) is consistent: every op has a name, its language parameters give at least
 * its required operands and at most its maximum, the required parameters come first, and the
 * defaults graph_op assumes come from it. */
static void test_op_table(void **state) {
  for (int o = 0; o < G_OP_COUNT; o++) {
    const GOpInfo *info = gop_info((GOp)o);
    assert_non_null(info);
    assert_non_null(info->name);
    assert_true(info->min_in <= info->max_in && info->max_in <= G_MAX_IN);
    assert_true(info->nparams <= GOP_MAX_PARAMS);
    int tensors = 0, optional_seen = 0;
    for (int i = 0; i < info->nparams; i++) {
      tensors += info->params[i].kind == GP_TENSOR;
      if (!gparam_required(info, i)) optional_seen = 1;
      else assert_false(optional_seen); /* required parameters are a prefix */
    }
    if (o != G_INPUT && o != G_CONST) {
      assert_true(tensors >= info->min_in && tensors <= info->max_in);
      assert_true(info->nparams > 0);
    }
  }
  assert_null(gop_info(G_OP_COUNT));
  GAttr a = gop_default_attr(G_RMS_NORM);
  assert_true(a.eps == 1e-6);
  assert_true(gop_default_attr(G_LAYER_NORM).eps == 1e-5);
  assert_true(gop_default_attr(G_ROPE).theta == 10000.0);
  assert_int_equal(gop_default_attr(G_SOFTMAX).axis, -1);
  assert_int_equal(gop_default_attr(G_CONCAT).axis, 0);
}

static void test_weak_literals(void **state) {
  Env *e = *state;
  int h = input(e, "h", DT_F16, SHAPE(e, "4"));
  int i = input(e, "i", DT_I32, SHAPE(e, "4"));
  int two = graph_const(e->g, 2, 0, 0), half = graph_const(e->g, 0.5, 0, 0);
  assert_string_equal(shape_str(e, op(e, G_ADD, h, two, NULL)), "f16[4]");
  assert_string_equal(shape_str(e, op(e, G_MUL, two, i, NULL)), "i32[4]");
  assert_string_equal(shape_str(e, op(e, G_MUL, i, half, NULL)), "f32[4]");
  assert_string_equal(shape_str(e, op(e, G_DIV, i, two, NULL)), "f32[4]");
  assert_string_equal(shape_str(e, op(e, G_ADD, h, i, NULL)), "f16[4]");
  assert_string_equal(shape_str(e, op(e, G_MAXIMUM, i, two, NULL)), "i32[4]");
  assert_string_equal(shape_str(e, op(e, G_EXP, i, -1, NULL)), "f32[4]");
  assert_string_equal(shape_str(e, op(e, G_RELU, i, -1, NULL)), "i32[4]");
  assert_string_equal(shape_str(e, op(e, G_ADD, two, half, NULL)), "f32[]");
}

static void test_arity_and_bad_inputs(void **state) {
  Env *e = *state;
  int x = input(e, "x", DT_F32, SHAPE(e, "2", "8"));
  int in[3] = {x, x, x};
  op_fails(e, G_ADD, in, 1, NULL, "add: expected 2 inputs, got 1");
  op_fails(e, G_LINEAR, in, 1, NULL, "linear: expected 2 to 3 inputs, got 1");
  op_fails(e, G_EXP, in, 3, NULL, "exp: expected 1 input, got 3");
  int bad[1] = {99};
  op_fails(e, G_EXP, bad, 1, NULL, "input 0 refers to no node");
  op_fails(e, G_CONST, in, 1, NULL, "graph_input/graph_const");
  op_fails(e, (GOp)1000, in, 1, NULL, "graph_input/graph_const");
}

static void test_null_attr_defaults(void **state) {
  Env *e = *state;
  int x = input(e, "x", DT_F32, SHAPE(e, "2", "8"));
  int w = input(e, "w", DT_F32, SHAPE(e, "8"));
  int r = op(e, G_RMS_NORM, x, w, NULL);
  assert_true(e->g->nodes[r].attr.eps == 1e-6);
  int s = op(e, G_SOFTMAX, x, -1, NULL);
  assert_int_equal(e->g->nodes[s].attr.axis, 1);
  int in[3] = {x, w, w};
  int l = graph_op(e->g, G_LAYER_NORM, in, 3, NULL, 0, 0, &e->d);
  assert_true(l > 0 && e->g->nodes[l].attr.eps == 1e-5);
  int t = op(e, G_SUM, x, -1, NULL); /* no axes: all of them */
  assert_int_equal(e->g->nodes[t].attr.naxes, 2);
  assert_string_equal(shape_str(e, t), "f32[]");
}

/* argmax: one axis, an i64 result; no axis or several is an error, not a silent choice */
static void test_argmax(void **state) {
  Env *e = *state;
  int x = input(e, "x", DT_BF16, SHAPE(e, "3", "seq", "5"));
  GAttr at = {0};
  at.naxes = 1;
  at.axes[0] = -1;
  assert_string_equal(shape_str(e, op(e, G_ARGMAX, x, -1, &at)), "i64[3,seq]");
  at.keepdim = 1;
  at.axes[0] = 1;
  assert_string_equal(shape_str(e, op(e, G_ARGMAX, x, -1, &at)), "i64[3,1,5]");
  int in[1] = {x};
  op_fails(e, G_ARGMAX, in, 1, NULL, "argmax: give exactly one axis (got 3)");
  GAttr two = {0};
  two.naxes = 2;
  two.axes[1] = 1;
  op_fails(e, G_ARGMAX, in, 1, &two, "argmax: give exactly one axis (got 2)");
}

static void test_reshape_symbolic(void **state) {
  Env *e = *state;
  int x = input(e, "x", DT_F32, SHAPE(e, "b", "seq", "4", "8"));
  GAttr at = {0};
  at.shape = SHAPE(e, "seq", "b", "-1");
  int r = op(e, G_RESHAPE, x, -1, &at); /* symbols in another order still prove equal counts */
  assert_string_equal(shape_str(e, r), "f32[seq,b,32]");
  assert_true(shape_equal(&e->g->nodes[r].attr.shape, &e->g->nodes[r].shape));
  at.shape = SHAPE(e, "-1", "16");
  int r2 = op(e, G_RESHAPE, r, -1, &at);
  assert_int_equal(e->g->nodes[r2].shape.rank, 2);
  assert_true(ex_is_int_const(e->g->nodes[r2].shape.dim[1], 16));
  assert_int_equal(e->g->nodes[r2].shape.dim[0]->op, X_MUL);
  at.shape = SHAPE(e, "b", "seq", "32");
  assert_string_equal(shape_str(e, op(e, G_RESHAPE, r2, -1, &at)), "f32[b,seq,32]");
  int in[1] = {x};
  at.shape = SHAPE(e, "b", "seq", "33");
  op_fails(e, G_RESHAPE, in, 1, &at, "element counts are not provably equal");
  at.shape = SHAPE(e, "seq", "-1");
  at.shape.dim[0] = ex_int(e->p, 3);
  op_fails(e, G_RESHAPE, in, 1, &at, "element counts are not provably equal");
}

static void test_slice_exprs(void **state) {
  Env *e = *state;
  int x = input(e, "x", DT_F32, SHAPE(e, "seq", "6"));
  Expr *seq = graph_symbol(e->g, "seq");
  GAttr at = {0};
  at.axis = -2;
  at.start = ex_int(e->p, 0);
  at.end = ex_bin(e->p, X_SUB, seq, ex_int(e->p, 1)); /* symbolic end as a builder would pass it */
  int s = op(e, G_SLICE, x, -1, &at);
  assert_int_equal(e->g->nodes[s].attr.axis, 0);
  assert_ptr_equal(e->g->nodes[s].shape.dim[0], at.end);
  assert_ptr_equal(e->g->nodes[s].attr.end, at.end);
  at.axis = 1;
  at.start = ex_int(e->p, -4);
  at.end = NULL;
  int t = op(e, G_SLICE, x, -1, &at);
  assert_true(ex_is_int_const(e->g->nodes[t].attr.start, 2));
  assert_true(ex_is_int_const(e->g->nodes[t].attr.end, 6));
  assert_string_equal(shape_str(e, t), "f32[seq,4]");
  int in[1] = {x};
  at.start = ex_int(e->p, 5);
  at.end = ex_int(e->p, 3);
  op_fails(e, G_SLICE, in, 1, &at, "slice: bounds (5, 3) out of range for axis 1 of [seq,6]");
  at.start = ex_int(e->p, 0);
  at.end = ex_int(e->p, 7);
  op_fails(e, G_SLICE, in, 1, &at, "need 0 <= start < end <= 6");
}

static void test_attention_and_permute(void **state) {
  Env *e = *state;
  int q = input(e, "q", DT_BF16, SHAPE(e, "1", "12", "s", "64"));
  int k = input(e, "k", DT_BF16, SHAPE(e, "1", "4", "t", "64"));
  int v = input(e, "v", DT_BF16, SHAPE(e, "1", "4", "t", "32"));
  int in[3] = {q, k, v};
  GAttr at = {0};
  at.causal = 5;
  int o = graph_op(e->g, G_ATTENTION, in, 3, &at, 0, 0, &e->d);
  assert_true(o > 0);
  assert_string_equal(shape_str(e, o), "bf16[1,12,s,32]");
  assert_int_equal(e->g->nodes[o].attr.causal, 1);
  int bad[3] = {q, v, k};
  op_fails(e, G_ATTENTION, bad, 3, NULL, "attention: head dims of q [1,12,s,64] and k [1,4,t,32] differ");
  GAttr pa = {0};
  pa.naxes = 4;
  int perm[4] = {0, -2, 1, 3};
  memcpy(pa.axes, perm, sizeof perm);
  int p = op(e, G_PERMUTE, q, -1, &pa);
  assert_string_equal(shape_str(e, p), "bf16[1,s,12,64]");
  assert_int_equal(e->g->nodes[p].attr.axes[1], 2);
}

static void test_print_unnamed_and_consts(void **state) {
  Env *e = *state;
  int x = input(e, "x", DT_F32, SHAPE(e, "2", "n"));
  int c = graph_const(e->g, 1.0, 0, 0);
  int h = graph_const(e->g, 0.5, 0, 0);
  int a = op(e, G_ADD, x, c, NULL);
  int m = op(e, G_MUL, a, h, NULL);
  graph_set_name(e->g, m, "y");
  GAttr ca = {0};
  ca.dtype = DT_F16;
  int t = op(e, G_CAST, m, -1, &ca);
  GAttr ra = {0};
  ra.naxes = 1;
  ra.axes[0] = -1;
  ra.keepdim = 1;
  int r = op(e, G_MAX, t, -1, &ra);
  assert_int_equal(graph_add_output(e->g, m), 0);
  assert_int_equal(graph_add_output(e->g, r), 1);
  StrBuf b = {0};
  graph_print(&b, e->g);
  assert_string_equal(sb_str(&b), "x: f32[2,n]\n"
                                  "t3 = add(x, 1) : f32[2,n]\n"
                                  "y = mul(t3, 0.5) : f32[2,n]\n"
                                  "t5 = cast(y, dtype=f16) : f16[2,n]\n"
                                  "t6 = max(t5, axis=1, keepdim=true) : f16[2,1]\n"
                                  "return y, t6\n");
  sb_free(&b);
  (void)t;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_inputs_and_symbols, setup, teardown),
      cmocka_unit_test(test_gop_names),
      cmocka_unit_test_setup_teardown(test_weak_literals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_arity_and_bad_inputs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_null_attr_defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(test_argmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reshape_symbolic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slice_exprs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_and_permute, setup, teardown),
      cmocka_unit_test_setup_teardown(test_print_unnamed_and_consts, setup, teardown),
      cmocka_unit_test(test_op_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
