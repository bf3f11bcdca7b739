/* Frontend: parsing every op, result shapes/dtypes, printing, error messages with positions, fuzzing. */
#include "testutil.h"
#include <stdio.h>
#include <stdlib.h>
#include "frontend/frontend.h"

typedef struct Parsed {
  Arena *arena;
  ExprPool *pool;
  Graph *g;
  Diag d;
} Parsed;

static Parsed parse(const char *src) {
  Parsed r = {0};
  r.arena = arena_new();
  r.pool = expr_pool_new(r.arena);
  r.g = parse_program(src, r.arena, r.pool, &r.d);
  return r;
}

static void done(Parsed *r) { arena_free(r->arena); }

/* The node a name was assigned to (the last one with that name). */
static const GNode *node(const Graph *g, const char *name) {
  for (int i = g->n - 1; i >= 0; i--)
    if (g->nodes[i].name && !strcmp(g->nodes[i].name, name)) return &g->nodes[i];
  fail_msg("no node named %s", name);
  return NULL;
}

static char shape_buf[8][128];
static int shape_slot;
static const char *shape_of(const GNode *n) {
  StrBuf b = {0};
  shape_print(&b, &n->shape);
  char *s = shape_buf[shape_slot++ % 8];
  snprintf(s, 128, "%s:%s", dtype_name(n->dtype), sb_str(&b));
  sb_free(&b);
  return s;
}

/* Asserts that `name` has type "dtype:[dims]". */
#define CHECK(p, name, expect) assert_string_equal(shape_of(node((p).g, name)), expect)

static void must_parse(Parsed *p) {
  if (!p->g) fail_msg("parse failed at %d:%d: %s", p->d.line, p->d.col, p->d.msg);
}

static void test_rms_norm_print(void **state) {
  Parsed p = parse("x: f32[1,32,2048]\nw: f32[2048]\ny = rms_norm(x, w)\n");
  must_parse(&p);
  StrBuf b = {0};
  graph_print(&b, p.g);
  assert_string_equal(sb_str(&b), "x: f32[1,32,2048]\n"
                                  "w: f32[2048]\n"
                                  "y = rms_norm(x, w, eps=1e-06) : f32[1,32,2048]\n"
                                  "return y\n");
  sb_free(&b);
  done(&p);
}

static void test_print_roundtrip(void **state) {
  const char *src = "x: f16[2,seq,8]; i: i64[seq]\n"
                    "a = softmax(x, 1) * 2.0 + sum(x, axis=[0,2], keepdim=true)\n"
                    "b = rope(permute(x, [0,1,2]), i, theta=500000.0)\n"
                    "c = slice(reshape(x, [2, seq, 2, -1]), 3, 1, -1)\n"
                    "return cast(a, f32), b, c, transpose(x, 0, 2)\n";
  Parsed p = parse(src);
  must_parse(&p);
  StrBuf b1 = {0}, b2 = {0};
  graph_print(&b1, p.g);
  assert_contains(sb_str(&b1), "softmax(x, axis=1) : f16[2,seq,8]");
  assert_contains(sb_str(&b1), "mul(t");
  assert_contains(sb_str(&b1), ", 2.0) : f16");
  assert_contains(sb_str(&b1), "sum(x, axis=[0,2], keepdim=true) : f16[1,seq,1]");
  assert_contains(sb_str(&b1), "theta=500000");
  assert_contains(sb_str(&b1), "shape=[2,seq,2,4]");
  assert_contains(sb_str(&b1), "slice(t");
  assert_contains(sb_str(&b1), ", axis=3, start=1, end=3) : f16[2,seq,2,2]");
  assert_contains(sb_str(&b1), "cast(a, dtype=f32) : f32[2,seq,8]");
  assert_contains(sb_str(&b1), "perm=[2,1,0]");
  assert_contains(sb_str(&b1), "perm=[0,1,2]");
  /* The printed program (minus result types) parses back to the same printout. */
  char *text = strdup(sb_str(&b1));
  for (char *c = text; (c = strstr(c, " : ")) != NULL;) {
    char *e = strchr(c, '\n');
    memmove(c, e, strlen(e) + 1);
  }
  Parsed q = parse(text);
  must_parse(&q);
  graph_print(&b2, q.g);
  assert_string_equal(sb_str(&b1), sb_str(&b2));
  free(text);
  sb_free(&b1);
  sb_free(&b2);
  done(&q);
  done(&p);
}

