#include "api_request.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "../base/strbuf.h"
#include "../engine/engine.h"

void api_error(ApiError *e, int status, const char *type, const char *param, const char *fmt, ...) {
  if (e->status) return;
  e->status = status;
  e->type = type;
  e->code = NULL;
  snprintf(e->param, sizeof e->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
}

#define BAD(e, param, ...) (api_error(e, 400, "invalid_request_error", param, __VA_ARGS__), 0)

json_t *api_parse_object(const char *body, size_t len, ApiError *e) {
  json_error_t je;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    api_error(e, 400, "invalid_request_error", NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text,
              je.line, je.column);
    return NULL;
  }
  if (!json_is_object(root)) {
    json_decref(root);
    api_error(e, 400, "invalid_request_error", NULL, "the body must be a JSON object");
    return NULL;
  }
  return root;
}

static int get_number(json_t *v, const char *name, double lo, double hi, double *out, ApiError *e) {
  if (!json_is_number(v)) return BAD(e, name, "'%s' must be a number", name);
  double x = json_number_value(v);
  if (!(x >= lo && x <= hi)) return BAD(e, name, "'%s' must be between %g and %g (got %g)", name, lo, hi, x);
  *out = x;
  return 1;
}

static int get_int(json_t *v, const char *name, long long lo, long long hi, long long *out, ApiError *e) {
  if (!json_is_integer(v)) return BAD(e, name, "'%s' must be an integer", name);
  long long x = json_integer_value(v);
  if (x < lo || x > hi) return BAD(e, name, "'%s' must be between %lld and %lld (got %lld)", name, lo, hi, x);
  *out = x;
  return 1;
}

static int get_bool(json_t *v, const char *name, int *out, ApiError *e) {
  if (!json_is_boolean(v)) return BAD(e, name, "'%s' must be true or false", name);
  *out = json_is_true(v);
  return 1;
}

static int parse_stop(ApiRequest *r, json_t *v, ApiError *e) {
  if (json_is_string(v)) {
    if (!json_string_length(v)) return BAD(e, "stop", "'stop' must not be an empty string");
    r->stop[r->nstop++] = json_string_value(v);
    return 1;
  }
  if (!json_is_array(v)) return BAD(e, "stop", "'stop' must be a string or a list of strings");
  if (json_array_size(v) > API_MAX_STOP)
    return BAD(e, "stop", "'stop' holds at most %d strings (got %zu)", API_MAX_STOP, json_array_size(v));
  size_t i;
  json_t *s;
  json_array_foreach(v, i, s) {
    if (!json_is_string(s) || !json_string_length(s))
      return BAD(e, "stop", "'stop[%zu]' must be a non-empty string", i);
    r->stop[r->nstop++] = json_string_value(s);
  }
  return 1;
}

static int parse_token_list(ApiRequest *r, json_t *v, ApiError *e) {
  size_t n = json_array_size(v), i;
  if (!n) return BAD(e, "prompt", "'prompt' is an empty list");
  r->prompt_ids = xmalloc(sizeof(int32_t) * n, "the prompt's tokens");
  json_t *t;
  json_array_foreach(v, i, t) {
    if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
      return BAD(e, "prompt", "'prompt[%zu]' must be a token id (a non-negative integer)", i);
    r->prompt_ids[i] = (int32_t)json_integer_value(t);
  }
  r->nprompt_ids = (int)n;
  return 1;
}

static int parse_prompt(ApiRequest *r, json_t *v, ApiError *e) {
  if (json_is_string(v)) {
    r->prompt_text = json_string_value(v);
    return 1;
  }
  if (!json_is_array(v)) return BAD(e, "prompt", "'prompt' must be a string, a list of token ids or a list of one");
  json_t *first = json_array_get(v, 0);
  if (json_array_size(v) > 1 && (json_is_string(first) || json_is_array(first)))
    return BAD(e, "prompt", "'prompt' holds %zu prompts and only one per request is supported", json_array_size(v));
  if (json_is_string(first)) {
    r->prompt_text = json_string_value(first);
    return 1;
  }
  if (json_is_array(first)) return parse_token_list(r, first, e);
  return parse_token_list(r, v, e);
}

