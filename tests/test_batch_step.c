/* The batched model step (model_step_batch) over a paged KV cache against the one-sequence step: several
 * sequences of different lengths, prefill chunks and decode tokens in the same step, block tables that
 * scatter each sequence over the pool, logits asked for in any order. Each sequence's logits must equal
 * what the one-sequence model gives for the same tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "generate/model.h"
#include "runtime/plan.h"
#include "base/settings.h"
#include "model/quantize.h"

#define FIXTURES "tests/fixtures/models"
#define TOL 1e-5

static Backend *be;
static Target target = TARGET_CPU;

enum { BLOCK = 4, BLOCKS = 40, MAXCTX = 64, NSEQ = 3 };

static Model *load_as(const char *path, int paged, int invariant) {
  Diag d = {0};
  ModelLoadOptions o = {.target = target, .max_ctx = MAXCTX, .quiet = 1, .batch_invariant = invariant};
  if (paged) o.kv_block = BLOCK, o.kv_blocks = BLOCKS;
  Model *m = model_load(path, be, &o, &d);
  if (!m) fail_msg("load %s: %s", path, d.msg);
  return m;
}

static Model *load(const char *path, int paged) { return load_as(path, paged, 0); }

static double rel_error(const float *got, const float *want, int n) {
  double maxref = 0, maxdiff = 0;
  for (int i = 0; i < n; i++) {
    if (!isfinite(got[i])) return INFINITY;
    maxref = fmax(maxref, fabs(want[i]));
    maxdiff = fmax(maxdiff, fabs((double)got[i] - want[i]));
  }
  return maxdiff / fmax(maxref, 1e-6);
}

/* The sequences' tokens, and the pool blocks each one's positions live in (deliberately out of order and
 * interleaved with the others'). */
static const int32_t toks[NSEQ][16] = {{1, 17, 42, 99, 3, 250, 7, 64, 128, 5, 200, 33, 9, 77},
                                       {8, 100, 2, 55, 19, 4, 31},
                                       {200, 201, 3, 3, 90, 12, 45, 6, 1, 2}};
static const int32_t blocks[NSEQ][4] = {{5, 2, 9, 11}, {0, 7, 13, 14}, {3, 1, 8, 6}};

typedef struct Entry {
  int seq, start, n; /* positions [start, start + n) of sequence seq */
} Entry;

/* One batched step of the entries; logits of each entry's last token into out[entry]. */
static void run_step(Model *m, const Entry *e, int ne, float **out) {
  int32_t ids[64], pos[64], seq[64], slot[64], rows[8], table[NSEQ * 16];
  int nt = 0, ctx = 1;
  for (int i = 0; i < NSEQ * m->blocks_per_seq; i++) table[i] = 0;
  for (int s = 0; s < NSEQ; s++)
    for (int b = 0; b < 4; b++) table[s * m->blocks_per_seq + b] = blocks[s][b];
  /* rows in reverse entry order, so logit row i is not entry i */
  for (int i = 0; i < ne; i++) {
    for (int p = e[i].start; p < e[i].start + e[i].n; p++, nt++) {
      ids[nt] = toks[e[i].seq][p];
      pos[nt] = p;
      seq[nt] = e[i].seq;
      slot[nt] = blocks[e[i].seq][p / BLOCK] * BLOCK + p % BLOCK;
      if (p + 1 > ctx) ctx = p + 1;
    }
    rows[ne - 1 - i] = nt - 1;
  }
  BatchStep st = {nt, NSEQ, ne, ctx, ids, pos, seq, slot, table, rows};
  float *logits = malloc(sizeof(float) * (size_t)ne * (size_t)m->cfg.vocab);
  int32_t next[8];
  Diag d = {0};
  if (!model_step_batch(m, &st, logits, next, &d)) fail_msg("batched step: %s", d.msg);
  for (int i = 0; i < ne; i++) {
    const float *row = logits + (size_t)(ne - 1 - i) * (size_t)m->cfg.vocab;
    memcpy(out[i], row, sizeof(float) * (size_t)m->cfg.vocab);
    int best = 0;
    for (int v = 1; v < m->cfg.vocab; v++)
      if (row[v] > row[best]) best = v;
    assert_int_equal(next[ne - 1 - i], best);
  }
  free(logits);
}

/* The one-sequence model's logits after tokens [0, upto) of sequence s. */
static void solo(Model *m, int s, int upto, float *out) {
  Diag d = {0};
  if (!model_step(m, toks[s], upto, 0, &d)) fail_msg("solo step: %s", d.msg);
  memcpy(out, m->logits, sizeof(float) * (size_t)m->cfg.vocab);
}

/* stacked: -1 the target's default, 0 or 1 LATHE_FUSE_PROJECTIONS for the batched model (the one-sequence model
 * never stacks), checked by the plan's inputs */
