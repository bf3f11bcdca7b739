/* The batched engine (engine.h): a scheduler step becomes one model_step_batch, every sequence that reached
 * its last known token gets its next token (the device's argmax when greedy, else its own sampler over its
 * row of logits), and the step's events say what each request got. */
#include "engine.h"
#define ENGINE_PARTS 5
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/clock.h"
#include "../base/mem.h"
#include "../base/strbuf.h"
#include "../base/notice.h"
#include "../base/settings.h"
#include "../generate/logprobs.h"

typedef struct Request {
  int live;           /* added and not yet reported finished */
  int cancel_pending; /* cancelled: the next step reports it */
  int ignore_eos, min_tokens;
  int forgotten; /* engine_forget dropped its records */
  Sampler sampler;
  DecodeState ds;
  StrBuf text, piece; /* text: everything decoded (stop strings); piece: this step's new text */
  StrBuf tail;        /* what the decoder held back, flushed when the request finishes (an event of its own) */
  char **stop;
  int nstop;
  int32_t *stop_tokens;
  int nstop_tokens;
  int32_t *out;
  int nout, cap;
  double presence, frequency;
  int logprobs, top_logprobs;
  float logprob; /* this step's token's, and its alternatives */
  int32_t top_ids[ENGINE_MAX_LOGPROBS];
  float top_lp[ENGINE_MAX_LOGPROBS];
  int32_t *prompt; /* with prompt logprobs: the prompt, and the next position whose logprob is due */
  int nprompt, prompt_lp_next;
  EnginePooling embed;
  float *pool;     /* an embedding's sum of hidden states (mean) or its last one, cfg.hidden floats */
  int pooled_next; /* mean: positions 0 .. pooled_next - 1 are in the sum (a recompute does not add them again) */
} Request;

struct Engine {
  Model *m;
  Sched *sched;
  StepPlan plan;
  Request *req;
  int nreq, capreq;
  EngineEvent *ev;
  int nev, capev;
  int *cancelled; /* requests cancelled since the last step, reported by the next one */
  int ncancelled, capcancelled;
  /* the step's host arrays, grown as needed */
  int32_t *table, *rows, *next, *new_tokens, *row_of;
  /* prompt logprobs: per entry, its first prompt row, the position of that row's reported token, how many;
   * the step's alternatives (ENGINE_MAX_LOGPROBS per prompt row) */
  int32_t *plp_row, *plp_pos, *plp_n;
  size_t cap_plp_entries, cap_plp_top;
  int32_t *plp_top_ids;
  float *plp_top_lp;
  /* the step's rows that the device samples: entry, logits row, uniform, options, token (cap_rows each) */
  int32_t *dev_entry, *dev_row, *dev_token;
  float *dev_u;
  const SamplerOptions **dev_opts;
  float *logits, *hidden;
  size_t cap_table, cap_rows, cap_logits, cap_hidden;
  int *counts; /* the penalties' scratch: vocab zeros */
  DeviceSampler *dsampler;
  long generated;
  double step_ms;
  double part_ms[ENGINE_PARTS]; /* LATHE_PROFILE: where the steps' wall time went (part_names) */
  int profile;
};

static void grow(void **p, size_t *cap, size_t want, size_t elem, const char *what) {
  if (want <= *cap) return;
  size_t n = *cap ? *cap : 16;
  while (n < want) n *= 2;
  *p = xrealloc(*p, n * elem, what);
  *cap = n;
}

Engine *engine_new(Model *m, const EngineOptions *o, Diag *d) {
  if (!m->kv_block) {
    diag_error(d, 0, 0, "the engine needs a model loaded for batched steps (a paged KV cache)");
    return NULL;
  }
  SchedConfig c = {m->kv_blocks,
                   m->kv_block,
                   o->max_batch_tokens > 0 ? o->max_batch_tokens : 2048,
                   o->max_seqs > 0 ? o->max_seqs : 256,
                   m->max_ctx,
                   m->cfg.vocab};
  if (c.max_batch_tokens < c.max_seqs) c.max_seqs = c.max_batch_tokens;
  Engine *e = xcalloc(1, sizeof *e, "the engine");
  e->m = m;
  if (!(e->sched = sched_new(&c, d))) {
    free(e);
    return NULL;
  }
  step_plan_init(&e->plan);
  const char *prof = setting_str(SET_PROFILE);
  e->profile = prof && *prof && strcmp(prof, "0");
  return e;
}

