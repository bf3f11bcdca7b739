/* Tests of the float64 reference interpreter against hand-computed values.
 * Graphs are built by hand (not with graph.c) so these tests pin the oracle independently. */
#include "testutil.h"
#include <math.h>
#include <stdlib.h>
#include "ref/ref.h"

#define MAXN 64

typedef struct Fixture {
  Arena *arena;
  Graph *g;
  SymEnv env;
  Diag d;
  RefTensor in[16];
  RefTensor out[16];
} Fixture;

static int setup(void **state) {
  Fixture *f = calloc(1, sizeof *f);
  f->arena = arena_new();
  f->g = ARENA_NEW(f->arena, Graph);
  f->g->arena = f->arena;
  f->g->pool = expr_pool_new(f->arena);
  f->g->cap = MAXN;
  f->g->nodes = ARENA_ARRAY(f->arena, GNode, MAXN);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  Fixture *f = *state;
  for (int j = 0; j < 16; j++) ref_tensor_free(&f->out[j]);
  arena_free(f->arena);
  free(f);
  return 0;
}

static Shape shape_of(Graph *g, int rank, const int64_t *d) {
  Shape s = {rank, {0}};
  for (int i = 0; i < rank; i++) s.dim[i] = ex_int(g->pool, d[i]);
  return s;
}
#define SH(g, ...) shape_of((g), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define AT(...) (&(GAttr){__VA_ARGS__})
#define SHAPE(...) ((Shape){__VA_ARGS__})
#define SCALAR (SHAPE(0, {0}))

static int add_node(Graph *g, GOp op, DType t, Shape s, int nin, const int *in, const GAttr *attr) {
  assert_true(g->n < g->cap);
  GNode *n = &g->nodes[g->n];
  n->id = g->n;
  n->op = op;
  n->dtype = t;
  n->shape = s;
  n->nin = nin;
  for (int i = 0; i < nin; i++) n->in[i] = in[i];
  if (attr) n->attr = *attr;
  n->line = 1;
  n->col = 1 + g->n;
  return g->n++;
}
#define OP(g, op, t, s, attr, ...)                                                                                     \
  add_node((g), (op), (t), (s), (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__}, (attr))

/* Adds input node `name` and binds the fixture's input slot to the given data (not copied by us). */
static int add_input(Fixture *f, const char *name, DType t, Shape s, const double *data) {
  int id = add_node(f->g, G_INPUT, t, s, 0, NULL, NULL);
  f->g->nodes[id].name = name;
  RefTensor *r = &f->in[f->g->ninputs];
  r->rank = s.rank;
  r->numel = 1;
  for (int i = 0; i < s.rank; i++) {
    int64_t v = 0;
    if (!ex_eval_int(s.dim[i], &f->env, &v)) v = 1;
    r->dims[i] = v;
    r->numel *= v;
  }
  r->data = (double *)data;
  f->g->inputs[f->g->ninputs++] = id;
  return id;
}

static void output(Fixture *f, int node) { f->g->outputs[f->g->noutputs++] = node; }

static void run_ok(Fixture *f) {
  int ok = ref_eval(f->g, &f->env, f->in, f->out, &f->d);
  if (!ok) fail_msg("ref_eval failed: %s", f->d.msg);
}

