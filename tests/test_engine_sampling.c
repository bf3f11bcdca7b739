/* The engine's OpenAI sampling extras and embeddings, each against an independent computation on a model
 * loaded for one sequence: the presence / frequency penalties (the greedy tokens of penalized logits computed
 * here), logprobs (log-softmax of the logits computed here), and pooled final hidden states (the last one times
 * the LM head gives the logits; the mean is the mean of every prefix's last one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "engine/engine.h"

#define FIXTURES "tests/fixtures/models"

static Backend *be;
static Target target = TARGET_CPU;
/* how far the batched step's values may be from the one-sequence model's: the same f32 arithmetic on the CPU;
 * on CUDA other GEMM shapes (and tensor cores) round differently */
static double slack = 1;

static Model *load_pool(int kv_block, int hidden_output, int kv_blocks) {
  Diag d = {0};
  ModelLoadOptions o = {.target = target,
                        .max_ctx = 64,
                        .quiet = 1,
                        .kv_block = kv_block,
                        .kv_blocks = kv_blocks,
                        .hidden_output = hidden_output};
  Model *m = model_load(FIXTURES "/llama", be, &o, &d);
  if (!m) fail_msg("load: %s", d.msg);
  return m;
}

static Model *load(int kv_block, int hidden_output) { return load_pool(kv_block, hidden_output, 64); }

typedef struct Got {
  int32_t tok[64];
  float lp[64], top_lp[64][ENGINE_MAX_LOGPROBS];
  int32_t top[64][ENGINE_MAX_LOGPROBS];
  int ntop[64], n, finished;
  float emb[256];
  int dim;
  /* EV_PROMPT_LOGPROB: position, token, logprob and alternatives of each */
  int npl, pl_pos[64], pl_ntop[64];
  int32_t pl_tok[64], pl_top[64][ENGINE_MAX_LOGPROBS];
  float pl_lp[64], pl_top_lp[64][ENGINE_MAX_LOGPROBS];
} Got;

static long run_preemptions; /* the last run's */

/* Runs the requests together until all finish, collecting their events. */
static void run(Model *m, const EngineOptions *eo, const EngineRequest *r, int n, Got *got) {
  Diag d = {0};
  Engine *e = engine_new(m, eo, &d);
  if (!e) fail_msg("engine: %s", d.msg);
  int ids[16];
  memset(got, 0, sizeof *got * (size_t)n);
  for (int i = 0; i < n; i++)
    if ((ids[i] = engine_add(e, &r[i], &d)) < 0) fail_msg("add %d: %s", i, d.msg);
  for (int step = 0; engine_has_work(e) && step < 1000; step++) {
    const EngineEvent *ev;
    int nev;
    if (!engine_step(e, &ev, &nev, &d)) fail_msg("step: %s", d.msg);
    for (int k = 0; k < nev; k++) {
      int i = 0;
      while (i < n && ids[i] != ev[k].id) i++;
      assert_true(i < n);
      Got *g = &got[i];
      assert_false(g->finished);
      if (ev[k].kind == EV_FINISHED) g->finished = 1;
      if (ev[k].kind == EV_EMBEDDING) {
        assert_true(ev[k].dim <= 256);
        memcpy(g->emb, ev[k].embedding, sizeof(float) * (size_t)ev[k].dim);
        g->dim = ev[k].dim;
      }
      if (ev[k].kind == EV_PROMPT_LOGPROB) {
        assert_true(r[i].prompt_logprobs && ev[k].has_logprob && g->npl < 64 && !g->n);
        g->pl_pos[g->npl] = ev[k].pos;
        g->pl_tok[g->npl] = ev[k].token;
        g->pl_lp[g->npl] = ev[k].logprob;
        g->pl_ntop[g->npl] = ev[k].ntop;
        for (int j = 0; j < ev[k].ntop; j++) {
          g->pl_top[g->npl][j] = ev[k].top_ids[j];
          g->pl_top_lp[g->npl][j] = ev[k].top_logprobs[j];
        }
        g->npl++;
      }
      if (ev[k].kind != EV_TOKEN || ev[k].token < 0) continue;
      assert_true(g->n < 64);
      g->tok[g->n] = ev[k].token;
      assert_int_equal(ev[k].has_logprob, r[i].logprobs != 0);
      if (ev[k].has_logprob) {
        g->lp[g->n] = ev[k].logprob;
        g->ntop[g->n] = ev[k].ntop;
        for (int j = 0; j < ev[k].ntop; j++) {
          g->top[g->n][j] = ev[k].top_ids[j];
          g->top_lp[g->n][j] = ev[k].top_logprobs[j];
        }
      }
      g->n++;
    }
  }
  for (int i = 0; i < n; i++) assert_true(got[i].finished);
  EngineStats st;
  engine_stats(e, &st);
  run_preemptions = st.preemptions;
  engine_free(e);
}