static void request_free(Request *r) {
  sampler_free(&r->sampler);
  sb_free(&r->text);
  sb_free(&r->piece);
  sb_free(&r->tail);
  for (int i = 0; i < r->nstop; i++) free(r->stop[i]);
  free(r->stop);
  free(r->stop_tokens);
  free(r->out);
  free(r->pool);
  free(r->prompt);
}

static const char *const part_names[ENGINE_PARTS] = {"schedule", "build inputs", "model step", "pick tokens",
                                                     "commit and report"};

void engine_free(Engine *e) {
  if (!e) return;
  if (e->profile && e->step_ms > 0) {
    long steps = 0;
    SchedStats ss;
    sched_stats(e->sched, &ss);
    steps = ss.steps > 0 ? ss.steps : 1;
    char line[512];
    int n =
        snprintf(line, sizeof line, "lathe engine profile: %ld steps, %.3f ms per step:", steps, e->step_ms / steps);
    for (int i = 0; i < ENGINE_PARTS && n > 0 && n < (int)sizeof line; i++)
      n += snprintf(line + n, sizeof line - (size_t)n, " %s %.3f", part_names[i], e->part_ms[i] / steps);
    notice(NOTICE_PROFILE, "%s", line);
  }
  for (int i = 0; i < e->nreq; i++) request_free(&e->req[i]);
  free(e->req);
  free(e->ev);
  free(e->cancelled);
  free(e->table);
  free(e->rows);
  free(e->next);
  free(e->new_tokens);
  free(e->row_of);
  free(e->plp_row);
  free(e->plp_pos);
  free(e->plp_n);
  free(e->plp_top_ids);
  free(e->plp_top_lp);
  free(e->dev_entry);
  free(e->dev_row);
  free(e->dev_token);
  free(e->dev_u);
  free(e->dev_opts);
  free(e->logits);
  free(e->hidden);
  free(e->counts);
  device_sampler_free(e->dsampler);
  step_plan_free(&e->plan);
  sched_free(e->sched);
  free(e);
}

