/* The batched engine against the one-sequence generator: every request's tokens must equal what
 * generate() gives for it alone (greedy and seeded sampling), whatever shares its steps: mixed prompt
 * lengths, staggered arrivals, small token budgets (chunked prefill), a tiny block pool (preemption and
 * recompute), shared prefixes (blocks reused), cancellation (every block freed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "engine/engine.h"
#include "base/rng.h"
#include "generate/generate.h"

#define FIXTURES "tests/fixtures/models"

static Backend *be;
static Target target = TARGET_CPU;

static Model *load(const char *fixture, int kv_block, int kv_blocks) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", FIXTURES, fixture);
  Diag d = {0};
  ModelLoadOptions o = {.target = target, .max_ctx = 64, .quiet = 1, .kv_block = kv_block, .kv_blocks = kv_blocks};
  Model *m = model_load(path, be, &o, &d);
  if (!m) fail_msg("load %s: %s", path, d.msg);
  return m;
}

enum { NREQ = 6 };

typedef struct Case {
  int32_t prompt[48];
  int nprompt, max_tokens;
  SamplerOptions sampling;
  int arrive; /* the step before which it is added */
} Case;

static void make_cases(Case *c, int vocab, int shared_prefix) {
  static const int lens[NREQ] = {12, 3, 30, 7, 19, 1};
  for (int i = 0; i < NREQ; i++) {
    c[i].nprompt = lens[i];
    for (int k = 0; k < lens[i]; k++)
      c[i].prompt[k] = (int32_t)(k < shared_prefix ? (k * 31 + 7) % vocab : (i * 97 + k * 13 + 5) % vocab);
    c[i].max_tokens = 5 + 3 * i;
    c[i].sampling = (SamplerOptions){.greedy = 1, .top_p = 1};
    if (i % 3 == 2) c[i].sampling = (SamplerOptions){.temperature = 0.8, .top_k = 20, .top_p = 0.9, .seed = 11 + i};
    c[i].arrive = i % 2 ? i : 0;
  }
}

static void solo_tokens(Model *m, const Case *c, int32_t **out, int *nout) {
  Diag d = {0};
  GenerateOptions go = {.max_tokens = c->max_tokens, .prefill_chunk = 8, .sampling = c->sampling, .ignore_eos = 1};
  GenerateStats st;
  int cached = 0;
  *out = NULL;
  *nout = 0;
  if (!generate(m, c->prompt, c->nprompt, &cached, &go, NULL, NULL, out, nout, &st, &d))
    fail_msg("solo generate: %s", d.msg);
}

typedef struct RunResult {
  EngineStats stats;
  int finished[NREQ];
  const char *reason[NREQ];
} RunResult;

/* Runs the cases through an engine (cancel: request `cancel` is cancelled after 2 steps), checking the
 * pool every step. */
static void run_engine(Model *m, const EngineOptions *eo, const Case *c, int cancel, int32_t **tok, int *ntok,
                       RunResult *res) {
  Diag d = {0};
  Engine *e = engine_new(m, eo, &d);
  if (!e) fail_msg("engine: %s", d.msg);
  int ids[NREQ];
  memset(res, 0, sizeof *res);
  for (int i = 0; i < NREQ; i++) ids[i] = -1;
  for (int step = 0; step < 2000; step++) {
    for (int i = 0; i < NREQ; i++)
      if (c[i].arrive == step) {
        EngineRequest r = {c[i].prompt, c[i].nprompt, c[i].max_tokens, c[i].sampling, NULL, 0, 1};
        if ((ids[i] = engine_add(e, &r, &d)) < 0) fail_msg("add: %s", d.msg);
      }
    if (step == 2 && cancel >= 0 && engine_cancel(e, ids[cancel], &d) < 0) fail_msg("cancel: %s", d.msg);
    if (step > NREQ && !engine_has_work(e)) break;
    const EngineEvent *ev;
    int nev;
    if (!engine_step(e, &ev, &nev, &d)) fail_msg("step %d: %s", step, d.msg);
    for (int k = 0; k < nev; k++) {
      int i = 0;
      while (i < NREQ && ids[i] != ev[k].id) i++;
      assert_true(i < NREQ);
      assert_false(res->finished[i]); /* nothing after its end */
      if (ev[k].kind == EV_FINISHED) {
        res->finished[i] = 1;
        res->reason[i] = ev[k].reason;
      }
    }
  }
  for (int i = 0; i < NREQ; i++) {
    assert_true(res->finished[i]);
    const int32_t *o = engine_output(e, ids[i], &ntok[i]);
    tok[i] = malloc(sizeof(int32_t) * (size_t)(ntok[i] ? ntok[i] : 1));
    if (ntok[i]) memcpy(tok[i], o, sizeof(int32_t) * (size_t)ntok[i]);
  }
  engine_stats(e, &res->stats);
  assert_int_equal(res->stats.blocks_used, 0); /* every block released */
  assert_int_equal(res->stats.running + res->stats.waiting, 0);
  engine_free(e);
}