static void batched_matches_solo_as(const char *fixture, int stacked) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", FIXTURES, fixture);
  Model *one = load(path, 0);
  if (stacked >= 0) setting_set(SET_FUSE_PROJ, stacked ? "1" : "0");
  Model *many = load(path, 1);
  setting_set(SET_FUSE_PROJ, NULL);
  if (stacked >= 0) {
    assert_int_equal(plan_input_index(many->plan, "model.layers.0.self_attn.qkv_proj.weight") >= 0, stacked);
    assert_int_equal(plan_input_index(many->plan, "model.layers.0.mlp.gate_up_proj.weight") >= 0, stacked);
    assert_int_equal(plan_input_index(many->plan, "model.layers.0.mlp.up_proj.weight") < 0, stacked);
  }
  int V = one->cfg.vocab;
  assert_int_equal(many->blocks_per_seq, MAXCTX / BLOCK);
  float *got[3], *want = malloc(sizeof(float) * (size_t)V);
  for (int i = 0; i < 3; i++) got[i] = malloc(sizeof(float) * (size_t)V);
  /* step 1: prefill chunks of all three; step 2: the rest of 0 and 2 with a decode token of 1; step 3: one
   * decode token each */
  Entry s1[3] = {{0, 0, 7}, {1, 0, 6}, {2, 0, 3}};
  Entry s2[3] = {{0, 7, 6}, {1, 6, 1}, {2, 3, 7}};
  const Entry *steps[2] = {s1, s2};
  for (int k = 0; k < 2; k++) {
    run_step(many, steps[k], 3, got);
    for (int i = 0; i < 3; i++) {
      const Entry *e = &steps[k][i];
      solo(one, e->seq, e->start + e->n, want);
      double err = rel_error(got[i], want, V);
      if (!(err <= TOL))
        fail_msg("%s step %d: sequence %d at %d tokens differs from the one-sequence step by %.3g", fixture, k + 1,
                 e->seq, e->start + e->n, err);
    }
  }
  /* a step of single decode tokens: sequence 0's 14th token alone */
  Entry last[1] = {{0, 13, 1}};
  run_step(many, last, 1, got);
  solo(one, 0, 14, want);
  assert_true(rel_error(got[0], want, V) <= TOL);
  for (int i = 0; i < 3; i++) free(got[i]);
  free(want);
  model_free(one);
  model_free(many);
}

static void batched_matches_solo(const char *fixture) { batched_matches_solo_as(fixture, -1); }

/* q/k/v and gate/up over weights stacked at load (Qwen2: with the q/k/v biases stacked too), and not. */
static void stacked_projections(void **st) {
  (void)st;
  static const char *const fixtures[] = {"llama", "qwen2", "qwen3"};
  for (int i = 0; i < 3; i++) {
    batched_matches_solo_as(fixtures[i], 1);
    batched_matches_solo_as(fixtures[i], 0);
  }
}

/* Random weights quantized to q8_0 blocks at load (bench --weights q8_0): a stacked weight's parts are each that
 * type's blocks, so the stacked step gives the logits of the unstacked one. */
static void stacked_quantized_blocks(void **st) {
  (void)st;
  Model *fixture = load(FIXTURES "/llama", 0);
  ModelConfig cfg = fixture->cfg;
  model_free(fixture);
  float *want[3], *got[3];
  for (int i = 0; i < 3; i++)
    want[i] = malloc(sizeof(float) * (size_t)cfg.vocab), got[i] = malloc(sizeof(float) * (size_t)cfg.vocab);
  Entry s1[3] = {{0, 0, 7}, {1, 0, 6}, {2, 0, 3}};
  for (int stacked = 0; stacked < 2; stacked++) {
    Diag d = {0};
    ModelLoadOptions o = {.target = target,
                          .max_ctx = MAXCTX,
                          .quiet = 1,
                          .kv_block = BLOCK,
                          .kv_blocks = BLOCKS,
                          .random_quant = QUANT_Q8_0 + 1};
    setting_set(SET_FUSE_PROJ, stacked ? "1" : "0");
    Model *m = model_new_random(&cfg, DT_F32, be, &o, &d);
    setting_set(SET_FUSE_PROJ, NULL);
    if (!m) fail_msg("random q8_0 model: %s", d.msg);
    assert_int_equal(plan_input_index(m->plan, "model.layers.1.mlp.gate_up_proj.weight") >= 0, stacked);
    run_step(m, s1, 3, stacked ? got : want);
    model_free(m);
  }
  /* The stacked and unstacked steps run different kernels, whose sums are ordered differently: with AVX2's
   * 8-lane forms that reaches 1.1e-5 of the largest logit. */
  for (int i = 0; i < 3; i++) {
    assert_true(rel_error(got[i], want[i], cfg.vocab) <= 10 * TOL);
    free(want[i]), free(got[i]);
  }
}

static void qwen3_batched(void **st) {
  (void)st;
  batched_matches_solo("qwen3");
}
static void llama_batched(void **st) {
  (void)st;
  batched_matches_solo("llama");
}
static void qwen2_batched(void **st) {
  (void)st;
  batched_matches_solo("qwen2");
}

/* Steady decode: a batched plan records a graph for a token count once two steps in a row have it, replays
 * it from then on (also after a step of another count), and the replayed steps still equal the one-sequence
 * model. */
