/* Reference: matmul, linear, embedding, rope, attention. */
#include <math.h>
#include <stdlib.h>
#include "ref_internal.h"
#include "../base/mem.h"

static int numel_mismatch(const RefOp *op, int64_t want) {
  char a[160];
  return ref_fail(op, "%s: result should hold %lld elements, node shape is %s", ref_op_name(op->node->op),
                  (long long)want, ref_dims_str(a, sizeof a, op->out->rank, op->out->dims));
}

/* torch.matmul: a 1-D left operand is a row [1,k], a 1-D right operand a column [k,1], and that
 * dimension is dropped from the result; leading (batch) dims broadcast. The result is written in
 * [batch..., m, n] order, which is also the order of the graph's shape with the 1-D dims dropped. */
int ref_matmul(const RefOp *op) {
  const RefTensor *a = op->in[0], *b = op->in[1];
  char x[160], y[160];
  if (a->rank == 0 || b->rank == 0) return ref_fail(op, "matmul: operands must have at least one axis");
  int abr = a->rank == 1 ? 0 : a->rank - 2, bbr = b->rank == 1 ? 0 : b->rank - 2;
  int64_t m = a->rank == 1 ? 1 : a->dims[a->rank - 2], k = a->dims[a->rank - 1];
  int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2], n = b->rank == 1 ? 1 : b->dims[b->rank - 1];
  if (k != kb)
    return ref_fail(op, "matmul: inner dimensions of %s and %s differ", ref_dims_str(x, sizeof x, a->rank, a->dims),
                    ref_dims_str(y, sizeof y, b->rank, b->dims));
  int br = abr > bbr ? abr : bbr;
  int64_t bd[LT_MAX_RANK], sa[LT_MAX_RANK], sb[LT_MAX_RANK], idx[LT_MAX_RANK] = {0}, batch = 1;
  int64_t ssa = m * k, ssb = k * n; /* running strides (in elements) from the innermost batch dim outwards */
  for (int i = br - 1; i >= 0; i--) {
    int ka = i - (br - abr), kb2 = i - (br - bbr);
    int64_t da = ka >= 0 ? a->dims[ka] : 1, db = kb2 >= 0 ? b->dims[kb2] : 1;
    if (da != db && da != 1 && db != 1)
      return ref_fail(op, "matmul: batch dims of %s and %s do not broadcast",
                      ref_dims_str(x, sizeof x, a->rank, a->dims), ref_dims_str(y, sizeof y, b->rank, b->dims));
    bd[i] = da == 1 ? db : da;
    sa[i] = da == 1 ? 0 : ssa;
    sb[i] = db == 1 ? 0 : ssb;
    ssa *= da;
    ssb *= db;
  }
  for (int i = 0; i < br; i++) batch *= bd[i];
  if (op->out->numel != batch * m * n) return numel_mismatch(op, batch * m * n);
  for (int64_t bi = 0; bi < batch; bi++) {
    int64_t oa = 0, ob = 0;
    for (int i = 0; i < br; i++) {
      oa += idx[i] * sa[i];
      ob += idx[i] * sb[i];
    }
    const double *A = a->data + oa, *B = b->data + ob;
    double *C = op->out->data + bi * m * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t t = 0; t < k; t++) s += A[i * k + t] * B[t * n + j];
        C[i * n + j] = s;
      }
    ref_next_index(br, bd, idx);
  }
  return 1;
}

int ref_linear(const RefOp *op) {
  const RefTensor *x = op->in[0], *w = op->in[1], *b = op->node->nin > 2 ? op->in[2] : NULL;
  char s1[160], s2[160];
  if (x->rank == 0 || w->rank != 2 || x->dims[x->rank - 1] != w->dims[1])
    return ref_fail(op, "linear: input %s does not match weight %s (expected [out, in])",
                    ref_dims_str(s1, sizeof s1, x->rank, x->dims), ref_dims_str(s2, sizeof s2, w->rank, w->dims));
  int64_t in = w->dims[1], outf = w->dims[0], rows = 1;
  for (int i = 0; i < x->rank - 1; i++) rows *= x->dims[i];
  if (b && b->numel != outf)
    return ref_fail(op, "linear: bias has %lld elements, expected %lld", (long long)b->numel, (long long)outf);
  if (op->out->numel != rows * outf) return numel_mismatch(op, rows * outf);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t o = 0; o < outf; o++) {
      double s = b ? b->data[o] : 0.0;
      for (int64_t i = 0; i < in; i++) s += x->data[r * in + i] * w->data[o * in + i];
      op->out->data[r * outf + o] = s;
    }
  return 1;
}

int ref_embedding(const RefOp *op) {
  const RefTensor *ids = op->in[0], *table = op->in[1];
  char s1[160];
  if (table->rank != 2)
    return ref_fail(op, "embedding: table has shape %s, expected [vocab, dim]",
                    ref_dims_str(s1, sizeof s1, table->rank, table->dims));
  int64_t vocab = table->dims[0], dim = table->dims[1];
  if (op->out->numel != ids->numel * dim) return numel_mismatch(op, ids->numel * dim);
  if (op->out->ival) *op->exact = 1;
  for (int64_t i = 0; i < ids->numel; i++) {
    double v = ids->data[i];
    if (!(v >= 0 && v < (double)vocab)) {
      if (isnan(v)) return ref_fail(op, "embedding: id nan out of range [0, %lld)", (long long)vocab);
      return ref_fail(op, "embedding: id %lld out of range [0, %lld)", (long long)ref_to_i64(v), (long long)vocab);
    }
    int64_t id = (int64_t)v;
    for (int64_t j = 0; j < dim; j++) {
      op->out->data[i * dim + j] = table->data[id * dim + j];
      if (op->out->ival) op->out->ival[i * dim + j] = ref_ival(table, id * dim + j);
    }
  }
  return 1;
}