static void test_separators_and_comments(void **state) {
  Parsed p = parse("# header comment\n"
                   "x: f32[4] ; y: f32[4]   # trailing comment\n"
                   "\n;;\n"
                   "z = x +\ny\n" /* a newline right after an operator ends the statement: error */);
  assert_null(p.g);
  assert_int_equal(p.d.line, 5);
  assert_int_equal(p.d.col, 8);
  assert_contains(p.d.msg, "expected an expression");
  done(&p);
  /* inside parentheses newlines are whitespace */
  p = parse("x: f32[4] ; y: f32[4]\nz = maximum(\n  x,\n  y)  # ok\n\n");
  must_parse(&p);
  CHECK(p, "z", "f32:[4]");
  assert_int_equal(p.g->noutputs, 1);
  assert_int_equal(p.g->outputs[0], node(p.g, "z")->id);
  done(&p);
}

static void test_elementwise_and_dtypes(void **state) {
  Parsed p = parse("x: f16[2,3]; i: i32[3]; l: i64[3]\n"
                   "a = exp(x); b = log(i); c = sqrt(x); d = rsqrt(x); e = tanh(x); f = sigmoid(x)\n"
                   "g = silu(x); h = gelu(x); r = relu(i); ab = abs(i); n = neg(x); m = -i\n"
                   "p1 = pow(x, 2); p2 = maximum(x, 0); p3 = minimum(i, l); p4 = x * 0.5; p5 = i * 2\n"
                   "p6 = i * 2.5; p7 = i / 2; p8 = x + i; p9 = 2 - x; q = (x + 1) * (x - 1) / 3\n"
                   "u = -(-.5) * x; v = i + l; w = 1e-6 + i\n");
  must_parse(&p);
  CHECK(p, "a", "f16:[2,3]");
  CHECK(p, "b", "f32:[3]");
  CHECK(p, "r", "i32:[3]");
  CHECK(p, "ab", "i32:[3]");
  CHECK(p, "n", "f16:[2,3]");
  CHECK(p, "m", "i32:[3]");
  CHECK(p, "p1", "f16:[2,3]");
  CHECK(p, "p2", "f16:[2,3]");
  CHECK(p, "p3", "i64:[3]");
  CHECK(p, "p4", "f16:[2,3]");
  CHECK(p, "p5", "i32:[3]");
  CHECK(p, "p6", "f32:[3]");
  CHECK(p, "p7", "f32:[3]");
  CHECK(p, "p8", "f16:[2,3]");
  CHECK(p, "p9", "f16:[2,3]");
  CHECK(p, "q", "f16:[2,3]");
  CHECK(p, "u", "f16:[2,3]");
  CHECK(p, "v", "i64:[3]");
  CHECK(p, "w", "f32:[3]");
  assert_int_equal(node(p.g, "g")->op, G_SILU);
  assert_int_equal(node(p.g, "h")->op, G_GELU);
  assert_int_equal(node(p.g, "m")->op, G_NEG);
  /* -(-.5) folds to the literal 0.5 */
  const GNode *u = node(p.g, "u");
  assert_int_equal(u->op, G_MUL);
  assert_int_equal(p.g->nodes[u->in[0]].op, G_CONST);
  assert_true(p.g->nodes[u->in[0]].attr.value == 0.5);
  done(&p);
}

static void test_broadcast(void **state) {
  Parsed p = parse("a: f32[5,1,3]; b: f32[4,1]; s: f32[]; c: f32[seq,1]; d: f32[1,seq]\n"
                   "x = a + b; y = a * s; z = c - d; w = x / 2\n");
  must_parse(&p);
  CHECK(p, "x", "f32:[5,4,3]");
  CHECK(p, "y", "f32:[5,1,3]");
  CHECK(p, "z", "f32:[seq,seq]");
  done(&p);
  p = parse("a: f32[2,3]\nb: f32[4]\nc = a + b");
  assert_null(p.g);
  assert_int_equal(p.d.line, 3);
  assert_int_equal(p.d.col, 7);
  assert_string_equal(p.d.msg, "add: shapes [2,3] and [4] do not broadcast");
  done(&p);
  p = parse("a: f32[n]\nb: f32[m]\nc = maximum(a, b)");
  assert_null(p.g);
  assert_string_equal(p.d.msg, "maximum: shapes [n] and [m] do not broadcast");
  assert_int_equal(p.d.col, 5);
  done(&p);
}

