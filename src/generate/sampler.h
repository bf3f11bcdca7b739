/* Choosing the next token from logits: greedy, or temperature / top-k / top-p sampling with a seeded
 * generator, so a run with the same seed gives the same tokens.
 *
 * The rule (the same on the host, sampler_pick, and on the GPU, sampler_device.c):
 *   1. temperature <= 0: the argmax (first maximum).
 *   2. candidates: the top_k largest logits (0 = all); ties at the k-th value are all kept.
 *   3. weights z = exp((logit - max) / temperature), as fixed-point integers W = floor(z * 2^40), so
 *      sums do not depend on the order they are added in (z < 2^-40 weighs nothing).
 *   4. top-p: the candidates whose weight is at least the largest threshold t with
 *      sum(W of candidates with z >= t) >= top_p * sum(W of candidates): the smallest set of the
 *      heaviest candidates holding top_p of the mass (ties at t all kept).
 *   5. one uniform u in [0, 1) (from the seeded generator) picks the kept token whose cumulative
 *      weight, in vocabulary order, first exceeds u * (their total).
 * Each step selects thresholds with a few passes over the logits (radix selection on the floats'
 * bits; for top-k, first the few logits near the maximum), never a sort. */
#ifndef LATHE_SAMPLER_H
#define LATHE_SAMPLER_H
#include <stdint.h>

typedef struct SamplerOptions {
  int greedy;         /* argmax; ignores the rest */
  double temperature; /* <= 0 means greedy */
  int top_k;          /* 0 = off */
  double top_p;       /* 1 = off */
  uint64_t seed;
} SamplerOptions;

typedef struct Sampler {
  SamplerOptions o;
  uint64_t state;
  float *z; /* host scratch: the weights of a step */
  int *idx; /* host scratch: top-k's candidates */
  int cap;
} Sampler;

/* lathe generate's defaults: temperature 0.7, top-k 40, top-p 0.9, seed 0 */
SamplerOptions sampler_defaults(void);
void sampler_init(Sampler *s, const SamplerOptions *o);
void sampler_free(Sampler *s);
int sampler_is_greedy(const SamplerOptions *o);
/* The step's uniform in [0, 1): 24 random bits, exactly representable as a float. */
float sampler_draw(Sampler *s);
/* Rule steps 1-5 on host logits with uniform u. */
int sampler_pick(Sampler *s, float u, const float *logits, int vocab);
/* sampler_pick with the next uniform (or the argmax when greedy). */
int sampler_next(Sampler *s, const float *logits, int vocab);
int argmax(const float *v, int n);
/* Order-preserving integer key of a float (larger float, larger key; NaN lowest). */
uint32_t sampler_key(float f);
#define SAMPLER_ONE 1099511627776.0 /* 2^40: the fixed-point weight of z = 1 */
#endif
