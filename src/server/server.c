/* The daemon, a request's life (headers, body, route, answer, log line) and authentication. */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../base/clock.h"
#include "../base/mem.h"
#include "api_response.h"
#include "server_internal.h"

typedef struct Route {
  const char *path, *method;
  enum MHD_Result (*run)(Conn *c);
  int open; /* answered without the API key, and while the model loads */
} Route;

static const Route ROUTES[] = {
    {"/health", "GET", route_health, 1},
    {"/metrics", "GET", route_metrics, 1},
    {"/v1/models", "GET", route_models, 0},
    {"/v1/completions", "POST", route_completions, 0},
    {"/v1/chat/completions", "POST", route_chat, 0},
    {"/v1/embeddings", "POST", route_embeddings, 0},
    {"/tokenize", "POST", route_tokenize, 0},
    {"/detokenize", "POST", route_detokenize, 0},
};
enum { NROUTES = sizeof ROUTES / sizeof ROUTES[0] };

Model *server_model(Server *s, EngineLoop **loop) {
  pthread_mutex_lock(&s->mu);
  Model *m = s->m;
  if (loop) *loop = s->loop;
  pthread_mutex_unlock(&s->mu);
  return m;
}

unsigned long long server_next_serial(Server *s) {
  pthread_mutex_lock(&s->mu);
  unsigned long long n = ++s->serial;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void conn_unref(Conn *c) {
  if (--c->refs) return;
  Server *s = c->s;
  EngineLoop *loop = NULL;
  server_model(s, &loop);
  if (c->job) {
    engine_loop_cancel(loop, c->job);
    job_release(loop, c->job);
  }
  metrics_request(s->mx, c->route, c->status);
  if (c->route[0] == '/' && strstr(c->route, "completions")) metrics_tokens(s->mx, c->prompt_tokens, c->gen_tokens);
  if (s->log) {
    char line[1024];
    snprintf(line, sizeof line, "%s %s %d, prompt %d tokens, generated %d, %.1f ms%s%s", c->method, c->path, c->status,
             c->prompt_tokens, c->gen_tokens, now_ms() - c->t0, c->note[0] ? ": " : "", c->note);
    s->log(s->log_ctx, line);
  }
  pthread_mutex_lock(&s->mu);
  s->active--;
  pthread_mutex_unlock(&s->mu);
  free(c->body);
  free(c);
}

int conn_client_gone(Conn *c) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci) return 0;
  struct pollfd p = {ci->connect_fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static enum MHD_Result reply_with(Conn *c, int status, const char *content_type, char *body, const char *header,
                                  const char *value) {
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (header) MHD_add_response_header(r, header, value);
  if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  c->status = status;
  enum MHD_Result ok = MHD_queue_response(c->mc, (unsigned)status, r);
  MHD_destroy_response(r);
  return ok;
}

enum MHD_Result reply(Conn *c, int status, const char *content_type, char *body) {
  return reply_with(c, status, content_type, body, NULL, NULL);
}

enum MHD_Result reply_error(Conn *c, const ApiError *e) {
  return reply(c, e->status, "application/json", api_error_body(e));
}

enum MHD_Result reply_busy(Conn *c, const char *msg) {
  ApiError e = {0};
  api_error(&e, 503, "server_error", NULL, "%s", msg);
  return reply_error(c, &e);
}

/* Compares the whole of both strings whatever they hold, so the time taken says nothing of the key. */
static int same_secret(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  unsigned char diff = na != nb;
  for (size_t i = 0; i < na; i++) diff |= (unsigned char)a[i] ^ (unsigned char)b[i % (nb ? nb : 1)];
  return !diff && nb;
}

static int authorized(Conn *c) {
  const char *key = c->s->o.api_key;
  if (!key) return 1;
  const char *h = MHD_lookup_connection_value(c->mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncmp(h, "Bearer ", 7) != 0) return 0;
  return same_secret(h + 7, key);
}

static int server_quiescing(Server *s);

static enum MHD_Result dispatch(Conn *c, const Route *rt, int path_known) {
  ApiError e = {0};
  const char *allowed = NULL;
  if (c->too_big) {
    api_error(&e, 413, "invalid_request_error", NULL, "the body is over %zu bytes (--max-body)", c->s->o.max_body);
  } else if (!path_known) {
    api_error(&e, 404, "not_found_error", NULL, "unknown route: %s %s", c->method, c->path);
  } else if (!rt) {
    for (int i = 0; i < NROUTES; i++)
      if (!strcmp(ROUTES[i].path, c->path)) allowed = ROUTES[i].method;
    api_error(&e, 405, "invalid_request_error", NULL, "%s is not allowed on %s (use %s)", c->method, c->path, allowed);
  } else if (!rt->open && !authorized(c)) {
    api_error(&e, 401, "authentication_error", NULL, "a missing or wrong API key (send Authorization: Bearer KEY)");
  } else if (!rt->open && !server_model(c->s, NULL)) {
    return reply_busy(c, "the model is loading");
  } else if (!rt->open && server_quiescing(c->s)) {
    return reply_busy(c, "the server is shutting down");
  } else {
    return rt->run(c);
  }
  return reply_with(c, e.status, "application/json", api_error_body(&e), allowed ? MHD_HTTP_HEADER_ALLOW : NULL,
                    allowed);
}

static Conn *conn_new(Server *s, struct MHD_Connection *mc, const char *url, const char *method) {
  Conn *c = xcalloc(1, sizeof *c, "a connection");
  c->s = s;
  c->mc = mc;
  c->refs = 1;
  c->t0 = now_ms();
  c->route = "other";
  c->status = 500; /* until an answer is queued */
  snprintf(c->method, sizeof c->method, "%s", method);
  snprintf(c->path, sizeof c->path, "%s", url);
  for (int i = 0; i < NROUTES; i++)
    if (!strcmp(ROUTES[i].path, url)) c->route = ROUTES[i].path;
  pthread_mutex_lock(&s->mu);
  s->active++;
  pthread_mutex_unlock(&s->mu);
  return c;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  Server *s = cls;
  Conn *c = *con_cls;
  if (!c) {
    *con_cls = c = conn_new(s, mc, url, method);
    const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->o.max_body) c->too_big = 1;
    if (c->too_big) return dispatch(c, NULL, 1); /* 413 before the body comes */
    return MHD_YES;
  }
  if (*upload_size) {
    if (c->len + *upload_size > s->o.max_body) c->too_big = 1;
    if (!c->too_big) {
      if (c->len + *upload_size + 1 > c->cap) {
        c->cap = (c->len + *upload_size + 1) * 2;
        if (c->cap > s->o.max_body + 1) c->cap = s->o.max_body + 1;
        c->body = xrealloc(c->body, c->cap, "a request body");
      }
      memcpy(c->body + c->len, upload, *upload_size);
      c->len += *upload_size;
      c->body[c->len] = 0;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (c->status != 500) return MHD_YES; /* answered already (413 on the headers) */
  const Route *rt = NULL;
  int known = 0;
  for (int i = 0; i < NROUTES; i++)
    if (!strcmp(ROUTES[i].path, url)) {
      known = 1;
      if (!strcmp(ROUTES[i].method, method)) rt = &ROUTES[i];
    }
  if (!c->body) c->body = xcalloc(1, 1, "a request body");
  return dispatch(c, rt, known);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode why) {
  Conn *c = *con_cls;
  if (!c) return;
  *con_cls = NULL;
  if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK && c->job) {
    EngineLoop *loop = NULL;
    server_model(c->s, &loop);
    engine_loop_cancel(loop, c->job); /* the client went away: free its blocks now */
    if (c->status < 400) c->status = 499;
  }
  conn_unref(c);
}

Server *server_start(const ServerOptions *o, Metrics *metrics, ServerLog log, void *log_ctx, Diag *d) {
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  char port[16];
  snprintf(port, sizeof port, "%d", o->port);
  int gai = getaddrinfo(o->host, port, &hints, &ai);
  if (gai) {
    diag_error(d, 0, 0, "cannot resolve --host %s: %s", o->host, gai_strerror(gai));
    return NULL;
  }
  Server *s = xcalloc(1, sizeof *s, "the server");
  s->o = *o;
  s->mx = metrics;
  s->log = log;
  s->log_ctx = log_ctx;
  pthread_mutex_init(&s->mu, NULL);
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
  if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  s->mhd = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024, MHD_OPTION_END);
  freeaddrinfo(ai);
  if (!s->mhd) {
    diag_error(d, 0, 0, "cannot listen on %s port %d (in use, or not an address of this machine?)", o->host, o->port);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
  }
  return s;
}

int server_port(const Server *s) {
  const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
  return i ? i->port : s->o.port;
}

void server_set_ready(Server *s, Model *m, EngineLoop *loop) {
  pthread_mutex_lock(&s->mu);
  s->m = m;
  s->loop = loop;
  pthread_mutex_unlock(&s->mu);
}

static int server_quiescing(Server *s) {
  pthread_mutex_lock(&s->mu);
  int q = s->quiesced;
  pthread_mutex_unlock(&s->mu);
  return q;
}

void server_quiesce(Server *s) {
  pthread_mutex_lock(&s->mu);
  int already = s->quiesced;
  s->quiesced = 1; /* requests on connections kept alive are refused from now on */
  pthread_mutex_unlock(&s->mu);
  if (already) return;
  MHD_socket fd = MHD_quiesce_daemon(s->mhd);
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

int server_active(Server *s) {
  pthread_mutex_lock(&s->mu);
  int n = s->active;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void server_stop(Server *s) {
  if (!s) return;
  MHD_stop_daemon(s->mhd);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