static void test_reductions(void **state) {
  Parsed p = parse("x: f32[2,3,4]; i: i32[2,3]\n"
                   "a = sum(x); b = mean(x, -1); c = max(x, axis=[2, 0], keepdim=true); d = min(x, 1, true)\n"
                   "e = sum(i, 0); f = mean(i); g = max(i, axis=1); h = softmax(x); k = softmax(x, axis=0)\n");
  must_parse(&p);
  CHECK(p, "a", "f32:[]");
  CHECK(p, "b", "f32:[2,3]");
  CHECK(p, "c", "f32:[1,3,1]");
  CHECK(p, "d", "f32:[2,1,4]");
  CHECK(p, "e", "i64:[3]");
  CHECK(p, "f", "f32:[]");
  CHECK(p, "g", "i32:[2]");
  CHECK(p, "h", "f32:[2,3,4]");
  const GNode *c = node(p.g, "c");
  assert_int_equal(c->attr.naxes, 2);
  assert_int_equal(c->attr.axes[0], 0);
  assert_int_equal(c->attr.axes[1], 2);
  assert_int_equal(node(p.g, "b")->attr.axes[0], 2);
  assert_int_equal(node(p.g, "a")->attr.naxes, 3);
  assert_int_equal(node(p.g, "h")->attr.axis, 2);
  assert_int_equal(node(p.g, "k")->attr.axis, 0);
  done(&p);
  p = parse("x: f32[2,3]\ny = sum(x, axis=[0, -2])");
  assert_null(p.g);
  assert_contains(p.d.msg, "sum: axis 0 given twice");
  done(&p);
  p = parse("x: f32[2,3]\ny = sum(x, 2)");
  assert_null(p.g);
  assert_contains(p.d.msg, "sum: axis 2 out of range");
  assert_int_equal(p.d.line, 2);
  assert_int_equal(p.d.col, 12);
  done(&p);
  p = parse("i: i32[2]\ny = softmax(i)");
  assert_null(p.g);
  assert_contains(p.d.msg, "softmax: x must be a float tensor, got i32");
  done(&p);
}

static void test_norms(void **state) {
  Parsed p = parse("x: bf16[2,seq,8]; w: bf16[8]; b: f32[8]\n"
                   "r = rms_norm(x, w, 1e-5); r2 = rms_norm(x, w, eps=0.001); l = layer_norm(x, w, b)\n"
                   "l2 = layer_norm(x, w, b, eps=1e-3)\n");
  must_parse(&p);
  CHECK(p, "r", "bf16:[2,seq,8]");
  CHECK(p, "l", "bf16:[2,seq,8]");
  assert_true(node(p.g, "r")->attr.eps == 1e-5);
  assert_true(node(p.g, "r2")->attr.eps == 0.001);
  assert_true(node(p.g, "l")->attr.eps == 1e-5);
  assert_true(node(p.g, "l2")->attr.eps == 1e-3);
  done(&p);
  p = parse("x: f32[2,8]; w: f32[8]; b: f32[9]\ny = layer_norm(x, w, b)");
  assert_null(p.g);
  assert_string_equal(p.d.msg, "layer_norm: bias shape [9] does not match last dim 8 of [2,8]");
  done(&p);
  p = parse("x: f32[2,8]; w: f32[8]\ny = rms_norm(x, w, eps=true)");
  assert_null(p.g);
  assert_contains(p.d.msg, "rms_norm: argument 'eps' must be a number");
  done(&p);
}

static void test_matmul_linear(void **state) {
  Parsed p = parse("a: f32[5,1,2,3]; b: f32[4,3,7]; v: f32[3]; u: f32[7]; m: f32[2,3]; n: f32[3,7]\n"
                   "c = matmul(a, b); d = matmul(v, b); e = matmul(a, v); f = matmul(v, v); g = matmul(m, n)\n"
                   "h = matmul(b, u)\n");
  must_parse(&p);
  CHECK(p, "c", "f32:[5,4,2,7]");
  CHECK(p, "d", "f32:[4,7]");
  CHECK(p, "e", "f32:[5,1,2]");
  CHECK(p, "f", "f32:[]");
  CHECK(p, "g", "f32:[2,7]");
  CHECK(p, "h", "f32:[4,3]");
  done(&p);
  p = parse("x: f16[2,seq,16]; w: f16[32,16]; b: f16[32]\ny = linear(x, w); z = linear(x, w, b)");
  must_parse(&p);
  CHECK(p, "y", "f16:[2,seq,32]");
  CHECK(p, "z", "f16:[2,seq,32]");
  assert_int_equal(node(p.g, "z")->nin, 3);
  assert_int_equal(node(p.g, "y")->nin, 2);
  done(&p);
  p = parse("x: f32[2,3]\nw: f32[4,5]\ny = matmul(x, w)");
  assert_null(p.g);
  assert_string_equal(p.d.msg, "matmul: inner dimensions differ: [2,3] @ [4,5]");
  assert_int_equal(p.d.line, 3);
  assert_int_equal(p.d.col, 5);
  done(&p);
  p = parse("a: f32[2,2,3]; b: f32[3,3,4]\ny = matmul(a, b)");
  assert_null(p.g);
  assert_contains(p.d.msg, "matmul: batch dimensions do not broadcast");
  done(&p);
  p = parse("x: f32[2,16]; w: f32[32,8]\ny = linear(x, w)");
  assert_null(p.g);
  assert_contains(p.d.msg, "linear: weight [32,8] does not match input features 16 of [2,16]");
  done(&p);
}

