/* Sampling on the GPU: sampler.h's rule as one CUDA kernel over the logits a plan left on the device,
 * so a sampled decode step copies back 4 bytes instead of the vocabulary's logits.
 *
 * One block of 1024 threads, in sweeps over the logits (8 loads in flight per thread: one block has
 * few warps to hide latency with):
 *   - the maximum;
 *   - top-k (k <= 1024): a histogram of each logit's distance below the maximum in 1/64 steps, then
 *     the logits down to the bin where the count reaches k are gathered into shared memory, where the
 *     exact k-th largest key, the top-p threshold (the largest weight whose mass at or above it
 *     reaches top_p of the total) and the draw (kept weights in vocabulary order) are found without
 *     touching the other logits again;
 *   - otherwise (no top-k, k > 1024, or too many ties to gather): radix selection, 8 bits of the
 *     order-preserving key (top-k) or of the weight's bits (top-p) per sweep, with 256-bin histograms
 *     in shared memory where the lanes of a warp that hit the same bin add their amounts first (most
 *     logits share their top bits: one atomic per element made a step cost 1.5 ms); then each thread
 *     sums the kept weights of its contiguous slice, a scan over the threads finds the slice holding
 *     u * total, and that thread walks its slice.
 * Weights are 40-bit fixed point (sampler.h), so the integer sums give the same token on every run. */
#include "sampler_device.h"
#include "../code/templates.h"
#include "../base/mem.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The kernel is src/code/templates/sampler.cuh, embedded at build time. */
static const char *const sampler_source = lt_embed_sampler;

struct DeviceSampler {
  Backend *b;
  BackendModule *m;
  int32_t *out; /* device: the token */
  /* device_sampler_pick_rows: the rows' tokens and parameters on the device, and the parameters' host copy */
  int32_t *rows_out;
  int64_t *rows_params, *host_params;
  int cap_rows;
};

DeviceSampler *device_sampler_new(Backend *b, Diag *d) {
  DeviceSampler *s = xcalloc(1, sizeof *s, "the device sampler");
  s->b = b;
  if (!(s->m = b->ops->compile(b, sampler_source, d)) || !(s->out = b->ops->alloc(b, sizeof(int32_t), d))) {
    device_sampler_free(s);
    return NULL;
  }
  return s;
}

void device_sampler_free(DeviceSampler *s) {
  if (!s) return;
  if (s->out) s->b->ops->free(s->b, s->out);
  if (s->rows_out) s->b->ops->free(s->b, s->rows_out);
  if (s->rows_params) s->b->ops->free(s->b, s->rows_params);
  free(s->host_params);
  if (s->m) s->b->ops->module_free(s->b, s->m);
  free(s);
}

static int64_t float_bits(float f) {
  int32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

int device_sampler_pick(DeviceSampler *s, const SamplerOptions *o, float u, const void *logits, int64_t vocab,
                        int32_t *token, Diag *d) {
  const BackendOps *ops = s->b->ops;
  if (vocab < 1 || vocab > INT32_MAX || !logits) {
    diag_error(d, 0, 0, "device sampler: no logits to sample (%lld)", (long long)vocab);
    return 0;
  }
  void *bufs[2] = {s->out, (void *)logits};
  int64_t syms[5] = {vocab, float_bits(sampler_is_greedy(o) ? 0.0f : (float)o->temperature), o->top_k,
                     float_bits((float)o->top_p), float_bits(u)};
  if (!ops->launch(s->b, s->m, "lathe_sample", bufs, 2, syms, 5, 1, 1024, d) ||
      !ops->download(s->b, token, s->out, sizeof *token, d))
    return 0;
  if (*token < 0 || *token >= vocab) {
    diag_error(d, 0, 0, "the device sampler returned token %d, outside the vocabulary [0, %lld)", *token,
               (long long)vocab);
    return 0;
  }
  return 1;
}

static int grow_rows(DeviceSampler *s, int n, Diag *d) {
  if (n <= s->cap_rows) return 1;
  int cap = s->cap_rows ? s->cap_rows : 16;
  while (cap < n) cap *= 2;
  const BackendOps *ops = s->b->ops;
  if (s->rows_out) ops->free(s->b, s->rows_out);
  if (s->rows_params) ops->free(s->b, s->rows_params);
  s->rows_params = NULL;
  s->cap_rows = 0;
  if (!(s->rows_out = ops->alloc(s->b, sizeof(int32_t) * (size_t)cap, d)) ||
      !(s->rows_params = ops->alloc(s->b, sizeof(int64_t) * 5 * (size_t)cap, d)))
    return 0;
  s->host_params = xrealloc(s->host_params, sizeof(int64_t) * 5 * (size_t)cap, "the sampler's parameters");
  s->cap_rows = cap;
  return 1;
}

int device_sampler_pick_rows(DeviceSampler *s, int n, const SamplerOptions *const *o, const float *u,
                             const int32_t *rows, const void *logits, int64_t vocab, int32_t *tokens, Diag *d) {
  const BackendOps *ops = s->b->ops;
  if (n <= 0) return 1;
  if (vocab < 1 || vocab > INT32_MAX || !logits || n > 65535) {
    diag_error(d, 0, 0, "device sampler: %d rows of %lld logits cannot be sampled", n, (long long)vocab);
    return 0;
  }
  if (!grow_rows(s, n, d)) return 0;
  for (int b = 0; b < n; b++) {
    int64_t *q = s->host_params + 5 * (size_t)b;
    q[0] = rows[b];
    q[1] = float_bits(sampler_is_greedy(o[b]) ? 0.0f : (float)o[b]->temperature);
    q[2] = o[b]->top_k;
    q[3] = float_bits((float)o[b]->top_p);
    q[4] = float_bits(u[b]);
  }
  void *bufs[3] = {s->rows_out, (void *)logits, s->rows_params};
  int64_t syms[1] = {vocab};
  if (!ops->upload(s->b, s->rows_params, s->host_params, sizeof(int64_t) * 5 * (size_t)n, d) ||
      !ops->launch(s->b, s->m, "lathe_sample_rows", bufs, 3, syms, 1, n, 1024, d) ||
      !ops->download(s->b, tokens, s->rows_out, sizeof(int32_t) * (size_t)n, d))
    return 0;
  for (int b = 0; b < n; b++)
    if (tokens[b] < 0 || tokens[b] >= vocab) {
      diag_error(d, 0, 0, "the device sampler returned token %d for row %d, outside the vocabulary [0, %lld)",
                 tokens[b], rows[b], (long long)vocab);
      return 0;
    }
  return 1;
}

const char *device_sampler_source(void) { return sampler_source; }
