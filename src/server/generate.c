/* POST /v1/completions and /v1/chat/completions: the request checked and encoded, queued on the engine loop,
 * then answered whole (waiting, and cancelling when the client goes away) or streamed (stream.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/mem.h"
#include "api_response.h"
#include "server_internal.h"
#include "stop_text.h"

/* The prompt's tokens (malloc'ed), or 0 with e set. */
static int encode_prompt(const Model *m, const ApiRequest *r, int32_t **ids, int *n, ApiError *e) {
  Diag d = {0};
  if (r->kind == API_COMPLETION && !r->prompt_text) {
    int vocab = m->cfg.vocab;
    for (int i = 0; i < r->nprompt_ids; i++)
      if (r->prompt_ids[i] >= vocab) {
        api_error(e, 400, "invalid_request_error", "prompt", "'prompt[%d]' is %d, outside the vocabulary (0 to %d)", i,
                  r->prompt_ids[i], vocab - 1);
        return 0;
      }
    *ids = xmalloc(sizeof(int32_t) * (size_t)r->nprompt_ids, "the prompt");
    memcpy(*ids, r->prompt_ids, sizeof(int32_t) * (size_t)r->nprompt_ids);
    *n = r->nprompt_ids;
    return 1;
  }
  if (!m->tok) {
    api_error(e, 400, "invalid_request_error", NULL, "the model has no tokenizer: give the prompt as token ids");
    return 0;
  }
  StrBuf text = {0};
  int ok = 1;
  if (r->kind == API_CHAT)
    ok = chat_render(m->tok, NULL, r->messages, r->nmessages, 1, &text, &d); /* the model's own template */
  else sb_puts(&text, r->prompt_text);
  /* a chat template writes the BOS itself (as apply_chat_template): none is added to its text */
  if (ok) ok = tokenizer_encode(m->tok, sb_str(&text), r->kind != API_CHAT, ids, n, &d);
  sb_free(&text);
  if (!ok && d.line)
    api_error(e, 400, "invalid_request_error", "messages", "chat template line %d, column %d: %s", d.line, d.col,
              d.msg);
  else if (!ok) api_error(e, 400, "invalid_request_error", r->kind == API_CHAT ? "messages" : "prompt", "%s", d.msg);
  return ok;
}

/* The echoed prompt of a completion (malloc'ed), or NULL without echo. */
static char *echo_text(const Model *m, const ApiRequest *r) {
  if (!r->echo) return NULL;
  if (r->prompt_text) return xstrdup(r->prompt_text, "the echo");
  StrBuf b = {0};
  if (m->tok) tokenizer_decode(m->tok, r->prompt_ids, r->nprompt_ids, 0, &b);
  return b.data ? b.data : xstrdup("", "the echo");
}

static void cancel_all(EngineLoop *loop, Job **jobs, int njobs) {
  for (int i = 0; i < njobs; i++) engine_loop_cancel(loop, jobs[i]);
}

/* Waits for the job to finish, polling the client meanwhile; 0 when the client went away (then every job is
 * cancelled). */
static int wait_done(Conn *c, EngineLoop *loop, Job *job, Job **jobs, int njobs, JobStatus *st) {
  size_t have = 0;
  for (;;) {
    job_wait(loop, job, have, 100, NULL, st);
    have = st->text_len;
    if (st->finished) return 1;
    if (conn_client_gone(c)) {
      cancel_all(loop, jobs, njobs);
      c->status = 499;
      return 0;
    }
  }
}

int job_status_error(const JobStatus *st, ApiError *e) {
  if (!strcmp(st->reason, "error")) {
    api_error(e, st->error_status, st->error_status == 400 ? "invalid_request_error" : "server_error", NULL, "%s",
              st->error);
    return 1;
  }
  if (!strcmp(st->reason, "cancelled")) { /* by the server: a client that went away gets no answer */
    api_error(e, 503, "server_error", NULL,
              "the request was cancelled before it finished: the server is shutting down");
    e->code = "cancelled";
    return 1;
  }
  return 0;
}

/* The logprobs of the tokens that begin before the answer's end (cut: where a stop string begins, or -1); with
 * echo, the prompt's tokens first (echo_ids: the n prompt tokens). */
