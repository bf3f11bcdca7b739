/* The small routes: /health, /metrics, /v1/models, /tokenize and /detokenize. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/mem.h"
#include "api_response.h"
#include "server_internal.h"

enum MHD_Result route_health(Conn *c) {
  EngineLoop *loop;
  Model *m = server_model(c->s, &loop);
  if (!m) return reply(c, 503, "application/json", xstrdup("{\"status\":\"loading\"}", "a body"));
  const char *failure = engine_loop_failure(loop);
  if (failure) {
    json_t *o = json_pack("{s:s, s:s}", "status", "error", "message", failure);
    char *body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    snprintf(c->note, sizeof c->note, "%s", failure);
    return reply(c, 500, "application/json", body ? body : xstrdup("{\"status\":\"error\"}", "a body"));
  }
  return reply(c, 200, "application/json", xstrdup("{\"status\":\"ok\"}", "a body"));
}

enum MHD_Result route_metrics(Conn *c) {
  EngineLoop *loop;
  Model *m = server_model(c->s, &loop);
  EngineStats st;
  if (m) engine_loop_stats(loop, &st);
  StrBuf b = {0};
  metrics_render(c->s->mx, m ? &st : NULL, &b);
  return reply(c, 200, "text/plain; version=0.0.4", b.data ? b.data : xstrdup("", "a body"));
}

enum MHD_Result route_models(Conn *c) {
  return reply(c, 200, "application/json", api_models_body(c->s->o.model_name, (long long)time(NULL)));
}

static enum MHD_Result bad(Conn *c, const char *param, const char *msg) {
  ApiError e = {0};
  api_error(&e, 400, "invalid_request_error", param, "%s", msg);
  return reply_error(c, &e);
}

static enum MHD_Result reply_json(Conn *c, json_t *o) {
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return reply(c, 200, "application/json", s ? s : xstrdup("{}", "a body"));
}

/* llama-server's shape: {"content": TEXT, "add_special": false} -> {"tokens": [ids]} */
enum MHD_Result route_tokenize(Conn *c) {
  Model *m = server_model(c->s, NULL);
  ApiError e = {0};
  json_t *o = api_parse_object(c->body, c->len, &e);
  if (!o) return reply_error(c, &e);
  json_t *content = json_object_get(o, "content"), *special = json_object_get(o, "add_special");
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (strcmp(key, "content") != 0 && strcmp(key, "add_special") != 0) {
      char msg[160];
      snprintf(msg, sizeof msg, "'%s' is not supported (tokenize takes content and add_special)", key);
      json_decref(o);
      return bad(c, key, msg);
    }
  }
  enum MHD_Result r;
  if (!json_is_string(content)) r = bad(c, "content", "'content' must be a string");
  else if (special && !json_is_boolean(special)) r = bad(c, "add_special", "'add_special' must be true or false");
  else if (!m->tok) r = bad(c, NULL, "the model has no tokenizer");
  else {
    int32_t *ids = NULL;
    int n = 0;
    Diag d = {0};
    if (!tokenizer_encode(m->tok, json_string_value(content), json_is_true(special), &ids, &n, &d)) {
      r = bad(c, "content", d.msg);
    } else {
      json_t *out = json_object(), *t = json_array();
      for (int i = 0; i < n; i++) json_array_append_new(t, json_integer(ids[i]));
      json_object_set_new(out, "tokens", t);
      r = reply_json(c, out);
    }
    free(ids);
  }
  json_decref(o);
  return r;
}

/* {"tokens": [ids]} -> {"content": TEXT} (special tokens as their text) */
enum MHD_Result route_detokenize(Conn *c) {
  Model *m = server_model(c->s, NULL);
  ApiError e = {0};
  json_t *o = api_parse_object(c->body, c->len, &e);
  if (!o) return reply_error(c, &e);
  json_t *tokens = json_object_get(o, "tokens");
  enum MHD_Result r;
  if (json_object_size(o) != 1 || !json_is_array(tokens)) {
    r = bad(c, "tokens", "detokenize takes one field, 'tokens': a list of token ids");
  } else if (!m->tok) {
    r = bad(c, NULL, "the model has no tokenizer");
  } else {
    size_t n = json_array_size(tokens), i;
    int32_t *ids = xmalloc(sizeof(int32_t) * (n ? n : 1), "token ids");
    int vocab = tokenizer_vocab_size(m->tok), ok = 1;
    char msg[128] = "";
    json_t *t;
    json_array_foreach(tokens, i, t) {
      long long id = json_is_integer(t) ? json_integer_value(t) : -1;
      if (ok && (id < 0 || id >= vocab)) {
        snprintf(msg, sizeof msg, "'tokens[%zu]' is not a token id (0 to %d)", i, vocab - 1);
        ok = 0;
      }
      ids[i] = (int32_t)id;
    }
    if (!ok) {
      r = bad(c, "tokens", msg);
    } else {
      StrBuf text = {0};
      tokenizer_decode(m->tok, ids, (int)n, 0, &text);
      json_t *out = json_object();
      json_object_set_new(out, "content", json_string(sb_str(&text)));
      sb_free(&text);
      r = reply_json(c, out);
    }
    free(ids);
  }
  json_decref(o);
  return r;
}
