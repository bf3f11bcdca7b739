/* lathe serve: an OpenAI-compatible HTTP server over the batched engine (src/server). The server listens
 * first (GET /health is 503 while the model loads), then the model is loaded for batched steps and the engine
 * thread started; SIGINT or SIGTERM stops accepting, lets what is in flight finish for --drain-s seconds,
 * cancels the rest and exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/clock.h"
#include "../model/presets.h"
#include "../server/engine_loop.h"
#include "../server/server.h"
#include "../tune/lookup.h"
#include "gen_common.h"
#include "options.h"

typedef struct ServeArgs {
  const char *model, *target, *host, *api_key, *name, *pooling, *config, *dtype, *kv_dtype;
  int port, max_seqs, max_queue, ctx, max_body, quiet, random_weights, batch_invariant;
  double drain_s, kv_memory_gb;
} ServeArgs;

static void log_line(void *ctx, const char *line) {
  if (!*(int *)ctx) fprintf(stderr, "lathe: %s\n", line);
}

/* The model's id in the API: its file or directory name, without .gguf. */
static char *model_id(const char *path) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  const char *b = path + n;
  while (b > path && b[-1] != '/') b--;
  size_t len = (size_t)(path + n - b);
  if (len > 5 && !strncmp(b + len - 5, ".gguf", 5)) len -= 5;
  char *id = malloc(len + 1);
  if (id) memcpy(id, b, len), id[len] = 0;
  return id;
}