static json_t *whole_logprobs(Job *job, EngineLoop *loop, const Model *m, const ApiRequest *r, const char *text,
                              long cut, const char *echo, const int32_t *echo_ids, int n_echo) {
  TokenLogprob *t = NULL;
  int cap = 0, n = job_logprobs(loop, job, 0, &t, &cap), upto = n; /* no stop string: every token */
  if (cut >= 0)
    for (upto = 0; upto < n && (upto ? t[upto - 1].end : 0) < (size_t)cut;) upto++;
  json_t *lp = api_logprobs_json(r->kind, m->tok, t, 0, upto, text, echo ? api_text_chars(echo) : 0);
  if (echo) {
    int np = job_prompt_logprobs(loop, job, &t, &cap);
    json_t *prompt = api_prompt_logprobs_json(m->tok, echo_ids, n_echo, t, np, r->prompt_text != NULL);
    api_logprobs_append(prompt, lp);
    lp = prompt;
  }
  free(t);
  return lp;
}

/* One choice of a whole answer from its finished job: its text (malloc'ed, after the echo; cut at a stop string),
 * finish reason and logprobs. */
static void whole_choice(Job *job, EngineLoop *loop, const Model *m, const ApiRequest *r, const char *echo,
                         const int32_t *ids, int n, int score_only, ApiChoice *ch, const char **reason) {
  JobStatus st;
  StrBuf text = {0};
  job_wait(loop, job, 0, 0, score_only ? NULL : &text, &st);
  long at = score_only ? 0 : stop_find(sb_str(&text), text.len, r->stop, r->nstop);
  ch->logprobs = r->logprobs ? whole_logprobs(job, loop, m, r, sb_str(&text), at, echo, ids, n) : NULL;
  StrBuf out = {0};
  if (echo) sb_puts(&out, echo);
  if (at >= 0 && text.data) text.data[at] = 0;
  sb_puts(&out, sb_str(&text));
  sb_free(&text);
  ch->text = out.data ? out.data : xstrdup("", "a choice");
  *reason = score_only ? "length" : at >= 0 ? "stop" : st.reason;
}

static enum MHD_Result answer_whole(Conn *c, EngineLoop *loop, const Model *m, const ApiRequest *r, const char *echo,
                                    const int32_t *ids, int n, int score_only, const char *model, Job **jobs,
                                    int njobs) {
  JobStatus st;
  int tokens = 0;
  ApiError e = {0};
  for (int i = 0; i < njobs; i++) {
    if (!wait_done(c, loop, jobs[i], jobs, njobs, &st)) return MHD_NO; /* closes the connection */
    tokens += score_only ? 0 : st.tokens;
    if (job_status_error(&st, &e)) {
      cancel_all(loop, jobs, njobs);
      break;
    }
  }
  c->gen_tokens = tokens;
  if (e.status) {
    if (e.status >= 500) snprintf(c->note, sizeof c->note, "%s", e.message);
    return reply_error(c, &e);
  }
  ApiChoice ch[API_MAX_N];
  for (int i = 0; i < njobs; i++)
    whole_choice(jobs[i], loop, m, r, echo, ids, n, score_only, &ch[i], &ch[i].finish_reason);
  ApiIdent id;
  api_ident_init(&id, r->kind, server_next_serial(c->s), model);
  ApiUsage u = {c->prompt_tokens, tokens}; /* the prompt once, as OpenAI counts it */
  char *body = api_choices_body(&id, ch, njobs, &u);
  for (int i = 0; i < njobs; i++) free((char *)ch[i].text);
  return reply(c, 200, "application/json", body);
}

/* n > 1: the other choices' jobs (seeds seed + 1, ...), queued once the first one's prompt is computed so that
 * they take its full blocks from the prefix cache. 1, or 0 when the queue is full (the caller answers 503), -1
 * when the client went away (all cancelled). */
static int submit_more(Conn *c, EngineLoop *loop, const EngineRequest *er, int n, Job **jobs) {
  JobStatus st;
  for (;;) {
    job_wait_tokens(loop, jobs[0], (size_t)-1, 0, 100, NULL, &st);
    if (st.tokens > 0 || st.finished) break;
    if (conn_client_gone(c)) {
      engine_loop_cancel(loop, jobs[0]);
      c->status = 499;
      return -1;
    }
  }
  for (int i = 1; i < n; i++) {
    EngineRequest more = *er;
    more.sampling.seed = er->sampling.seed + (uint64_t)i;
    if (!(jobs[i] = engine_loop_submit(loop, &more))) {
      cancel_all(loop, jobs, i);
      for (int k = 1; k < i; k++) job_release(loop, jobs[k]);
      return 0;
    }
  }
  return 1;
}