static void expect(const RefTensor *t, int64_t n, const double *want, double tol) {
  assert_int_equal(t->numel, n);
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(t->data[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("element %lld: got %.9g, want %.9g", (long long)i, t->data[i], want[i]);
}
#define EXPECT(t, tol, ...)                                                                                            \
  expect((t), (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__}, (tol))

static void expect_dims(const RefTensor *t, int rank, const int64_t *d) {
  assert_int_equal(t->rank, rank);
  for (int i = 0; i < rank; i++) assert_int_equal(t->dims[i], d[i]);
}
#define EXPECT_DIMS(t, ...)                                                                                            \
  expect_dims((t), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static const double F32 = 1e-6; /* results of f32 nodes are rounded to f32 */

static void test_unary(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double xs[] = {-1, 0, 2};
  int x = add_input(f, "x", DT_F32, SH(g, 3), xs);
  GOp ops[] = {G_NEG, G_EXP, G_SIGMOID, G_SILU, G_GELU, G_RELU, G_ABS, G_TANH};
  for (int i = 0; i < 8; i++) output(f, OP(g, ops[i], DT_F32, SH(g, 3), NULL, x));
  static const double ys[] = {4};
  int y = add_input(f, "y", DT_F32, SH(g, 1), ys);
  output(f, OP(g, G_RSQRT, DT_F32, SH(g, 1), NULL, y));
  output(f, OP(g, G_LOG, DT_F32, SH(g, 1), NULL, y));
  run_ok(f);
  double s1 = 1 / (1 + exp(1.0)), s2 = 1 / (1 + exp(-2.0));
  EXPECT(&f->out[0], 0, 1, 0, -2);
  EXPECT(&f->out[1], F32, exp(-1.0), 1, exp(2.0));
  EXPECT(&f->out[2], F32, s1, 0.5, s2);
  EXPECT(&f->out[3], F32, -s1, 0, 2 * s2);
  EXPECT(&f->out[4], F32, -0.15865525393145707, 0, 1.9544997361036416); /* torch gelu, exact erf */
  EXPECT(&f->out[5], 0, 0, 0, 2);
  EXPECT(&f->out[6], 0, 1, 0, 2);
  EXPECT(&f->out[7], F32, tanh(-1.0), 0, tanh(2.0));
  EXPECT(&f->out[8], 0, 0.5);
  EXPECT(&f->out[9], F32, log(4.0));
}

static void test_f16_results_are_rounded(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double xs[] = {1, 0.1};
  int x = add_input(f, "x", DT_F16, SH(g, 2), xs);
  output(f, x);
  output(f, OP(g, G_EXP, DT_F16, SH(g, 2), NULL, x));
  run_ok(f);
  EXPECT(&f->out[0], 0, 1, 0.0999755859375); /* the input itself is stored as f16 */
  EXPECT(&f->out[1], 0, 2.71875, 1.10546875);
}

static void test_binary_broadcast(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {10, 20, 30}, c[] = {1, 2}, h[] = {0.5};
  int A = add_input(f, "a", DT_F32, SH(g, 2, 3), a);
  int B = add_input(f, "b", DT_F32, SH(g, 3), b);
  int C = add_input(f, "c", DT_F32, SH(g, 2, 1), c);
  int H = add_input(f, "h", DT_F32, SCALAR, h);
  output(f, OP(g, G_ADD, DT_F32, SH(g, 2, 3), NULL, A, B));
  output(f, OP(g, G_MUL, DT_F32, SH(g, 2, 3), NULL, C, B)); /* [2,1] * [3] -> [2,3] */
  output(f, OP(g, G_SUB, DT_F32, SH(g, 2, 3), NULL, B, A));
  output(f, OP(g, G_DIV, DT_F32, SH(g, 2, 3), NULL, A, H));
  output(f, OP(g, G_POW, DT_F32, SH(g, 2, 1), NULL, C, H));
  output(f, OP(g, G_MAXIMUM, DT_F32, SH(g, 2, 3), NULL, A, C));
  output(f, OP(g, G_MINIMUM, DT_F32, SH(g, 2, 3), NULL, A, C));
  GAttr k = {.value = 3};
  int K = add_node(g, G_CONST, DT_F32, SCALAR, 0, NULL, &k);
  output(f, OP(g, G_MUL, DT_F32, SH(g, 2, 3), NULL, A, K));
  run_ok(f);
  EXPECT(&f->out[0], 0, 11, 22, 33, 14, 25, 36);
  EXPECT(&f->out[1], 0, 10, 20, 30, 20, 40, 60);
  EXPECT(&f->out[2], 0, 9, 18, 27, 6, 15, 24);
  EXPECT(&f->out[3], 0, 2, 4, 6, 8, 10, 12);
  EXPECT(&f->out[4], F32, 1, sqrt(2.0));
  EXPECT(&f->out[5], 0, 1, 2, 3, 4, 5, 6);
  EXPECT(&f->out[6], 0, 1, 1, 1, 2, 2, 2);
  EXPECT(&f->out[7], 0, 3, 6, 9, 12, 15, 18);
  EXPECT_DIMS(&f->out[1], 2, 3);
}

static void test_integer_arithmetic(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {7, 65536, -7}, b[] = {2, 65536, 2};
  int A = add_input(f, "a", DT_I32, SH(g, 3), a);
  int B = add_input(f, "b", DT_I32, SH(g, 3), b);
  output(f, OP(g, G_MUL, DT_I32, SH(g, 3), NULL, A, B)); /* 65536*65536 wraps to 0 in int32 */
  output(f, OP(g, G_DIV, DT_F32, SH(g, 3), NULL, A, B)); /* true division */
  output(f, OP(g, G_SUB, DT_I64, SH(g, 3), NULL, A, B));
  output(f, OP(g, G_ADD, DT_I32, SH(g, 3), NULL, A, B));
  run_ok(f);
  EXPECT(&f->out[0], 0, 14, 0, -14);
  EXPECT(&f->out[1], 0, 3.5, 1, -3.5);
  EXPECT(&f->out[2], 0, 5, 0, -9);
  EXPECT(&f->out[3], 0, 9, 131072, -5);
}

static void test_reductions(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3, 4, 5, 6};
  int A = add_input(f, "a", DT_F32, SH(g, 2, 3), a);
  GAttr ax1k = {.naxes = 1, .axes = {1}, .keepdim = 1}, ax0 = {.naxes = 1, .axes = {0}},
        all = {.naxes = 2, .axes = {0, 1}}, allk = {.naxes = 2, .axes = {0, 1}, .keepdim = 1};
  output(f, OP(g, G_SUM, DT_F32, SH(g, 2, 1), &ax1k, A));
  output(f, OP(g, G_MEAN, DT_F32, SH(g, 3), &ax0, A));
  output(f, OP(g, G_MAX, DT_F32, SCALAR, &all, A));
  output(f, OP(g, G_MIN, DT_F32, SH(g, 1, 1), &allk, A));
  output(f, OP(g, G_MAX, DT_F32, SH(g, 2, 1), &ax1k, A));
  run_ok(f);
  EXPECT(&f->out[0], 0, 6, 15);
  EXPECT_DIMS(&f->out[0], 2, 1);
  EXPECT(&f->out[1], 0, 2.5, 3.5, 4.5);
  EXPECT(&f->out[2], 0, 6);
  assert_int_equal(f->out[2].rank, 0);
  EXPECT(&f->out[3], 0, 1);
  EXPECT_DIMS(&f->out[3], 1, 1);
  EXPECT(&f->out[4], 0, 3, 6);
}

static void test_reduction_shape_mismatch(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3, 4, 5, 6};
  int A = add_input(f, "a", DT_F32, SH(g, 2, 3), a);
  GAttr ax1 = {.naxes = 1, .axes = {1}};
  output(f, OP(g, G_SUM, DT_F32, SH(g, 3), &ax1, A)); /* should be [2] */
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_contains(f->d.msg, "sum: reducing [2,3] gives [2], node says [3]");
}

static void test_softmax(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3}, b[] = {0, 1, 0, 3};
  int A = add_input(f, "a", DT_F32, SH(g, 3), a);
  int B = add_input(f, "b", DT_F32, SH(g, 2, 2), b);
  GAttr ax0 = {.axis = 0};
  output(f, OP(g, G_SOFTMAX, DT_F32, SH(g, 3), &ax0, A));
  output(f, OP(g, G_SOFTMAX, DT_F32, SH(g, 2, 2), &ax0, B)); /* columns */
  run_ok(f);
  EXPECT(&f->out[0], F32, 0.09003057317038046, 0.24472847105479767, 0.6652409557748219);
  double s = 1 / (1 + exp(2.0));
  EXPECT(&f->out[1], F32, 0.5, s, 0.5, 1 - s);
}

