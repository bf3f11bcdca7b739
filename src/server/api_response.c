#include "api_response.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/mem.h"

void api_ident_init(ApiIdent *a, ApiKind kind, unsigned long long serial, const char *model) {
  a->kind = kind;
  a->created = (long long)time(NULL);
  a->model = model;
  snprintf(a->id, sizeof a->id, "%s-%llx%llx", kind == API_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)a->created,
           serial);
}

static char *dump(json_t *o) {
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!s) s = xstrdup("{}", "a response"); /* out of memory inside jansson */
  return s;
}

char *api_error_body(const ApiError *e) {
  json_t *err = json_object();
  json_object_set_new(err, "message", json_string(e->message));
  json_object_set_new(err, "type", json_string(e->type ? e->type : "invalid_request_error"));
  json_object_set_new(err, "param", e->param[0] ? json_string(e->param) : json_null());
  json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
  json_t *o = json_object();
  json_object_set_new(o, "error", err);
  return dump(o);
}

static json_t *usage_json(const ApiUsage *u) {
  json_t *o = json_object();
  json_object_set_new(o, "prompt_tokens", json_integer(u->prompt_tokens));
  json_object_set_new(o, "completion_tokens", json_integer(u->completion_tokens));
  json_object_set_new(o, "total_tokens", json_integer(u->prompt_tokens + u->completion_tokens));
  return o;
}

static json_t *head(const ApiIdent *a, const char *object) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_string(a->id));
  json_object_set_new(o, "object", json_string(object));
  json_object_set_new(o, "created", json_integer(a->created));
  json_object_set_new(o, "model", json_string(a->model));
  return o;
}

static json_t *reason_json(const char *finish_reason) {
  return finish_reason ? json_string(finish_reason) : json_null();
}

char *api_choices_body(const ApiIdent *a, const ApiChoice *ch, int n, const ApiUsage *u) {
  int chat = a->kind == API_CHAT;
  json_t *o = head(a, chat ? "chat.completion" : "text_completion");
  json_t *choices = json_array();
  for (int i = 0; i < n; i++) {
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(i));
    if (chat) {
      json_t *msg = json_object();
      json_object_set_new(msg, "role", json_string("assistant"));
      json_object_set_new(msg, "content", json_string(ch[i].text));
      json_object_set_new(choice, "message", msg);
    } else {
      json_object_set_new(choice, "text", json_string(ch[i].text));
    }
    json_object_set_new(choice, "logprobs", ch[i].logprobs ? ch[i].logprobs : json_null());
    json_object_set_new(choice, "finish_reason", reason_json(ch[i].finish_reason));
    json_array_append_new(choices, choice);
  }
  json_object_set_new(o, "choices", choices);
  json_object_set_new(o, "usage", usage_json(u));
  return dump(o);
}

char *api_completion_body(const ApiIdent *a, const char *text, const char *finish_reason, const ApiUsage *u,
                          json_t *logprobs) {
  ApiChoice ch = {text, finish_reason, logprobs};
  return api_choices_body(a, &ch, 1, u);
}

char *api_chunk_event(const ApiIdent *a, const char *text, int first, const char *finish_reason, const ApiUsage *usage,
                      int include_usage, json_t *logprobs) {
  int chat = a->kind == API_CHAT;
  json_t *o = head(a, chat ? "chat.completion.chunk" : "text_completion");
  json_t *choices = json_array();
  if (!usage) {
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (chat) {
      json_t *delta = json_object();
      if (first) json_object_set_new(delta, "role", json_string("assistant"));
      if (text) json_object_set_new(delta, "content", json_string(text));
      json_object_set_new(choice, "delta", delta);
    } else {
      json_object_set_new(choice, "text", json_string(text ? text : ""));
    }
    json_object_set_new(choice, "logprobs", logprobs ? logprobs : json_null());
    logprobs = NULL;
    json_object_set_new(choice, "finish_reason", reason_json(finish_reason));
    json_array_append_new(choices, choice);
  }
  json_decref(logprobs); /* a usage chunk has no choice to carry it */
  json_object_set_new(o, "choices", choices);
  if (usage) json_object_set_new(o, "usage", usage_json(usage));
  else if (include_usage) json_object_set_new(o, "usage", json_null());
  char *body = dump(o);
  size_t n = strlen(body);
  char *ev = xmalloc(n + 9, "an event");
  memcpy(ev, "data: ", 6);
  memcpy(ev + 6, body, n);
  memcpy(ev + 6 + n, "\n\n", 3);
  free(body);
  return ev;
}

char *api_models_body(const char *model, long long created) {
  json_t *m = json_object();
  json_object_set_new(m, "id", json_string(model));
  json_object_set_new(m, "object", json_string("model"));
  json_object_set_new(m, "created", json_integer(created));
  json_object_set_new(m, "owned_by", json_string("lathe"));
  json_t *data = json_array();
  json_array_append_new(data, m);
  json_t *o = json_object();
  json_object_set_new(o, "object", json_string("list"));
  json_object_set_new(o, "data", data);
  return dump(o);
}
