/* A streamed answer: server-sent events ("data: {chunk}\n\n" ... "data: [DONE]\n\n") produced by MHD's
 * content-reader callback on the connection's own thread. It waits for the job's text (never the engine
 * for it), holds back a tail that could begin a stop string, and ends when the job finishes or the client
 * goes away (then the job is cancelled). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "api_response.h"
#include "server_internal.h"
#include "stop_text.h"

typedef struct Stream {
  Conn *c;
  EngineLoop *loop;
  Job *job;
  ApiIdent ident;
  int include_usage;
  char *echo;
  char *stop[API_MAX_STOP];
  int nstop;
  const Tokenizer *tok;
  int logprobs;
  long lp_base;    /* the characters before the generated text (an echo's) */
  int32_t *prompt; /* echo with logprobs: the prompt's tokens */
  int nprompt, prompt_skip_special;
  int score_only;
  TokenLogprob *lp; /* the job's records so far */
  int nlp, caplp, lp_sent;
  StrBuf text;   /* the job's text so far */
  size_t sent;   /* of it, sent */
  int tokens;    /* a model without a tokenizer: the tokens a chunk has announced (its text is empty) */
  int started;   /* the first chunk (role, or echo) is out */
  int done;      /* [DONE] is queued */
  StrBuf out;    /* events not yet written */
  size_t out_at; /* written of out */
} Stream;

static void put_event(Stream *s, char *ev) {
  sb_puts(&s->out, ev);
  free(ev);
}

/* The logprobs of the tokens not yet sent whose text ends within the first upto bytes (at the end: all of them,
 * or after a stop string (at upto) those that begin before it); NULL when there are none or the request has no
 * logprobs. */
static json_t *take_logprobs(Stream *s, size_t upto, int final, int stopped) {
  if (!s->logprobs) return NULL;
  s->nlp = job_logprobs(s->loop, s->job, s->nlp, &s->lp, &s->caplp);
  int k = s->lp_sent;
  while (k < s->nlp && (final && !stopped ? 1 : final ? (k ? s->lp[k - 1].end : 0) < upto : s->lp[k].end <= upto)) k++;
  if (k == s->lp_sent) return NULL;
  json_t *j = api_logprobs_json(s->ident.kind, s->tok, s->lp, s->lp_sent, k, sb_str(&s->text), s->lp_base);
  s->lp_sent = k;
  return j;
}

static void put_text(Stream *s, const char *text, size_t n, json_t *logprobs) {
  char *piece = xmalloc(n + 1, "a chunk");
  memcpy(piece, text, n);
  piece[n] = 0;
  put_event(s, api_chunk_event(&s->ident, piece, 0, NULL, NULL, s->include_usage, logprobs));
  free(piece);
}

/* After a stream started, an error is an event of OpenAI's error object (then [DONE]): never a silent end. */
static void put_end(Stream *s, const JobStatus *st, int stopped) {
  s->c->gen_tokens = st->tokens;
  ApiError e = {0};
  if (job_status_error(st, &e)) {
    if (e.status >= 500) snprintf(s->c->note, sizeof s->c->note, "%s", e.message);
    char *body = api_error_body(&e);
    sb_puts(&s->out, "data: ");
    sb_puts(&s->out, body);
    sb_puts(&s->out, "\n\n");
    free(body);
  } else {
    put_event(s, api_chunk_event(&s->ident, NULL, 0, stopped ? "stop" : st->reason, NULL, s->include_usage, NULL));
    if (s->include_usage) {
      ApiUsage u = {s->c->prompt_tokens, st->tokens};
      put_event(s, api_chunk_event(&s->ident, NULL, 0, NULL, &u, 1, NULL));
    }
  }
  sb_puts(&s->out, "data: [DONE]\n\n");
  s->done = 1;
}

/* The echo chunk with the prompt's logprobs, once the prompt is computed (the job has text or finished); 0 while
 * it is not, after waiting a while. */
static int put_echo_logprobs(Stream *s) {
  JobStatus st;
  job_wait(s->loop, s->job, s->text.len, 100, &s->text, &st);
  if (!st.finished && !s->text.len) return 0;
  TokenLogprob *rec = NULL;
  int cap = 0, n = job_prompt_logprobs(s->loop, s->job, &rec, &cap);
  json_t *lp = api_prompt_logprobs_json(s->tok, s->prompt, s->nprompt, rec, n, s->prompt_skip_special);
  free(rec);
  put_text(s, s->echo, strlen(s->echo), lp);
  return 1;
}