static void test_softmax_large_values_are_stable(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1000, 1000};
  int A = add_input(f, "a", DT_F32, SH(g, 2), a);
  output(f, OP(g, G_SOFTMAX, DT_F32, SH(g, 2), AT(.axis = 0), A));
  run_ok(f);
  EXPECT(&f->out[0], 0, 0.5, 0.5);
}

static void test_rms_norm(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double x[] = {1, 2, 3, 4, 2, 2, 2, 2}, w[] = {1, 1, 2, 2};
  int X = add_input(f, "x", DT_F32, SH(g, 2, 4), x);
  int W = add_input(f, "w", DT_F32, SH(g, 4), w);
  output(f, OP(g, G_RMS_NORM, DT_F32, SH(g, 2, 4), AT(.eps = 0), X, W));
  output(f, OP(g, G_RMS_NORM, DT_F32, SH(g, 2, 4), AT(.eps = 5), X, W));
  run_ok(f);
  double r = sqrt(7.5); /* mean of 1,4,9,16 */
  EXPECT(&f->out[0], F32, 1 / r, 2 / r, 6 / r, 8 / r, 1, 1, 2, 2);
  EXPECT(&f->out[1], F32, 1 / sqrt(12.5), 2 / sqrt(12.5), 6 / sqrt(12.5), 8 / sqrt(12.5), 2 / 3.0, 2 / 3.0, 4 / 3.0,
         4 / 3.0);
}