int engine_add(Engine *e, const EngineRequest *r, Diag *d) {
  const Model *m = e->m;
  if (r->nprompt <= 0) {
    diag_error(d, 0, 0, "empty prompt: give at least one token");
    return -1;
  }
  if (r->nprompt >= m->max_ctx) {
    diag_error(d, 0, 0, "the prompt has %d tokens but the context holds %d", r->nprompt, m->max_ctx);
    return -1;
  }
  if (r->max_tokens < 1 && r->embed == POOL_NONE) {
    diag_error(d, 0, 0, "max_tokens must be at least 1 (got %d)", r->max_tokens);
    return -1;
  }
  if (r->min_tokens < 0) {
    diag_error(d, 0, 0, "min_tokens must be at least 0 (got %d)", r->min_tokens);
    return -1;
  }
  if (r->nstop < 0 || r->nstop > 64 || r->nstop_tokens < 0 || r->nstop_tokens > 64) {
    diag_error(d, 0, 0, "at most 64 stop strings and 64 stop tokens (got %d and %d)", r->nstop, r->nstop_tokens);
    return -1;
  }
  if (r->nstop && !m->tok) {
    diag_error(d, 0, 0, "stop strings need the model's tokenizer, and this model has none");
    return -1;
  }
  if (r->embed != POOL_NONE && !m->hidden_output) {
    diag_error(d, 0, 0,
               "embeddings need the model loaded with its hidden-state output (ModelLoadOptions.hidden_output)");
    return -1;
  }
  if (r->prompt_logprobs && r->embed != POOL_NONE) {
    diag_error(d, 0, 0, "an embedding request cannot ask for prompt logprobs");
    return -1;
  }
  if ((r->logprobs || r->prompt_logprobs) && (r->top_logprobs < 0 || r->top_logprobs > ENGINE_MAX_LOGPROBS)) {
    diag_error(d, 0, 0, "top_logprobs must be 0 to %d (got %d)", ENGINE_MAX_LOGPROBS, r->top_logprobs);
    return -1;
  }
  if (!(r->presence_penalty >= -2 && r->presence_penalty <= 2 && r->frequency_penalty >= -2 &&
        r->frequency_penalty <= 2)) {
    diag_error(d, 0, 0, "the presence and frequency penalties must be between -2 and 2 (got %g, %g)",
               r->presence_penalty, r->frequency_penalty);
    return -1;
  }
  if (r->sampling.top_p <= 0 || r->sampling.top_p > 1 || r->sampling.top_k < 0) {
    diag_error(d, 0, 0, "sampling: top_p must be in (0, 1] and top_k at least 0 (got %g, %d)", r->sampling.top_p,
               r->sampling.top_k);
    return -1;
  }
  /* a request asking for more than the context holds stops there ("length") */
  int max_new = r->max_tokens < m->max_ctx - r->nprompt ? r->max_tokens : m->max_ctx - r->nprompt;
  if (r->embed != POOL_NONE) max_new = 1; /* never sampled: it finishes when its prompt is computed */
  int id = sched_add(e->sched, r->prompt, r->nprompt, max_new, d);
  if (id < 0) return -1;
  /* a mean needs every position's hidden state: none may come from the prefix cache */
  if ((r->embed == POOL_MEAN || r->prompt_logprobs) && sched_no_prefix(e->sched, id, d) < 0) return -1;
  if (id >= e->capreq) {
    int n = e->capreq ? e->capreq * 2 : 16;
    while (n <= id) n *= 2;
    e->req = xrealloc(e->req, sizeof *e->req * (size_t)n, "the engine's requests");
    memset(e->req + e->capreq, 0, sizeof *e->req * (size_t)(n - e->capreq));
    e->capreq = n;
  }
  if (id >= e->nreq) e->nreq = id + 1;
  Request *q = &e->req[id];
  memset(q, 0, sizeof *q);
  q->live = 1;
  q->ignore_eos = r->ignore_eos;
  q->min_tokens = r->min_tokens;
  sampler_init(&q->sampler, &r->sampling);
  q->nstop = r->nstop;
  q->stop = r->nstop ? xcalloc((size_t)r->nstop, sizeof *q->stop, "the stop strings") : NULL;
  for (int i = 0; i < r->nstop; i++) q->stop[i] = xstrdup(r->stop[i] ? r->stop[i] : "", "a stop string");
  if (r->nstop_tokens > 0) {
    q->stop_tokens = xmalloc(sizeof(int32_t) * (size_t)r->nstop_tokens, "the stop tokens");
    memcpy(q->stop_tokens, r->stop_tokens, sizeof(int32_t) * (size_t)r->nstop_tokens);
    q->nstop_tokens = r->nstop_tokens;
  }
  q->presence = r->presence_penalty;
  q->frequency = r->frequency_penalty;
  q->logprobs = r->logprobs != 0;
  q->top_logprobs = r->top_logprobs;
  q->embed = r->embed;
  if (r->prompt_logprobs) {
    q->prompt = xmalloc(sizeof(int32_t) * (size_t)r->nprompt, "a prompt");
    memcpy(q->prompt, r->prompt, sizeof(int32_t) * (size_t)r->nprompt);
    q->nprompt = r->nprompt;
    q->prompt_lp_next = 1;
  }
  if (q->embed != POOL_NONE) q->pool = xcalloc((size_t)m->cfg.hidden, sizeof(float), "an embedding");
  return id;
}

static Request *live_request(Engine *e, int id, Diag *d) {
  if (id < 0 || id >= e->nreq || !e->req[id].live || e->req[id].cancel_pending) {
    diag_error(d, 0, 0, "no running or waiting request %d", id);
    return NULL;
  }
  return &e->req[id];
}

int engine_cancel(Engine *e, int id, Diag *d) {
  Request *q = live_request(e, id, d);
  if (!q || sched_cancel(e->sched, id, d) < 0) return -1;
  q->cancel_pending = 1;
  if (e->ncancelled == e->capcancelled) {
    e->capcancelled = e->capcancelled ? 2 * e->capcancelled : 16;
    e->cancelled = xrealloc(e->cancelled, sizeof(int) * (size_t)e->capcancelled, "the cancelled requests");
  }
  e->cancelled[e->ncancelled++] = id;
  return 0;
}

int engine_has_work(const Engine *e) { return e->ncancelled > 0 || sched_has_work(e->sched); }