static void expect_solo(Model *solo, const Case *c, int32_t **tok, const int *ntok, int skip, const char *what) {
  for (int i = 0; i < NREQ; i++) {
    if (i == skip) continue;
    int32_t *want;
    int nwant;
    solo_tokens(solo, &c[i], &want, &nwant);
    if (ntok[i] != nwant) fail_msg("%s: request %d got %d tokens, alone %d", what, i, ntok[i], nwant);
    for (int k = 0; k < nwant; k++)
      if (tok[i][k] != want[k])
        fail_msg("%s: request %d token %d is %d, alone %d (%s)", what, i, k, tok[i][k], want[k],
                 c[i].sampling.greedy ? "greedy" : "sampled");
    free(want);
  }
}

static void free_tokens(int32_t **tok) {
  for (int i = 0; i < NREQ; i++) free(tok[i]);
}

static void batched_equals_solo(const char *fixture) {
  Model *solo = load(fixture, 0, 0), *m = load(fixture, 4, 64);
  Case c[NREQ];
  make_cases(c, m->cfg.vocab, 0);
  int32_t *tok[NREQ];
  int ntok[NREQ];
  RunResult r;
  EngineOptions big = {.max_batch_tokens = 64, .max_seqs = 8};
  run_engine(m, &big, c, -1, tok, ntok, &r);
  expect_solo(solo, c, tok, ntok, -1, fixture);
  for (int i = 0; i < NREQ; i++) assert_string_equal(r.reason[i], "length");
  free_tokens(tok);
  /* a budget of 8 tokens a step: prompts prefill in chunks beside the others' decode tokens */
  EngineOptions small = {.max_batch_tokens = 8, .max_seqs = 4};
  run_engine(m, &small, c, -1, tok, ntok, &r);
  expect_solo(solo, c, tok, ntok, -1, fixture);
  assert_true(r.stats.steps > 10);
  free_tokens(tok);
  model_free(m);
  model_free(solo);
}

static void llama_engine(void **s) {
  (void)s;
  batched_equals_solo("llama");
}
static void qwen3_engine(void **s) {
  (void)s;
  batched_equals_solo("qwen3");
}

/* 14 blocks of 4 positions for requests needing up to 12: sequences are preempted and recomputed. */
static void tiny_pool_preempts(void **s) {
  (void)s;
  Model *solo = load("llama", 0, 0), *m = load("llama", 4, 14);
  Case c[NREQ];
  make_cases(c, m->cfg.vocab, 0);
  int32_t *tok[NREQ];
  int ntok[NREQ];
  RunResult r;
  EngineOptions o = {.max_batch_tokens = 32, .max_seqs = 6};
  run_engine(m, &o, c, -1, tok, ntok, &r);
  expect_solo(solo, c, tok, ntok, -1, "tiny pool");
  if (r.stats.preemptions < 1) fail_msg("expected preemptions with 14 blocks, got none");
  free_tokens(tok);
  model_free(m);
  model_free(solo);
}