static void test_embedding_rope_attention(void **state) {
  Parsed p = parse("ids: i32[1,seq]; tab: bf16[1000,64]; pos: i64[seq]\n"
                   "e = embedding(ids, tab)\n"
                   "x = reshape(e, [1, seq, 4, 16]); x = transpose(x, 1, 2)\n"
                   "r = rope(x, pos); r2 = rope(x, pos, 500000.0)\n"
                   "q: f16[2,32,seq,128]; k: f16[2,8,kv,128]; v: f16[2,8,kv,64]\n"
                   "o = attention(q, k, v); oc = attention(q, k, v, causal=true); o3 = attention(q, k, v, true)\n");
  must_parse(&p);
  CHECK(p, "e", "bf16:[1,seq,64]");
  CHECK(p, "x", "bf16:[1,4,seq,16]");
  CHECK(p, "r", "bf16:[1,4,seq,16]");
  CHECK(p, "o", "f16:[2,32,seq,64]");
  assert_true(node(p.g, "r")->attr.theta == 10000.0);
  assert_true(node(p.g, "r2")->attr.theta == 500000.0);
  assert_int_equal(node(p.g, "o")->attr.causal, 0);
  assert_int_equal(node(p.g, "oc")->attr.causal, 1);
  assert_int_equal(node(p.g, "o3")->attr.causal, 1);
  done(&p);
  p = parse("ids: f32[3]; tab: f32[10,4]\ne = embedding(ids, tab)");
  assert_null(p.g);
  assert_contains(p.d.msg, "embedding: ids must be an integer tensor (i32 or i64), got f32");
  done(&p);
  p = parse("x: f32[2,5,7]; pos: i32[5]\ny = rope(x, pos)");
  assert_null(p.g);
  assert_contains(p.d.msg, "rope: head_dim (last dim of [2,5,7]) must be an even constant");
  done(&p);
  p = parse("x: i32[2,5,8]; pos: i32[5]\ny = rope(x, pos)");
  assert_null(p.g);
  assert_contains(p.d.msg, "rope: x must be a float tensor");
  done(&p);
  p = parse("x: f32[2,5,8]; pos: f32[5]\ny = rope(x, pos)");
  assert_null(p.g);
  assert_contains(p.d.msg, "rope: pos must be an integer tensor");
  done(&p);
  p = parse("q: f32[1,6,4,8]; k: f32[1,4,4,8]; v: f32[1,4,4,8]\no = attention(q, k, v)");
  assert_null(p.g);
  assert_string_equal(p.d.msg, "attention: query heads 6 is not a multiple of key/value heads 4");
  done(&p);
  p = parse("q: f32[1,4,4,8]; k: f32[1,4,4,8]; v: f32[1,4,4,8]\no = attention(q, k, v, causal=1)");
  assert_null(p.g);
  assert_contains(p.d.msg, "attention: argument 'causal' must be true or false");
  done(&p);
}