static void emit(Engine *e, EngineEventKind kind, int id, int32_t token, const char *text, const char *reason) {
  if (e->nev == e->capev) {
    e->capev = e->capev ? e->capev * 2 : 64;
    e->ev = xrealloc(e->ev, sizeof *e->ev * (size_t)e->capev, "the engine's events");
  }
  e->ev[e->nev++] = (EngineEvent){.kind = kind, .id = id, .token = token, .text = text, .reason = reason};
}

static void finish(Engine *e, int id, const char *reason) {
  Request *q = &e->req[id];
  if (e->m->tok) {
    /* into its own buffer: the step's last token event still points at piece */
    sb_clear(&q->tail);
    tokenizer_decode_flush(&q->ds, &q->tail);
    if (q->tail.len) emit(e, EV_TOKEN, id, -1, sb_str(&q->tail), NULL);
  }
  emit(e, EV_FINISHED, id, -1, NULL, reason);
  q->live = 0;
  sampler_free(&q->sampler);
  memset(&q->sampler, 0, sizeof q->sampler);
  sb_free(&q->text);
}

/* Whether a request's rows need the host's logits whatever the target: penalties change them, logprobs read them,
 * min_tokens masks the tokens that would end it. */
static int needs_host_row(const Request *q) {
  return q->logprobs || q->presence != 0 || q->frequency != 0 || q->nout < q->min_tokens;
}

enum { MAX_ENDING = 8 + 1 + 1 + 64 };

/* The tokens that would end q now and that min_tokens keeps it from choosing: its stop tokens, and the model's
 * end-of-sequence ones unless it ignores them. */
static int ending_tokens(const Engine *e, const Request *q, int32_t *out) {
  const Model *m = e->m;
  int n = 0, vocab = m->cfg.vocab;
  for (int k = 0; k < q->nstop_tokens; k++) out[n++] = q->stop_tokens[k];
  if (!q->ignore_eos) {
    if (m->cfg.eos_id >= 0) out[n++] = m->cfg.eos_id;
    for (int k = 0; k < m->cfg.n_eos && k < 8; k++) out[n++] = m->cfg.eos_ids[k];
    if (m->tok && tokenizer_eos(m->tok) >= 0) out[n++] = tokenizer_eos(m->tok);
  }
  int kept = 0;
  for (int k = 0; k < n; k++)
    if (out[k] >= 0 && out[k] < vocab) out[kept++] = out[k];
  return kept;
}

/* Which of the step's positions give a prompt logprob: entry i's tokens plp_row[i] .. + plp_n[i] - 1 (indices within
 * the entry, made logit rows by build_step), whose logits give the prompt tokens from position plp_pos[i] on (the
 * next position each; a recompute after a preemption reports nothing twice). The number of such rows. */
static int plan_prompt_rows(Engine *e) {
  const StepPlan *p = &e->plan;
  size_t cap = e->cap_plp_entries;
  grow((void **)&e->plp_row, &e->cap_plp_entries, (size_t)p->nentries, sizeof(int32_t), "the prompt rows");
  if (e->cap_plp_entries != cap) {
    e->plp_pos = xrealloc(e->plp_pos, sizeof(int32_t) * e->cap_plp_entries, "the prompt rows");
    e->plp_n = xrealloc(e->plp_n, sizeof(int32_t) * e->cap_plp_entries, "the prompt rows");
  }
  int total = 0;
  for (int i = 0; i < p->nentries; i++) {
    const StepEntry *en = &p->entries[i];
    const Request *q = &e->req[en->seq];
    e->plp_n[i] = 0;
    if (!q->prompt || !q->live || q->cancel_pending) continue;
    /* the row of position pos gives the token at pos + 1 */
    int lo = q->prompt_lp_next > en->start + 1 ? q->prompt_lp_next : en->start + 1;
    int hi = q->nprompt < en->start + en->n + 1 ? q->nprompt : en->start + en->n + 1;
    if (lo >= hi) continue;
    e->plp_row[i] = lo - 1 - en->start;
    e->plp_pos[i] = lo;
    e->plp_n[i] = hi - lo;
    total += hi - lo;
  }
  return total;
}

/* The scheduler's plan as the model's batched step; which logit row each sampling entry reads. *any_hidden:
 * whether an embedding's tokens are in it. */
