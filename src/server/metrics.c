#include "metrics.h"
#include <stdio.h>
#include <string.h>

/* Histogram bounds in seconds, from a fast GPU token to a slow CPU one. */
static const double BOUNDS[METRICS_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

void metrics_init(Metrics *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->mu, NULL);
}

void metrics_destroy(Metrics *m) { pthread_mutex_destroy(&m->mu); }

void metrics_request(Metrics *m, const char *route, int status) {
  pthread_mutex_lock(&m->mu);
  int i = 0;
  while (i < m->nseries && (m->series[i].status != status || strcmp(m->series[i].route, route) != 0)) i++;
  if (i == m->nseries && m->nseries < METRICS_MAX_SERIES) {
    snprintf(m->series[i].route, sizeof m->series[i].route, "%s", route);
    m->series[i].status = status;
    m->series[i].count = 0;
    m->nseries++;
  }
  if (i < m->nseries) m->series[i].count++;
  pthread_mutex_unlock(&m->mu);
}

void metrics_tokens(Metrics *m, int prompt, int generated) {
  pthread_mutex_lock(&m->mu);
  m->prompt_tokens += prompt;
  m->generated_tokens += generated;
  pthread_mutex_unlock(&m->mu);
}

static void observe(Metrics *m, Histogram *h, double s) {
  pthread_mutex_lock(&m->mu);
  int b = 0;
  while (b < METRICS_BUCKETS && s > BOUNDS[b]) b++;
  h->counts[b]++;
  h->sum += s;
  h->n++;
  pthread_mutex_unlock(&m->mu);
}

void metrics_ttft(Metrics *m, double seconds) { observe(m, &m->ttft, seconds); }
void metrics_itl(Metrics *m, double seconds) { observe(m, &m->itl, seconds); }

static void histogram(StrBuf *o, const char *name, const char *help, const Histogram *h) {
  sb_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  long cum = 0;
  for (int b = 0; b < METRICS_BUCKETS; b++) {
    cum += h->counts[b];
    sb_printf(o, "%s_bucket{le=\"%g\"} %ld\n", name, BOUNDS[b], cum);
  }
  cum += h->counts[METRICS_BUCKETS];
  sb_printf(o, "%s_bucket{le=\"+Inf\"} %ld\n%s_sum %.6f\n%s_count %ld\n", name, cum, name, h->sum, name, h->n);
}

static void gauge(StrBuf *o, const char *name, const char *help, const char *type, double v) {
  sb_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

void metrics_render(Metrics *m, const EngineStats *st, StrBuf *o) {
  pthread_mutex_lock(&m->mu);
  sb_puts(o, "# HELP lathe_requests_total HTTP requests answered, by route and status.\n"
             "# TYPE lathe_requests_total counter\n");
  for (int i = 0; i < m->nseries; i++)
    sb_printf(o, "lathe_requests_total{route=\"%s\",status=\"%d\"} %ld\n", m->series[i].route, m->series[i].status,
              m->series[i].count);
  gauge(o, "lathe_prompt_tokens_total", "Prompt tokens of the completed requests.", "counter",
        (double)m->prompt_tokens);
  gauge(o, "lathe_generated_tokens_total", "Tokens generated for the completed requests.", "counter",
        (double)m->generated_tokens);
  histogram(o, "lathe_time_to_first_token_seconds", "Time from a request's arrival to its first token.", &m->ttft);
  histogram(o, "lathe_inter_token_latency_seconds", "Time between a request's consecutive tokens.", &m->itl);
  pthread_mutex_unlock(&m->mu);
  EngineStats z = {0};
  if (!st) st = &z;
  gauge(o, "lathe_running_sequences", "Sequences being generated.", "gauge", st->running);
  gauge(o, "lathe_waiting_sequences", "Sequences waiting for room in the batch.", "gauge", st->waiting);
  gauge(o, "lathe_kv_blocks_used", "Paged KV-cache blocks held by sequences.", "gauge", st->blocks_used);
  gauge(o, "lathe_kv_blocks_total", "Paged KV-cache blocks in the pool.", "gauge", st->blocks_total);
  gauge(o, "lathe_engine_steps_total", "Batched steps run.", "counter", (double)st->steps);
  gauge(o, "lathe_engine_step_seconds_total", "Wall time spent in batched steps.", "counter", st->step_ms / 1e3);
  gauge(o, "lathe_preemptions_total", "Sequences preempted for lack of KV blocks.", "counter", (double)st->preemptions);
}
