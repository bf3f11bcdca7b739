/* lathe bench --concurrency N: throughput and latency of the batched engine. N requests (random prompt and
 * output lengths in the given ranges, an optional shared prefix) arrive all at once or as a Poisson process;
 * reported: output tok/s, step time, time to first token and inter-token latency (p50, p99), KV blocks used,
 * prefix tokens reused, preemptions. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/clock.h"
#include "../base/mem.h"
#include "../base/rng.h"
#include "../engine/engine.h"
#include "bench_batched.h"
#include "cli.h"

int bench_range_parse(const char *s, const char *flag, int *lo, int *hi) {
  char *end;
  long a = strtol(s, &end, 10), b = a;
  if (*end == '-') b = strtol(end + 1, &end, 10);
  if (*end || a < 1 || b < a || b > 1 << 20) {
    report_msg("%s expects N or MIN-MAX (1 <= MIN <= MAX), got '%s'", flag, s);
    return 0;
  }
  *lo = (int)a;
  *hi = (int)b;
  return 1;
}

int bench_arrivals_parse(const char *s, double *rate) {
  *rate = 0;
  if (!strcmp(s, "all")) return 1;
  char *end;
  if (!strncmp(s, "poisson:", 8)) {
    *rate = strtod(s + 8, &end);
    if (!*end && *rate > 0 && isfinite(*rate)) return 1;
  }
  report_msg("--arrivals expects all or poisson:RATE (requests per second, > 0), got '%s'", s);
  return 0;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double pct(double *v, int n, double p) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int i = (int)ceil(p / 100 * n) - 1;
  return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

typedef struct Req {
  int id, nprompt, ngen, started;
  double arrive, first, last;
  int32_t *prompt;
} Req;

static void sleep_ms(double ms) {
  if (ms <= 0) return;
  struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
  nanosleep(&ts, NULL);
}

/* One untimed request first: the first steps load modules and grow the workspace. */
static int warm_up(Engine *e, const BatchedBenchArgs *a, int vocab, Diag *d) {
  int n = a->prompt_lo < 64 ? a->prompt_lo : 64;
  int32_t *p = xmalloc(sizeof(int32_t) * (size_t)n, "the warm-up prompt");
  for (int i = 0; i < n; i++) p[i] = (int32_t)((i * 7919 + 13) % vocab);
  EngineRequest r = {p, n, 4, {.greedy = 1, .top_p = 1}, NULL, 0, 1};
  int ok = engine_add(e, &r, d) >= 0;
  while (ok && engine_has_work(e)) {
    const EngineEvent *ev;
    int nev;
    ok = engine_step(e, &ev, &nev, d);
  }
  free(p);
  return ok;
}

