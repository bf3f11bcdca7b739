/* The learned prior's features, score, JSON form, fit and gate (prior.h). */
#include "prior.h"
#include "search.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double log2p(double x) { return x > 1 ? log2(x) : 0; }

static double extent_at(const Expr *e, const SymEnv *env) {
  int64_t v;
  return e && ex_eval_int(e, env, &v) && v > 0 ? (double)v : 1;
}

void prior_kernel_features(const LKernel *k, const SymEnv *env, const TargetDesc *dev,
                           double f[PRIOR_KERNEL_FEATURES]) {
  double points = 1, reduce = 1;
  for (int i = 0; i < k->npar; i++) points *= extent_at(k->par[i].extent, env);
  for (int i = 0; k->nphase > 0 && i < k->phases[0].naxes; i++) reduce *= extent_at(k->phases[0].axes[i].extent, env);
  f[0] = 1;
  f[1] = log2p(points) / 20;
  f[2] = log2p(reduce) / 16;
  f[3] = k->nphase > 0;
  f[4] = k->ninner > 0;
  f[5] = k->npar ? log2p(extent_at(k->par[k->npar - 1].extent, env)) / 16 : 0;
  f[6] = dev->kind == TARGET_CUDA;
  f[7] = log2p(dev->sms) / 8;
  f[8] = k->npar / 4.0;               /* with the blocked axis (schedule feature 15): whether it is the innermost */
  f[9] = log2p(points * reduce) / 30; /* the work: what threads' start-up is worth against */
}

void prior_schedule_features(const Schedule *s, double f[PRIOR_SCHEDULE_FEATURES]) {
  f[0] = s->red == RS_SERIAL;
  f[1] = s->red == RS_WARP;
  f[2] = s->red == RS_BLOCK;
  f[3] = log2p(s->block_threads) / 10;
  f[4] = log2p(s->vec) / 3;
  f[5] = s->omp != 0;
  f[6] = s->rows > 1;
  f[7] = log2p(s->rows) / 3;
  f[8] = s->rows > 1 && s->rows_serial;
  f[9] = s->rows > 1 && s->mma > 0;
  f[10] = s->rows > 1 && s->flash > 0;
  f[11] = s->flash_decode != 0;
  f[12] = s->flash_decode ? log2p(s->decode_fill) / 12 : 0;
  f[13] = s->rows > 1 && s->mma > 0 && s->gemm_fill > 0;
  f[14] = s->rows > 1 && s->mma > 0 && s->gemm_library;
  f[15] = s->rows > 1 ? (s->row_axis + 1) / 4.0 : 0;
  f[16] = f[5] * f[4]; /* knobs that act together: threads' share of a wider loop, blocked rows' vectors */
  f[17] = f[6] * f[4];
}

static void cross(const double kf[PRIOR_KERNEL_FEATURES], const Schedule *s,
                  double x[PRIOR_SCHEDULE_FEATURES][PRIOR_KERNEL_FEATURES]) {
  double sf[PRIOR_SCHEDULE_FEATURES];
  prior_schedule_features(s, sf);
  for (int i = 0; i < PRIOR_SCHEDULE_FEATURES; i++)
    for (int j = 0; j < PRIOR_KERNEL_FEATURES; j++) x[i][j] = sf[i] * kf[j];
}

double prior_score(const Prior *p, const double kf[PRIOR_KERNEL_FEATURES], const Schedule *s) {
  double x[PRIOR_SCHEDULE_FEATURES][PRIOR_KERNEL_FEATURES], score = 0;
  cross(kf, s, x);
  for (int i = 0; i < PRIOR_SCHEDULE_FEATURES; i++)
    for (int j = 0; j < PRIOR_KERNEL_FEATURES; j++) score += p->w[i][j] * x[i][j];
  return score;
}

int prior_pick(const Prior *p, const double kf[PRIOR_KERNEL_FEATURES], const Schedule *cand, int n) {
  if (n < 1) return 0;
  const double def = prior_score(p, kf, &cand[0]);
  int pick = 0;
  double best = def;
  for (int i = 1; i < n; i++) {
    if (p->reach > 0 && schedule_distance(&cand[0], &cand[i]) > p->reach) continue;
    double sc = prior_score(p, kf, &cand[i]);
    if (sc > best) best = sc, pick = i;
  }
  return pick;
}

