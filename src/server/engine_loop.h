/* The server's engine thread: it alone owns the Engine (which is not thread-safe). HTTP handler threads
 * submit jobs and cancellations into a mutex-protected queue; the thread makes them between steps, runs
 * engine_step while there is work (else sleeps on a condition variable) and routes each step's events to
 * their job by request id: the job's text grows, and its waiters are woken. The engine never waits for a
 * reader: a job's text is a buffer that a slow client drains at its own pace. */
#ifndef LATHE_SERVER_ENGINE_LOOP_H
#define LATHE_SERVER_ENGINE_LOOP_H
#include <stddef.h>
#include "../base/strbuf.h"
#include "../engine/engine.h"
#include "metrics.h"

typedef struct EngineLoop EngineLoop;
typedef struct Job Job;

/* A job as its handler sees it at one moment (job_wait's copy). */
typedef struct JobStatus {
  int finished;
  const char *reason; /* "stop", "length", "cancelled" or "error" once finished */
  char error[640];    /* reason "error": why (the request was refused by the engine, or a step failed) */
  int error_status;   /* the HTTP status that error means (400 refused, 500 a failed step) */
  int tokens;         /* generated so far */
  size_t text_len;    /* bytes of text so far */
} JobStatus;

/* One generated token's log-probabilities (requests with EngineRequest.logprobs). */
typedef struct TokenLogprob {
  int32_t token;
  float logprob;
  size_t end; /* the job's text up to the end of this token's text (bytes) */
  int ntop;
  int32_t top_ids[ENGINE_MAX_LOGPROBS];
  float top_lp[ENGINE_MAX_LOGPROBS];
} TokenLogprob;

/* Starts the thread. max_jobs: jobs in flight (queued, waiting or running) at most; more are refused. The
 * loop does not own e; metrics (may be NULL) gets the time-to-first-token and inter-token latencies. */
EngineLoop *engine_loop_start(Engine *e, int max_jobs, Metrics *metrics, Diag *d);
/* Cancels what is in flight, waits for the thread and frees the loop (the engine stays). */
void engine_loop_free(EngineLoop *l);

/* Queues a request (its prompt and stop strings are copied). NULL when max_jobs are in flight (the queue is
 * full) or the loop has stopped. The caller holds the returned reference until job_release. */
Job *engine_loop_submit(EngineLoop *l, const EngineRequest *r);
/* Asks for the job to be cancelled (its blocks are freed at the next step); idempotent, harmless once done. */
void engine_loop_cancel(EngineLoop *l, Job *j);
void engine_loop_cancel_all(EngineLoop *l);
int engine_loop_in_flight(EngineLoop *l);
/* Why the loop stopped taking jobs after a failed step, or NULL while it works. */
const char *engine_loop_failure(EngineLoop *l);
/* The engine's statistics after its latest step. */
void engine_loop_stats(EngineLoop *l, EngineStats *st);

/* Waits up to timeout_ms until the job has more than `from` bytes of text or has finished; appends its
 * text from `from` on to out (when out is non-NULL) and fills st. */
void job_wait(EngineLoop *l, Job *j, size_t from, int timeout_ms, StrBuf *out, JobStatus *st);
/* The same, and also done waiting once the job has more than from_tokens tokens (text or not). */
void job_wait_tokens(EngineLoop *l, Job *j, size_t from, int from_tokens, int timeout_ms, StrBuf *out, JobStatus *st);
/* Appends the job's logprob records from index `from` on to *out (of *cap, grown); the number of records it has. */
int job_logprobs(EngineLoop *l, Job *j, int from, TokenLogprob **out, int *cap);
/* A job with EngineRequest.prompt_logprobs: copies its prompt-token records so far (position 1 on, in order; all
 * of them once the job has text or has finished) into *out (of *cap, grown); their number. */
int job_prompt_logprobs(EngineLoop *l, Job *j, TokenLogprob **out, int *cap);
/* A finished embedding job's vector (*dim floats, the engine's, not normalized; valid while the job is held),
 * or NULL. */
const float *job_embedding(EngineLoop *l, Job *j, int *dim);
void job_retain(EngineLoop *l, Job *j);
void job_release(EngineLoop *l, Job *j);
#endif