/* Requests sharing a 16-token prefix: later ones reuse its blocks, computing fewer prefill tokens. */
static void shared_prefix_reuses_blocks(void **s) {
  (void)s;
  Model *solo = load("qwen3", 0, 0), *m = load("qwen3", 4, 64);
  Case c[NREQ];
  make_cases(c, m->cfg.vocab, 16);
  for (int i = 0; i < NREQ; i++) {
    for (int k = c[i].nprompt; k < 17 + i; k++) c[i].prompt[k] = (int32_t)((i * 97 + k * 13 + 5) % m->cfg.vocab);
    for (int k = 0; k < 16; k++) c[i].prompt[k] = (int32_t)((k * 31 + 7) % m->cfg.vocab);
    if (c[i].nprompt < 17) c[i].nprompt = 17 + i; /* everyone has the whole prefix */
    c[i].arrive = 2 * i;                          /* the first has filled the blocks before the others come */
  }
  int32_t *tok[NREQ];
  int ntok[NREQ];
  RunResult r;
  EngineOptions o = {.max_batch_tokens = 64, .max_seqs = 8};
  run_engine(m, &o, c, -1, tok, ntok, &r);
  expect_solo(solo, c, tok, ntok, -1, "shared prefix");
  if (r.stats.prefix_tokens_reused < 16 * (NREQ - 2))
    fail_msg("prefix tokens reused: %ld, expected at least %d", r.stats.prefix_tokens_reused, 16 * (NREQ - 2));
  free_tokens(tok);
  model_free(m);
  model_free(solo);
}

static void cancel_frees_blocks(void **s) {
  (void)s;
  Model *solo = load("llama", 0, 0), *m = load("llama", 4, 64);
  Case c[NREQ];
  make_cases(c, m->cfg.vocab, 0);
  int32_t *tok[NREQ];
  int ntok[NREQ];
  RunResult r;
  EngineOptions o = {.max_batch_tokens = 16, .max_seqs = 8};
  run_engine(m, &o, c, 2, tok, ntok, &r); /* run_engine checks every block came back */
  assert_string_equal(r.reason[2], "cancelled");
  assert_true(ntok[2] < c[2].max_tokens);
  expect_solo(solo, c, tok, ntok, 2, "with a cancellation");
  free_tokens(tok);
  model_free(m);
  model_free(solo);
}

/* A finished request can be forgotten (its tokens dropped); a running one, or one forgotten, cannot. */
static void forget_finished(void **s) {
  (void)s;
  Model *m = load("llama", 4, 64);
  Diag d = {0};
  EngineOptions o = {0};
  Engine *e = engine_new(m, &o, &d);
  assert_non_null(e);
  int32_t p[3] = {1, 2, 3};
  EngineRequest r = {p, 3, 2, {.greedy = 1, .top_p = 1}, NULL, 0, 1};
  int id = engine_add(e, &r, &d);
  assert_true(id >= 0);
  assert_int_equal(engine_forget(e, id, &d), -1);
  assert_non_null(strstr(d.msg, "not finished"));
  int finished = 0;
  while (engine_has_work(e)) {
    const EngineEvent *ev;
    int nev;
    assert_true(engine_step(e, &ev, &nev, &d));
    for (int k = 0; k < nev; k++) finished |= ev[k].kind == EV_FINISHED && ev[k].id == id;
  }
  assert_true(finished);
  int n;
  engine_output(e, id, &n);
  assert_int_equal(n, 2);
  d = (Diag){0};
  assert_int_equal(engine_forget(e, id, &d), 0);
  engine_output(e, id, &n);
  assert_int_equal(n, 0);
  assert_int_equal(engine_forget(e, id, &d), -1);
  assert_non_null(strstr(d.msg, "forgotten already"));
  d = (Diag){0};
  assert_int_equal(engine_forget(e, id + 1, &d), -1);
  /* the engine goes on serving after a forget */
  int id2 = engine_add(e, &r, &d);
  assert_true(id2 > id);
  while (engine_has_work(e)) {
    const EngineEvent *ev;
    int nev;
    assert_true(engine_step(e, &ev, &nev, &d));
  }
  engine_output(e, id2, &n);
  assert_int_equal(n, 2);
  engine_free(e);
  model_free(m);
}

/* Random arrivals, prompt lengths, output lengths, sampling and cancellations over a small pool, in
 * batch-invariant mode: every request that is not cancelled gets exactly the tokens it gets alone, and the
 * pool's blocks all come back. */