static int build_step(Engine *e, BatchStep *b, int *any_sampled, int *any_hidden) {
  const StepPlan *p = &e->plan;
  const Model *m = e->m;
  int bps = m->blocks_per_seq;
  grow((void **)&e->table, &e->cap_table, (size_t)p->nentries * (size_t)bps, sizeof(int32_t), "the block tables");
  int nprompt_rows = plan_prompt_rows(e);
  size_t cap = e->cap_rows;
  grow((void **)&e->rows, &e->cap_rows, (size_t)(p->nentries + nprompt_rows) + 1, sizeof(int32_t), "the logit rows");
  if (e->cap_rows != cap) { /* the per-entry arrays share the rows' capacity */
    e->next = xrealloc(e->next, sizeof(int32_t) * e->cap_rows, "the greedy tokens");
    e->new_tokens = xrealloc(e->new_tokens, sizeof(int32_t) * e->cap_rows, "the new tokens");
    e->row_of = xrealloc(e->row_of, sizeof(int32_t) * e->cap_rows, "the logit rows");
    e->dev_entry = xrealloc(e->dev_entry, sizeof(int32_t) * e->cap_rows, "the sampled rows");
    e->dev_row = xrealloc(e->dev_row, sizeof(int32_t) * e->cap_rows, "the sampled rows");
    e->dev_token = xrealloc(e->dev_token, sizeof(int32_t) * e->cap_rows, "the sampled rows");
    e->dev_u = xrealloc(e->dev_u, sizeof(float) * e->cap_rows, "the sampled rows");
    e->dev_opts = xrealloc(e->dev_opts, sizeof(*e->dev_opts) * e->cap_rows, "the sampled rows");
  }
  int nrows = 0, ctx = 1;
  *any_hidden = 0;
  for (int i = 0; i < p->nentries; i++) {
    const StepEntry *en = &p->entries[i];
    int32_t *row = e->table + (size_t)i * (size_t)bps;
    for (int k = 0; k < bps; k++) /* unused entries name a block the sequence holds: never read unmasked */
      row[k] = k < en->table_len ? p->block_tables[en->table_at + k] : en->table_len ? row[en->table_len - 1] : 0;
    if (en->start + en->n > ctx) ctx = en->start + en->n;
    e->row_of[i] = -1;
    if (e->plp_n[i]) { /* rows before the entry's own: the rows stay in token order */
      int at = e->plp_row[i];
      e->plp_row[i] = nrows;
      for (int k = 0; k < e->plp_n[i]; k++) e->rows[nrows++] = en->first + at + k;
    }
    if (e->req[en->seq].embed != POOL_NONE) {
      *any_hidden = 1; /* every token's hidden state is an output of its own: no logit row */
    } else if (en->sample) {
      e->row_of[i] = nrows;
      e->rows[nrows++] = en->first + en->n - 1;
    }
  }
  *any_sampled = nrows > 0;
  if (!nrows) e->rows[nrows++] = 0; /* a step of prefill chunks only: one row, unused */
  *b = (BatchStep){p->ntokens,   p->nentries, nrows,    ctx,      p->tokens,
                   p->positions, p->entry_of, p->slots, e->table, e->rows};
  return nrows;
}

/* A host row's penalties, the token chosen from it, and its logprobs. */
static int32_t pick_host_row(Engine *e, Request *q, float *row, int32_t device_greedy, float u) {
  int vocab = e->m->cfg.vocab;
  int penalized = q->presence != 0 || q->frequency != 0;
  if (penalized) {
    if (!e->counts) e->counts = xcalloc((size_t)vocab, sizeof(int), "the penalties' counts");
    logits_apply_penalties(row, vocab, q->out, q->nout, q->presence, q->frequency, e->counts);
  }
  /* min_tokens: the ending tokens are -inf for the choice only (the logprobs below see the model's values) */
  int32_t ending[MAX_ENDING];
  float saved[MAX_ENDING];
  int nending = q->nout < q->min_tokens ? ending_tokens(e, q, ending) : 0;
  for (int k = 0; k < nending; k++) saved[k] = row[ending[k]];
  for (int k = 0; k < nending; k++) row[ending[k]] = -INFINITY;
  int32_t tok = !sampler_is_greedy(&q->sampler.o) ? sampler_pick(&q->sampler, u, row, vocab)
                : penalized || nending            ? argmax(row, vocab)
                                                  : device_greedy;
  for (int k = nending - 1; k >= 0; k--) row[ending[k]] = saved[k]; /* in reverse: a repeated id gets its own */
  if (q->logprobs) {
    double norm = logits_log_normalizer(row, vocab);
    q->logprob = (float)((double)row[tok] - norm);
    int k = logits_top(row, vocab, q->top_logprobs, q->top_ids);
    for (int j = 0; j < k; j++) q->top_lp[j] = (float)((double)row[q->top_ids[j]] - norm);
  }
  return tok;
}