static enum MHD_Result generate_route(Conn *c, ApiKind kind) {
  EngineLoop *loop;
  Model *m = server_model(c->s, &loop);
  const char *model = c->s->o.model_name;
  ApiRequest r;
  ApiError e = {0};
  int32_t *ids = NULL;
  int n = 0;
  char *echo = NULL;
  enum MHD_Result res;
  if (!api_parse_request(c->body, c->len, kind, &r, &e)) goto refuse;
  if (r.model && strcmp(r.model, model) != 0) {
    api_error(&e, 400, "invalid_request_error", "model", "the model '%s' is not served here (this server has '%s')",
              r.model, model);
    e.code = "model_not_found";
    goto refuse;
  }
  if (!encode_prompt(m, &r, &ids, &n, &e)) goto refuse;
  if (n >= m->max_ctx) {
    api_error(&e, 400, "invalid_request_error", kind == API_CHAT ? "messages" : "prompt",
              "the prompt has %d tokens and the context holds %d (lathe serve --ctx), leaving no room to generate", n,
              m->max_ctx);
    e.code = "context_length_exceeded";
    goto refuse;
  }
  c->prompt_tokens = n;
  /* OpenAI's defaults: 16 tokens for a completion, the rest of the context for a chat. max_tokens 0 (echo: the
   * prompt alone, often to score it) runs one token, which is not sent. */
  int score_only = r.max_tokens == 0;
  int max_tokens = r.max_tokens > 0 ? r.max_tokens : score_only ? 1 : kind == API_CHAT ? m->max_ctx : 16;
  if (!r.seed_given) r.sampling.seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull + server_next_serial(c->s);
  EngineRequest er = {ids, n, max_tokens, r.sampling, r.stop, r.nstop, r.ignore_eos};
  er.min_tokens = r.min_tokens;
  if (r.min_tokens > max_tokens) { /* max_tokens not given: its default */
    api_error(&e, 400, "invalid_request_error", "min_tokens",
              "'min_tokens' (%d) must not exceed max_tokens (not given: %d, the default)", r.min_tokens, max_tokens);
    goto refuse;
  }
  er.presence_penalty = r.presence_penalty;
  er.frequency_penalty = r.frequency_penalty;
  er.logprobs = r.logprobs;
  er.top_logprobs = r.top_logprobs;
  er.prompt_logprobs = r.echo && r.logprobs; /* the echoed prompt's tokens get theirs (the first: null) */
  if (!(c->job = engine_loop_submit(loop, &er))) {
    const char *failure = engine_loop_failure(loop);
    if (failure) {
      api_error(&e, 500, "server_error", NULL, "%s", failure);
      goto refuse;
    }
    res = reply_busy(c, "the server is at its limit of requests in flight (or shutting down): retry later");
    goto done;
  }
  echo = echo_text(m, &r);
  if (r.stream) {
    StreamSpec sp = {kind, model, r.include_usage, echo, r.stop, r.nstop, r.logprobs};
    sp.score_only = score_only;
    if (er.prompt_logprobs) {
      sp.prompt = ids;
      sp.nprompt = n;
      sp.prompt_skip_special = r.prompt_text != NULL;
    }
    res = reply_stream(c, c->job, &sp);
  } else {
    Job *jobs[API_MAX_N] = {c->job}; /* c->job is the connection's (released with it), the others are ours */
    int more = r.n > 1 ? submit_more(c, loop, &er, r.n, jobs) : 1;
    if (more > 0) {
      res = answer_whole(c, loop, m, &r, echo, ids, n, score_only, model, jobs, r.n);
      for (int i = 1; i < r.n; i++) job_release(loop, jobs[i]);
    } else {
      res = more < 0 ? MHD_NO : reply_busy(c, "the server is at its limit of requests in flight: retry later");
    }
  }
  goto done;
refuse:
  res = reply_error(c, &e);
done:
  free(echo);
  free(ids);
  api_request_free(&r);
  return res;
}

enum MHD_Result route_completions(Conn *c) { return generate_route(c, API_COMPLETION); }
enum MHD_Result route_chat(Conn *c) { return generate_route(c, API_CHAT); }