int bench_batched(Model *m, const BatchedBenchArgs *a, const char *name, Diag *d) {
  EngineOptions eo = {a->max_batch_tokens, a->concurrency};
  Engine *e = engine_new(m, &eo, d);
  if (!e || !warm_up(e, a, m->cfg.vocab, d)) {
    engine_free(e);
    return 0;
  }
  EngineStats base;
  engine_stats(e, &base);
  plan_profile_report(m->plan, NULL); /* LATHE_PROFILE=1: the warm-up is not counted */
  int n = a->requests, ok = 1;
  Req *q = xcalloc((size_t)n, sizeof *q, "the bench requests");
  uint64_t rng = a->seed * 0x9E3779B97F4A7C15ULL + 1;
  int32_t *prefix = xmalloc(sizeof(int32_t) * (size_t)(a->shared_prefix + 1), "the shared prefix");
  for (int i = 0; i < a->shared_prefix; i++) prefix[i] = (int32_t)(splitmix64(&rng) % (uint64_t)m->cfg.vocab);
  double t = 0;
  for (int i = 0; i < n; i++) {
    q[i].id = -1;
    q[i].nprompt = a->prompt_lo + (int)(splitmix64(&rng) % (uint64_t)(a->prompt_hi - a->prompt_lo + 1));
    if (q[i].nprompt <= a->shared_prefix) q[i].nprompt = a->shared_prefix + 1;
    q[i].ngen = a->gen_lo + (int)(splitmix64(&rng) % (uint64_t)(a->gen_hi - a->gen_lo + 1));
    q[i].prompt = xmalloc(sizeof(int32_t) * (size_t)q[i].nprompt, "a bench prompt");
    for (int k = 0; k < q[i].nprompt; k++)
      q[i].prompt[k] = k < a->shared_prefix ? prefix[k] : (int32_t)(splitmix64(&rng) % (uint64_t)m->cfg.vocab);
    if (a->arrival_rate > 0 && i > 0) t += -log(1 - splitmix64_unit(&rng)) / a->arrival_rate * 1e3;
    q[i].arrive = t;
  }
  int next = 0, done = 0, peak_blocks = 0;
  long tokens = 0;
  double t0 = now_ms(), step_ms = 0;
  long steps = 0;
  /* steps that computed only decode tokens, as PyTorch's decode-only figure counts: their times and tokens */
  long ndec = 0, dec_tokens = 0, cap_dec = 256;
  double *dec_ms = xmalloc(sizeof(double) * (size_t)cap_dec, "the decode steps"), dec_total = 0;
  EngineStats prev = base;
  while (ok && done < n) {
    double now = now_ms() - t0;
    for (; next < n && q[next].arrive <= now; next++) {
      EngineRequest r = {q[next].prompt, q[next].nprompt, q[next].ngen, {.greedy = 1, .top_p = 1}, NULL, 0, 1};
      if ((q[next].id = engine_add(e, &r, d)) < 0) ok = 0;
    }
    if (!ok) break;
    if (!engine_has_work(e)) {
      if (next < n) sleep_ms(q[next].arrive - now);
      continue;
    }
    const EngineEvent *ev;
    int nev;
    double s0 = now_ms();
    if (!(ok = engine_step(e, &ev, &nev, d))) break;
    double s1 = now_ms();
    step_ms += s1 - s0;
    steps++;
    EngineStats st;
    engine_stats(e, &st);
    if (st.blocks_used > peak_blocks) peak_blocks = st.blocks_used;
    if (st.prefill_tokens == prev.prefill_tokens && st.decode_tokens > prev.decode_tokens) {
      if (ndec == cap_dec) dec_ms = xrealloc(dec_ms, sizeof(double) * (size_t)(cap_dec *= 2), "the decode steps");
      dec_ms[ndec++] = s1 - s0;
      dec_total += s1 - s0;
      dec_tokens += st.decode_tokens - prev.decode_tokens;
    }
    prev = st;
    for (int k = 0; k < nev; k++) {
      int i = ev[k].id - q[0].id; /* ids are consecutive in order of adding */
      if (i < 0 || i >= n) continue;
      if (ev[k].kind == EV_FINISHED) {
        done++;
      } else if (ev[k].token >= 0) {
        if (!q[i].started) q[i].first = s1 - t0;
        q[i].started++;
        q[i].last = s1 - t0;
        tokens++;
      }
    }
  }
  double wall = now_ms() - t0;
  plan_profile_report(m->plan, "the batched steps");
  EngineStats st;
  engine_stats(e, &st);
  if (ok) {
    double *ttft = xmalloc(sizeof(double) * (size_t)n, "the latencies"),
           *itl = xmalloc(sizeof(double) * (size_t)n, "the latencies");
    int nitl = 0;
    for (int i = 0; i < n; i++) {
      ttft[i] = q[i].first - q[i].arrive;
      if (q[i].started > 1) itl[nitl++] = (q[i].last - q[i].first) / (q[i].started - 1);
    }
    double tok_s = tokens * 1e3 / wall, mstep = steps ? step_ms / steps : 0;
    double t50 = pct(ttft, n, 50), t99 = pct(ttft, n, 99), i50 = pct(itl, nitl, 50), i99 = pct(itl, nitl, 99);
    double d50 = pct(dec_ms, (int)ndec, 50), dec_tok_s = dec_total > 0 ? dec_tokens * 1e3 / dec_total : 0;
    long reused = st.prefix_tokens_reused - base.prefix_tokens_reused, pre = st.preemptions - base.preemptions;
    if (a->json) {
      json_t *o =
          json_pack("{s:s, s:s, s:i, s:i, s:s, s:f, s:i, s:i, s:i, s:i, s:i, s:I, s:f, s:f, s:I, s:f}", "model", name,
                    "target", target_name(m->backend->target.kind), "concurrency", a->concurrency, "requests", n,
                    "arrivals", a->arrival_rate > 0 ? "poisson" : "all", "arrival_rate", a->arrival_rate,
                    "prompt_len_min", a->prompt_lo, "prompt_len_max", a->prompt_hi, "gen_len_min", a->gen_lo,
                    "gen_len_max", a->gen_hi, "shared_prefix", a->shared_prefix, "output_tokens", (json_int_t)tokens,
                    "wall_ms", wall, "output_tok_s", tok_s, "steps", (json_int_t)steps, "step_ms_mean", mstep);
      json_object_set_new(o, "ttft_ms_p50", json_real(t50));
      json_object_set_new(o, "ttft_ms_p99", json_real(t99));
      json_object_set_new(o, "itl_ms_p50", json_real(i50));
      json_object_set_new(o, "itl_ms_p99", json_real(i99));
      json_object_set_new(o, "decode_steps", json_integer(ndec));
      json_object_set_new(o, "decode_step_ms_p50", json_real(d50));
      json_object_set_new(o, "decode_tok_s", json_real(dec_tok_s));
      json_object_set_new(o, "kv_blocks_peak", json_integer(peak_blocks));
      json_object_set_new(o, "kv_blocks_total", json_integer(st.blocks_total));
      json_object_set_new(o, "kv_block_size", json_integer(st.block_size));
      json_object_set_new(o, "prefix_tokens_reused", json_integer(reused));
      json_object_set_new(o, "preemptions", json_integer(pre));
      json_object_set_new(o, "max_batch_tokens", json_integer(a->max_batch_tokens));
      char *s = json_dumps(o, JSON_COMPACT);
      if (s) puts(s);
      free(s);
      json_decref(o);
    } else {
      printf("model %s on %s: %d requests, at most %d at once, %s; prompts %d-%d, outputs %d-%d tokens", name,
             target_name(m->backend->target.kind), n, a->concurrency,
             a->arrival_rate > 0 ? "Poisson arrivals" : "all at once", a->prompt_lo, a->prompt_hi, a->gen_lo,
             a->gen_hi);
      if (a->shared_prefix) printf(", %d-token shared prefix", a->shared_prefix);
      printf("\n  output: %ld tokens in %.2f s: %.1f tok/s; %ld steps, %.3f ms per step\n", tokens, wall / 1e3, tok_s,
             steps, mstep);
      printf("  time to first token: p50 %.1f ms, p99 %.1f ms; inter-token latency: p50 %.2f ms, p99 %.2f ms\n", t50,
             t99, i50, i99);
      if (ndec) printf("  decode-only steps: %ld, p50 %.3f ms; %.1f tok/s over them\n", ndec, d50, dec_tok_s);
      printf("  KV blocks: peak %d of %d (%d positions each); prefix tokens reused %ld; preemptions %ld\n", peak_blocks,
             st.blocks_total, st.block_size, reused, pre);
    }
    free(ttft);
    free(itl);
  }
  for (int i = 0; i < n; i++) free(q[i].prompt);
  free(q);
  free(prefix);
  free(dec_ms);
  engine_free(e);
  return ok;
}