static void repeated_steps_replay_a_graph(void **st) {
  (void)st;
  Model *one = load(FIXTURES "/llama", 0), *many = load(FIXTURES "/llama", 1);
  int V = one->cfg.vocab;
  float *got[3], *want = malloc(sizeof(float) * (size_t)V);
  for (int i = 0; i < 3; i++) got[i] = malloc(sizeof(float) * (size_t)V);
  Entry prefill[3] = {{0, 0, 7}, {1, 0, 2}, {2, 0, 3}};
  run_step(many, prefill, 3, got);
  long base = plan_graph_replays(many->plan);
  /* (entries, replays expected after the step): three decode tokens, three again, three, then two, then three */
  struct {
    int ne, replays;
  } plan[5] = {{3, 0}, {3, 1}, {3, 2}, {2, 2}, {3, 3}};
  int at[3] = {7, 2, 3};
  for (int k = 0; k < 5; k++) {
    Entry e[3];
    for (int i = 0; i < plan[k].ne; i++) e[i] = (Entry){i, at[i]++, 1};
    run_step(many, e, plan[k].ne, got);
    assert_int_equal(plan_graph_replays(many->plan) - base, plan[k].replays);
    for (int i = 0; i < plan[k].ne; i++) {
      solo(one, e[i].seq, e[i].start + 1, want);
      if (!(rel_error(got[i], want, V) <= TOL))
        fail_msg("decode step %d: sequence %d differs from the one-sequence step by %.3g", k + 1, i,
                 rel_error(got[i], want, V));
    }
  }
  for (int i = 0; i < 3; i++) free(got[i]);
  free(want);
  model_free(one);
  model_free(many);
}

/* Batch-invariant schedules: sequence 0's logits are bit-identical alone and beside others (other lengths,
 * other token counts), in prefill chunks and in decode steps. */
static void batch_invariant_bits(void **st) {
  (void)st;
  Model *m = load_as(FIXTURES "/qwen3", 1, 1);
  int V = m->cfg.vocab;
  float *alone[3], *mixed[3];
  for (int i = 0; i < 3; i++) {
    alone[i] = malloc(sizeof(float) * (size_t)V);
    mixed[i] = malloc(sizeof(float) * (size_t)V);
  }
  Entry a1[1] = {{0, 0, 9}}, a2[1] = {{0, 9, 1}};
  Entry m1[3] = {{1, 0, 7}, {0, 0, 9}, {2, 0, 2}}, m2[3] = {{2, 2, 8}, {1, 6, 1}, {0, 9, 1}};
  run_step(m, a1, 1, alone);
  run_step(m, m1, 3, mixed);
  if (memcmp(alone[0], mixed[1], sizeof(float) * (size_t)V))
    fail_msg("prefill: sequence 0's logits differ between alone and batched (%.3g)", rel_error(mixed[1], alone[0], V));
  run_step(m, a2, 1, alone);
  run_step(m, m2, 3, mixed);
  if (memcmp(alone[0], mixed[2], sizeof(float) * (size_t)V))
    fail_msg("decode: sequence 0's logits differ between alone and batched (%.3g)", rel_error(mixed[2], alone[0], V));
  for (int i = 0; i < 3; i++) {
    free(alone[i]);
    free(mixed[i]);
  }
  model_free(m);
}

/* Bad step descriptions are errors, not out-of-bounds reads. */
static void bad_steps_are_errors(void **st) {
  (void)st;
  Model *m = load(FIXTURES "/llama", 1);
  int32_t ids[1] = {1}, pos[1] = {0}, seq[1] = {0}, slot[1] = {0}, rows[1] = {0}, table[16] = {0};
  BatchStep good = {1, 1, 1, 1, ids, pos, seq, slot, table, rows};
  Diag d = {0};
  assert_true(model_step_batch(m, &good, NULL, NULL, &d));
  BatchStep b = good;
  int32_t bad_slot[1] = {BLOCKS * BLOCK};
  b.slot = bad_slot;
  assert_false(model_step_batch(m, &b, NULL, NULL, &d));
  assert_non_null(strstr(d.msg, "slot"));
  b = good;
  int32_t bad_row[1] = {1};
  b.rows = bad_row;
  d = (Diag){0};
  assert_false(model_step_batch(m, &b, NULL, NULL, &d));
  assert_non_null(strstr(d.msg, "logit row"));
  b = good;
  int32_t bad_pos[1] = {3};
  b.pos = bad_pos;
  d = (Diag){0};
  assert_false(model_step_batch(m, &b, NULL, NULL, &d));
  model_free(m);
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
      cmocka_unit_test(qwen3_batched),        cmocka_unit_test(llama_batched),
      cmocka_unit_test(qwen2_batched),        cmocka_unit_test(batch_invariant_bits),
      cmocka_unit_test(bad_steps_are_errors), cmocka_unit_test(repeated_steps_replay_a_graph),
      cmocka_unit_test(stacked_projections),  cmocka_unit_test(stacked_quantized_blocks),
  };
  int rc = cmocka_run_group_tests_name("batch_step", tests, NULL, NULL);
  be->ops->destroy(be);
  return rc;
}