enum { RREQ = 80 };
static void randomized_batch_invariant(void **st) {
  (void)st;
  Model *m = NULL;
  {
    Diag d = {0};
    ModelLoadOptions o = {
        .target = target, .max_ctx = 64, .quiet = 1, .kv_block = 4, .kv_blocks = 24, .batch_invariant = 1};
    if (!(m = model_load(FIXTURES "/qwen3", be, &o, &d))) fail_msg("load: %s", d.msg);
  }
  uint64_t rng = 12345;
  int32_t prompt[RREQ][40];
  EngineRequest req[RREQ];
  int arrive[RREQ], cancel_at[RREQ], ids[RREQ], done[RREQ] = {0};
  for (int i = 0; i < RREQ; i++) {
    int n = 1 + (int)(splitmix64(&rng) % 30);
    for (int k = 0; k < n; k++) prompt[i][k] = (int32_t)(splitmix64(&rng) % (uint64_t)m->cfg.vocab);
    SamplerOptions so = {.greedy = 1, .top_p = 1};
    if (splitmix64(&rng) % 2) so = (SamplerOptions){.temperature = 0.9, .top_k = 8, .top_p = 0.95, .seed = 100 + i};
    req[i] = (EngineRequest){prompt[i], n, 1 + (int)(splitmix64(&rng) % 20), so, NULL, 0, 1};
    arrive[i] = (int)(splitmix64(&rng) % 400);
    cancel_at[i] = splitmix64(&rng) % 6 == 0 ? arrive[i] + (int)(splitmix64(&rng) % 8) : -1;
    ids[i] = -1;
  }
  Diag d = {0};
  EngineOptions eo = {.max_batch_tokens = 24, .max_seqs = 6};
  Engine *e = engine_new(m, &eo, &d);
  assert_non_null(e);
  int steps = 0;
  for (int step = 0; step < 5000; step++) {
    for (int i = 0; i < RREQ; i++)
      if (arrive[i] == step && (ids[i] = engine_add(e, &req[i], &d)) < 0) fail_msg("add: %s", d.msg);
    for (int i = 0; i < RREQ; i++)
      if (cancel_at[i] == step && ids[i] >= 0 && !done[i] && engine_cancel(e, ids[i], &d) < 0)
        fail_msg("cancel: %s", d.msg);
    if (step > 400 && !engine_has_work(e)) break;
    const EngineEvent *ev;
    int nev;
    if (!engine_step(e, &ev, &nev, &d)) fail_msg("step %d: %s", step, d.msg);
    steps++;
    EngineStats es;
    engine_stats(e, &es);
    assert_true(es.blocks_used <= es.blocks_total && es.running <= eo.max_seqs);
    for (int k = 0; k < nev; k++)
      if (ev[k].kind == EV_FINISHED)
        for (int i = 0; i < RREQ; i++)
          if (ids[i] == ev[k].id) {
            assert_false(done[i]);
            done[i] = 1 + !strcmp(ev[k].reason, "cancelled");
          }
  }
  EngineStats es;
  engine_stats(e, &es);
  assert_int_equal(es.blocks_used, 0);
  for (int i = 0; i < RREQ; i++) assert_true(done[i]);
  /* each request again, alone */
  int checked = 0;
  for (int i = 0; i < RREQ; i++) {
    if (done[i] == 2) continue;
    Engine *one = engine_new(m, &eo, &d);
    int id = engine_add(one, &req[i], &d);
    assert_true(id >= 0);
    while (engine_has_work(one)) {
      const EngineEvent *ev;
      int nev;
      if (!engine_step(one, &ev, &nev, &d)) fail_msg("solo: %s", d.msg);
    }
    int na, nb;
    const int32_t *a = engine_output(e, ids[i], &na), *b = engine_output(one, id, &nb);
    if (na != nb || (na && memcmp(a, b, sizeof(int32_t) * (size_t)na)))
      fail_msg("request %d (%s): %d tokens batched, %d alone, or they differ", i,
               req[i].sampling.greedy ? "greedy" : "sampled", na, nb);
    checked++;
    engine_free(one);
  }
  print_message("%d steps, %d requests compared, %ld preemptions\n", steps, checked, es.preemptions);
  assert_true(checked > RREQ / 2);
  assert_true(es.preemptions > 0);
  engine_free(e);
  model_free(m);
}

