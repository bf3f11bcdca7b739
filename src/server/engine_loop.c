#include "engine_loop.h"
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/clock.h"
#include "../base/mem.h"

struct Job {
  int refs; /* the handler's and, until the job finishes, the engine thread's (and one per queued cancel) */
  EngineRequest req;
  int32_t *prompt;
  char *stop[8];
  int id; /* the engine's request id; -1 until added */
  int cancel_req, finished;
  const char *reason;
  char error[640];
  int error_status;
  StrBuf text;
  int tokens;
  TokenLogprob *lp; /* with logprobs: one per token */
  int nlp, caplp;
  TokenLogprob *plp; /* with prompt logprobs: one per prompt token after the first */
  int nplp, capplp;
  float *embedding; /* an embedding job's, once it arrived */
  int dim;
  double t_submit, t_last; /* ms */
  pthread_cond_t cv;
};

typedef struct JobList {
  Job **at;
  int n, cap;
} JobList;

struct EngineLoop {
  Engine *e;
  Metrics *mx;
  int max_jobs, in_flight, stop, broken;
  char broken_msg[600];
  pthread_mutex_t mu;
  pthread_cond_t work;
  pthread_t thread;
  JobList adds, cancels;
  Job **by_id; /* engine id -> its job, while it runs */
  int cap_id;
  EngineStats stats;
};

static void push(JobList *q, Job *j) {
  if (q->n == q->cap) q->at = xrealloc(q->at, sizeof *q->at * (size_t)(q->cap = q->cap ? 2 * q->cap : 16), "a queue");
  q->at[q->n++] = j;
}

static void unref(Job *j) {
  if (--j->refs) return;
  free(j->prompt);
  for (int i = 0; i < j->req.nstop; i++) free(j->stop[i]);
  sb_free(&j->text);
  free(j->lp);
  free(j->plp);
  free(j->embedding);
  pthread_cond_destroy(&j->cv);
  free(j);
}

/* Called with the lock held. */
static void finish_job(EngineLoop *l, Job *j, const char *reason) {
  if (j->finished) return;
  j->finished = 1;
  j->reason = reason;
  if (j->id >= 0 && j->id < l->cap_id && l->by_id[j->id] == j) l->by_id[j->id] = NULL;
  l->in_flight--;
  pthread_cond_broadcast(&j->cv);
  unref(j); /* the engine thread's reference */
}

static void fail_job(EngineLoop *l, Job *j, int status, const char *msg) {
  snprintf(j->error, sizeof j->error, "%s", msg);
  j->error_status = status;
  finish_job(l, j, "error");
}

static void add_jobs(EngineLoop *l) {
  for (int i = 0; i < l->adds.n; i++) {
    Job *j = l->adds.at[i];
    if (j->cancel_req) {
      finish_job(l, j, "cancelled");
      continue;
    }
    Diag d = {0};
    int id = engine_add(l->e, &j->req, &d);
    if (id < 0) {
      fail_job(l, j, 400, d.msg);
      continue;
    }
    if (id >= l->cap_id) {
      int n = l->cap_id ? l->cap_id : 64;
      while (n <= id) n *= 2;
      l->by_id = xrealloc(l->by_id, sizeof *l->by_id * (size_t)n, "the jobs by id");
      memset(l->by_id + l->cap_id, 0, sizeof *l->by_id * (size_t)(n - l->cap_id));
      l->cap_id = n;
    }
    j->id = id;
    l->by_id[id] = j;
  }
  l->adds.n = 0;
  for (int i = 0; i < l->cancels.n; i++) {
    Job *j = l->cancels.at[i];
    if (!j->finished && j->id >= 0) engine_cancel(l->e, j->id, &(Diag){0});
    unref(j); /* the queue's reference */
  }
  l->cancels.n = 0;
}