/* The logits after the prompt and the given tokens, on the one-sequence model (into m->logits). */
static void solo_logits(Model *solo, const int32_t *prompt, int np, const int32_t *out, int nout) {
  Diag d = {0};
  int32_t ids[128];
  memcpy(ids, prompt, sizeof(int32_t) * (size_t)np);
  if (nout) memcpy(ids + np, out, sizeof(int32_t) * (size_t)nout);
  if (!model_step(solo, ids, np + nout, 0, &d)) fail_msg("solo step: %s", d.msg);
}

static int argmax_of(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

static const int32_t prompt[] = {5, 17, 99, 3, 42, 42, 7};
enum { NP = sizeof prompt / sizeof prompt[0], NGEN = 24 };

static void penalties_change_greedy_tokens(void **s) {
  (void)s;
  Model *m = load(4, 0), *solo = load(0, 0);
  int vocab = m->cfg.vocab;
  EngineRequest r[3] = {{prompt, NP, NGEN, {.greedy = 1, .top_p = 1}, .ignore_eos = 1},
                        {prompt, NP, NGEN, {.greedy = 1, .top_p = 1}, .ignore_eos = 1, .frequency_penalty = 2},
                        {prompt,
                         NP,
                         NGEN,
                         {.greedy = 1, .top_p = 1},
                         .ignore_eos = 1,
                         .presence_penalty = 1.5,
                         .frequency_penalty = 0.5}};
  Got got[3];
  run(m, &(EngineOptions){0}, r, 3, got);
  /* the unpenalized greedy output repeats tokens (so the penalty has something to change) */
  int repeats = 0;
  for (int i = 0; i < got[0].n; i++)
    for (int j = 0; j < i; j++) repeats += got[0].tok[i] == got[0].tok[j];
  assert_true(repeats > 0);
  for (int q = 1; q < 3; q++) {
    assert_int_equal(got[q].n, NGEN);
    float *row = malloc(sizeof(float) * (size_t)vocab);
    for (int k = 0; k < NGEN; k++) { /* the penalized argmax, computed here */
      solo_logits(solo, prompt, NP, got[q].tok, k);
      memcpy(row, solo->logits, sizeof(float) * (size_t)vocab);
      for (int t = 0; t < vocab; t++) {
        int count = 0;
        for (int j = 0; j < k; j++) count += got[q].tok[j] == t;
        if (count) row[t] -= (float)(r[q].presence_penalty + r[q].frequency_penalty * count);
      }
      if (got[q].tok[k] != argmax_of(row, vocab))
        fail_msg("request %d token %d: %d, the penalized argmax is %d", q, k, got[q].tok[k], argmax_of(row, vocab));
    }
    free(row);
  }
  /* a frequency penalty of 2 on this model's small logits: fewer repeats than without */
  int repeats1 = 0;
  for (int i = 0; i < got[1].n; i++)
    for (int j = 0; j < i; j++) repeats1 += got[1].tok[i] == got[1].tok[j];
  assert_true(repeats1 < repeats);
  model_free(m);
  model_free(solo);
}

static void logprobs_are_log_softmax(void **s) {
  (void)s;
  Model *m = load(4, 0), *solo = load(0, 0);
  int vocab = m->cfg.vocab;
  EngineRequest r[3] = {
      {prompt, NP, 8, {.greedy = 1, .top_p = 1}, .ignore_eos = 1, .logprobs = 1, .top_logprobs = 5},
      {prompt,
       NP,
       8,
       {.temperature = 0.9, .top_k = 30, .top_p = 0.95, .seed = 3},
       .ignore_eos = 1,
       .logprobs = 1,
       .top_logprobs = 20,
       .presence_penalty = 0.7},
      {prompt + 2, NP - 2, 8, {.greedy = 1, .top_p = 1}, .ignore_eos = 1}, /* no logprobs: none in its events */
  };
  Got got[3];
  run(m, &(EngineOptions){0}, r, 3, got);
  for (int q = 0; q < 2; q++) {
    for (int k = 0; k < got[q].n; k++) {
      solo_logits(solo, prompt, NP, got[q].tok, k);
      float *row = solo->logits;
      for (int t = 0; t < vocab; t++) {
        int count = 0;
        for (int j = 0; j < k; j++) count += got[q].tok[j] == t;
        if (count) row[t] -= (float)(r[q].presence_penalty + r[q].frequency_penalty * count);
      }
      double mx = -INFINITY, sum = 0;
      for (int t = 0; t < vocab; t++) mx = row[t] > mx ? row[t] : mx;
      for (int t = 0; t < vocab; t++) sum += exp(row[t] - mx);
      double want = row[got[q].tok[k]] - mx - log(sum);
      if (fabs(got[q].lp[k] - want) > 1e-4 * slack)
        fail_msg("request %d token %d: logprob %g, want %g", q, k, got[q].lp[k], want);
      assert_int_equal(got[q].ntop[k], r[q].top_logprobs);
      double mass = 0;
      for (int j = 0; j < got[q].ntop[k]; j++) {
        int32_t t = got[q].top[k][j];
        assert_true(fabs(got[q].top_lp[k][j] - (row[t] - mx - log(sum))) < 1e-4 * slack);
        if (j) assert_true(got[q].top_lp[k][j] <= got[q].top_lp[k][j - 1]);
        mass += exp(got[q].top_lp[k][j]);
      }
      assert_true(mass <= 1 + 1e-5);
      if (q == 0) { /* greedy: the chosen token is the most likely one */
        assert_int_equal(got[q].top[k][0], got[q].tok[k]);
        assert_true(fabs(got[q].lp[k] - got[q].top_lp[k][0]) < 1e-6);
      }
    }
  }
  model_free(m);
  model_free(solo);
}

/* log-softmax(row)[t] in double */
static double log_softmax_at(const float *row, int vocab, int t) {
  double mx = -INFINITY, sum = 0;
  for (int j = 0; j < vocab; j++) mx = row[j] > mx ? row[j] : mx;
  for (int j = 0; j < vocab; j++) sum += exp(row[j] - mx);
  return row[t] - mx - log(sum);
}

/* min_tokens: a stop token cannot be chosen before the request has that many tokens (the argmax without it is,
 * computed here on the one-sequence model), and ends it as usual afterwards */
static void min_tokens_defer_the_end(void **s) {
  (void)s;
  Model *m = load(4, 0), *solo = load(0, 0);
  int vocab = m->cfg.vocab;
  EngineRequest plain = {prompt, NP, 8, {.greedy = 1, .top_p = 1}, .ignore_eos = 1};
  Got g0;
  run(m, &(EngineOptions){0}, &plain, 1, &g0);
  int32_t stop_tok = g0.tok[2];
  EngineRequest r[2] = {
      {prompt, NP, 8, {.greedy = 1, .top_p = 1}, .ignore_eos = 1, .stop_tokens = &stop_tok, .nstop_tokens = 1},
      {prompt,
       NP,
       8,
       {.greedy = 1, .top_p = 1},
       .ignore_eos = 1,
       .stop_tokens = &stop_tok,
       .nstop_tokens = 1,
       .min_tokens = 5,
       .logprobs = 1}};
  Got got[2];
  run(m, &(EngineOptions){0}, r, 2, got);
  assert_int_equal(got[0].n, 2); /* the stop token ends it (and is not part of its output) */
  assert_true(got[1].n >= 5);
  assert_memory_equal(got[1].tok, g0.tok, sizeof(int32_t) * 2);
  float *row = malloc(sizeof(float) * (size_t)vocab);
  for (int k = 2; k < 5; k++) {
    solo_logits(solo, prompt, NP, got[1].tok, k);
    memcpy(row, solo->logits, sizeof(float) * (size_t)vocab);
    double lp = log_softmax_at(row, vocab, got[1].tok[k]); /* logprobs are the model's, unmasked */
    row[stop_tok] = -INFINITY;
    assert_int_not_equal(got[1].tok[k], stop_tok);
    assert_int_equal(got[1].tok[k], argmax_of(row, vocab));
    assert_true(fabs(got[1].lp[k] - lp) < 1e-4 * slack);
  }
  free(row);
  for (int k = 5; k < got[1].n; k++) assert_int_not_equal(got[1].tok[k], stop_tok); /* it would have ended there */
  Diag d = {0};
  Engine *e = engine_new(m, &(EngineOptions){0}, &d);
  EngineRequest bad = {prompt, NP, 4, {.greedy = 1, .top_p = 1}, .min_tokens = -1};
  assert_int_equal(engine_add(e, &bad, &d), -1);
  assert_non_null(strstr(d.msg, "min_tokens"));
  engine_free(e);
  model_free(m);
  model_free(solo);
}

/* Prompt logprobs (echo with logprobs): every prompt token after the first, once and in order, with the
 * log-softmax of the one-sequence model's logits after the tokens before it; also when the prompt is computed in
 * chunks, when another request holds the same prompt in the prefix cache, and when a preemption recomputes it. */
static void prompt_logprobs_score_the_prompt(void **s) {
  (void)s;
  Model *solo = load(0, 0);
  int vocab = solo->cfg.vocab;
  enum { LP = 22 };
  int32_t longp[LP];
  for (int i = 0; i < LP; i++) longp[i] = (int32_t)((i * 37 + 11) % vocab);
  for (int pool = 0; pool < 2; pool++) {
    /* pool 1: 9 blocks of 4 for three sequences of up to 32 positions (8 blocks each): preemptions */
    Model *m = pool ? load_pool(4, 0, 9) : load(4, 0);
    EngineRequest r[3] = {
        {longp, LP, 10, {.greedy = 1, .top_p = 1}, .ignore_eos = 1, .prompt_logprobs = 1, .top_logprobs = 5},
        {longp, LP, 10, {.greedy = 1, .top_p = 1}, .ignore_eos = 1}, /* the same prompt: in the prefix cache */
        {longp, LP, 10, {.greedy = 1, .top_p = 1}, .ignore_eos = 1, .prompt_logprobs = 1, .logprobs = 1}};
    Got got[3];
    run(m, &(EngineOptions){.max_batch_tokens = 8, .max_seqs = 8}, r, 3, got);
    if (pool) assert_true(run_preemptions > 0);
    assert_int_equal(got[1].npl, 0);
    for (int q = 0; q < 3; q += 2) {
      assert_int_equal(got[q].npl, LP - 1);
      assert_int_equal(got[q].n, 10);
      assert_memory_equal(got[q].tok, got[1].tok, sizeof(int32_t) * 10); /* generation is unchanged */
      for (int k = 0; k < LP - 1; k++) {
        assert_int_equal(got[q].pl_pos[k], k + 1);
        assert_int_equal(got[q].pl_tok[k], longp[k + 1]);
        solo_logits(solo, longp, k + 1, NULL, 0);
        double want = log_softmax_at(solo->logits, vocab, longp[k + 1]);
        if (fabs(got[q].pl_lp[k] - want) > 1e-4 * slack)
          fail_msg("request %d prompt token %d: logprob %g, want %g", q, k + 1, got[q].pl_lp[k], want);
        assert_int_equal(got[q].pl_ntop[k], r[q].top_logprobs);
        for (int j = 0; j < got[q].pl_ntop[k]; j++) {
          assert_true(fabs(got[q].pl_top_lp[k][j] - log_softmax_at(solo->logits, vocab, got[q].pl_top[k][j])) <
                      1e-4 * slack);
          if (j) assert_true(got[q].pl_top_lp[k][j] <= got[q].pl_top_lp[k][j - 1]);
        }
        if (got[q].pl_ntop[k]) assert_int_equal(got[q].pl_top[k][0], argmax_of(solo->logits, vocab));
      }
    }
    model_free(m);
  }
  /* an embedding cannot also score its prompt */
  Model *m = load(4, 1);
  Diag d = {0};
  Engine *e = engine_new(m, &(EngineOptions){0}, &d);
  EngineRequest bad = {prompt, NP, 1, {.greedy = 1, .top_p = 1}, .embed = POOL_LAST, .prompt_logprobs = 1};
  assert_int_equal(engine_add(e, &bad, &d), -1);
  assert_non_null(strstr(d.msg, "prompt logprobs"));
  engine_free(e);
  model_free(m);
  model_free(solo);
}

static double dot(const float *a, const float *b, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

static void embeddings_pool_hidden_states(void **s) {
  (void)s;
  Model *m = load(4, 1), *solo = load(0, 0);
  int vocab = m->cfg.vocab, dim = m->cfg.hidden;
  /* every prefix's last hidden state, a mean over the whole prompt, and a generation sharing the steps; a small
   * token budget splits the prompt into chunks */
  EngineRequest r[NP + 2];
  for (int k = 0; k < NP; k++) r[k] = (EngineRequest){prompt, k + 1, 1, {.greedy = 1, .top_p = 1}, .embed = POOL_LAST};
  r[NP] = (EngineRequest){prompt, NP, 1, {.greedy = 1, .top_p = 1}, .embed = POOL_MEAN};
  r[NP + 1] = (EngineRequest){prompt, NP, 6, {.greedy = 1, .top_p = 1}, .ignore_eos = 1};
  Got got[NP + 2];
  run(m, &(EngineOptions){.max_batch_tokens = 16, .max_seqs = 16}, r, NP + 2, got);
  float *head = malloc(sizeof(float) * (size_t)vocab * (size_t)dim);
  Diag d = {0};
  if (!weights_read(m->weights, "lm_head.weight", DT_F32, head, &d)) fail_msg("lm_head: %s", d.msg);
  for (int k = 0; k < NP; k++) { /* the LM head over the last hidden state gives the next token's logits */
    assert_int_equal(got[k].dim, dim);
    assert_int_equal(got[k].n, 0);
    solo_logits(solo, prompt, k + 1, NULL, 0);
    for (int t = 0; t < vocab; t++) {
      double want = solo->logits[t], have = dot(got[k].emb, head + (size_t)t * (size_t)dim, dim);
      if (fabs(have - want) > 1e-3 * slack * (1 + fabs(want)))
        fail_msg("prefix %d: hidden . lm_head[%d] = %g, the logit is %g", k + 1, t, have, want);
    }
  }
  for (int j = 0; j < dim; j++) { /* the mean is the mean of every prefix's last hidden state */
    double mean = 0;
    for (int k = 0; k < NP; k++) mean += got[k].emb[j] / NP;
    if (fabs(got[NP].emb[j] - mean) > 1e-4 * slack * (1 + fabs(mean)))
      fail_msg("mean pooling [%d]: %g, the mean of the prefixes' is %g", j, got[NP].emb[j], mean);
  }
  assert_int_equal(got[NP + 1].n, 6);
  /* the prompt in the prefix cache (a generation finished first on the same engine) changes nothing */
  Engine *e = engine_new(m, &(EngineOptions){0}, &d);
  assert_non_null(e);
  for (int pass = 0; pass < 2; pass++) {
    int id = engine_add(e, &r[pass ? NP : NP + 1], &d);
    assert_true(id >= 0);
    const float *emb = NULL;
    while (engine_has_work(e)) {
      const EngineEvent *ev;
      int nev;
      if (!engine_step(e, &ev, &nev, &d)) fail_msg("step: %s", d.msg);
      for (int k = 0; k < nev; k++)
        if (ev[k].kind == EV_EMBEDDING) {
          emb = ev[k].embedding;
          for (int j = 0; j < dim; j++)
            assert_true(fabs(emb[j] - got[NP].emb[j]) < 1e-4 * slack * (1 + fabs(got[NP].emb[j])));
        }
    }
    assert_true(pass == 0 || emb);
  }
  EngineStats st;
  engine_stats(e, &st);
  assert_true(st.prefix_tokens_reused == 0); /* the mean took nothing from the cache */
  engine_free(e);
  free(head);
  model_free(solo);
  /* a model loaded without the hidden-state output refuses embeddings */
  model_free(m);
  m = load(4, 0);
  e = engine_new(m, &(EngineOptions){0}, &d);
  d = (Diag){0};
  assert_int_equal(engine_add(e, &r[NP], &d), -1);
  assert_non_null(strstr(d.msg, "hidden"));
  engine_free(e);
  model_free(m);
}

int main(void) {
  Diag d = {0};
  const char *want = getenv("LATHE_TEST_TARGET");
  if (want && !strcmp(want, "cuda")) {
    target = TARGET_CUDA;
    be = backend_cuda_new(&d);
    slack = 100;
  } else {
    be = backend_cpu_new(&d);
  }
  if (!be) {
    fprintf(stderr, "backend: %s\n", d.msg);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(penalties_change_greedy_tokens), cmocka_unit_test(logprobs_are_log_softmax),
      cmocka_unit_test(embeddings_pool_hidden_states),  cmocka_unit_test(prompt_logprobs_score_the_prompt),
      cmocka_unit_test(min_tokens_defer_the_end),
  };
  int rc = cmocka_run_group_tests_name("engine_sampling", tests, NULL, NULL);
  be->ops->destroy(be);
  return rc;
}