static int parse(int argc, char **argv, ServeArgs *a) {
  *a = (ServeArgs){.target = "auto",
                   .host = "127.0.0.1",
                   .port = 8000,
                   .max_seqs = 64,
                   .max_queue = 256,
                   .max_body = 1 << 20,
                   .pooling = "last",
                   .dtype = "bf16",
                   .kv_dtype = "auto",
                   .drain_s = 10};
  const char *pos = NULL;
  Opt opts[] = {
      {"--model", "-m", OPT_STR, "MODEL", "the model (as the positional MODEL)", &a->model,
       .def = "the default model, see lathe env"},
      {"--host", NULL, OPT_STR, "HOST", "the address to listen on (0.0.0.0: every interface)", &a->host},
      {"--port", "-p", OPT_INT, "N", "the TCP port (0: any free one, printed)", &a->port, 0, 65535},
      {"--api-key", NULL, OPT_STR, "KEY", "require Authorization: Bearer KEY (all routes but /health and /metrics)",
       &a->api_key, .def = "none"},
      {"--name", NULL, OPT_STR, "NAME", "the model's id in the API (the 'model' field)", &a->name,
       .def = "the model's file name without .gguf"},
      {"--max-seqs", NULL, OPT_INT, "N", "sequences generated at once (the engine's batch)", &a->max_seqs, 1, 4096},
      {"--max-queue", NULL, OPT_INT, "N", "requests in flight (running and waiting) at most; more get 503",
       &a->max_queue, 1, 1 << 20},
      {"--ctx", "-c", OPT_INT, "N", "the context (positions) of one sequence", &a->ctx, 8, 1 << 20,
       .def = "the model's trained length, at most 4096"},
      {"--max-body", NULL, OPT_INT, "BYTES", "the largest request body; larger ones get 413", &a->max_body, 64,
       1 << 30},
      {"--drain-s", NULL, OPT_NUM, "S", "on SIGINT or SIGTERM: seconds to let requests in flight finish", &a->drain_s,
       0, 3600},
      {"--pooling", NULL, OPT_STR, "last|mean",
       "/v1/embeddings: the last token's final hidden state (the only one that saw the whole input in a causal "
       "model), or the mean over every token",
       &a->pooling},
      {"--target", NULL, OPT_STR, "auto|cuda|cpu", "where to run (auto: cuda when a GPU is present)", &a->target},
      {"--kv-dtype", NULL, OPT_STR, "auto|f32|bf16", "the KV cache's element type (auto: bf16 on CUDA, f32 on the CPU)",
       &a->kv_dtype},
      {"--kv-memory", NULL, OPT_NUM, "GB", "the KV cache pool's size (so that other programs fit beside it)",
       &a->kv_memory_gb, 1e-6, 1e6,
       .def = "90% of the GPU memory the weights leave free; on the CPU 25%, at most 4 GB"},
      {"--batch-invariant", NULL, OPT_FLAG, NULL,
       "schedules whose results for a request do not depend on the rest of the batch (slower): every answer has "
       "the tokens it has alone",
       &a->batch_invariant},
      {"--config", NULL, OPT_STR, "NAME",
       "a built-in architecture instead of a model, with --random-weights (for benchmarks: prompts as token ids)",
       &a->config},
      {"--random-weights", NULL, OPT_FLAG, NULL, "random weights for --config", &a->random_weights},
      {"--dtype", NULL, OPT_STR, "f32|f16|bf16", "the weights' type with --config", &a->dtype},
      {"--quiet", "-q", OPT_FLAG, NULL, "no load or per-request lines on stderr (the listening line stays)", &a->quiet},
  };
  CmdSpec spec = {
      "serve",
      "[MODEL] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [options]",
      "Serve the model over HTTP with OpenAI's API (/v1/completions, /v1/chat/completions,\n"
      "/v1/embeddings, /v1/models), plus /health, /metrics, /tokenize and /detokenize, batching requests on the\n"
      "engine.",
      opts,
      sizeof opts / sizeof opts[0],
      "MODEL",
      &pos,
      "Prints \"listening on http://HOST:PORT\" on stderr when ready, then one line per request.\n"
      "SIGINT or SIGTERM stops accepting, waits --drain-s for requests in flight, cancels the rest\n"
      "and exits 0."};
  int r = opts_parse(&spec, argc, argv);
  if (r == OPTS_HELP) exit(EXIT_OK);
  if (r != OPTS_OK) return 0;
  if (pos && a->model) {
    report_msg("unexpected argument '%s': the model is already given with --model %s", pos, a->model);
    return 0;
  }
  if (pos) a->model = pos;
  if (a->config && a->model) {
    report_msg("give a MODEL or --config NAME --random-weights, not both (configs: %s)", model_preset_names());
    return 0;
  }
  if (a->config && !a->random_weights) {
    report_msg("--config serves random weights; add --random-weights");
    return 0;
  }
  if (!a->config && (a->random_weights || opts_seen(&spec, "--dtype"))) {
    report_msg("%s applies to --config only", a->random_weights ? "--random-weights" : "--dtype");
    return 0;
  }
  if (strcmp(a->pooling, "last") != 0 && strcmp(a->pooling, "mean") != 0) {
    report_msg("--pooling must be last or mean (got '%s')", a->pooling);
    return 0;
  }
  return 1;
}

/* --config NAME --random-weights: the built-in architecture with random weights (no tokenizer), loaded as
 * gen_open_model loads a model for the server. */
static Model *open_random(const ServeArgs *a, Backend **be) {
  ModelConfig cfg;
  DType wdt;
  if (!model_preset(a->config, &cfg)) {
    report_msg("unknown --config '%s' (known: %s)", a->config, model_preset_names());
    return NULL;
  }
  if (!dtype_parse(a->dtype, &wdt) || !dtype_is_float(wdt)) {
    report_msg("--dtype expects f32, f16 or bf16, got '%s'", a->dtype);
    return NULL;
  }
  Diag d = {0};
  Target t;
  if (!(*be = open_backend(a->target, &t, &d))) {
    report(&d, NULL);
    return NULL;
  }
  ModelLoadOptions lo = {t, a->ctx, 1, 0, DT_F32};
  lo.kv_block = 16;
  lo.kv_seqs = a->max_seqs;
  lo.kv_memory = (size_t)(a->kv_memory_gb * 1e9);
  lo.batch_invariant = a->batch_invariant;
  lo.hidden_output = 1;
  Model *m = NULL;
  if (gen_kv_dtype(a->kv_dtype, t, &lo.kv_dtype)) {
    TuneLookup tl;
    lo.schedules = cli_tune_source(&tl, t, 0, NULL);
    if (!(m = model_new_random(&cfg, wdt, *be, &lo, &d))) report(&d, NULL);
    if (lo.schedules) tune_lookup_close(&tl);
  }
  if (!m) {
    (*be)->ops->destroy(*be);
    *be = NULL;
  }
  return m;
}

