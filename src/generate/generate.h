/* Text generation over a loaded model: chunked prefill, then one decode step per token, with
 * sampling, stop conditions, streaming through a callback, and speed statistics. */
#ifndef LATHE_GENERATE_H
#define LATHE_GENERATE_H
#include <signal.h>
#include "model.h"
#include "sampler.h"

typedef struct GenerateOptions {
  int max_tokens;
  int prefill_chunk; /* tokens per prefill step */
  SamplerOptions sampling;
  const char *stop[8]; /* stop strings (checked on the decoded text) */
  int nstop;
  int ignore_eos;
  /* When non-NULL and set (by a signal handler or another thread), generation stops before its next
   * prefill chunk or decode step, with stop_reason "interrupted"; what was generated is kept. */
  const volatile sig_atomic_t *interrupt;
} GenerateOptions;

typedef struct GenerateStats {
  int prompt_tokens, generated;
  double prefill_ms, decode_ms;
  const char *stop_reason; /* "eos", "stop", "length", "context", "interrupted" */
} GenerateStats;

/* Called with each new token and its newly complete text (may be ""); return non-zero to stop. */
typedef int (*TokenCallback)(void *ctx, int32_t id, const char *text);

/* Generates after `prompt` (the whole token sequence; tokens[0..past) already in the cache are reused
 * when *cached says so). *cached is updated to the number of tokens now in the cache, and the new
 * tokens are appended to out/nout (malloc'ed, grown). */
int generate(Model *m, const int32_t *prompt, int nprompt, int *cached, const GenerateOptions *o, TokenCallback cb,
             void *ctx, int32_t **out, int *nout, GenerateStats *st, Diag *d);
#endif
