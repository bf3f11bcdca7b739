/* Composite NN ops: softmax, rms_norm, layer_norm, rope, attention. Intermediates are f32; only the
 * last node of each op has the graph node's dtype. */
#include <math.h>
#include "lower_internal.h"

static int last_axis(const Shape *s) { return s->rank - 1; }

/* y = x * rsqrt(mean(x^2) + eps) * w */
static int rms_norm(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int in = lw_node(L, n->in[0]);
  Shape s = *lw_shape(L, in);
  unsigned ax = 1u << last_axis(&s);
  Expr *a0 = lw_arg(L, 0, in);
  int sq = t_map(L->p, ex_mul(x, a0, a0), DT_F32, &s, &in, 1);
  int ss = t_reduce(L->p, RED_ADD, sq, ax);
  int src[3] = {in, ss, 0}, nsrc = 2;
  Expr *nf = lw_fdim(L, s.dim[last_axis(&s)]);
  Expr *inv = ex_un(x, X_RSQRT, ex_add(x, ex_bin(x, X_DIV, lw_arg(L, 1, ss), nf), lw_f32(L, n->attr.eps)));
  Expr *fn = ex_mul(x, a0, inv);
  if (n->nin >= 2) {
    src[nsrc] = lw_node(L, n->in[1]);
    fn = ex_mul(x, fn, lw_arg(L, nsrc, src[nsrc]));
    nsrc++;
  }
  return lw_map(L, fn, n->dtype, &s, src, nsrc);
}

/* d = x - mean(x); y = d * rsqrt(mean(d^2) + eps) * w + b */
static int layer_norm(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int in = lw_node(L, n->in[0]);
  Shape s = *lw_shape(L, in);
  unsigned ax = 1u << last_axis(&s);
  Expr *nf = lw_fdim(L, s.dim[last_axis(&s)]);
  int sum = t_reduce(L->p, RED_ADD, in, ax);
  Shape rs = *lw_shape(L, sum);
  int mean = t_map(L->p, ex_bin(x, X_DIV, lw_arg(L, 0, sum), nf), DT_F32, &rs, &sum, 1);
  int xm[2] = {in, mean};
  int dev = lw_map(L, ex_bin(x, X_SUB, lw_arg(L, 0, in), lw_arg(L, 1, mean)), DT_F32, &s, xm, 2);
  Expr *d0 = lw_arg(L, 0, dev);
  int sq = t_map(L->p, ex_mul(x, d0, d0), DT_F32, &s, &dev, 1);
  int ss = t_reduce(L->p, RED_ADD, sq, ax);
  int var = t_map(L->p, ex_bin(x, X_DIV, lw_arg(L, 0, ss), nf), DT_F32, &rs, &ss, 1);
  int src[4] = {dev, var}, nsrc = 2;
  Expr *fn = ex_mul(x, d0, ex_un(x, X_RSQRT, ex_add(x, lw_arg(L, 1, var), lw_f32(L, n->attr.eps))));
  if (n->nin >= 2) {
    src[nsrc] = lw_node(L, n->in[1]);
    fn = ex_mul(x, fn, lw_arg(L, nsrc, src[nsrc]));
    nsrc++;
  }
  if (n->nin >= 3) {
    src[nsrc] = lw_node(L, n->in[2]);
    fn = ex_add(x, fn, lw_arg(L, nsrc, src[nsrc]));
    nsrc++;
  }
  return lw_map(L, fn, n->dtype, &s, src, nsrc);
}

int lower_norm(Lower *L, const GNode *n) {
  if (n->op == G_RMS_NORM) return rms_norm(L, n);
  if (n->op == G_LAYER_NORM) return layer_norm(L, n);
  /* softmax: the final divide carries the cast */
  int in = lw_node(L, n->in[0]);
  return lw_softmax(L, in, 1u << n->attr.axis, n->dtype);
}

/* Rotate-half RoPE: y[j] = x[j] cos(a) + (j < D/2 ? -x[j+D/2] : x[j-D/2]) sin(a),
 * a = pos * theta^(-2 (j mod D/2) / D). */
