/* The batched engine: requests (prompt tokens and sampling parameters) in, tokens out, many sequences per
 * step. It ties the scheduler (scheduler.h: which positions of which sequences each step computes, the paged
 * KV blocks, prefix sharing, preemption) to a model loaded for batched steps (model_step_batch) and samples
 * every sequence's next token with its own parameters. The CLI (generate --concurrency, bench --concurrency)
 * and the server use it.
 *
 * Threads: every call must come from one thread at a time (the caller serializes them; a server queues the
 * adds and cancels that arrive while a step runs and makes them between steps). */
#ifndef LATHE_ENGINE_H
#define LATHE_ENGINE_H
#include "../generate/model.h"
#include "../generate/sampler.h"
#include "scheduler.h"

typedef struct EngineOptions {
  int max_batch_tokens; /* tokens computed per step, all sequences together (0: 2048) */
  int max_seqs;         /* sequences running at once (0: 256) */
} EngineOptions;

enum { ENGINE_MAX_LOGPROBS = 20 };

typedef enum EnginePooling {
  POOL_NONE, /* a generation request */
  POOL_LAST, /* the last position's hidden state */
  POOL_MEAN  /* the mean over every position */
} EnginePooling;

typedef struct EngineRequest {
  const int32_t *prompt;
  int nprompt;
  int max_tokens; /* new tokens at most */
  SamplerOptions sampling;
  const char *const *stop; /* stop strings, checked on the decoded text (needs the model's tokenizer) */
  int nstop;
  int ignore_eos;             /* the model's end-of-sequence tokens do not stop it */
  const int32_t *stop_tokens; /* further token ids that end it ("stop"; not part of its output) */
  int nstop_tokens;
  /* vLLM's min_tokens: until the request has this many tokens, its end-of-sequence and stop tokens cannot be
   * chosen (their logits are -inf for the choice; its rows are read on the host meanwhile). Stop strings still
   * apply. */
  int min_tokens;
  /* OpenAI's penalties: before choosing a token, presence_penalty * [count > 0] + frequency_penalty * count is
   * subtracted from the logit of every token this request has generated count times so far. */
  double presence_penalty, frequency_penalty;
  /* logprobs: each token event carries the chosen token's log-probability and the top_logprobs (at most
   * ENGINE_MAX_LOGPROBS) most likely tokens with theirs: the log-softmax of the logits it was chosen from,
   * after the penalties and before temperature, top-k and top-p (the model's own distribution, as vLLM's
   * default reports it). */
  int logprobs, top_logprobs;
  /* prompt_logprobs: every prompt token after the first gets an EV_PROMPT_LOGPROB event while the prompt is
   * computed: its log-probability under the logits of the position before it (the model's own distribution: no
   * penalties) and the top_logprobs most likely tokens there. Those positions' logits are computed (one logit row
   * each), so such a request takes nothing from the prefix cache. */
  int prompt_logprobs;
  /* An embedding instead of tokens: the prompt's final hidden state (after the final norm, before the LM head)
   * pooled over its positions; one EV_EMBEDDING event, then EV_FINISHED "stop". max_tokens and sampling are
   * not read. */
  EnginePooling embed;
} EngineRequest;

typedef enum EngineEventKind { EV_TOKEN, EV_FINISHED, EV_EMBEDDING, EV_PROMPT_LOGPROB } EngineEventKind;

/* What one step did for one request. Texts stay valid until the next engine call. */
typedef struct EngineEvent {
  EngineEventKind kind;
  int id;
  int32_t token;      /* EV_TOKEN; EV_PROMPT_LOGPROB: the prompt's token at position pos */
  int pos;            /* EV_PROMPT_LOGPROB (1 .. nprompt - 1, each once, in order) */
  const char *text;   /* EV_TOKEN: the newly complete text ("" when the token ends inside a character) */
  const char *reason; /* EV_FINISHED: "stop" (end-of-sequence token or stop string), "length", "cancelled" */
  /* EV_TOKEN of a token (not a flushed tail) of a request with logprobs, and EV_PROMPT_LOGPROB: the token's
   * log-probability and the ntop most likely tokens, most likely first */
  int has_logprob, ntop;
  float logprob;
  const int32_t *top_ids;
  const float *top_logprobs;
  /* EV_EMBEDDING: the pooled hidden state, dim floats (not normalized) */
  const float *embedding;
  int dim;
} EngineEvent;

typedef struct EngineStats {
  int running, waiting;
  int blocks_used, blocks_cached, blocks_total, block_size;
  long steps, prefill_tokens, decode_tokens, prefix_tokens_reused, preemptions;
  long generated;   /* tokens sampled */
  double step_ms;   /* wall time in steps */
  double tok_per_s; /* generated / step time */
} EngineStats;

typedef struct Engine Engine;

/* m must be loaded with ModelLoadOptions.kv_block set (a batched model); the engine does not own it. Embedding
 * requests need it loaded with ModelLoadOptions.hidden_output too. */
Engine *engine_new(Model *m, const EngineOptions *o, Diag *d);
void engine_free(Engine *e);
/* Queues a request; its id, or -1 with an error (empty prompt, too long for the context or the pool, a token
 * outside the vocabulary, bad sampling parameters). */
int engine_add(Engine *e, const EngineRequest *r, Diag *d);
/* Cancels a waiting or running request: its blocks are freed now, and the next step reports it finished
 * ("cancelled"). -1 with an error for an unknown or finished id. */
int engine_cancel(Engine *e, int id, Diag *d);
/* Runs one step; *events (owned by the engine, valid until the next call) gets *nevents events. 0 events and
 * no work left: engine_has_work() is 0. 0 with an error in d when the step failed. */
int engine_step(Engine *e, const EngineEvent **events, int *nevents, Diag *d);
int engine_has_work(const Engine *e);
void engine_stats(const Engine *e, EngineStats *s);
/* Drops a finished request's records (its tokens, its scheduler entry): a server forgets each request once
 * it has read its events, so memory does not grow with the requests served. engine_output then gives none.
 * -1 with an error for an unknown, running, waiting or already forgotten id. */
int engine_forget(Engine *e, int id, Diag *d);
/* A request's tokens so far (prompt excluded); valid until the next engine call. */
const int32_t *engine_output(const Engine *e, int id, int *n);
#endif
