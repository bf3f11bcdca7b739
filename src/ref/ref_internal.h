/* Private to src/ref: what the op implementations of the reference interpreter share. */
#ifndef LATHE_REF_INTERNAL_H
#define LATHE_REF_INTERNAL_H
#include <stddef.h>
#include "ref.h"

/* One node being evaluated: its operands' values and its result, already allocated with the
 * dims the node's shape evaluates to (ops fill out->data; the driver rounds to the node's dtype). */
typedef struct RefOp {
  const GNode *node;
  const RefTensor *in[G_MAX_IN];
  RefTensor *out;
  const SymEnv *env;
  Diag *d;
  int *exact;              /* set by an op that filled out->ival */
  const Graph *g;          /* ref_input: the graph inputs' order */
  const RefTensor *inputs; /* ref_input: their values */
} RefOp;

/* Records "fmt..." at the node's source position; returns 0 so callers can `return ref_fail(...)`. */
int ref_fail(const RefOp *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *ref_op_name(GOp op);
/* Writes "[2,3]" into buf. Returns buf. */
const char *ref_dims_str(char *buf, size_t n, int rank, const int64_t *dims);
void ref_strides(int rank, const int64_t *dims, int64_t *strides);
/* Advances a row-major multi-index; returns 0 after the last one (the index wraps to zeros). */
int ref_next_index(int rank, const int64_t *dims, int64_t *idx);
/* Evaluates an integer expression, with a diag naming the unbound symbol on failure. */
int ref_eval_dim(const RefOp *op, const Expr *e, int64_t *out);
/* Element i of t as an exact integer (its ival when it has one). */
static inline int64_t ref_ival(const RefTensor *t, int64_t i);
/* v as a tensor of dtype t would hold it; float->int truncates toward zero, NaN->0, saturating. */
double ref_round(DType t, double v);
int64_t ref_to_i64(double v);
static inline int64_t ref_ival(const RefTensor *t, int64_t i) { return t->ival ? t->ival[i] : ref_to_i64(t->data[i]); }
/* An op that computes integers exactly writes op->out->ival (allocated for integer results) and sets
 * *op->exact; otherwise the driver derives the integers from the doubles. */

/* One function per op (the REF column of ops.def). */
int ref_input(const RefOp *op);
int ref_const(const RefOp *op);
int ref_unary(const RefOp *op);
int ref_binary(const RefOp *op);
int ref_cast(const RefOp *op);
int ref_reduce(const RefOp *op);
int ref_argmax(const RefOp *op);
int ref_softmax(const RefOp *op);
int ref_rms_norm(const RefOp *op);
int ref_layer_norm(const RefOp *op);
int ref_matmul(const RefOp *op);
int ref_cache_write(const RefOp *op);
int ref_cache_scatter(const RefOp *op);
int ref_paged_gather(const RefOp *op);
int ref_linear(const RefOp *op);
int ref_embedding(const RefOp *op);
int ref_rope(const RefOp *op);
int ref_attention(const RefOp *op);
int ref_reshape(const RefOp *op);
int ref_permute(const RefOp *op);
int ref_slice(const RefOp *op);
int ref_concat(const RefOp *op);
#endif
