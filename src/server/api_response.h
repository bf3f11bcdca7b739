/* OpenAI response bodies: completions ("text_completion"), chat completions ("chat.completion"), their
 * streamed chunks ("text_completion" / "chat.completion.chunk" as server-sent events), the model list and
 * the error body. Every function returns a malloc'ed NUL-terminated string. */
#ifndef LATHE_SERVER_API_RESPONSE_H
#define LATHE_SERVER_API_RESPONSE_H
#include "api_request.h"
#include "engine_loop.h"

typedef struct ApiUsage {
  int prompt_tokens, completion_tokens;
} ApiUsage;

/* What every completion object and chunk names. */
typedef struct ApiIdent {
  ApiKind kind;
  char id[48]; /* "cmpl-..." or "chatcmpl-..." */
  long long created;
  const char *model;
} ApiIdent;

void api_ident_init(ApiIdent *a, ApiKind kind, unsigned long long serial, const char *model);
/* {"error": {"message", "type", "param", "code"}} */
char *api_error_body(const ApiError *e);
/* The whole (non-streamed) answer; logprobs (taken over) NULL: "logprobs": null. */
char *api_completion_body(const ApiIdent *a, const char *text, const char *finish_reason, const ApiUsage *u,
                          json_t *logprobs);
/* A whole answer of n choices (indexed 0 .. n - 1); each one's logprobs (NULL: null) is taken over. */
typedef struct ApiChoice {
  const char *text, *finish_reason;
  json_t *logprobs;
} ApiChoice;
char *api_choices_body(const ApiIdent *a, const ApiChoice *ch, int n, const ApiUsage *u);
/* One streamed chunk as "data: {...}\n\n". text may be NULL (no content: the chat's first chunk, which carries
 * the role, when first is set; the last, which carries finish_reason). usage non-NULL: the usage chunk (no
 * choices); include_usage: the other chunks carry "usage": null. */
char *api_chunk_event(const ApiIdent *a, const char *text, int first, const char *finish_reason, const ApiUsage *usage,
                      int include_usage, json_t *logprobs);
/* The logprobs of tokens t[from..to) as OpenAI writes them. Completions: {"tokens", "token_logprobs",
 * "top_logprobs" (a {token: logprob} object of the alternatives and the chosen token), "text_offset"}, the
 * offsets in characters: base (an echo's characters) + the characters of text (the job's text, t[k].end
 * indexes it) before the token. Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
 * "logprob", "bytes"}]}]}. A token's string is its own decoded bytes (invalid UTF-8 as U+FFFD; "bytes" keeps
 * them). */
json_t *api_logprobs_json(ApiKind kind, const Tokenizer *tok, const TokenLogprob *t, int from, int to, const char *text,
                          long base);
/* Completions with echo and logprobs: the prompt's n tokens as api_logprobs_json writes tokens, rec[k] (nrec of
 * them) the records of positions k + 1; the first token (and any without a record) has a null logprob and null
 * alternatives; the offsets count the characters of the prompt decoded token by token (skip_special as the echo
 * was decoded). */
json_t *api_prompt_logprobs_json(const Tokenizer *tok, const int32_t *prompt, int n, const TokenLogprob *rec, int nrec,
                                 int skip_special);
/* Appends the arrays of completions logprobs b (taken over) to those of a. */
void api_logprobs_append(json_t *a, json_t *b);
/* UTF-8 characters in s (OpenAI's offsets count characters). */
long api_text_chars(const char *s);
/* An embeddings answer: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
 * "usage"}; vectors n x dim floats, each a list of numbers or (base64) its little-endian f32 bytes. */
char *api_embeddings_body(const char *model, const float *vectors, int n, int dim, int base64, int prompt_tokens);
/* {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]} */
char *api_models_body(const char *model, long long created);
#endif
