#include "sampler.h"
#include "../base/rng.h"
#include <math.h>
#include <stdlib.h>

void sampler_init(Sampler *s, const SamplerOptions *o) {
  s->o = *o;
  s->state = o->seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
  s->order = NULL;
  s->prob = NULL;
  s->cap = 0;
}

void sampler_free(Sampler *s) {
  free(s->order);
  free(s->prob);
  s->order = NULL;
  s->prob = NULL;
}


int argmax(const float *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

static const float *sort_logits;
static int by_logit_desc(const void *a, const void *b) {
  float x = sort_logits[*(const int *)a], y = sort_logits[*(const int *)b];
  if (x != y) return x < y ? 1 : -1;
  return *(const int *)a - *(const int *)b; /* ties: lower id first, deterministic */
}

int sampler_next(Sampler *s, const float *logits, int vocab) {
  if (s->o.greedy || s->o.temperature <= 0) return argmax(logits, vocab);
  if (s->cap < vocab) {
    free(s->order);
    free(s->prob);
    s->order = malloc(sizeof(int) * (size_t)vocab);
    s->prob = malloc(sizeof(float) * (size_t)vocab);
    if (!s->order || !s->prob) abort();
    s->cap = vocab;
  }
  for (int i = 0; i < vocab; i++) s->order[i] = i;
  sort_logits = logits;
  qsort(s->order, (size_t)vocab, sizeof(int), by_logit_desc);
  int n = s->o.top_k > 0 && s->o.top_k < vocab ? s->o.top_k : vocab;
  /* softmax over the candidates at the temperature, in sorted order */
  double mx = logits[s->order[0]], sum = 0;
  for (int i = 0; i < n; i++) sum += s->prob[i] = (float)exp((logits[s->order[i]] - mx) / s->o.temperature);
  /* top-p: the smallest prefix whose mass reaches p */
  if (s->o.top_p > 0 && s->o.top_p < 1) {
    double acc = 0;
    int keep = n;
    for (int i = 0; i < n; i++) {
      acc += s->prob[i] / sum;
      if (acc >= s->o.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    sum = 0;
    for (int i = 0; i < n; i++) sum += s->prob[i];
  }
  double r = splitmix64_unit(&s->state) * sum;
  for (int i = 0; i < n; i++) {
    r -= s->prob[i];
    if (r < 0) return s->order[i];
  }
  return s->order[n - 1];
}