int prior_parse(const char *text, const char *what, Prior *out, Diag *d) {
  memset(out, 0, sizeof *out);
  while (*text == ' ' || *text == '\n' || *text == '\t' || *text == '\r') text++;
  if (!*text) return 1; /* no prior */
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) {
    diag_error(d, err.line > 0 ? err.line : 0, err.column > 0 ? err.column : 0, "%s: %s", what, err.text);
    return 0;
  }
  const char *format = json_string_value(json_object_get(root, "format"));
  json_t *version = json_object_get(root, "version"), *w = json_object_get(root, "weights");
  int ok = format && !strcmp(format, "lathe-prior") && json_integer_value(version) == 1 && json_is_array(w) &&
           json_array_size(w) == PRIOR_SCHEDULE_FEATURES;
  for (size_t i = 0; ok && i < PRIOR_SCHEDULE_FEATURES; i++) {
    json_t *row = json_array_get(w, i);
    ok = json_is_array(row) && json_array_size(row) == PRIOR_KERNEL_FEATURES;
    for (size_t j = 0; ok && j < PRIOR_KERNEL_FEATURES; j++) {
      json_t *v = json_array_get(row, j);
      ok = json_is_number(v) && isfinite(json_number_value(v));
      if (ok) out->w[i][j] = json_number_value(v);
    }
  }
  if (!ok) {
    diag_error(d, 0, 0,
               "%s: not a lathe prior ({\"format\": \"lathe-prior\", \"version\": 1, \"weights\": %d rows of %d "
               "finite numbers})",
               what, PRIOR_SCHEDULE_FEATURES, PRIOR_KERNEL_FEATURES);
    memset(out, 0, sizeof *out);
  } else {
    json_t *reach = json_object_get(root, "reach");
    if (reach && (!json_is_integer(reach) || json_integer_value(reach) < 0)) {
      diag_error(d, 0, 0, "%s: \"reach\" must be a whole number >= 0 (0: anywhere)", what);
      memset(out, 0, sizeof *out);
      json_decref(root);
      return 0;
    }
    out->reach = reach ? (int)json_integer_value(reach) : 0;
    out->pairs = (int)json_integer_value(json_object_get(root, "pairs"));
    out->kernels = (int)json_integer_value(json_object_get(root, "kernels"));
    out->loaded = 1;
  }
  json_decref(root);
  return ok;
}

char *prior_to_json(const Prior *p) {
  json_t *w = json_array();
  for (int i = 0; i < PRIOR_SCHEDULE_FEATURES; i++) {
    json_t *row = json_array();
    for (int j = 0; j < PRIOR_KERNEL_FEATURES; j++)
      json_array_append_new(row, json_real(round(p->w[i][j] * 1e6) / 1e6));
    json_array_append_new(w, row);
  }
  json_t *root = json_pack("{s:s, s:i, s:i, s:i, s:i, s:o}", "format", "lathe-prior", "version", 1, "kernels",
                           p->kernels, "pairs", p->pairs, "reach", p->reach, "weights", w);
  char *text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
  json_decref(root);
  return text;
}

extern const char lt_embed_prior[];      /* goldens/prior.json, embedded by the Makefile */
extern const char lt_embed_prior_cuda[]; /* goldens/prior-cuda.json */

static const Prior *parsed_once(const char *text, Prior *p, int *parsed) {
  if (!*parsed) {
    Diag d = {0};
    if (!prior_parse(text, "the built-in prior", p, &d)) memset(p, 0, sizeof *p); /* never shipped */
    *parsed = 1;
  }
  return p;
}

const Prior *prior_builtin(void) {
  static Prior p;
  static int parsed;
  return parsed_once(lt_embed_prior, &p, &parsed);
}

const Prior *prior_builtin_for(Target t) {
  static Prior cuda;
  static int parsed;
  return t == TARGET_CUDA ? parsed_once(lt_embed_prior_cuda, &cuda, &parsed) : prior_builtin();
}

/* ---- fitting ---- */

typedef struct Pair {
  double x[PRIOR_SCHEDULE_FEATURES][PRIOR_KERNEL_FEATURES]; /* features of the faster minus the slower */
  double weight;                                            /* 1 / the kernel's pairs: every kernel counts alike */
} Pair;