static void route(EngineLoop *l, const EngineEvent *ev, int nev) {
  double now = now_ms();
  for (int k = 0; k < nev; k++) {
    Job *j = ev[k].id >= 0 && ev[k].id < l->cap_id ? l->by_id[ev[k].id] : NULL;
    if (ev[k].kind == EV_FINISHED) {
      if (j) finish_job(l, j, ev[k].reason);
      continue;
    }
    if (!j) continue;
    if (ev[k].kind == EV_EMBEDDING) {
      j->embedding = xmalloc(sizeof(float) * (size_t)ev[k].dim, "an embedding");
      memcpy(j->embedding, ev[k].embedding, sizeof(float) * (size_t)ev[k].dim);
      j->dim = ev[k].dim;
      continue;
    }
    if (ev[k].kind == EV_PROMPT_LOGPROB) {
      if (j->nplp == j->capplp)
        j->plp = xrealloc(j->plp, sizeof *j->plp * (size_t)(j->capplp = j->capplp ? 2 * j->capplp : 64), "logprobs");
      TokenLogprob *t = &j->plp[j->nplp++];
      t->token = ev[k].token;
      t->logprob = ev[k].logprob;
      t->end = 0;
      t->ntop = ev[k].ntop;
      memcpy(t->top_ids, ev[k].top_ids, sizeof(int32_t) * (size_t)ev[k].ntop);
      memcpy(t->top_lp, ev[k].top_logprobs, sizeof(float) * (size_t)ev[k].ntop);
      continue;
    }
    if (ev[k].text) sb_puts(&j->text, ev[k].text);
    if (ev[k].has_logprob) {
      if (j->nlp == j->caplp)
        j->lp = xrealloc(j->lp, sizeof *j->lp * (size_t)(j->caplp = j->caplp ? 2 * j->caplp : 16), "logprobs");
      TokenLogprob *t = &j->lp[j->nlp++];
      t->token = ev[k].token;
      t->logprob = ev[k].logprob;
      t->ntop = ev[k].ntop;
      memcpy(t->top_ids, ev[k].top_ids, sizeof(int32_t) * (size_t)ev[k].ntop);
      memcpy(t->top_lp, ev[k].top_logprobs, sizeof(float) * (size_t)ev[k].ntop);
    }
    if (j->nlp) j->lp[j->nlp - 1].end = j->text.len; /* a flushed tail belongs to the last token */
    if (ev[k].token >= 0) {
      if (l->mx) {
        if (!j->tokens) metrics_ttft(l->mx, (now - j->t_submit) / 1e3);
        else metrics_itl(l->mx, (now - j->t_last) / 1e3);
      }
      j->tokens++;
      j->t_last = now;
    }
    pthread_cond_broadcast(&j->cv);
  }
}

/* A failed step leaves the engine in an unknown state: every job fails and no new one is taken. */
static void break_loop(EngineLoop *l, const char *msg) {
  l->broken = 1;
  snprintf(l->broken_msg, sizeof l->broken_msg, "the engine failed: %s", msg);
  for (int i = 0; i < l->cap_id; i++)
    if (l->by_id[i]) fail_job(l, l->by_id[i], 500, l->broken_msg);
}

static void *run(void *arg) {
  EngineLoop *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    add_jobs(l);
    if (l->broken || !engine_has_work(l->e)) {
      if (l->stop) break;
      pthread_cond_wait(&l->work, &l->mu);
      continue;
    }
    pthread_mutex_unlock(&l->mu);
    const EngineEvent *ev;
    int nev;
    Diag d = {0};
    int ok = engine_step(l->e, &ev, &nev, &d);
    pthread_mutex_lock(&l->mu);
    if (!ok) {
      break_loop(l, d.msg);
    } else {
      route(l, ev, nev);
      /* the texts are read: drop the finished requests' records, so memory does not grow with requests */
      for (int k = 0; k < nev; k++)
        if (ev[k].kind == EV_FINISHED) engine_forget(l->e, ev[k].id, &(Diag){0});
    }
    engine_stats(l->e, &l->stats);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

EngineLoop *engine_loop_start(Engine *e, int max_jobs, Metrics *metrics, Diag *d) {
  EngineLoop *l = xcalloc(1, sizeof *l, "the engine loop");
  l->e = e;
  l->mx = metrics;
  l->max_jobs = max_jobs;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work, NULL);
  engine_stats(e, &l->stats);
  if (pthread_create(&l->thread, NULL, run, l) != 0) {
    diag_error(d, 0, 0, "cannot start the engine thread: %s", strerror(errno));
    pthread_cond_destroy(&l->work);
    pthread_mutex_destroy(&l->mu);
    free(l);
    return NULL;
  }
  return l;
}

static void cancel_locked(EngineLoop *l, Job *j) {
  if (j->finished || j->cancel_req) return;
  j->cancel_req = 1;
  if (j->id >= 0) {
    j->refs++;
    push(&l->cancels, j);
  }
  pthread_cond_signal(&l->work);
}

void engine_loop_cancel_all(EngineLoop *l) {
  pthread_mutex_lock(&l->mu);
  for (int i = 0; i < l->adds.n; i++) l->adds.at[i]->cancel_req = 1;
  for (int i = 0; i < l->cap_id; i++)
    if (l->by_id[i]) cancel_locked(l, l->by_id[i]);
  pthread_cond_signal(&l->work);
  pthread_mutex_unlock(&l->mu);
}

void engine_loop_free(EngineLoop *l) {
  if (!l) return;
  engine_loop_cancel_all(l);
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_signal(&l->work);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  add_jobs(l); /* what arrived since: finished as cancelled */
  for (int i = 0; i < l->cap_id; i++)
    if (l->by_id[i]) finish_job(l, l->by_id[i], "cancelled");
  free(l->adds.at);
  free(l->cancels.at);
  free(l->by_id);
  pthread_cond_destroy(&l->work);
  pthread_mutex_destroy(&l->mu);
  free(l);
}

