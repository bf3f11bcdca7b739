/* POST /v1/embeddings: each input (a string, or a list of token ids) is a request of its own on the engine loop,
 * all queued at once so the engine batches them (with whatever else runs); each gives the final hidden state
 * pooled over its tokens as `lathe serve --pooling` says, L2-normalized here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "api_response.h"
#include "server_internal.h"

enum { MAX_INPUTS = 2048 };

typedef struct Inputs {
  int32_t *ids[MAX_INPUTS];
  int n[MAX_INPUTS];
  int count;
} Inputs;

#define BAD(e, param, ...) (api_error(e, 400, "invalid_request_error", param, __VA_ARGS__), 0)

static int token_list(const Model *m, json_t *v, const char *where, Inputs *in, ApiError *e) {
  size_t n = json_array_size(v), i;
  if (!n) return BAD(e, "input", "'%s' is an empty list of token ids", where);
  int32_t *ids = xmalloc(sizeof(int32_t) * n, "the input's tokens");
  in->ids[in->count] = ids;
  in->n[in->count++] = (int)n;
  json_t *t;
  json_array_foreach(v, i, t) {
    long long id = json_is_integer(t) ? json_integer_value(t) : -1;
    if (id < 0 || id >= m->cfg.vocab)
      return BAD(e, "input", "'%s[%zu]' must be a token id (0 to %d)", where, i, m->cfg.vocab - 1);
    ids[i] = (int32_t)id;
  }
  return 1;
}

static int text_input(const Model *m, json_t *v, const char *where, Inputs *in, ApiError *e) {
  if (!json_string_length(v)) return BAD(e, "input", "'%s' is an empty string", where);
  if (!m->tok) return BAD(e, "input", "the model has no tokenizer: give the input as token ids");
  Diag d = {0};
  int32_t *ids = NULL;
  int n = 0;
  if (!tokenizer_encode(m->tok, json_string_value(v), 1, &ids, &n, &d))
    return BAD(e, "input", "'%s': %s", where, d.msg);
  in->ids[in->count] = ids;
  in->n[in->count++] = n;
  return 1;
}

/* A string, a list of strings, a list of token ids, or a list of such lists. */
static int parse_input(const Model *m, json_t *v, Inputs *in, ApiError *e) {
  if (json_is_string(v)) return text_input(m, v, "input", in, e);
  if (!json_is_array(v) || !json_array_size(v))
    return BAD(e, "input", "'input' must be a non-empty string, a list of strings, or token ids");
  json_t *first = json_array_get(v, 0);
  if (json_is_integer(first)) return token_list(m, v, "input", in, e);
  if (json_array_size(v) > MAX_INPUTS)
    return BAD(e, "input", "'input' holds %zu inputs, at most %d are taken", json_array_size(v), MAX_INPUTS);
  size_t i;
  json_t *item;
  json_array_foreach(v, i, item) {
    char where[32];
    snprintf(where, sizeof where, "input[%zu]", i);
    if (json_is_string(item) && json_is_string(first)) {
      if (!text_input(m, item, where, in, e)) return 0;
    } else if (json_is_array(item) && json_is_array(first)) {
      if (!token_list(m, item, where, in, e)) return 0;
    } else {
      return BAD(e, "input", "'%s' must be a %s like input[0]", where, json_is_string(first) ? "string" : "token list");
    }
  }
  return 1;
}

static int parse_body(Conn *c, const Model *m, Inputs *in, int *base64, ApiError *e) {
  json_t *o = api_parse_object(c->body, c->len, e);
  if (!o) return 0;
  const char *key;
  json_t *v, *input = NULL;
  int ok = 1;
  json_object_foreach(o, key, v) {
    if (!ok || json_is_null(v)) continue;
    if (!strcmp(key, "input")) {
      input = v;
    } else if (!strcmp(key, "model")) {
      if (!json_is_string(v)) ok = BAD(e, key, "'model' must be a string");
      else if (strcmp(json_string_value(v), c->s->o.model_name) != 0) {
        ok = BAD(e, key, "the model '%s' is not served here (this server has '%s')", json_string_value(v),
                 c->s->o.model_name);
        e->code = "model_not_found";
      }
    } else if (!strcmp(key, "encoding_format")) {
      const char *f = json_string_value(v);
      if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
        ok = BAD(e, key, "'encoding_format' must be \"float\" or \"base64\"");
      else *base64 = !strcmp(f, "base64");
    } else if (!strcmp(key, "dimensions")) {
      if (!json_is_integer(v) || json_integer_value(v) != m->cfg.hidden)
        ok = BAD(e, key, "'dimensions' must be the model's hidden size, %d (no other is supported)", m->cfg.hidden);
    } else if (!strcmp(key, "user")) {
      if (!json_is_string(v)) ok = BAD(e, key, "'user' must be a string");
    } else {
      ok = BAD(e, key, "'%s' is not supported by this server", key);
    }
  }
  if (ok && !input) ok = BAD(e, "input", "'input' is required");
  if (ok) ok = parse_input(m, input, in, e);
  for (int i = 0; ok && i < in->count; i++)
    if (in->n[i] >= m->max_ctx) {
      ok = BAD(e, "input", "input %d has %d tokens and at most %d fit the context of %d (lathe serve --ctx)", i,
               in->n[i], m->max_ctx - 1, m->max_ctx);
      e->code = "context_length_exceeded";
    }
  json_decref(o);
  return ok;
}

