/* What the server's files share: the server, a connection's state, and the helpers that answer. */
#ifndef LATHE_SERVER_INTERNAL_H
#define LATHE_SERVER_INTERNAL_H
#include <microhttpd.h>
#include <pthread.h>
#include "api_request.h"
#include "server.h"

struct Server {
  struct MHD_Daemon *mhd;
  ServerOptions o;
  Metrics *mx;
  ServerLog log;
  void *log_ctx;
  pthread_mutex_t mu; /* guards what follows */
  Model *m;           /* NULL while loading */
  EngineLoop *loop;
  unsigned long long serial;
  int active;
  int quiesced;
};

/* One request, from its headers to its last byte. Referenced by the connection and, while it streams, by the
 * stream; the last reference logs it. */
typedef struct Conn {
  Server *s;
  struct MHD_Connection *mc;
  int refs;
  char *body;
  size_t len, cap;
  int too_big;
  double t0; /* ms */
  char method[16], path[128];
  const char *route; /* the route's path, or "other" */
  int status, prompt_tokens, gen_tokens;
  char note[700]; /* a 5xx's cause, for the log line */
  Job *job;
} Conn;

void conn_unref(Conn *c);
/* Whether the client has closed its end (poll, no waiting). */
int conn_client_gone(Conn *c);
/* The model and loop, or NULL while loading. */
Model *server_model(Server *s, EngineLoop **loop);
unsigned long long server_next_serial(Server *s);

/* Queue a response (body malloc'ed, taken over). */
enum MHD_Result reply(Conn *c, int status, const char *content_type, char *body);
enum MHD_Result reply_error(Conn *c, const ApiError *e);
/* A 503 with Retry-After. */
enum MHD_Result reply_busy(Conn *c, const char *msg);

/* The routes (routes.c, generate.c). */
enum MHD_Result route_health(Conn *c);
enum MHD_Result route_metrics(Conn *c);
enum MHD_Result route_models(Conn *c);
enum MHD_Result route_tokenize(Conn *c);
enum MHD_Result route_detokenize(Conn *c);
enum MHD_Result route_embeddings(Conn *c);
enum MHD_Result route_completions(Conn *c);
enum MHD_Result route_chat(Conn *c);

/* A finished job that has no answer: a refusal (400), a failed step (500), or cancelled by the server (503: it is
 * shutting down) becomes e; 0 for a job that answers. */
int job_status_error(const JobStatus *st, ApiError *e);

/* Streams a job's text as server-sent events (stream.c); takes a reference on c and on the job. */
typedef struct StreamSpec {
  ApiKind kind;
  const char *model;
  int include_usage;
  const char *echo; /* completions with echo: the prompt's text, sent first */
  const char *const *stop;
  int nstop;
  int logprobs; /* the chunks carry their tokens' logprobs */
  /* echo with logprobs: the prompt's tokens (copied), whose logprobs go with the echo (then sent once the prompt
   * is computed) */
  const int32_t *prompt;
  int nprompt, prompt_skip_special;
  int score_only; /* max_tokens 0 with echo: the echo, then the end; the one token generated is not sent */
} StreamSpec;
enum MHD_Result reply_stream(Conn *c, Job *job, const StreamSpec *sp);
#endif