static void test_layer_norm(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double x[] = {1, 2, 3, 4}, w[] = {1, 1, 1, 2}, b[] = {0, 0, 0, 1};
  int X = add_input(f, "x", DT_F32, SH(g, 1, 4), x);
  int W = add_input(f, "w", DT_F32, SH(g, 4), w);
  int B = add_input(f, "b", DT_F32, SH(g, 4), b);
  output(f, OP(g, G_LAYER_NORM, DT_F32, SH(g, 1, 4), AT(.eps = 0.75), X, W, B));
  run_ok(f);
  /* mean 2.5, biased variance 1.25, + eps = 2 */
  double s = sqrt(2.0);
  EXPECT(&f->out[0], F32, -1.5 / s, -0.5 / s, 0.5 / s, 2 * 1.5 / s + 1);
}

static void test_matmul(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12}, v[] = {1, 0, -1};
  int A = add_input(f, "a", DT_F32, SH(g, 2, 3), a);
  int B = add_input(f, "b", DT_F32, SH(g, 3, 2), b);
  int V = add_input(f, "v", DT_F32, SH(g, 3), v);
  output(f, OP(g, G_MATMUL, DT_F32, SH(g, 2, 2), NULL, A, B));
  output(f, OP(g, G_MATMUL, DT_F32, SH(g, 2), NULL, V, B)); /* [3] @ [3,2] -> [2] */
  output(f, OP(g, G_MATMUL, DT_F32, SH(g, 2), NULL, A, V)); /* [2,3] @ [3] -> [2] */
  output(f, OP(g, G_MATMUL, DT_F32, SCALAR, NULL, V, V));   /* dot */
  run_ok(f);
  EXPECT(&f->out[0], 0, 58, 64, 139, 154);
  EXPECT(&f->out[1], 0, -4, -4);
  EXPECT(&f->out[2], 0, -2, -2);
  EXPECT(&f->out[3], 0, 2);
}

static void test_matmul_batch_broadcast(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  /* a [2,1,1,2] @ b [3,2,1] -> [2,3,1,1]: out[i,j] = a[i] . b[j] */
  static const double a[] = {1, 2, 3, 4}, b[] = {1, 0, 0, 1, 1, 1};
  int A = add_input(f, "a", DT_F32, SH(g, 2, 1, 1, 2), a);
  int B = add_input(f, "b", DT_F32, SH(g, 3, 2, 1), b);
  output(f, OP(g, G_MATMUL, DT_F32, SH(g, 2, 3, 1, 1), NULL, A, B));
  run_ok(f);
  EXPECT(&f->out[0], 0, 1, 2, 3, 3, 4, 7);
  EXPECT_DIMS(&f->out[0], 2, 3, 1, 1);
}

static void test_linear(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double x[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 0, 0, 1, 1, 1}, b[] = {10, 100};
  int X = add_input(f, "x", DT_F32, SH(g, 1, 2, 3), x);
  int W = add_input(f, "w", DT_F32, SH(g, 2, 3), w);
  int B = add_input(f, "b", DT_F32, SH(g, 2), b);
  output(f, OP(g, G_LINEAR, DT_F32, SH(g, 1, 2, 2), NULL, X, W, B));
  output(f, OP(g, G_LINEAR, DT_F32, SH(g, 1, 2, 2), NULL, X, W));
  run_ok(f);
  EXPECT(&f->out[0], 0, 11, 106, 14, 115);
  EXPECT(&f->out[1], 0, 1, 6, 4, 15);
}