/* Waits for in-flight requests up to ms; 1 when none is left. */
static int wait_idle(Server *s, double ms) {
  double until = now_ms() + ms;
  while (server_active(s) > 0) {
    if (now_ms() >= until) return 0;
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  return 1;
}

int cmd_serve(int argc, char **argv) {
  ServeArgs a;
  if (!parse(argc, argv, &a)) return EXIT_ERROR;
  /* the signals are taken by sigwait below, not by any thread the server starts */
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);

  GenArgs g;
  memset(&g, 0, sizeof g);
  g.model = a.model;
  g.target = a.target;
  g.ctx = a.ctx;
  g.quiet = 1;
  g.kv_block = 16;
  g.hidden_output = 1; /* /v1/embeddings reads the final hidden states */
  g.concurrency = a.max_seqs;
  g.kv_dtype = a.kv_dtype;
  g.kv_memory_gb = a.kv_memory_gb;
  g.batch_invariant = a.batch_invariant;
  g.gen.sampling = sampler_defaults();
  const char *path = a.config ? a.config : a.model ? model_arg_resolve(a.model) : default_model_path();
  char *id = a.name ? NULL : model_id(path);
  Metrics mx;
  metrics_init(&mx);
  ServerOptions so = {a.host,
                      a.port,
                      a.api_key,
                      (size_t)a.max_body,
                      a.name ? a.name : id,
                      !strcmp(a.pooling, "mean") ? POOL_MEAN : POOL_LAST};
  Diag d = {0};
  int rc = EXIT_ERROR;
  Backend *be = NULL;
  Model *m = NULL;
  Engine *e = NULL;
  EngineLoop *loop = NULL;
  Server *srv = server_start(&so, &mx, log_line, &a.quiet, &d);
  if (!srv) {
    report(&d, NULL);
    goto done;
  }
  if (!(m = a.config ? open_random(&a, &be) : gen_open_model(&g, &be))) goto done;
  if (!a.quiet)
    fprintf(stderr,
            "lathe: %s%s (%s, %d layers, %s weights, context %d, %d KV blocks of %d, %s, %.2f GB%s) on %s compiled in "
            "%.0f ms, loaded in %.0f ms\n",
            path, a.config ? " with random weights" : "", m->cfg.arch_name, m->cfg.layers, model_weights_form(m),
            m->max_ctx, m->kv_blocks, m->kv_block, dtype_name(m->kv_dtype), (double)m->cache_bytes / 1e9,
            a.batch_invariant ? ", batch-invariant" : "", target_name(m->backend->target.kind), m->compile_ms,
            m->load_ms);
  EngineOptions eo = {0, a.max_seqs};
  if (!(e = engine_new(m, &eo, &d)) || !(loop = engine_loop_start(e, a.max_queue, &mx, &d))) {
    report(&d, NULL);
    goto done;
  }
  server_set_ready(srv, m, loop);
  fprintf(stderr, "lathe: serving %s: listening on http://%s:%d\n", so.model_name, a.host, server_port(srv));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (!a.quiet)
    fprintf(stderr, "lathe: %s: no new connections; %d requests in flight get %g s to finish\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", server_active(srv), a.drain_s);
  server_quiesce(srv);
  if (!wait_idle(srv, a.drain_s * 1e3)) {
    engine_loop_cancel_all(loop);
    wait_idle(srv, 5000);
  }
  rc = EXIT_OK;
done:
  server_stop(srv); /* closes the connections left (none after a drain) before the loop goes */
  engine_loop_free(loop);
  engine_free(e);
  model_free(m);
  if (be) be->ops->destroy(be);
  metrics_destroy(&mx);
  free(id);
  return rc;
}
