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

const char *device_sampler_source(void) { return sampler_source; }