int ref_rope(const RefOp *op) {
  const RefTensor *x = op->in[0], *pos = op->in[1];
  char s1[160], s2[160];
  if (x->rank < 2)
    return ref_fail(op, "rope: input %s needs [..., seq, head_dim]", ref_dims_str(s1, sizeof s1, x->rank, x->dims));
  int64_t S = x->dims[x->rank - 2], D = x->dims[x->rank - 1], half = D / 2;
  if (D % 2) return ref_fail(op, "rope: head_dim %lld is odd", (long long)D);
  if (pos->numel != S)
    return ref_fail(op, "rope: positions %s do not match seq %lld of input %s",
                    ref_dims_str(s1, sizeof s1, pos->rank, pos->dims), (long long)S,
                    ref_dims_str(s2, sizeof s2, x->rank, x->dims));
  for (int64_t s = 0; s < S; s++)
    if (!(pos->data[s] >= 0 && isfinite(pos->data[s])))
      return ref_fail(op, "rope: position %g at index %lld out of range (must be >= 0)", pos->data[s], (long long)s);
  if (!op->out->numel || !D) return 1;
  double theta = op->node->attr.theta;
  const RefTensor *freqs = op->node->nin == 3 ? op->in[2] : NULL;
  if (freqs && freqs->numel != half)
    return ref_fail(op, "rope: freqs has %lld elements, expected head_dim/2 = %lld", (long long)freqs->numel,
                    (long long)half);
  int64_t rows = x->numel / (S * D);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t s = 0; s < S; s++) {
      const double *xs = x->data + (r * S + s) * D;
      double *ys = op->out->data + (r * S + s) * D;
      for (int64_t i = 0; i < D; i++) {
        double inv_freq = freqs ? freqs->data[i % half] : pow(theta, -(double)(2 * (i % half)) / (double)D);
        double ang = pos->data[s] * inv_freq;
        double rot = i < half ? -xs[i + half] : xs[i - half];
        ys[i] = xs[i] * cos(ang) + rot * sin(ang);
      }
    }
  return 1;
}

/* With kv_len, row b's keys from kv_len[b] on are masked too. */
int ref_attention(const RefOp *op) {
  const RefTensor *q = op->in[0], *k = op->in[1], *v = op->in[2], *len = op->node->nin == 4 ? op->in[3] : NULL;
  char s1[160], s2[160], s3[160];
  if (q->rank != 4 || k->rank != 4 || v->rank != 4 || k->dims[0] != q->dims[0] || v->dims[0] != q->dims[0] ||
      k->dims[3] != q->dims[3] || v->dims[1] != k->dims[1] || v->dims[2] != k->dims[2] || k->dims[1] == 0 ||
      q->dims[1] % k->dims[1])
    return ref_fail(op, "attention: q %s, k %s, v %s do not fit [b,h,s,d], [b,kvh,t,d], [b,kvh,t,dv]",
                    ref_dims_str(s1, sizeof s1, q->rank, q->dims), ref_dims_str(s2, sizeof s2, k->rank, k->dims),
                    ref_dims_str(s3, sizeof s3, v->rank, v->dims));
  int64_t B = q->dims[0], H = q->dims[1], S = q->dims[2], D = q->dims[3];
  int64_t KH = k->dims[1], T = k->dims[2], DV = v->dims[3], group = H / KH;
  if (op->out->numel != B * H * S * DV) return numel_mismatch(op, B * H * S * DV);
  if (T == 0 && op->out->numel > 0) return ref_fail(op, "attention: no keys (k and v have 0 positions)");
  double scale = 1.0 / sqrt((double)D), *p = malloc((size_t)(T ? T : 1) * sizeof(double));
  if (!p)
    return ref_fail(op, "attention: out of memory: %zu bytes for the scores", (size_t)(T ? T : 1) * sizeof(double));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++) {
      const double *K = k->data + (b * KH + h / group) * T * D, *V = v->data + (b * KH + h / group) * T * DV;
      for (int64_t s = 0; s < S; s++) {
        const double *Q = q->data + ((b * H + h) * S + s) * D;
        double *O = op->out->data + ((b * H + h) * S + s) * DV;
        /* Causal with a cache: query s sits at absolute position s + (T - S). */
        int64_t nvis = op->node->attr.causal ? s + (T - S) + 1 : T;
        if (nvis > T) nvis = T;
        if (len && ref_ival(len, b) < nvis) nvis = ref_ival(len, b);
        if (nvis <= 0) { /* every key masked: softmax of all -inf is NaN in torch */
          for (int64_t j = 0; j < DV; j++) O[j] = NAN;
          continue;
        }
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < nvis; t++) {
          double dot = 0;
          for (int64_t i = 0; i < D; i++) dot += Q[i] * K[t * D + i];
          p[t] = dot * scale;
          mx = isnan(p[t]) || p[t] > mx ? p[t] : mx;
        }
        for (int64_t t = 0; t < nvis; t++) sum += p[t] = exp(p[t] - mx);
        for (int64_t j = 0; j < DV; j++) {
          double acc = 0;
          for (int64_t t = 0; t < nvis; t++) acc += p[t] * V[t * DV + j];
          O[j] = acc / sum;
        }
      }
    }
  free(p);
  return 1;
}
