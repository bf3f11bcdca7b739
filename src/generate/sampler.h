/* Choosing the next token from logits: greedy, or temperature / top-k / top-p sampling with a seeded
 * generator, so a run with the same seed gives the same tokens. */
#ifndef LATHE_SAMPLER_H
#define LATHE_SAMPLER_H
#include <stdint.h>

typedef struct SamplerOptions {
  int greedy;          /* argmax; ignores the rest */
  double temperature;  /* <= 0 means greedy */
  int top_k;           /* 0 = off */
  double top_p;        /* 1 = off */
  uint64_t seed;
} SamplerOptions;

typedef struct Sampler {
  SamplerOptions o;
  uint64_t state;
  int *order;  /* scratch: candidate ids */
  float *prob; /* scratch */
  int cap;
} Sampler;

void sampler_init(Sampler *s, const SamplerOptions *o);
void sampler_free(Sampler *s);
int sampler_next(Sampler *s, const float *logits, int vocab);
int argmax(const float *v, int n);
#endif