static void test_views(void **state) {
  Parsed p =
      parse("x: f32[seq,4,6]; y: f32[2,3]\n"
            "a = reshape(x, [seq, -1]); b = reshape(a, [-1, 3, 8]); c = reshape(y, [6]); d = reshape(x, [2, -1])\n"
            "e = permute(x, [2, 0, 1]); f = transpose(x, 0, -1); g = slice(x, 1, 1, 3); h = slice(y, 1, -2)\n"
            "i = slice(x, 0, 1, -1); j = concat(y, y, 0); k = concat(x, x, axis=-1); l = slice(x, 2, 0, -1)\n"
            "m = cast(y, i32)\n");
  must_parse(&p);
  CHECK(p, "a", "f32:[seq,24]");
  CHECK(p, "b", "f32:[seq,3,8]");
  CHECK(p, "c", "f32:[6]");
  CHECK(p, "d", "f32:[2,seq*12]");
  CHECK(p, "e", "f32:[6,seq,4]");
  CHECK(p, "f", "f32:[6,4,seq]");
  CHECK(p, "g", "f32:[seq,2,6]");
  CHECK(p, "h", "f32:[2,2]");
  CHECK(p, "i", "f32:[seq + -2,4,6]");
  CHECK(p, "j", "f32:[4,3]");
  CHECK(p, "k", "f32:[seq,4,12]");
  CHECK(p, "l", "f32:[seq,4,5]");
  CHECK(p, "m", "i32:[2,3]");
  const GNode *h = node(p.g, "h");
  assert_true(ex_is_int_const(h->attr.start, 1) && ex_is_int_const(h->attr.end, 3));
  assert_int_equal(h->attr.axis, 1);
  const GNode *i = node(p.g, "i");
  ExprPool *pool = p.pool;
  assert_ptr_equal(i->attr.end, ex_add(pool, ex_sym(pool, "seq"), ex_int(pool, -1)));
  assert_true(ex_is_int_const(i->attr.start, 1));
  assert_int_equal(node(p.g, "f")->op, G_PERMUTE);
  assert_int_equal(node(p.g, "f")->attr.axes[0], 2);
  assert_int_equal(node(p.g, "k")->attr.axis, 2);
  done(&p);
  struct {
    const char *src, *msg;
  } bad[] = {
      {"x: f32[2,3]\ny = reshape(x, [4])", "reshape: cannot reshape [2,3] (6 elements) to [4] (4 elements)"},
      {"x: f32[2,3]\ny = reshape(x, [4, -1])", "reshape: cannot reshape [2,3] (6 elements) to [4,-1]"},
      {"x: f32[seq,3]\ny = reshape(x, [seq, 2])", "element counts are not provably equal"},
      {"x: f32[seq,3]\ny = reshape(x, [-1, 2])", "element counts are not provably equal"},
      {"x: f32[2,3]\ny = reshape(x, [-1, -1])", "reshape: only one -1 allowed"},
      {"x: f32[2,3]\ny = reshape(x, [0, 6])", "reshape: dimension 0 must be positive or -1"},
      {"x: f32[2,3]\ny = reshape(x, [n, 6])", "reshape: unknown size name 'n'"},
      {"x: f32[2,3]\ny = permute(x, [0, 0])", "permute: axis 0 appears twice"},
      {"x: f32[2,3]\ny = permute(x, [0])", "permute: permutation has 1 entries but [2,3] has rank 2"},
      {"x: f32[2,3]\ny = slice(x, 1, 2, 2)", "slice: bounds (2, 2) out of range"},
      {"x: f32[2,3]\ny = slice(x, 1, 0, 4)", "slice: bounds (0, 4) out of range"},
      {"x: f32[2,3]\ny = slice(x, 1, -4)", "slice: bounds (-4, ) out of range"},
      {"x: f32[2,3]\ny = slice(x, 2, 0)", "slice: axis 2 out of range for a tensor of rank 2"},
      {"x: f32[2,3]\ny = concat(x, x, 2)", "concat: axis 2 out of range"},
      {"x: f32[2,3]; z: f32[3,3]\ny = concat(x, z, 1)", "concat: shapes [2,3] and [3,3] differ outside axis 1"},
      {"x: f32[2,3]\ny = transpose(x, 0, 3)", "transpose: axis 3 out of range"},
      {"x: f32[2,3]\ny = cast(x, bool)", "unknown dtype 'bool'"},
      {"x: f32[2,3]\ny = cast(x, x)", "cast: argument 'dtype' must be a dtype"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    p = parse(bad[k].src);
    if (p.g) fail_msg("expected an error for %s", bad[k].src);
    assert_contains(p.d.msg, bad[k].msg);
    assert_int_equal(p.d.line, 2);
    assert_true(p.d.col >= 1);
    done(&p);
  }
}

static void test_outputs(void **state) {
  Parsed p = parse("x: f32[2]\na = exp(x)\nb = a * 2\nreturn a, b, x + 1\n");
  must_parse(&p);
  assert_int_equal(p.g->noutputs, 3);
  assert_int_equal(p.g->outputs[0], node(p.g, "a")->id);
  assert_int_equal(p.g->outputs[1], node(p.g, "b")->id);
  assert_int_equal(p.g->nodes[p.g->outputs[2]].op, G_ADD);
  done(&p);
  /* reassignment: later uses see the new value; the last assignment is the output */
  p = parse("x: f32[2]\nh = exp(x)\nh = h * 2\ny = h + 1\nh = y");
  must_parse(&p);
  assert_int_equal(p.g->noutputs, 1);
  const GNode *y = node(p.g, "y");
  assert_int_equal(p.g->outputs[0], y->id);
  assert_int_equal(p.g->nodes[y->in[0]].op, G_MUL);
  done(&p);
  p = parse("x: f32[2]\nreturn x\n");
  must_parse(&p);
  assert_int_equal(p.g->outputs[0], p.g->inputs[0]);
  done(&p);
}

static void test_symbols(void **state) {
  Parsed p = parse("x: f32[batch, seq, 8]; y: f32[seq, 1]\nz = x + y");
  must_parse(&p);
  assert_int_equal(p.g->nsymbols, 2);
  assert_string_equal(p.g->symbols[0], "batch");
  assert_string_equal(p.g->symbols[1], "seq");
  assert_ptr_equal(node(p.g, "z")->shape.dim[1], ex_sym(p.pool, "seq"));
  done(&p);
  p = parse("s: f32[]\ny = s * 3");
  must_parse(&p);
  CHECK(p, "y", "f32:[]");
  done(&p);
}

typedef struct ErrCase {
  const char *src;
  int line, col;
  const char *msg;
} ErrCase;

static void test_error_messages(void **state) {
  static const ErrCase cases[] = {
      {"x: f32[2]\ny = exp(x", 2, 10, "expected ')' after arguments, got end of input"},
      {"x: f32[2]\ny = maximum(x x)", 2, 15, "expected ')' after arguments, got 'x'"},
      {"x: f32[2]\ny = foo(x)", 2, 5, "unknown op 'foo'"},
      {"x: f8[2]", 1, 4,
       "unknown dtype 'f8' (expected one of f32, f16, bf16, i32, i64; an input may also be q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k)"},
      {"x: f32[2]\ny = cast(x, f8)", 2, 13,
       "unknown dtype 'f8' (expected one of f32, f16, bf16, i32, i64; an input may also be q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k)"},
      {"x: f32[2]\n\ny = x + y", 3, 9, "undefined name 'y'"},
      {"x: f32[2]\n  x: f32[3]", 2, 3, "duplicate input 'x'"},
      {"x: f32[2]\ny = x $ 1", 2, 7, "unexpected character '$'"},
      {"x: f32[2]\ny = rms_norm(x)", 2, 5, "rms_norm takes 2 or 3 arguments (x, w, eps), got 1"},
      {"x: f32[2]\ny = exp(x, x)", 2, 5, "exp takes 1 argument (x), got 2"},
      {"x: f32[2]\ny = sum()", 2, 5, "sum takes 1 to 3 arguments (x, axis, keepdim), got 0"},
      {"x: f32[2]\ny = softmax(x, dim=0)", 2, 16, "softmax has no argument 'dim' (arguments: x, axis)"},
      {"x: f32[2]\ny = softmax(x, axis=0, axis=0)", 2, 24, "softmax: argument 'axis' given twice"},
      {"x: f32[2]\ny = softmax(axis=0, x)", 2, 21, "softmax: positional argument after keyword arguments"},
      {"x: f32[2]; w: f32[2]\ny = rms_norm(x, eps=1.0, x)", 2, 26, "rms_norm: positional argument"},
      {"x: f32[2]; w: f32[2]\ny = rms_norm(x, eps=1.0)", 2, 5, "rms_norm: missing argument 'w'"},
      {"x: f32[2]", 1, 10, "program has no output"},
      {"", 1, 1, "program has no output"},
      {"# only a comment\n", 2, 1, "program has no output"},
      {"x: f32[0]", 1, 8, "dimension must be a positive integer, got 0"},
      {"x: f32[2,]]", 1, 11, "expected end of statement"},
      {"x: f32 2", 1, 8, "expected '[' after dtype f32"},
      {"x: f32[2]\nx + 1", 2, 3, "expected ':' (input) or '=' (assignment) after 'x'"},
      {"(x)", 1, 1, "expected a statement"},
      {"x: f32[2]\ny = exp(x) exp(x)", 2, 12, "expected end of statement (newline or ';'), got 'exp'"},
      {"x: f32[2]\ny = (x + 1", 2, 11, "expected ')' to close '('"},
      {"x: f32[2]\nreturn", 2, 7, "expected an expression after 'return'"},
      {"x: f32[2]\nreturn x\nreturn x", 3, 1, "only one 'return' statement"},
      {"x: f32[2]\ny = [1, 2]", 2, 5, "assigned value must be a tensor, got a list"},
      {"x: f32[2]\ny = x + true", 2, 9, "operand of '+' must be a tensor, got 'true'"},
      {"x: f32[2]\ny = 1e", 2, 5, "malformed number '1e'"},
      {"x: f32[2]\ny = 12ab", 2, 5, "malformed number '12ab'"},
      {"x: f32[2]\ny = 99999999999999999999", 2, 5, "integer literal '99999999999999999999' is too large"},
      {"x: f32[2]\ny = 1e999", 2, 5, "number '1e999' is out of range"},
      {"return: f32[2]", 1, 7, "expected an expression"},
      {"true = 1", 1, 1, "'true' is a reserved word"},
      {"f32: f32[2]", 1, 1, "'f32' is a reserved word"},
      {"x: f32[1,2,3,4,5,6,7,8,9]", 1, 24, "too many dimensions (at most 8)"},
      {"x: f32[2]\ny = sum(x, axis=[0, n])", 2, 21, "sum: expected an integer in 'axis', got 'n'"},
      {"x: f32[2]\ny = sum(x, axis=1.5)", 2, 17, "sum: argument 'axis' must be an integer, got a number"},
      {"x: f32[2]\ny = x\t\x01", 2, 7, "unexpected character (byte 0x01)"},
      {"x: f32[2]\ny = 9223372036854775807 * 2", 2, 25, "integer overflow in constant expression"},
      {"x: f32[2]\ny = exp(z)", 2, 9, "undefined name 'z'"},
      {"x: f32[2]\ny = -(-9223372036854775807 - 1)", 2, 5, "integer overflow in constant expression"},
      {"x: f32[1099511627777]", 1, 8, "dimension 1099511627777 is too large (at most 2^40)"},
      {"x: f32[seq]\ny = slice(x, 0, -9223372036854775807)", 2, 5, "slice: bound -9223372036854775807 is out of range"},
      {"x: f32[2]\ny = x(1)", 2, 5, "unknown op 'x'"},
      {"w: q4_1[3,48]", 1, 1,
       "input 'w': a q4_1 tensor's last dimension must be a constant multiple of 32 (its block)"},
      {"w: q4_k[seq]", 1, 1, "input 'w': a q4_k tensor's last dimension must be a constant multiple of 256"},
      {"x: f32[2,32]\ny = cast(x, q8_0)", 2, 5, "cast: q8_0 is a weight format that only program inputs have"},
      {"c: q8_0[4,32]; x: f32[1,32]\ny = cache_write(c, x, axis=0, start=0)", 2, 5,
       "cache_write: the cache is q8_0; a quantized tensor is read-only (a weight)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Parsed p = parse(cases[i].src);
    if (p.g) fail_msg("case %zu: expected an error for: %s", i, cases[i].src);
    if (!strstr(p.d.msg, cases[i].msg) || p.d.line != cases[i].line || p.d.col != cases[i].col)
      fail_msg("case %zu (%s):\n  got      %d:%d: %s\n  expected %d:%d: %s", i, cases[i].src, p.d.line, p.d.col,
               p.d.msg, cases[i].line, cases[i].col, cases[i].msg);
    done(&p);
  }
}

static void test_deep_nesting(void **state) {
  size_t n = 5000;
  char *src = malloc(n * 2 + 64);
  strcpy(src, "x: f32[2]\ny = ");
  size_t len = strlen(src);
  for (size_t i = 0; i < n; i++) src[len++] = '(';
  src[len++] = 'x';
  for (size_t i = 0; i < n; i++) src[len++] = ')';
  src[len] = 0;
  Parsed p = parse(src);
  assert_null(p.g);
  assert_contains(p.d.msg, "nested too deeply");
  done(&p);
  free(src);
}

static const char *valid_programs[] = {
    "x: f32[1,32,2048]\nw: f32[2048]\ny = rms_norm(x, w)\n",
    "x: f16[2,seq,8]; i: i64[seq]\na = softmax(x, 1) * 2.0 + sum(x, axis=[0,2], keepdim=true)\n"
    "b = rope(x, i, theta=500000.0)  # comment\nreturn a, b, slice(x, 1, -3)\n",
    "q: f32[1,8,s,16]; k: f32[1,2,s,16]; v: f32[1,2,s,16]\no = attention(q, k, v, causal=true)\n"
    "r = reshape(transpose(o, 1, 2), [1, s, -1])\nw: f32[32,128]; b: f32[32]\nreturn linear(r, w, b)\n",
    "ids: i32[4]; t: f32[100,8]\ne = embedding(ids, t); m = mean(e, -1, true); c = concat(e, m, 1)\n"
    "d = cast(-c / 3 + .5e-1, bf16); return maximum(d, 0), pow(c, 2), matmul(e, transpose(e, 0, 1))\n",
};

/* Cheap deterministic PRNG, so failures reproduce. */
static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void check_result(const char *src) {
  Parsed p = parse(src);
  if (!p.g) {
    assert_true(p.d.set);
    assert_true(p.d.line >= 1 && p.d.col >= 1);
    assert_true(p.d.msg[0] != 0);
  } else {
    assert_false(p.d.set);
    assert_true(p.g->noutputs >= 1);
    StrBuf b = {0};
    graph_print(&b, p.g);
    assert_true(b.len > 0);
    sb_free(&b);
  }
  done(&p);
}

static void test_fuzz_no_crash(void **state) {
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  char buf[600];
  /* every truncation of every valid program */
  for (size_t v = 0; v < sizeof valid_programs / sizeof valid_programs[0]; v++) {
    const char *src = valid_programs[v];
    check_result(src);
    Parsed p = parse(src);
    must_parse(&p);
    done(&p);
    for (size_t n = 0; n < strlen(src); n++) {
      memcpy(buf, src, n);
      buf[n] = 0;
      check_result(buf);
    }
  }
  /* random mutations of valid programs, and random bytes */
  static const char alphabet[] = "xyzw()[],;:=+-*/.#\n 0123456789e_-f32i64sumaxisreturntrue";
  for (int iter = 0; iter < 3000; iter++) {
    const char *src = valid_programs[rnd(&seed) % (sizeof valid_programs / sizeof valid_programs[0])];
    size_t n = strlen(src);
    if (n >= sizeof buf - 1) n = sizeof buf - 1;
    memcpy(buf, src, n);
    buf[n] = 0;
    int edits = 1 + (int)(rnd(&seed) % 4);
    for (int e = 0; e < edits; e++) {
      size_t at = rnd(&seed) % n;
      buf[at] = (iter & 1) ? alphabet[rnd(&seed) % (sizeof alphabet - 1)] : (char)(1 + rnd(&seed) % 255);
    }
    check_result(buf);
  }
  for (int iter = 0; iter < 1000; iter++) {
    size_t n = rnd(&seed) % 100;
    for (size_t i = 0; i < n; i++) buf[i] = (char)(1 + rnd(&seed) % 255);
    buf[n] = 0;
    check_result(buf);
  }
  check_result(NULL);
}

/* The paged KV cache's ops and attention's kv_len: shapes and their errors. */
static void test_paged_ops(void **state) {
  (void)state;
  Parsed p = parse("c: f32[blocks, 16, 2, 8]; x: f32[tok, 2, 8]; s: i32[tok]; t: i32[seqs, 4]\n"
                   "q: f32[tok, 4, 1, 8]\n"
                   "k = permute(paged_gather(cache_scatter(c, x, s), t, s, len=ctx), [0, 2, 1, 3])\n"
                   "y = attention(q, k, k, kv_len=s)");
  must_parse(&p);
  StrBuf b = {0};
  graph_print(&b, p.g);
  assert_contains(sb_str(&b), "paged_gather(");
  assert_contains(sb_str(&b), ": f32[tok,ctx,2,8]");
  assert_contains(sb_str(&b), "attention(q, ");
  sb_free(&b);
  done(&p);
  static const char *bad[][2] = {
      {"c: f32[4, 2]; x: f32[3]; s: i32[3]; y = cache_scatter(exp(c), x, s)", "must be a program input"},
      {"c: f32[4, 2, 3]; x: f32[3, 4]; s: i32[3]; y = cache_scatter(c, x, s)", "rows and x"},
      {"c: f32[4, 2, 3]; x: f32[5, 3]; s: i32[3]; y = cache_scatter(c, x, s)", "one per row of x"},
      {"c: f32[4, 2, 3]; x: f32[3, 3]; s: f32[3]; y = cache_scatter(c, x, s)", "must be an integer tensor"},
      {"p: f32[4, 2, 3]; t: i32[4]; r: i32[3]; y = paged_gather(p, t, r, len=5)", "table must be 2-D"},
      {"p: f32[4]; t: i32[4, 2]; r: i32[3]; y = paged_gather(p, t, r, len=5)", "[blocks, block_size, ...]"},
      {"q: f32[3,4,1,8]; k: f32[3,2,5,8]; n: i32[4]; y = attention(q, k, k, kv_len=n)", "kv_len must be 1-D"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    Parsed e = parse(bad[i][0]);
    assert_null(e.g);
    assert_contains(e.d.msg, bad[i][1]);
    done(&e);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rms_norm_print),
      cmocka_unit_test(test_print_roundtrip),
      cmocka_unit_test(test_separators_and_comments),
      cmocka_unit_test(test_elementwise_and_dtypes),
      cmocka_unit_test(test_broadcast),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_norms),
      cmocka_unit_test(test_matmul_linear),
      cmocka_unit_test(test_embedding_rope_attention),
      cmocka_unit_test(test_views),
      cmocka_unit_test(test_outputs),
      cmocka_unit_test(test_symbols),
      cmocka_unit_test(test_error_messages),
      cmocka_unit_test(test_deep_nesting),
      cmocka_unit_test(test_fuzz_no_crash),
      cmocka_unit_test(test_paged_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