void prior_fit(const PriorKernel *k, int nk, double l2, Prior *out) {
  memset(out, 0, sizeof *out);
  int cap = 0, n = 0;
  Pair *pairs = NULL;
  double *median = calloc((size_t)nk + 1, sizeof *median);
  for (int a = 0; median && a < nk; a++) { /* the slowest of the faster half, as the gate counts it */
    double *v = malloc(sizeof *v * (size_t)(k[a].n + 1));
    if (!v) break;
    memcpy(v, k[a].us, sizeof *v * (size_t)k[a].n);
    for (int i = 0; i < k[a].n; i++)
      for (int j = i + 1; j < k[a].n; j++)
        if (v[j] < v[i]) {
          double t = v[i];
          v[i] = v[j], v[j] = t;
        }
    median[a] = k[a].n ? v[(k[a].n + 1) / 2 - 1] : 0;
    free(v);
  }
  for (int a = 0; median && a < nk; a++) {
    int first = n;
    for (int i = 0; i < k[a].n; i++)
      for (int j = 0; j < k[a].n; j++) {
        if (!(k[a].us[i] < k[a].us[j] * 0.97)) continue;
        /* what matters is telling the faster half from the slower: pairs across the median, weighted by how
         * far apart they are (a 3% difference is as likely noise as not) */
        if (!(k[a].us[i] <= median[a] && k[a].us[j] > median[a])) continue;
        if (n == cap) {
          cap = cap ? 2 * cap : 256;
          Pair *grown = realloc(pairs, sizeof *pairs * (size_t)cap);
          if (!grown) goto done;
          pairs = grown;
        }
        double xi[PRIOR_SCHEDULE_FEATURES][PRIOR_KERNEL_FEATURES], xj[PRIOR_SCHEDULE_FEATURES][PRIOR_KERNEL_FEATURES];
        cross(k[a].kf, &k[a].s[i], xi);
        cross(k[a].kf, &k[a].s[j], xj);
        for (int r = 0; r < PRIOR_SCHEDULE_FEATURES; r++)
          for (int c = 0; c < PRIOR_KERNEL_FEATURES; c++) pairs[n].x[r][c] = xi[r][c] - xj[r][c];
        pairs[n].weight = fmin(log(k[a].us[j] / k[a].us[i]), 1.0);
        n++;
      }
    double sum = 0;
    for (int p = first; p < n; p++) sum += pairs[p].weight;
    for (int p = first; p < n; p++) pairs[p].weight /= sum;
    out->kernels += n > first;
  }
  out->pairs = n;
  /* gradient descent on sum of weight * log(1 + exp(-w.x)) / kernels + lambda |w|^2 */
  const double lambda = l2, rate = 20.0;
  for (int it = 0; it < 20000 && n > 0; it++) {
    double g[PRIOR_SCHEDULE_FEATURES][PRIOR_KERNEL_FEATURES] = {{0}};
    for (int p = 0; p < n; p++) {
      double z = 0;
      for (int r = 0; r < PRIOR_SCHEDULE_FEATURES; r++)
        for (int c = 0; c < PRIOR_KERNEL_FEATURES; c++) z += out->w[r][c] * pairs[p].x[r][c];
      double coef = -pairs[p].weight / (1 + exp(z)); /* d/dz log(1 + exp(-z)) */
      for (int r = 0; r < PRIOR_SCHEDULE_FEATURES; r++)
        for (int c = 0; c < PRIOR_KERNEL_FEATURES; c++) g[r][c] += coef * pairs[p].x[r][c];
    }
    for (int r = 0; r < PRIOR_SCHEDULE_FEATURES; r++)
      for (int c = 0; c < PRIOR_KERNEL_FEATURES; c++)
        out->w[r][c] -= rate * (g[r][c] / out->kernels + 2 * lambda * out->w[r][c]);
  }
done:
  out->loaded = 1;
  free(pairs);
  free(median);
}

void prior_gate(const Prior *p, const PriorKernel *k, int nk, int min_pool, int *counted, int *passed,
                unsigned char *missed) {
  *counted = *passed = 0;
  for (int a = 0; a < nk; a++) {
    if (k[a].n < min_pool || k[a].n < 2) continue;
    const int pick = prior_pick(p, k[a].kf, k[a].s, k[a].n);
    int faster = 0; /* measurements faster than the pick */
    for (int i = 0; i < k[a].n; i++) faster += k[a].us[i] < k[a].us[pick];
    (*counted)++;
    *passed += faster < (k[a].n + 1) / 2;
    if (missed) missed[a] = faster >= (k[a].n + 1) / 2;
  }
}
