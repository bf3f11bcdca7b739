/* OpenAI request bodies (POST /v1/completions and /v1/chat/completions) parsed and checked: every field is
 * either understood or refused with a 400 that names it (never silently ignored). The errors carry what
 * OpenAI's error body needs ({"error": {"message", "type", "param", "code"}}, api_response.h writes it). */
#ifndef LATHE_SERVER_API_REQUEST_H
#define LATHE_SERVER_API_REQUEST_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "../generate/sampler.h"
#include "../tokenizer/tokenizer.h"

typedef struct ApiError {
  int status;       /* the HTTP status; 0 while there is no error */
  const char *type; /* "invalid_request_error", "authentication_error", "not_found_error", "server_error", ... */
  char param[64];   /* the offending field ("" for none: null in the body) */
  const char *code; /* NULL: null in the body */
  char message[512];
} ApiError;

/* Records the first error only (later ones are ignored, as Diag does). */
void api_error(ApiError *e, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

typedef enum ApiKind { API_COMPLETION, API_CHAT } ApiKind;

enum { API_MAX_STOP = 8, API_MAX_N = 16 };

typedef struct ApiRequest {
  ApiKind kind;
  const char *model; /* NULL when not given */
  /* completions: the prompt as text, or as token ids (prompt_text NULL) */
  const char *prompt_text;
  int32_t *prompt_ids;
  int nprompt_ids;
  /* chat: the messages (strings owned by the request) */
  ChatMessage *messages;
  int nmessages;
  int max_tokens; /* -1: not given; 0 only with echo (the prompt alone: nothing is generated) */
  SamplerOptions sampling;
  int seed_given;
  const char *stop[API_MAX_STOP];
  int nstop;
  int stream, include_usage, echo, ignore_eos;
  int min_tokens; /* vLLM's: no end-of-sequence token before this many tokens (0: none) */
  int n;          /* choices (1 to API_MAX_N; more than 1 not streamed) */
  int best_of;    /* 0: not given; else it must equal n */
  double presence_penalty, frequency_penalty;
  int logprobs, top_logprobs; /* logprobs: the tokens' log-probabilities, with top_logprobs alternatives each */
  int top_given;
  json_t *root; /* the parsed body: the strings above point into it */
  char **owned; /* message contents assembled from parts */
  int nowned;
} ApiRequest;

/* Parses body (len bytes) as a request of the given kind into r (freed with api_request_free, also after a
 * failure). 0 with e set (status 400) on malformed JSON, a wrong type, a value out of range or a field that
 * is not supported. */
int api_parse_request(const char *body, size_t len, ApiKind kind, ApiRequest *r, ApiError *e);
void api_request_free(ApiRequest *r);

/* Parses a JSON object body for /tokenize or /detokenize; NULL with e set (400) when it is not one. */
json_t *api_parse_object(const char *body, size_t len, ApiError *e);
#endif
