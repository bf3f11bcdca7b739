/* Sampling on the device (sampler.h's rule) for backends that compile CUDA C: one kernel reads the
 * logits a plan left on the device and writes the token. */
#ifndef LATHE_SAMPLER_DEVICE_H
#define LATHE_SAMPLER_DEVICE_H
#include "../backend/backend.h"
#include "sampler.h"

typedef struct DeviceSampler DeviceSampler;
/* Compiles the kernel (through the backend's cache) and allocates its output. NULL with d on failure. */
DeviceSampler *device_sampler_new(Backend *b, Diag *d);
void device_sampler_free(DeviceSampler *s);
/* The token for device logits[0..vocab) with uniform u (sampler_draw); greedy options give the argmax. */
int device_sampler_pick(DeviceSampler *s, const SamplerOptions *o, float u, const void *logits, int64_t vocab,
                        int32_t *token, Diag *d);
/* A batched step's sampled rows in one launch: for each b < n, tokens[b] is the token for logits row rows[b]
 * (each vocab wide) with options o[b] and uniform u[b]; one upload and one download. */
int device_sampler_pick_rows(DeviceSampler *s, int n, const SamplerOptions *const *o, const float *u,
                             const int32_t *rows, const void *logits, int64_t vocab, int32_t *tokens, Diag *d);
/* The CUDA C source, for tests that compile it. */
const char *device_sampler_source(void);
#endif
