/* lathe serve's HTTP server (libmicrohttpd, one thread per connection): OpenAI's API over the engine loop
 * (engine_loop.h). It listens before the model is loaded (GET /health says 503 until server_set_ready) and
 * answers every route with a JSON body; a client that disconnects has its request cancelled at once. */
#ifndef LATHE_SERVER_H
#define LATHE_SERVER_H
#include <stddef.h>
#include "../base/diag.h"
#include "../generate/model.h"
#include "engine_loop.h"
#include "metrics.h"

typedef struct ServerOptions {
  const char *host;       /* a name or address to bind ("127.0.0.1") */
  int port;               /* 0: any free port (server_port says which) */
  const char *api_key;    /* NULL: no authentication */
  size_t max_body;        /* bytes; larger bodies get 413 */
  const char *model_name; /* the model's id in the API */
  EnginePooling pooling;  /* /v1/embeddings: POOL_LAST (also for POOL_NONE) or POOL_MEAN */
} ServerOptions;

/* One line per answered request (method, path, status, tokens, latency), for the program to print. */
typedef void (*ServerLog)(void *ctx, const char *line);

typedef struct Server Server;

Server *server_start(const ServerOptions *o, Metrics *metrics, ServerLog log, void *log_ctx, Diag *d);
int server_port(const Server *s);
/* The model is loaded: generation routes are served from now on (m and loop stay the caller's). */
void server_set_ready(Server *s, Model *m, EngineLoop *loop);
/* Stops accepting connections; requests that arrive on connections kept open get 503 (those in flight go on). */
void server_quiesce(Server *s);
/* Requests being answered now. */
int server_active(Server *s);
/* Closes every connection and frees the server. */
void server_stop(Server *s);
#endif