/* Each sampling entry's next token: the device's argmax when greedy, else its request's sampler: on the host's
 * copy of its row when the step has one (on CUDA, only when a request needs penalties or logprobs), or for every
 * sampled row of the step in one device launch. */
static int pick_tokens(Engine *e, int host_logits, Diag *d) {
  const StepPlan *p = &e->plan;
  Model *m = e->m;
  int ndev = 0;
  for (int i = 0; i < p->nentries; i++) {
    int r = e->row_of[i];
    e->new_tokens[i] = -1;
    if (r < 0) continue;
    Request *q = &e->req[p->entries[i].seq];
    int greedy = sampler_is_greedy(&q->sampler.o);
    if (greedy && !needs_host_row(q)) {
      e->new_tokens[i] = e->next[r];
      continue;
    }
    float u = greedy ? 0 : sampler_draw(&q->sampler);
    if (host_logits) {
      e->new_tokens[i] = pick_host_row(e, q, e->logits + (size_t)r * (size_t)m->cfg.vocab, e->next[r], u);
      continue;
    }
    e->dev_entry[ndev] = i;
    e->dev_row[ndev] = r;
    e->dev_u[ndev] = u;
    e->dev_opts[ndev++] = &q->sampler.o;
  }
  if (!ndev) return 1;
  if (!e->dsampler && !(e->dsampler = device_sampler_new(m->backend, d))) return 0;
  if (!device_sampler_pick_rows(e->dsampler, ndev, e->dev_opts, e->dev_u, e->dev_row, plan_output_device(m->plan, 0),
                                m->cfg.vocab, e->dev_token, d))
    return 0;
  for (int b = 0; b < ndev; b++) e->new_tokens[e->dev_entry[b]] = e->dev_token[b];
  return 1;
}

/* The prompt tokens' logprobs from their rows (host logits), as EV_PROMPT_LOGPROB events. */
static void report_prompt_logprobs(Engine *e) {
  const StepPlan *p = &e->plan;
  int vocab = e->m->cfg.vocab;
  size_t nrows = 0;
  for (int i = 0; i < p->nentries; i++) nrows += (size_t)e->plp_n[i];
  if (!nrows) return;
  size_t cap = e->cap_plp_top;
  grow((void **)&e->plp_top_ids, &e->cap_plp_top, nrows * ENGINE_MAX_LOGPROBS, sizeof(int32_t), "prompt logprobs");
  if (e->cap_plp_top != cap) e->plp_top_lp = xrealloc(e->plp_top_lp, sizeof(float) * e->cap_plp_top, "prompt logprobs");
  size_t at = 0;
  for (int i = 0; i < p->nentries; i++) {
    int id = p->entries[i].seq;
    Request *q = &e->req[id];
    for (int k = 0; k < e->plp_n[i]; k++, at++) {
      const float *row = e->logits + (size_t)(e->plp_row[i] + k) * (size_t)vocab;
      int pos = e->plp_pos[i] + k;
      int32_t tok = q->prompt[pos], *top = e->plp_top_ids + at * ENGINE_MAX_LOGPROBS;
      float *top_lp = e->plp_top_lp + at * ENGINE_MAX_LOGPROBS;
      double norm = logits_log_normalizer(row, vocab);
      int ntop = logits_top(row, vocab, q->top_logprobs, top);
      for (int j = 0; j < ntop; j++) top_lp[j] = (float)((double)row[top[j]] - norm);
      emit(e, EV_PROMPT_LOGPROB, id, tok, NULL, NULL);
      EngineEvent *ev = &e->ev[e->nev - 1];
      ev->pos = pos;
      ev->has_logprob = 1;
      ev->logprob = (float)((double)row[tok] - norm);
      ev->ntop = ntop;
      ev->top_ids = top;
      ev->top_logprobs = top_lp;
      q->prompt_lp_next = pos + 1;
    }
  }
}

