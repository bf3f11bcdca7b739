/* The host sampler (the rule is in sampler.h). */
#include "sampler.h"
#include "../base/mem.h"
#include "../base/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

SamplerOptions sampler_defaults(void) {
  return (SamplerOptions){.temperature = 0.7, .top_k = 40, .top_p = 0.9, .seed = 0};
}

void sampler_init(Sampler *s, const SamplerOptions *o) {
  s->o = *o;
  s->state = o->seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
  s->z = NULL;
  s->idx = NULL;
  s->cap = 0;
}

void sampler_free(Sampler *s) {
  free(s->z);
  free(s->idx);
  s->z = NULL;
  s->idx = NULL;
  s->cap = 0;
}

int sampler_is_greedy(const SamplerOptions *o) { return o->greedy || !(o->temperature > 0); }

float sampler_draw(Sampler *s) { return (float)(splitmix64(&s->state) >> 40) * (1.0f / 16777216.0f); }

int argmax(const float *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best] || (v[best] != v[best] && v[i] == v[i])) best = i;
  return best;
}

uint32_t sampler_key(float f) {
  if (f != f) return 0;
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return (x & 0x80000000u) ? ~x : x | 0x80000000u;
}

static uint32_t zbits(float z) {
  uint32_t x;
  memcpy(&x, &z, sizeof x);
  return x; /* z >= 0: the bits order like the values */
}

/* The largest 32-bit value t, found 8 bits at a time, with amount(items >= t) >= need, where
 * key(i) is item i's key and amount(i) its count or weight (0 = not an item). */
typedef uint64_t (*AmountFn)(const void *ctx, int i, uint32_t *key);
static uint32_t radix_select(const void *ctx, int n, AmountFn amount, uint64_t need) {
  uint32_t prefix = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    uint64_t hist[256] = {0};
    uint32_t high = shift == 24 ? 0 : ~0u << (shift + 8);
    for (int i = 0; i < n; i++) {
      uint32_t key;
      uint64_t a = amount(ctx, i, &key);
      if (a && (key & high) == prefix) hist[(key >> shift) & 255] += a;
    }
    uint64_t above = 0;
    int b = 255;
    while (b > 0 && above + hist[b] < need) above += hist[b--];
    prefix |= (uint32_t)b << shift;
    need -= above;
  }
  return prefix;
}

/* The tokens a step weighs: all of them (idx NULL), or the listed ones in vocabulary order. */
typedef struct Step {
  const float *logits;
  const int *idx;
  const float *z; /* per item */
  uint32_t kth;
} Step;

static float logit_of(const Step *s, int item) { return s->logits[s->idx ? s->idx[item] : item]; }

static uint64_t count_logit(const void *ctx, int item, uint32_t *key) {
  *key = sampler_key(logit_of(ctx, item));
  return 1;
}

/* 0 for tokens that are not candidates, and for NaN logits (z is NaN) */
static uint64_t weight_of(const Step *s, int item) {
  return sampler_key(logit_of(s, item)) >= s->kth && s->z[item] > 0 ? (uint64_t)((double)s->z[item] * SAMPLER_ONE) : 0;
}

static uint64_t mass_of(const void *ctx, int item, uint32_t *key) {
  const Step *s = ctx;
  *key = zbits(s->z[item]);
  return weight_of(s, item);
}

/* Top-k's candidates without a pass per key byte: a histogram of each logit's distance below the
 * maximum in 1/64 steps finds the distance within which k logits lie; those (a few more than k) are
 * listed in vocabulary order. 0 when fewer than k lie within 32 of the maximum. */
enum { NEAR_BINS = 2048 }; /* 32 logits below the maximum in 1/64 steps */

static int near_candidates(const float *logits, int vocab, float mx, int k, int *idx) {
  int near[NEAR_BINS] = {0};
  for (int i = 0; i < vocab; i++) {
    float d = mx - logits[i];
    if (d < 32.0f) near[(int)(d * 64.0f)]++;
  }
  int cut = 0, run = 0;
  while (cut < NEAR_BINS && run + near[cut] < k) run += near[cut++];
  if (cut == NEAR_BINS) return 0;
  int n = 0;
  for (int i = 0; i < vocab; i++) {
    float d = mx - logits[i];
    if (d < 32.0f && (int)(d * 64.0f) <= cut) idx[n++] = i;
  }
  return n;
}

int sampler_pick(Sampler *s, float u, const float *logits, int vocab) {
  if (sampler_is_greedy(&s->o) || vocab < 1) return argmax(logits, vocab);
  if (s->cap < vocab) {
    free(s->z);
    free(s->idx);
    s->z = xmalloc(sizeof(float) * (size_t)vocab, "the sampler");
    s->idx = xmalloc(sizeof(int) * (size_t)vocab, "the sampler");
    s->cap = vocab;
  }
  int best = argmax(logits, vocab);
  float mx = logits[best], t = (float)s->o.temperature;
  if (!isfinite(mx)) return best; /* nothing finite to weigh */
  Step st = {logits, NULL, s->z, 0};
  int n = vocab;
  if (s->o.top_k > 0 && s->o.top_k < vocab) {
    int cn = near_candidates(logits, vocab, mx, s->o.top_k, s->idx);
    if (cn > 0) { /* the k-th largest key among them is the k-th largest of all */
      st.idx = s->idx;
      n = cn;
    }
    st.kth = radix_select(&st, n, count_logit, (uint64_t)s->o.top_k);
  }
  uint64_t total = 0;
  for (int j = 0; j < n; j++) {
    s->z[j] = expf((logit_of(&st, j) - mx) / t);
    total += weight_of(&st, j);
  }
  uint32_t zth = 0;
  if (s->o.top_p > 0 && s->o.top_p < 1) {
    uint64_t need = (uint64_t)(s->o.top_p * (double)total);
    zth = radix_select(&st, n, mass_of, need ? need : 1);
  }
  uint64_t kept = 0;
  for (int j = 0; j < n; j++)
    if (zbits(s->z[j]) >= zth) kept += weight_of(&st, j);
  uint64_t r = (uint64_t)((double)u * (double)kept), acc = 0;
  int last = best;
  for (int j = 0; j < n; j++) {
    if (zbits(s->z[j]) < zth) continue;
    uint64_t w = weight_of(&st, j);
    if (!w) continue;
    last = st.idx ? st.idx[j] : j;
    acc += w;
    if (acc > r) return last;
  }
  return last;
}

int sampler_next(Sampler *s, const float *logits, int vocab) {
  if (sampler_is_greedy(&s->o)) return argmax(logits, vocab);
  return sampler_pick(s, sampler_draw(s), logits, vocab);
}