/* A message's content: a string, or a list of {"type": "text", "text": ...} parts joined. */
static int parse_content(ApiRequest *r, json_t *c, size_t i, const char **out, ApiError *e) {
  char where[48];
  snprintf(where, sizeof where, "messages[%zu].content", i);
  if (json_is_string(c)) {
    *out = json_string_value(c);
    return 1;
  }
  if (!json_is_array(c)) return BAD(e, where, "'%s' must be a string or a list of text parts", where);
  StrBuf b = {0};
  size_t k;
  json_t *part;
  json_array_foreach(c, k, part) {
    json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
    if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") != 0 ||
        !json_is_string(text)) {
      sb_free(&b);
      return BAD(e, where, "'%s[%zu]' is not a text part ({\"type\": \"text\", \"text\": ...}): only text is supported",
                 where, k);
    }
    sb_puts(&b, json_string_value(text));
  }
  r->owned = xrealloc(r->owned, sizeof *r->owned * (size_t)(r->nowned + 1), "message contents");
  r->owned[r->nowned++] = b.data ? b.data : xstrdup("", "a message");
  *out = r->owned[r->nowned - 1];
  return 1;
}

static int parse_messages(ApiRequest *r, json_t *v, ApiError *e) {
  if (!json_is_array(v) || !json_array_size(v)) return BAD(e, "messages", "'messages' must be a non-empty list");
  size_t n = json_array_size(v), i;
  r->messages = xcalloc(n, sizeof *r->messages, "the messages");
  json_t *m;
  json_array_foreach(v, i, m) {
    char where[48];
    snprintf(where, sizeof where, "messages[%zu]", i);
    if (!json_is_object(m)) return BAD(e, where, "'%s' must be an object with a role and a content", where);
    const char *key;
    json_t *val;
    json_object_foreach(m, key, val) {
      if (strcmp(key, "role") != 0 && strcmp(key, "content") != 0)
        return BAD(e, where, "'%s.%s' is not supported (messages have a role and a content)", where, key);
    }
    json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
    const char *rs = json_string_value(role);
    if (!rs || (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "developer")))
      return BAD(e, where, "'%s.role' must be \"system\", \"user\" or \"assistant\"", where);
    r->messages[i].role = !strcmp(rs, "developer") ? "system" : rs;
    if (!content) return BAD(e, where, "'%s.content' is missing", where);
    if (!parse_content(r, content, i, &r->messages[i].content, e)) return 0;
  }
  r->nmessages = (int)n;
  return 1;
}

/* Fields that are refused unless they hold the value that means "off". */
static int only_off(json_t *v, const char *key, ApiError *e) {
  if (!strcmp(key, "logit_bias")) {
    if (json_is_object(v) && !json_object_size(v)) return 1;
    return BAD(e, key, "'logit_bias' is not supported (only {})");
  }
  if (!strcmp(key, "suffix")) {
    if (json_is_string(v) && !json_string_length(v)) return 1;
    return BAD(e, key, "'suffix' is not supported");
  }
  return -1;
}

static int parse_stream_options(ApiRequest *r, json_t *v, ApiError *e) {
  if (!json_is_object(v)) return BAD(e, "stream_options", "'stream_options' must be an object");
  const char *key;
  json_t *val;
  json_object_foreach(v, key, val) {
    if (strcmp(key, "include_usage") != 0)
      return BAD(e, "stream_options", "'stream_options.%s' is not supported (only include_usage)", key);
    if (!get_bool(val, "stream_options.include_usage", &r->include_usage, e)) return 0;
  }
  return 1;
}