static void test_embedding(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double ids[] = {2, 0, 1, 2}, table[] = {0, 1, 10, 11, 20, 21};
  int I = add_input(f, "ids", DT_I64, SH(g, 2, 2), ids);
  int T = add_input(f, "table", DT_F32, SH(g, 3, 2), table);
  output(f, OP(g, G_EMBEDDING, DT_F32, SH(g, 2, 2, 2), NULL, I, T));
  run_ok(f);
  EXPECT(&f->out[0], 0, 20, 21, 0, 1, 10, 11, 20, 21);
}

static void test_embedding_id_out_of_range(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double ids[] = {5, 70000};
  double *table = calloc(32000, sizeof(double));
  int I = add_input(f, "ids", DT_I64, SH(g, 2), ids);
  int T = add_input(f, "table", DT_F32, SH(g, 32000, 1), table);
  output(f, OP(g, G_EMBEDDING, DT_F32, SH(g, 2, 1), NULL, I, T));
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  free(table);
  assert_string_equal(f->d.msg, "embedding: id 70000 out of range [0, 32000)");
  assert_int_equal(f->d.line, 1);
  assert_int_equal(f->d.col, 3); /* node 2 */
  assert_null(f->out[0].data);
}

static void test_rope(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  /* S=2, D=4, theta=10000: inv_freq = {1, 0.01, 1, 0.01}; position 0 is the identity. */
  static const double x[] = {5, 6, 7, 8, 1, 2, 3, 4}, pos[] = {0, 1};
  int X = add_input(f, "x", DT_F32, SH(g, 1, 2, 4), x);
  int P = add_input(f, "pos", DT_I64, SH(g, 2), pos);
  output(f, OP(g, G_ROPE, DT_F32, SH(g, 1, 2, 4), AT(.theta = 10000), X, P));
  run_ok(f);
  double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
  EXPECT(&f->out[0], F32, 5, 6, 7, 8, 1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2);
}

static void test_rope_negative_position(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double x[] = {1, 2}, pos[] = {-3};
  int X = add_input(f, "x", DT_F32, SH(g, 1, 2), x);
  int P = add_input(f, "pos", DT_I64, SH(g, 1), pos);
  output(f, OP(g, G_ROPE, DT_F32, SH(g, 1, 2), AT(.theta = 10000), X, P));
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_contains(f->d.msg, "rope: position -3");
}

static double wavg(int n, const double *score, const double *val) {
  double num = 0, den = 0;
  for (int i = 0; i < n; i++) {
    num += exp(score[i]) * val[i];
    den += exp(score[i]);
  }
  return num / den;
}

static void test_attention_causal_gqa(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  /* B=1, H=4, KH=2 (heads 0,1 -> kv 0; heads 2,3 -> kv 1), S=2, T=3, D=1. Query s sees t <= s+1. */
  static const double q[] = {1, 1, 0, 2, 1, 1, 0, 2}, k[] = {0, 1, 2, 0, 2, 4}, v[] = {1, 2, 3, 10, 20, 30};
  int Q = add_input(f, "q", DT_F32, SH(g, 1, 4, 2, 1), q);
  int K = add_input(f, "k", DT_F32, SH(g, 1, 2, 3, 1), k);
  int V = add_input(f, "v", DT_F32, SH(g, 1, 2, 3, 1), v);
  output(f, OP(g, G_ATTENTION, DT_F32, SH(g, 1, 4, 2, 1), AT(.causal = 1), Q, K, V));
  output(f, OP(g, G_ATTENTION, DT_F32, SH(g, 1, 4, 2, 1), AT(.causal = 0), Q, K, V));
  run_ok(f);
  const double *v0 = v, *v1 = v + 3;
  double want[8] = {
      wavg(2, (double[]){0, 1}, v0),    wavg(3, (double[]){0, 1, 2}, v0), wavg(2, (double[]){0, 0}, v0),
      wavg(3, (double[]){0, 2, 4}, v0), wavg(2, (double[]){0, 2}, v1),    wavg(3, (double[]){0, 2, 4}, v1),
      wavg(2, (double[]){0, 0}, v1),    wavg(3, (double[]){0, 4, 8}, v1),
  };
  expect(&f->out[0], 8, want, F32);
  assert_true(fabs(f->out[0].data[2] - 1.5) < 1e-6);
  assert_true(fabs(f->out[0].data[6] - 15) < 1e-6);
  /* without the mask, row s=0 sees all three keys */
  assert_true(fabs(f->out[1].data[0] - wavg(3, (double[]){0, 1, 2}, v0)) < 1e-6);
  assert_true(fabs(f->out[1].data[2] - 2) < 1e-6);
}

