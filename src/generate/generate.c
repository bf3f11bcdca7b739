#include "generate.h"
#include "../base/clock.h"
#include <stdlib.h>
#include <string.h>

static int interrupted(const GenerateOptions *o) { return o->interrupt && *o->interrupt; }

static int push(int32_t **out, int *n, int *cap, int32_t id) {
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 64;
    int32_t *o = realloc(*out, sizeof(int32_t) * (size_t)*cap);
    if (!o) return 0;
    *out = o;
  }
  (*out)[(*n)++] = id;
  return 1;
}

int generate(Model *m, const int32_t *prompt, int nprompt, int *cached, const GenerateOptions *o, TokenCallback cb,
             void *ctx, int32_t **out, int *nout, GenerateStats *st, Diag *d) {
  memset(st, 0, sizeof *st);
  st->prompt_tokens = nprompt;
  if (nprompt <= 0) {
    diag_error(d, 0, 0, "empty prompt: give at least one token");
    return 0;
  }
  if (nprompt >= m->max_ctx) {
    diag_error(d, 0, 0, "the prompt has %d tokens but the context holds %d", nprompt, m->max_ctx);
    return 0;
  }
  /* Reuse what the cache already holds; always recompute at least the last prompt token. */
  int past = cached ? *cached : 0;
  if (past >= nprompt) past = nprompt - 1;
  int chunk = o->prefill_chunk > 0 ? o->prefill_chunk : 256;
  /* The next token comes from the device (its argmax, or its sampler on CUDA); only a host sampler
   * needs the logits copied back. The prompt's chunks before the last need no token at all. */
  Sampler s;
  sampler_init(&s, &o->sampling);
  int32_t next = -1;
  double t0 = now_ms();
  st->stop_reason = "length";
  while (past < nprompt) {
    if (interrupted(o)) {
      st->stop_reason = "interrupted";
      break;
    }
    int n = nprompt - past < chunk ? nprompt - past : chunk;
    int ok = past + n < nprompt ? model_step_greedy(m, prompt + past, n, past, &next, d)
                                : model_step_sample(m, prompt + past, n, past, &s, &next, d);
    if (!ok) {
      sampler_free(&s);
      return 0;
    }
    past += n;
  }
  st->prefill_ms = now_ms() - t0;
  int prefilled = past == nprompt;
  DecodeState ds = {0};
  StrBuf text = {0}, piece = {0};
  int cap = *nout, ok = 1;
  double t1 = now_ms();
  for (int i = 0; prefilled && i < o->max_tokens; i++) {
    int32_t id = next;
    if (!o->ignore_eos && model_is_eos(m, id)) {
      st->stop_reason = "eos";
      break;
    }
    if (!push(out, nout, &cap, id)) {
      diag_error(d, 0, 0, "out of memory: %zu bytes for the generated tokens", sizeof(int32_t) * (size_t)cap);
      ok = 0;
      break;
    }
    st->generated++;
    sb_clear(&piece);
    if (m->tok) tokenizer_decode_step(m->tok, &ds, id, 1, &piece);
    sb_puts(&text, sb_str(&piece));
    int stop = 0;
    for (int k = 0; k < o->nstop && !stop; k++) stop = o->stop[k][0] && strstr(sb_str(&text), o->stop[k]);
    if (cb && cb(ctx, id, sb_str(&piece))) stop = 1;
    if (stop) {
      st->stop_reason = "stop";
      break;
    }
    if (i + 1 == o->max_tokens) break; /* no step needed for a token we will not sample from */
    if (interrupted(o)) {
      st->stop_reason = "interrupted";
      break;
    }
    if (past + 1 > m->max_ctx) {
      st->stop_reason = "context";
      break;
    }
    if (!model_step_sample(m, &id, 1, past, &s, &next, d)) {
      ok = 0;
      break;
    }
    past++;
  }
  if (m->tok) {
    sb_clear(&piece);
    tokenizer_decode_flush(&ds, &piece);
    if (piece.len && cb) cb(ctx, -1, sb_str(&piece));
  }
  st->decode_ms = now_ms() - t1;
  if (cached) *cached = past;
  sampler_free(&s);
  sb_free(&text);
  sb_free(&piece);
  return ok;
}