static int parse_field(ApiRequest *r, const char *key, json_t *v, ApiError *e) {
  int chat = r->kind == API_CHAT;
  double x;
  long long k;
  int off = only_off(v, key, e);
  if (off >= 0) return off;
  if (!strcmp(key, "model")) {
    if (!json_is_string(v)) return BAD(e, key, "'model' must be a string");
    r->model = json_string_value(v);
  } else if (!chat && !strcmp(key, "prompt")) {
    return parse_prompt(r, v, e);
  } else if (chat && !strcmp(key, "messages")) {
    return parse_messages(r, v, e);
  } else if (!strcmp(key, "max_tokens") || (chat && !strcmp(key, "max_completion_tokens"))) {
    if (!get_int(v, key, chat ? 1 : 0, 1 << 30, &k, e)) return 0; /* 0: completions with echo, checked below */
    r->max_tokens = (int)k;
  } else if (!strcmp(key, "temperature")) {
    if (!get_number(v, key, 0, 2, &x, e)) return 0;
    r->sampling.temperature = x;
  } else if (!strcmp(key, "top_p")) {
    if (!get_number(v, key, 0, 1, &x, e)) return 0;
    if (x <= 0) return BAD(e, key, "'top_p' must be greater than 0");
    r->sampling.top_p = x;
  } else if (!strcmp(key, "top_k")) {
    if (!get_int(v, key, -1, 1 << 30, &k, e)) return 0;
    r->sampling.top_k = k < 0 ? 0 : (int)k; /* -1: all, as vLLM */
  } else if (!strcmp(key, "seed")) {
    if (!get_int(v, key, INT64_MIN, INT64_MAX, &k, e)) return 0;
    r->sampling.seed = (uint64_t)k;
    r->seed_given = 1;
  } else if (!strcmp(key, "presence_penalty") || !strcmp(key, "frequency_penalty")) {
    if (!get_number(v, key, -2, 2, &x, e)) return 0;
    *(key[0] == 'p' ? &r->presence_penalty : &r->frequency_penalty) = x;
  } else if (!chat && !strcmp(key, "logprobs")) { /* completions: how many alternatives */
    if (!get_int(v, key, 0, ENGINE_MAX_LOGPROBS, &k, e)) return 0;
    r->logprobs = 1;
    r->top_logprobs = (int)k;
  } else if (chat && !strcmp(key, "logprobs")) {
    return get_bool(v, key, &r->logprobs, e);
  } else if (chat && !strcmp(key, "top_logprobs")) {
    if (!get_int(v, key, 0, ENGINE_MAX_LOGPROBS, &k, e)) return 0;
    r->top_logprobs = (int)k;
    r->top_given = 1;
  } else if (!strcmp(key, "stop")) {
    return parse_stop(r, v, e);
  } else if (!strcmp(key, "stream")) {
    return get_bool(v, key, &r->stream, e);
  } else if (!strcmp(key, "stream_options")) {
    return parse_stream_options(r, v, e);
  } else if (!chat && !strcmp(key, "echo")) {
    return get_bool(v, key, &r->echo, e);
  } else if (!strcmp(key, "ignore_eos")) {
    return get_bool(v, key, &r->ignore_eos, e);
  } else if (!strcmp(key, "min_tokens")) {
    if (!get_int(v, key, 0, 1 << 30, &k, e)) return 0;
    r->min_tokens = (int)k;
  } else if (!strcmp(key, "n") || (!chat && !strcmp(key, "best_of"))) {
    if (!get_int(v, key, 1, API_MAX_N, &k, e)) return 0;
    *(key[0] == 'n' ? &r->n : &r->best_of) = (int)k;
  } else if (!strcmp(key, "user")) {
    if (!json_is_string(v)) return BAD(e, key, "'user' must be a string");
  } else {
    return BAD(e, key, "'%s' is not supported by this server", key);
  }
  return 1;
}

int api_parse_request(const char *body, size_t len, ApiKind kind, ApiRequest *r, ApiError *e) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->n = 1;
  r->max_tokens = -1;
  r->sampling = (SamplerOptions){0, 1.0, 0, 1.0, 0}; /* OpenAI's defaults: temperature 1, top_p 1 */
  if (!(r->root = api_parse_object(body, len, e))) return 0;
  const char *key;
  json_t *v;
  json_object_foreach(r->root, key, v) {
    if (json_is_null(v)) continue; /* null means "the default", as OpenAI reads it */
    if (!parse_field(r, key, v, e)) return 0;
  }
  if (kind == API_COMPLETION && !r->prompt_text && !r->prompt_ids) return BAD(e, "prompt", "'prompt' is required");
  if (kind == API_CHAT && !r->messages) return BAD(e, "messages", "'messages' is required");
  if (r->include_usage && !r->stream)
    return BAD(e, "stream_options", "'stream_options' is only allowed when 'stream' is true");
  if (kind == API_CHAT && r->top_given && !r->logprobs)
    return BAD(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (r->best_of && r->best_of != r->n)
    return BAD(e, "best_of", "'best_of' must equal 'n' (%d): choosing the best of more choices is not supported", r->n);
  if (r->n > 1 && r->stream) return BAD(e, "n", "'n' greater than 1 is not supported with 'stream'");
  if (r->min_tokens && r->nstop)
    return BAD(e, "min_tokens",
               "'min_tokens' with 'stop' strings is not supported (only the end-of-sequence "
               "token is held back)");
  if (r->max_tokens >= 0 && r->min_tokens > r->max_tokens)
    return BAD(e, "min_tokens", "'min_tokens' (%d) must not exceed '%s' (%d)", r->min_tokens,
               kind == API_CHAT ? "max_completion_tokens" : "max_tokens", r->max_tokens);
  if (r->max_tokens == 0 && !r->echo)
    return BAD(e, "max_tokens",
               "'max_tokens' must be at least 1 (0 only for a completion with 'echo': the prompt alone, scored)");
  if (r->sampling.temperature <= 0) r->sampling.greedy = 1;
  return 1;
}

void api_request_free(ApiRequest *r) {
  json_decref(r->root);
  free(r->prompt_ids);
  free(r->messages);
  for (int i = 0; i < r->nowned; i++) free(r->owned[i]);
  free(r->owned);
  memset(r, 0, sizeof *r);
}