/* Embedding entries: their tokens' hidden states pooled; one whose prompt is now computed is finished (before the
 * commit, which then skips it) with its EV_EMBEDDING. */
static int pool_embeddings(Engine *e, Diag *d) {
  const StepPlan *p = &e->plan;
  int dim = e->m->cfg.hidden;
  for (int i = 0; i < p->nentries; i++) {
    const StepEntry *en = &p->entries[i];
    Request *q = &e->req[en->seq];
    if (q->embed == POOL_NONE || !q->live || q->cancel_pending) continue;
    for (int k = 0; k < en->n; k++) {
      const float *h = e->hidden + (size_t)(en->first + k) * (size_t)dim;
      if (q->embed == POOL_MEAN && en->start + k == q->pooled_next) {
        for (int j = 0; j < dim; j++) q->pool[j] += h[j];
        q->pooled_next++;
      } else if (q->embed == POOL_LAST && en->sample && k == en->n - 1) {
        memcpy(q->pool, h, sizeof(float) * (size_t)dim);
      }
    }
    if (!en->sample) continue;
    SeqInfo si;
    if (q->embed == POOL_MEAN && (sched_seq(e->sched, en->seq, &si) < 0 || q->pooled_next != si.prompt_len)) {
      diag_error(d, 0, 0, "internal: request %d pooled %d of its %d positions", en->seq, q->pooled_next, si.prompt_len);
      return 0;
    }
    if (q->embed == POOL_MEAN)
      for (int j = 0; j < dim; j++) q->pool[j] /= (float)q->pooled_next;
    if (sched_finish(e->sched, en->seq, SEQ_FINISH_STOP, d) < 0) return 0;
    emit(e, EV_EMBEDDING, en->seq, -1, NULL, NULL);
    e->ev[e->nev - 1].embedding = q->pool;
    e->ev[e->nev - 1].dim = dim;
    finish(e, en->seq, "stop");
  }
  return 1;
}

/* After the commit: the tokens' events, stop tokens and strings, and sequences the scheduler finished. */
static int report(Engine *e, Diag *d) {
  const StepPlan *p = &e->plan;
  const Model *m = e->m;
  for (int i = 0; i < p->nentries; i++) {
    if (e->row_of[i] < 0) continue;
    int id = p->entries[i].seq;
    Request *q = &e->req[id];
    if (!q->live || q->cancel_pending) continue;
    int32_t tok = e->new_tokens[i];
    e->generated++;
    SeqInfo si;
    if (sched_seq(e->sched, id, &si) < 0) continue;
    int stop_token = 0;
    for (int k = 0; k < q->nstop_tokens; k++) stop_token |= q->stop_tokens[k] == tok;
    if (stop_token || (!q->ignore_eos && model_is_eos(m, tok))) {
      if (si.state != SEQ_FINISHED && sched_finish(e->sched, id, SEQ_FINISH_STOP, d) < 0) return 0;
      finish(e, id, "stop");
      continue;
    }
    if (q->nout == q->cap) {
      q->cap = q->cap ? q->cap * 2 : 64;
      q->out = xrealloc(q->out, sizeof(int32_t) * (size_t)q->cap, "a request's tokens");
    }
    q->out[q->nout++] = tok;
    sb_clear(&q->piece);
    if (m->tok) tokenizer_decode_step(m->tok, &q->ds, tok, 1, &q->piece);
    emit(e, EV_TOKEN, id, tok, sb_str(&q->piece), NULL);
    if (q->logprobs) {
      EngineEvent *ev = &e->ev[e->nev - 1];
      ev->has_logprob = 1;
      ev->logprob = q->logprob;
      ev->ntop = q->top_logprobs;
      ev->top_ids = q->top_ids;
      ev->top_logprobs = q->top_lp;
    }
    int stop = 0;
    if (q->nstop) {
      sb_puts(&q->text, sb_str(&q->piece));
      for (int k = 0; k < q->nstop && !stop; k++) stop = q->stop[k][0] && strstr(sb_str(&q->text), q->stop[k]);
    }
    if (stop) {
      if (si.state != SEQ_FINISHED && sched_finish(e->sched, id, SEQ_FINISH_STOP, d) < 0) return 0;
      finish(e, id, "stop");
    } else if (si.state == SEQ_FINISHED) {
      finish(e, id, seq_finish_name(si.finish));
    }
  }
  return 1;
}