/* A stop token ends a request with "stop" and is not part of its output. */
static void stop_tokens_end_requests(void **s) {
  (void)s;
  Model *solo = load("llama", 0, 0), *m = load("llama", 4, 64);
  Case c[NREQ];
  make_cases(c, m->cfg.vocab, 0);
  int32_t *want;
  int nwant;
  solo_tokens(solo, &c[0], &want, &nwant);
  assert_true(nwant >= 4);
  int k = 2;
  while (k < nwant && (want[k] == want[0] || want[k] == want[1])) k++; /* its first occurrence */
  assert_true(k < nwant);
  Diag d = {0};
  EngineOptions o = {0};
  Engine *e = engine_new(m, &o, &d);
  int32_t stop[2] = {want[k], 1 << 20};
  EngineRequest r = {c[0].prompt, c[0].nprompt, c[0].max_tokens, c[0].sampling, NULL, 0, 1, stop, 2};
  int id = engine_add(e, &r, &d);
  assert_true(id >= 0);
  const char *reason = NULL;
  while (engine_has_work(e)) {
    const EngineEvent *ev;
    int nev;
    if (!engine_step(e, &ev, &nev, &d)) fail_msg("step: %s", d.msg);
    for (int i = 0; i < nev; i++)
      if (ev[i].kind == EV_FINISHED) reason = ev[i].reason;
  }
  int n;
  const int32_t *out = engine_output(e, id, &n);
  assert_non_null(reason);
  assert_string_equal(reason, "stop");
  assert_int_equal(n, k);
  assert_memory_equal(out, want, sizeof(int32_t) * (size_t)k);
  free(want);
  engine_free(e);
  model_free(m);
  model_free(solo);
}

static void bad_requests_are_errors(void **s) {
  (void)s;
  Model *m = load("llama", 4, 64);
  Diag d = {0};
  EngineOptions o = {0};
  Engine *e = engine_new(m, &o, &d);
  assert_non_null(e);
  int32_t p[70] = {0};
  EngineRequest r = {p, 0, 4, {.greedy = 1, .top_p = 1}, NULL, 0, 0};
  assert_int_equal(engine_add(e, &r, &d), -1);
  assert_non_null(strstr(d.msg, "empty prompt"));
  r.nprompt = 70;
  d = (Diag){0};
  assert_int_equal(engine_add(e, &r, &d), -1);
  assert_non_null(strstr(d.msg, "context"));
  r.nprompt = 3;
  p[1] = 1 << 20;
  d = (Diag){0};
  assert_int_equal(engine_add(e, &r, &d), -1);
  p[1] = 0;
  d = (Diag){0};
  assert_int_equal(engine_cancel(e, 5, &d), -1);
  engine_free(e);
  model_free(m);
  /* a model loaded for one sequence is refused */
  Model *one = load("llama", 0, 0);
  d = (Diag){0};
  assert_null(engine_new(one, &o, &d));
  model_free(one);
}

int main(void) {
  Diag d = {0};
  const char *want = getenv("LATHE_TEST_TARGET");
  if (want && !strcmp(want, "cuda")) {
    target = TARGET_CUDA;
    be = backend_cuda_new(&d);
  } else {
    be = backend_cpu_new(&d);
  }
  if (!be) {
    fprintf(stderr, "backend: %s\n", d.msg);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(llama_engine),
      cmocka_unit_test(qwen3_engine),
      cmocka_unit_test(tiny_pool_preempts),
      cmocka_unit_test(shared_prefix_reuses_blocks),
      cmocka_unit_test(cancel_frees_blocks),
      cmocka_unit_test(randomized_batch_invariant),
      cmocka_unit_test(stop_tokens_end_requests),
      cmocka_unit_test(bad_requests_are_errors),
      cmocka_unit_test(forget_finished),
  };
  int rc = cmocka_run_group_tests_name("engine", tests, NULL, NULL);
  be->ops->destroy(be);
  return rc;
}
