/* OpenAI response bodies: completions ("text_completion"), chat completions ("chat.completion"), their
 * streamed chunks ("text_completion" / "chat.completion.chunk" as server-sent events), the model list and
 * the error body. Every function returns a malloc'ed NUL-terminated string. */
#ifndef LATHE_SERVER_API_RESPONSE_H
#define LATHE_SERVER_API_RESPONSE_H
#include "api_request.h"

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
/* The whole (non-streamed) answer. */
char *api_completion_body(const ApiIdent *a, const char *text, const char *finish_reason, const ApiUsage *u);
/* One streamed chunk as "data: {...}\n\n". text may be NULL (no content: the chat's first chunk, which carries
 * the role, when first is set; the last, which carries finish_reason). usage non-NULL: the usage chunk (no
 * choices); include_usage: the other chunks carry "usage": null. */
char *api_chunk_event(const ApiIdent *a, const char *text, int first, const char *finish_reason, const ApiUsage *usage,
                      int include_usage);
/* {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]} */
char *api_models_body(const char *model, long long created);
#endif