int engine_step(Engine *e, const EngineEvent **events, int *nevents, Diag *d) {
  e->nev = 0;
  *events = NULL;
  *nevents = 0;
  for (int k = 0; k < e->ncancelled; k++) {
    Request *q = &e->req[e->cancelled[k]];
    q->cancel_pending = 0;
    sb_clear(&q->piece);
    finish(e, e->cancelled[k], "cancelled");
  }
  e->ncancelled = 0;
  double t0 = now_ms(), t[ENGINE_PARTS + 1] = {t0};
  if (sched_plan_step(e->sched, &e->plan, d) < 0) return 0;
  t[1] = t[2] = t[3] = t[4] = now_ms();
  if (e->plan.nentries > 0) {
    BatchStep b;
    Model *m = e->m;
    int sampled, any_hidden, nrows = build_step(e, &b, &sampled, &any_hidden), host_logits = 0;
    for (int i = 0; sampled && i < e->plan.nentries; i++) {
      const Request *q = &e->req[e->plan.entries[i].seq];
      if (e->plp_n[i]) host_logits = 1;
      if (e->row_of[i] >= 0 &&
          (needs_host_row(q) || (!sampler_is_greedy(&q->sampler.o) && m->backend->target.kind != TARGET_CUDA)))
        host_logits = 1;
    }
    if (host_logits)
      grow((void **)&e->logits, &e->cap_logits, (size_t)nrows * (size_t)m->cfg.vocab, sizeof(float), "the logits");
    if (any_hidden)
      grow((void **)&e->hidden, &e->cap_hidden, (size_t)b.ntok * (size_t)m->cfg.hidden, sizeof(float),
           "the hidden states");
    t[2] = now_ms();
    if (!model_step_batch_hidden(m, &b, host_logits ? e->logits : NULL, e->next, any_hidden ? e->hidden : NULL, d))
      return 0;
    t[3] = now_ms();
    if (!pick_tokens(e, host_logits, d)) return 0;
    report_prompt_logprobs(e);
    if (any_hidden && !pool_embeddings(e, d)) return 0;
    t[4] = now_ms();
    if (sched_commit(e->sched, &e->plan, e->new_tokens, d) < 0) return 0;
    if (!report(e, d)) return 0;
  }
  t[ENGINE_PARTS] = now_ms();
  for (int i = 0; i < ENGINE_PARTS; i++) e->part_ms[i] += t[i + 1] - t[i];
  e->step_ms += t[ENGINE_PARTS] - t0;
  *events = e->ev;
  *nevents = e->nev;
  return 1;
}

void engine_stats(const Engine *e, EngineStats *s) {
  SchedStats ss;
  sched_stats(e->sched, &ss);
  *s = (EngineStats){ss.running,       ss.waiting,
                     ss.blocks_held,   ss.blocks_cached,
                     e->m->kv_blocks,  e->m->kv_block,
                     ss.steps,         ss.prefill_tokens,
                     ss.decode_tokens, ss.prefix_tokens_reused,
                     ss.preemptions,   e->generated,
                     e->step_ms,       e->step_ms > 0 ? e->generated / (e->step_ms / 1e3) : 0};
}

int engine_forget(Engine *e, int id, Diag *d) {
  if (id < 0 || id >= e->nreq || e->req[id].live || e->req[id].forgotten) {
    diag_error(d, 0, 0, "cannot forget request %d: %s", id,
               id < 0 || id >= e->nreq ? "no such request"
               : e->req[id].live       ? "it has not finished"
                                       : "it is forgotten already");
    return -1;
  }
  if (sched_forget(e->sched, id, d) < 0) return -1;
  Request *q = &e->req[id];
  request_free(q);
  memset(q, 0, sizeof *q);
  q->forgotten = 1;
  return 0;
}

const int32_t *engine_output(const Engine *e, int id, int *n) {
  if (id < 0 || id >= e->nreq) {
    *n = 0;
    return NULL;
  }
  *n = e->req[id].nout;
  return e->req[id].out;
}