int lower_rope(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int in = lw_node(L, n->in[0]), pos = lw_node(L, n->in[1]);
  Shape s = *lw_shape(L, in);
  int r = s.rank;
  if (r < 2 || lw_shape(L, pos)->rank != 1) return lw_fail(L, n, "expects x [..., seq, head_dim] and pos [seq]");
  Expr *D = s.dim[r - 1], *half = ex_bin(x, X_IDIV, D, ex_int(x, 2)), *j = lw_var(L, r - 1);
  Expr *idx[LT_MAX_RANK];
  for (int d = 0; d < r; d++) idx[d] = lw_var(L, d);
  idx[r - 1] = ex_bin(x, X_MOD, ex_add(x, j, half), D);
  int xr = t_view(L->p, in, &s, idx, NULL);
  Expr *pidx[1] = {lw_var(L, r - 2)};
  int pb = t_view(L->p, pos, &s, pidx, NULL);

  Expr *inv;
  int src[4] = {in, xr, pb, -1}, nsrc = 3;
  if (n->nin == 3) { /* given inverse frequencies (Llama 3 scaling), read at j mod D/2 */
    Expr *fidx[1] = {ex_bin(x, X_MOD, j, half)};
    src[nsrc] = t_view(L->p, lw_node(L, n->in[2]), &s, fidx, NULL);
    inv = ex_cast(x, DT_F32, lw_arg(L, nsrc, src[nsrc]));
    nsrc++;
  } else {
    Expr *jf = ex_cast(x, DT_F32, ex_bin(x, X_MOD, j, half));
    Expr *expo = ex_bin(x, X_DIV, ex_mul(x, lw_f32(L, -2), jf), lw_fdim(L, D));
    inv = ex_bin(x, X_POW, lw_f32(L, n->attr.theta), expo);
  }
  Expr *ang = ex_mul(x, ex_cast(x, DT_F32, ex_arg(x, 2, lw_dtype(L, pb))), inv);
  Expr *a0 = lw_arg(L, 0, in), *a1 = lw_arg(L, 1, xr);
  Expr *rot = ex_select(x, ex_bin(x, X_LT, j, half), ex_un(x, X_NEG, a1), a1);
  Expr *fn = ex_add(x, ex_mul(x, a0, ex_un(x, X_COS, ang)), ex_mul(x, rot, ex_un(x, X_SIN, ang)));
  return t_map(L->p, ex_cast(x, n->dtype, fn), n->dtype, &s, src, nsrc);
}

/* softmax(q k^T / sqrt(D) [+ causal mask]) v, with grouped-query heads: head h reads kv head h / (H/KH). */
int lower_attention(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int q = lw_node(L, n->in[0]), k = lw_node(L, n->in[1]), v = lw_node(L, n->in[2]);
  Shape qs = *lw_shape(L, q), ks = *lw_shape(L, k), vs = *lw_shape(L, v);
  if (qs.rank != 4 || ks.rank != 4 || vs.rank != 4) return lw_fail(L, n, "expects 4-D q, k, v");
  Expr *B = qs.dim[0], *H = qs.dim[1], *S = qs.dim[2], *D = qs.dim[3];
  Expr *T = ks.dim[2], *DV = vs.dim[3];
  Expr *group = ex_bin(x, X_IDIV, H, ks.dim[1]);
  Expr *i0 = lw_var(L, 0), *i1 = lw_var(L, 1), *i2 = lw_var(L, 2), *i3 = lw_var(L, 3), *i4 = lw_var(L, 4);
  Expr *kvh = ex_bin(x, X_IDIV, i1, group);

  /* scores [B,H,S,T] = sum_d q[b,h,s,d] k[b,h/g,t,d] */
  Shape c1 = {5, {B, H, S, T, D}};
  Expr *qi[4] = {i0, i1, i2, i4}, *ki[4] = {i0, kvh, i3, i4};
  int qv = t_view(L->p, q, &c1, qi, NULL), kv = t_view(L->p, k, &c1, ki, NULL);
  int sc = t_contract(L->p, qv, kv, 1u << 4);
  Shape ss = {4, {B, H, S, T}};
  sc = lw_drop(L, sc, 1u << 4, &ss);

  Expr *scale = ex_un(x, X_RSQRT, lw_fdim(L, D));
  Expr *fn = ex_mul(x, lw_arg(L, 0, sc), scale);
  if (n->attr.causal) {
    /* query s sits at absolute position s + (T - S): keys after it are masked */
    Expr *masked = ex_bin(x, X_LT, ex_add(x, i2, ex_bin(x, X_SUB, T, S)), i3);
    fn = ex_select(x, masked, lw_f32(L, -INFINITY), fn);
  }
  int msrc[2] = {sc, -1}, nms = 1;
  if (n->nin == 4) { /* keys from kv_len[b] on are masked */
    int len = lw_node(L, n->in[3]);
    if (len < 0) return -1;
    Expr *li[1] = {i0};
    msrc[nms++] = t_view(L->p, len, &ss, li, NULL);
    Expr *masked = ex_bin(x, X_LE, ex_cast(x, DT_I64, lw_arg(L, 1, len)), i3);
    fn = ex_select(x, masked, lw_f32(L, -INFINITY), fn);
  }
  int sm = t_map(L->p, fn, DT_F32, &ss, msrc, nms);
  int pr = lw_softmax(L, sm, 1u << 3, DT_F32);

  /* out [B,H,S,DV] = sum_t p[b,h,s,t] v[b,h/g,t,dv] */
  Shape c2 = {5, {B, H, S, DV, T}};
  Expr *pi[4] = {i0, i1, i2, i4}, *vi[4] = {i0, kvh, i4, i3};
  int pv = t_view(L->p, pr, &c2, pi, NULL), vv = t_view(L->p, v, &c2, vi, NULL);
  int o = t_contract(L->p, pv, vv, 1u << 4);
  Shape os = {4, {B, H, S, DV}};
  return lw_drop(L, o, 1u << 4, &os);
}