static void test_attention_scale_and_dv(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  /* D=4 so scores are q.k / 2; DV=2 differs from D. */
  static const double q[] = {1, 1, 1, 1}, k[] = {0, 0, 0, 0, 1, 1, 1, 1}, v[] = {1, 2, 3, 4};
  int Q = add_input(f, "q", DT_F32, SH(g, 1, 1, 1, 4), q);
  int K = add_input(f, "k", DT_F32, SH(g, 1, 1, 2, 4), k);
  int V = add_input(f, "v", DT_F32, SH(g, 1, 1, 2, 2), v);
  output(f, OP(g, G_ATTENTION, DT_F32, SH(g, 1, 1, 1, 2), AT(.causal = 1), Q, K, V));
  run_ok(f);
  EXPECT(&f->out[0], F32, wavg(2, (double[]){0, 2}, (double[]){1, 3}), wavg(2, (double[]){0, 2}, (double[]){2, 4}));
}

static void test_attention_fully_masked_row_is_nan(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  /* S=3 > T=2: query 0 may see t <= 0 + (2-3) = -1, i.e. nothing. */
  static const double q[] = {1, 1, 1}, k[] = {1, 1}, v[] = {1, 2};
  int Q = add_input(f, "q", DT_F32, SH(g, 1, 1, 3, 1), q);
  int K = add_input(f, "k", DT_F32, SH(g, 1, 1, 2, 1), k);
  int V = add_input(f, "v", DT_F32, SH(g, 1, 1, 2, 1), v);
  output(f, OP(g, G_ATTENTION, DT_F32, SH(g, 1, 1, 3, 1), AT(.causal = 1), Q, K, V));
  run_ok(f);
  assert_true(isnan(f->out[0].data[0]));
  assert_true(fabs(f->out[0].data[1] - 1) < 1e-6);
  assert_true(fabs(f->out[0].data[2] - 1.5) < 1e-6);
}

static void test_views(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9};
  int A = add_input(f, "a", DT_F32, SH(g, 2, 3), a);
  int B = add_input(f, "b", DT_F32, SH(g, 1, 3), b);
  output(f, OP(g, G_RESHAPE, DT_F32, SH(g, 3, 2), NULL, A));
  output(f, OP(g, G_PERMUTE, DT_F32, SH(g, 3, 2), AT(.naxes = 2, .axes = {1, 0}), A));
  output(f,
         OP(g, G_SLICE, DT_F32, SH(g, 2, 2), AT(.axis = 1, .start = ex_int(g->pool, 1), .end = ex_int(g->pool, 3)), A));
  output(f, OP(g, G_CONCAT, DT_F32, SH(g, 3, 3), AT(.axis = 0), A, B));
  int P = OP(g, G_PERMUTE, DT_F32, SH(g, 3, 1), AT(.naxes = 2, .axes = {1, 0}), B);
  output(f, OP(g, G_CONCAT, DT_F32, SH(g, 3, 3), AT(.axis = 1), P,
               OP(g, G_PERMUTE, DT_F32, SH(g, 3, 2), AT(.naxes = 2, .axes = {1, 0}), A)));
  run_ok(f);
  EXPECT(&f->out[0], 0, 1, 2, 3, 4, 5, 6);
  EXPECT_DIMS(&f->out[0], 3, 2);
  EXPECT(&f->out[1], 0, 1, 4, 2, 5, 3, 6);
  EXPECT(&f->out[2], 0, 2, 3, 5, 6);
  EXPECT(&f->out[3], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
  EXPECT(&f->out[4], 0, 7, 1, 4, 8, 2, 5, 9, 3, 6);
}

static void test_permute_rank3(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; /* [2,3,2]: a[i,j,k] = 6i+2j+k */
  int A = add_input(f, "a", DT_F32, SH(g, 2, 3, 2), a);
  output(f, OP(g, G_PERMUTE, DT_F32, SH(g, 3, 2, 2), AT(.naxes = 3, .axes = {1, 2, 0}), A));
  run_ok(f);
  /* out[j,k,i] = 6i+2j+k */
  EXPECT(&f->out[0], 0, 0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11);
}