/* Waits for every job; 0 when the client went away (then all are cancelled). */
static int wait_all(Conn *c, EngineLoop *loop, Job **jobs, int n) {
  for (int i = 0; i < n; i++) {
    JobStatus st;
    for (;;) {
      job_wait(loop, jobs[i], 0, 100, NULL, &st);
      if (st.finished) break;
      if (conn_client_gone(c)) {
        for (int k = 0; k < n; k++) engine_loop_cancel(loop, jobs[k]);
        c->status = 499;
        return 0;
      }
    }
  }
  return 1;
}

/* The jobs' vectors, normalized, into out (n x dim); 0 with e set when one has none. */
static int gather(EngineLoop *loop, Job **jobs, int n, int dim, float *out, ApiError *e) {
  for (int i = 0; i < n; i++) {
    JobStatus st;
    job_wait(loop, jobs[i], 0, 0, NULL, &st);
    if (job_status_error(&st, e)) return 0;
    int got = 0;
    const float *v = job_embedding(loop, jobs[i], &got);
    if (!v || got != dim) {
      api_error(e, 500, "server_error", NULL, "input %d got no embedding (finished: %s)", i, st.reason);
      return 0;
    }
    double ss = 0;
    for (int j = 0; j < dim; j++) ss += (double)v[j] * v[j];
    double inv = ss > 0 ? 1 / sqrt(ss) : 0;
    for (int j = 0; j < dim; j++) out[(size_t)i * (size_t)dim + (size_t)j] = (float)(v[j] * inv);
  }
  return 1;
}

enum MHD_Result route_embeddings(Conn *c) {
  EngineLoop *loop;
  Model *m = server_model(c->s, &loop);
  Inputs *in = xcalloc(1, sizeof *in, "the inputs");
  Job **jobs = NULL;
  float *vec = NULL;
  int base64 = 0, njobs = 0;
  ApiError e = {0};
  enum MHD_Result res;
  if (!parse_body(c, m, in, &base64, &e)) goto refuse;
  jobs = xcalloc((size_t)in->count, sizeof *jobs, "the jobs");
  for (int i = 0; i < in->count; i++) {
    c->prompt_tokens += in->n[i];
    EngineRequest er = {in->ids[i], in->n[i], 1, {.greedy = 1, .top_p = 1}};
    er.embed = c->s->o.pooling == POOL_MEAN ? POOL_MEAN : POOL_LAST;
    if (!(jobs[njobs] = engine_loop_submit(loop, &er))) break;
    njobs++;
  }
  if (njobs < in->count) {
    for (int k = 0; k < njobs; k++) engine_loop_cancel(loop, jobs[k]);
    const char *failure = engine_loop_failure(loop);
    if (failure) api_error(&e, 500, "server_error", NULL, "%s", failure);
    else api_error(&e, 503, "server_error", NULL, "the server is at its limit of requests in flight: retry later");
    goto refuse;
  }
  if (!wait_all(c, loop, jobs, njobs)) {
    res = MHD_NO;
    goto done;
  }
  int dim = m->cfg.hidden;
  vec = xmalloc(sizeof(float) * (size_t)njobs * (size_t)dim, "the embeddings");
  if (!gather(loop, jobs, njobs, dim, vec, &e)) goto refuse;
  res = reply(c, 200, "application/json",
              api_embeddings_body(c->s->o.model_name, vec, njobs, dim, base64, c->prompt_tokens));
  goto done;
refuse:
  if (e.status >= 500) snprintf(c->note, sizeof c->note, "%s", e.message);
  res = reply_error(c, &e);
done:
  for (int k = 0; k < njobs; k++) job_release(loop, jobs[k]);
  for (int i = 0; i < in->count; i++) free(in->ids[i]);
  free(in);
  free(jobs);
  free(vec);
  return res;
}