/* Fills s->out with the next events; 0 when the client has gone. */
static int produce(Stream *s) {
  if (!s->started && s->prompt) {
    if (put_echo_logprobs(s)) s->started = 1;
    else if (conn_client_gone(s->c)) return 0;
    return 1;
  }
  if (!s->started) {
    s->started = 1;
    if (s->ident.kind == API_CHAT) {
      put_event(s, api_chunk_event(&s->ident, "", 1, NULL, NULL, s->include_usage, NULL));
      return 1;
    }
    if (s->echo && s->echo[0]) {
      put_text(s, s->echo, strlen(s->echo), NULL);
      return 1;
    }
  }
  JobStatus st;
  if (s->score_only) { /* nothing of the generated token goes out: only the end, once the job is done */
    job_wait(s->loop, s->job, (size_t)-1, 100, NULL, &st);
    if (st.finished) {
      st.tokens = 0;
      if (!strcmp(st.reason, "stop")) st.reason = "length";
      put_end(s, &st, 0);
    } else if (conn_client_gone(s->c)) {
      return 0;
    }
    return 1;
  }
  /* without a tokenizer (random weights) tokens have no text: each step's tokens still get a chunk, empty */
  job_wait_tokens(s->loop, s->job, s->text.len, s->tok ? INT_MAX : s->tokens, 100, &s->text, &st);
  long at = stop_find(sb_str(&s->text), s->text.len, (const char *const *)s->stop, s->nstop);
  size_t upto = at >= 0       ? (size_t)at
                : st.finished ? s->text.len
                              : stop_safe_len(sb_str(&s->text), s->text.len, (const char *const *)s->stop, s->nstop);
  json_t *lp = take_logprobs(s, upto, st.finished, at >= 0);
  if (upto > s->sent || lp || (!s->tok && st.tokens > s->tokens && !st.finished)) {
    put_text(s, sb_str(&s->text) + s->sent, upto - s->sent, lp);
    s->sent = upto;
  }
  s->tokens = st.tokens;
  if (st.finished) put_end(s, &st, at >= 0);
  else if (!s->out.len && conn_client_gone(s->c)) return 0;
  return 1;
}

static ssize_t on_read(void *cls, uint64_t pos, char *buf, size_t max) {
  Stream *s = cls;
  while (s->out_at == s->out.len) {
    if (s->done) return MHD_CONTENT_READER_END_OF_STREAM;
    sb_clear(&s->out);
    s->out_at = 0;
    if (!produce(s)) {
      engine_loop_cancel(s->loop, s->job);
      s->c->status = 499;
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
  }
  size_t n = s->out.len - s->out_at;
  if (n > max) n = max;
  memcpy(buf, s->out.data + s->out_at, n);
  s->out_at += n;
  return (ssize_t)n;
}

static void on_free(void *cls) {
  Stream *s = cls;
  if (!s->done) engine_loop_cancel(s->loop, s->job);
  job_release(s->loop, s->job);
  sb_free(&s->text);
  sb_free(&s->out);
  free(s->lp);
  free(s->echo);
  free(s->prompt);
  for (int i = 0; i < s->nstop; i++) free(s->stop[i]);
  Conn *c = s->c;
  free(s);
  conn_unref(c);
}

enum MHD_Result reply_stream(Conn *c, Job *job, const StreamSpec *sp) {
  Stream *s = xcalloc(1, sizeof *s, "a stream");
  s->c = c;
  server_model(c->s, &s->loop);
  s->job = job;
  api_ident_init(&s->ident, sp->kind, server_next_serial(c->s), sp->model);
  s->include_usage = sp->include_usage;
  s->logprobs = sp->logprobs;
  s->tok = server_model(c->s, NULL)->tok;
  s->echo = sp->echo ? xstrdup(sp->echo, "the echo") : NULL;
  s->lp_base = sp->echo ? api_text_chars(sp->echo) : 0;
  s->score_only = sp->score_only;
  if (sp->prompt && sp->echo) {
    s->prompt = xmalloc(sizeof(int32_t) * (size_t)sp->nprompt, "the prompt");
    memcpy(s->prompt, sp->prompt, sizeof(int32_t) * (size_t)sp->nprompt);
    s->nprompt = sp->nprompt;
    s->prompt_skip_special = sp->prompt_skip_special;
  }
  s->nstop = sp->nstop;
  for (int i = 0; i < sp->nstop; i++) s->stop[i] = xstrdup(sp->stop[i], "a stop string");
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, on_read, s, on_free);
  if (!r) {
    for (int i = 0; i < s->nstop; i++) free(s->stop[i]);
    free(s->echo);
    free(s->prompt);
    free(s);
    return MHD_NO;
  }
  /* the stream holds the job and the connection until MHD frees the response */
  job_retain(s->loop, job);
  c->refs++;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  c->status = 200;
  enum MHD_Result ok = MHD_queue_response(c->mc, 200, r);
  MHD_destroy_response(r);
  return ok;
}