static void test_symbolic_dims_and_slice(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  symenv_set(&f->env, "seq", 3);
  symenv_set(&f->env, "p", 1);
  Expr *seq = ex_sym(g->pool, "seq"), *p = ex_sym(g->pool, "p");
  static const double a[] = {1, 2, 3, 4, 5, 6};
  int A = add_input(f, "a", DT_F32, SHAPE(2, {seq, ex_int(g->pool, 2)}), a);
  output(f, OP(g, G_SUM, DT_F32, SH(g, 2), AT(.naxes = 1, .axes = {0}), A));
  /* a[p : p + 2] along axis 0 */
  Expr *end = ex_add(g->pool, p, ex_int(g->pool, 2));
  output(f, OP(g, G_SLICE, DT_F32, SHAPE(2, {ex_int(g->pool, 2), ex_int(g->pool, 2)}),
               AT(.axis = 0, .start = p, .end = end), A));
  run_ok(f);
  EXPECT(&f->out[0], 0, 9, 12);
  EXPECT(&f->out[1], 0, 3, 4, 5, 6);
}

static void test_cast(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {-1.7, 2.9, 0.1, NAN, 0};
  int A = add_input(f, "a", DT_F32, SH(g, 5), a);
  output(f, OP(g, G_CAST, DT_I32, SH(g, 5), AT(.dtype = DT_I32), A));
  output(f, OP(g, G_CAST, DT_F16, SH(g, 5), AT(.dtype = DT_F16), A));
  output(f, OP(g, G_CAST, DT_BOOL, SH(g, 5), AT(.dtype = DT_BOOL), A));
  run_ok(f);
  EXPECT(&f->out[0], 0, -1, 2, 0, 0, 0); /* toward zero; NaN -> 0 */
  assert_true(f->out[1].data[2] == 0.0999755859375);
  assert_true(f->out[1].data[0] == -1.7001953125);
  EXPECT(&f->out[2], 0, 1, 1, 1, 1, 0);
}

static void test_unbound_symbol(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  Expr *seq = ex_sym(g->pool, "seq");
  static const double a[] = {1};
  int A = add_input(f, "x", DT_F32, SHAPE(2, {ex_int(g->pool, 1), ex_mul(g->pool, seq, ex_int(g->pool, 2))}), a);
  output(f, A);
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_string_equal(f->d.msg, "symbolic dimension 'seq' has no value");
  assert_int_equal(f->d.line, 1);
}

static void test_input_dims_mismatch(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3, 4};
  int A = add_input(f, "x", DT_F32, SH(g, 2, 2), a);
  f->in[0].dims[1] = 1;
  f->in[0].dims[0] = 4;
  output(f, A);
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_contains(f->d.msg, "input 'x': given dims [4,1] but the graph expects [2,2]");
}

static void test_bad_broadcast_and_reshape(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 2};
  int A = add_input(f, "a", DT_F32, SH(g, 2, 3), a);
  int B = add_input(f, "b", DT_F32, SH(g, 2), b);
  output(f, OP(g, G_ADD, DT_F32, SH(g, 2, 3), NULL, A, B));
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_contains(f->d.msg, "add: shapes [2,3] and [2] do not broadcast");

  memset(&f->d, 0, sizeof f->d);
  g->noutputs = 0;
  g->n = 2;
  output(f, OP(g, G_RESHAPE, DT_F32, SH(g, 4, 2), NULL, A));
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_contains(f->d.msg, "reshape: cannot reshape [2,3] (6 elements) into [4,2] (8 elements)");
}

/* Float -> integer casts saturate: NaN -> 0, out of range -> the end of the range (issue 14). */
static void test_cast_saturates(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double x[5] = {1e30, -1e30, NAN, -2.75, 3e9};
  int a = add_input(f, "x", DT_F32, SH(g, 5), x);
  output(f, OP(g, G_CAST, DT_I32, SH(g, 5), AT(.dtype = DT_I32), a));
  output(f, OP(g, G_CAST, DT_I64, SH(g, 5), AT(.dtype = DT_I64), a));
  run_ok(f);
  EXPECT(&f->out[0], 0, 2147483647.0, -2147483648.0, 0, -2, 2147483647.0);
  EXPECT(&f->out[1], 0, 9223372036854775807.0, -9223372036854775808.0, 0, -2, 3e9);
}

