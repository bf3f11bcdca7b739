/* The server's counters for GET /metrics (Prometheus text format): requests by route and status, prompt and
 * generated tokens, time-to-first-token and inter-token latency histograms, and the engine's gauges
 * (running and waiting sequences, KV blocks used and total, step time). Thread-safe. */
#ifndef LATHE_SERVER_METRICS_H
#define LATHE_SERVER_METRICS_H
#include <pthread.h>
#include "../base/strbuf.h"
#include "../engine/engine.h"

enum { METRICS_MAX_SERIES = 64, METRICS_BUCKETS = 12 };

typedef struct Histogram {
  long counts[METRICS_BUCKETS + 1]; /* the last one: above every bound (+Inf) */
  double sum;
  long n;
} Histogram;

typedef struct Metrics {
  pthread_mutex_t mu;
  struct {
    char route[32];
    int status;
    long count;
  } series[METRICS_MAX_SERIES];
  int nseries;
  long prompt_tokens, generated_tokens;
  Histogram ttft, itl; /* seconds */
} Metrics;

void metrics_init(Metrics *m);
void metrics_destroy(Metrics *m);
/* route: a known path ("/v1/completions"), or "other" for the rest (so unknown paths add no series). */
void metrics_request(Metrics *m, const char *route, int status);
void metrics_tokens(Metrics *m, int prompt, int generated);
void metrics_ttft(Metrics *m, double seconds);
void metrics_itl(Metrics *m, double seconds);
/* The whole text of GET /metrics; st: the engine's latest statistics (NULL while the model loads). */
void metrics_render(Metrics *m, const EngineStats *st, StrBuf *out);
#endif