Job *engine_loop_submit(EngineLoop *l, const EngineRequest *r) {
  pthread_mutex_lock(&l->mu);
  if (l->stop || l->broken || l->in_flight >= l->max_jobs) {
    pthread_mutex_unlock(&l->mu);
    return NULL;
  }
  Job *j = xcalloc(1, sizeof *j, "a job");
  j->refs = 2;
  j->id = -1;
  j->req = *r;
  j->prompt = xmalloc(sizeof(int32_t) * (size_t)(r->nprompt > 0 ? r->nprompt : 1), "a prompt");
  if (r->nprompt > 0) memcpy(j->prompt, r->prompt, sizeof(int32_t) * (size_t)r->nprompt);
  j->req.prompt = j->prompt;
  j->req.nstop = r->nstop < 8 ? r->nstop : 8;
  for (int i = 0; i < j->req.nstop; i++) j->stop[i] = xstrdup(r->stop[i], "a stop string");
  j->req.stop = (const char *const *)j->stop;
  j->req.stop_tokens = NULL; /* not copied: the server sends none */
  j->req.nstop_tokens = 0;
  j->t_submit = now_ms();
  pthread_cond_init(&j->cv, NULL);
  push(&l->adds, j);
  l->in_flight++;
  pthread_cond_signal(&l->work);
  pthread_mutex_unlock(&l->mu);
  return j;
}

void engine_loop_cancel(EngineLoop *l, Job *j) {
  pthread_mutex_lock(&l->mu);
  cancel_locked(l, j);
  pthread_mutex_unlock(&l->mu);
}

int engine_loop_in_flight(EngineLoop *l) {
  pthread_mutex_lock(&l->mu);
  int n = l->in_flight;
  pthread_mutex_unlock(&l->mu);
  return n;
}

const char *engine_loop_failure(EngineLoop *l) {
  pthread_mutex_lock(&l->mu);
  int broken = l->broken;
  pthread_mutex_unlock(&l->mu);
  return broken ? l->broken_msg : NULL; /* written once, before broken is set */
}

void engine_loop_stats(EngineLoop *l, EngineStats *st) {
  pthread_mutex_lock(&l->mu);
  *st = l->stats;
  pthread_mutex_unlock(&l->mu);
}

void job_wait(EngineLoop *l, Job *j, size_t from, int timeout_ms, StrBuf *out, JobStatus *st) {
  job_wait_tokens(l, j, from, INT_MAX, timeout_ms, out, st);
}

void job_wait_tokens(EngineLoop *l, Job *j, size_t from, int from_tokens, int timeout_ms, StrBuf *out, JobStatus *st) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&l->mu);
  while (j->text.len <= from && j->tokens <= from_tokens && !j->finished)
    if (pthread_cond_timedwait(&j->cv, &l->mu, &until) == ETIMEDOUT) break;
  if (out && j->text.len > from) sb_puts(out, j->text.data + from);
  st->finished = j->finished;
  st->reason = j->finished ? j->reason : NULL;
  snprintf(st->error, sizeof st->error, "%s", j->error);
  st->error_status = j->error_status;
  st->tokens = j->tokens;
  st->text_len = j->text.len;
  pthread_mutex_unlock(&l->mu);
}

int job_logprobs(EngineLoop *l, Job *j, int from, TokenLogprob **out, int *cap) {
  pthread_mutex_lock(&l->mu);
  int n = j->nlp;
  if (n > *cap) {
    *out = xrealloc(*out, sizeof **out * (size_t)n, "logprobs");
    *cap = n;
  }
  if (n > from) memcpy(*out + from, j->lp + from, sizeof **out * (size_t)(n - from));
  pthread_mutex_unlock(&l->mu);
  return n;
}

int job_prompt_logprobs(EngineLoop *l, Job *j, TokenLogprob **out, int *cap) {
  pthread_mutex_lock(&l->mu);
  int n = j->nplp;
  if (n > *cap) {
    *out = xrealloc(*out, sizeof **out * (size_t)n, "logprobs");
    *cap = n;
  }
  if (n) memcpy(*out, j->plp, sizeof **out * (size_t)n);
  pthread_mutex_unlock(&l->mu);
  return n;
}

const float *job_embedding(EngineLoop *l, Job *j, int *dim) {
  pthread_mutex_lock(&l->mu);
  const float *v = j->finished ? j->embedding : NULL;
  *dim = j->dim;
  pthread_mutex_unlock(&l->mu);
  return v;
}

void job_retain(EngineLoop *l, Job *j) {
  pthread_mutex_lock(&l->mu);
  j->refs++;
  pthread_mutex_unlock(&l->mu);
}

void job_release(EngineLoop *l, Job *j) {
  if (!j) return;
  pthread_mutex_lock(&l->mu);
  unref(j);
  pthread_mutex_unlock(&l->mu);
}