/* Integer results are exact 64-bit integers (ival), also beyond 2^53 where doubles are not. */
static void test_exact_integers(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  static const double x[2] = {1, -1};
  int a = add_input(f, "x", DT_I64, SH(g, 2), x);
  int c = add_node(g, G_CONST, DT_I64, SCALAR, 0, NULL, AT(.value = 9007199254740992.0, .ivalue = 9007199254740992LL));
  int s = OP(g, G_ADD, DT_I64, SH(g, 2), NULL, a, c);
  output(f, s);
  output(f,
         OP(g, G_SUM, DT_I64, SHAPE(0, {0}), AT(.naxes = 1, .axes = {0}), OP(g, G_ADD, DT_I64, SH(g, 2), NULL, s, s)));
  int m = add_node(g, G_CONST, DT_I64, SCALAR, 0, NULL, AT(.value = 9.2e18, .ivalue = INT64_MAX));
  output(f, OP(g, G_ADD, DT_I64, SH(g, 2), NULL, a, m)); /* wraps */
  run_ok(f);
  assert_non_null(f->out[0].ival);
  assert_int_equal(f->out[0].ival[0], 9007199254740993LL);
  assert_int_equal(f->out[0].ival[1], 9007199254740991LL);
  assert_int_equal(f->out[1].ival[0], 4 * 9007199254740992LL);
  assert_int_equal(f->out[2].ival[0], INT64_MIN);
  assert_int_equal(f->out[2].ival[1], INT64_MAX - 1);
}

/* argmax of no elements and attention without keys are errors, at the op's position. */
static void test_empty_argmax_and_attention(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  symenv_set(&f->env, "k", 0);
  Expr *k = ex_sym(g->pool, "k");
  int x = add_input(f, "x", DT_F32, SHAPE(2, {ex_int(g->pool, 3), k}), NULL);
  output(f, OP(g, G_ARGMAX, DT_I64, SH(g, 3), AT(.naxes = 1, .axes = {1}), x));
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_string_equal(f->d.msg, "argmax: axis 1 is empty (argmax of no elements is undefined)");
  assert_int_equal(f->d.col, 2);
}

static void test_attention_no_keys(void **state) {
  Fixture *f = *state;
  Graph *g = f->g;
  symenv_set(&f->env, "t", 0);
  Expr *t = ex_sym(g->pool, "t"), *one = ex_int(g->pool, 1), *two = ex_int(g->pool, 2);
  static const double qd[2] = {1, 2};
  int q = add_input(f, "q", DT_F32, SH(g, 1, 1, 1, 2), qd);
  int k = add_input(f, "k", DT_F32, SHAPE(4, {one, one, t, two}), NULL);
  int v = add_input(f, "v", DT_F32, SHAPE(4, {one, one, t, two}), NULL);
  output(f, OP(g, G_ATTENTION, DT_F32, SH(g, 1, 1, 1, 2), NULL, q, k, v));
  assert_false(ref_eval(g, &f->env, f->in, f->out, &f->d));
  assert_string_equal(f->d.msg, "attention: no keys (k and v have 0 positions)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unary, setup, teardown),
      cmocka_unit_test_setup_teardown(test_f16_results_are_rounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_binary_broadcast, setup, teardown),
      cmocka_unit_test_setup_teardown(test_integer_arithmetic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reductions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reduction_shape_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_softmax_large_values_are_stable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rms_norm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_layer_norm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matmul, setup, teardown),
      cmocka_unit_test_setup_teardown(test_matmul_batch_broadcast, setup, teardown),
      cmocka_unit_test_setup_teardown(test_linear, setup, teardown),
      cmocka_unit_test_setup_teardown(test_embedding, setup, teardown),
      cmocka_unit_test_setup_teardown(test_embedding_id_out_of_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rope, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rope_negative_position, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_causal_gqa, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_scale_and_dv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_fully_masked_row_is_nan, setup, teardown),
      cmocka_unit_test_setup_teardown(test_views, setup, teardown),
      cmocka_unit_test_setup_teardown(test_permute_rank3, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symbolic_dims_and_slice, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cast, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unbound_symbol, setup, teardown),
      cmocka_unit_test_setup_teardown(test_input_dims_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_broadcast_and_reshape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cast_saturates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exact_integers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_empty_argmax_and_attention, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_no_keys, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
