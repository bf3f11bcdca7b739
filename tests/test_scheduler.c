/* The continuous-batching scheduler (engine/scheduler.h) driven by a fake executor. The fake "model" keeps
 * a real paged K/V store: each step writes every scheduled token (and its position) into its slot, and a
 * sampled token is a hash of the whole context read back through the entry's block table. So a sequence's
 * output equals its solo output only if every slot, block table, shared prefix block and recompute was
 * right. Checked: exact outputs, the token budget, staggered arrivals, preemption in tiny pools, prefix
 * sharing (same block ids, fewer prefill tokens), cancellation, refused requests and bad calls, and a
 * randomized run checking every invariant after every step. */
#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "base/rng.h"
#include "engine/scheduler.h"

#define VOCAB 1000
#define MAXSEQ 512

/* The fake model's next token after context[0..n). */
static int32_t fake_next(const int32_t *context, int n) {
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)(uint32_t)context[i] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  }
  return (int32_t)((h ^ (h >> 29)) % VOCAB);
}

/* The engine's stop rule in these tests (when enabled): a sampled token divisible by stop_mod ends it. */
static int stop_mod;
static int is_stop(int32_t t) { return stop_mod && t % stop_mod == 0; }

/* A sequence run alone: prompt, then up to max_new tokens of fake_next, stopping after a stop token. */
static int solo(const int32_t *prompt, int n, int max_new, int32_t *out) {
  memcpy(out, prompt, (size_t)n * sizeof *out);
  int len = n;
  for (int g = 0; g < max_new; g++) {
    int32_t t = fake_next(out, len);
    out[len++] = t;
    if (is_stop(t)) break;
  }
  return len;
}

typedef struct Fake {
  SchedConfig cfg;
  Sched *s;
  StepPlan plan;
  int32_t *kv_tok, *kv_pos; /* the K/V store: per slot, the token and position written there */
  long steps, max_step_tokens;
} Fake;

static void fake_init(Fake *f, SchedConfig cfg) {
  Diag d = {0};
  f->cfg = cfg;
  f->s = sched_new(&cfg, &d);
  if (!f->s) fail_msg("sched_new: %s", d.msg);
  step_plan_init(&f->plan);
  size_t nslots = (size_t)cfg.nblocks * (size_t)cfg.block_size;
  f->kv_tok = malloc(nslots * sizeof(int32_t));
  f->kv_pos = malloc(nslots * sizeof(int32_t));
  for (size_t i = 0; i < nslots; i++) f->kv_tok[i] = f->kv_pos[i] = -1;
  f->steps = f->max_step_tokens = 0;
}

static void fake_free(Fake *f) {
  sched_free(f->s);
  step_plan_free(&f->plan);
  free(f->kv_tok);
  free(f->kv_pos);
}

static void check_sched(const Sched *s) {
  Diag d = {0};
  if (sched_check(s, &d)) fail_msg("sched_check: %s", d.msg);
}

/* Independent of sched_check: a block in two running sequences' tables must be a registered full prefix
 * block at the same index of both, fully computed, with the same tokens from position 0 through it. */
static void check_sharing(const Fake *f, int nids) {
  int bs = f->cfg.block_size;
  int *owner = malloc(sizeof(int) * (size_t)f->cfg.nblocks), *at = malloc(sizeof(int) * (size_t)f->cfg.nblocks);
  for (int i = 0; i < f->cfg.nblocks; i++) owner[i] = -1;
  const KvBlockPool *p = sched_pool(f->s);
  for (int id = 0; id < nids; id++) {
    SeqInfo a;
    if (sched_seq(f->s, id, &a) || a.state != SEQ_RUNNING) continue;
    for (int k = 0; k < a.table_len; k++) {
      int b = a.table[k];
      if (owner[b] < 0) {
        owner[b] = id;
        at[b] = k;
        continue;
      }
      SeqInfo o;
      assert_int_equal(sched_seq(f->s, owner[b], &o), 0);
      if (at[b] != k || !kv_blocks_is_registered(p, b) || (k + 1) * bs > a.computed || (k + 1) * bs > o.computed ||
          memcmp(a.tokens, o.tokens, (size_t)(k + 1) * (size_t)bs * sizeof(int32_t)))
        fail_msg("block %d shared by sequences %d (index %d) and %d (index %d) wrongly", b, owner[b], at[b], id, k);
    }
  }
  free(owner);
  free(at);
}

/* Runs one step: plans, checks the plan, writes the K/V, samples, commits, applies the stop rule.
 * Returns the number of entries (0: nothing left to do). */
static int fake_step(Fake *f, int nids) {
  Diag d = {0};
  StepPlan *pl = &f->plan;
  SchedStats before, after;
  sched_stats(f->s, &before);
  unsigned char *was_waiting = calloc((size_t)nids + 1, 1);
  for (int id = 0; id < nids; id++) {
    SeqInfo q;
    was_waiting[id] = !sched_seq(f->s, id, &q) && q.state == SEQ_WAITING;
  }
  if (sched_plan_step(f->s, pl, &d)) fail_msg("sched_plan_step: %s", d.msg);
  sched_stats(f->s, &after);
  /* A step that preempted admits nobody (a victim would come straight back): every victim waits. */
  if (after.preemptions > before.preemptions) {
    assert_int_equal(after.waiting, before.waiting + (int)(after.preemptions - before.preemptions));
    for (int i = 0; i < pl->nentries; i++)
      if (was_waiting[pl->entries[i].seq]) fail_msg("step admitted sequence %d after preempting", pl->entries[i].seq);
  }
  free(was_waiting);
  if (pl->nentries == 0) return 0;
  check_sched(f->s);
  check_sharing(f, nids);
  int bs = f->cfg.block_size;
  const KvBlockPool *pool = sched_pool(f->s);
  assert_true(pl->ntokens <= f->cfg.max_batch_tokens);
  if (pl->ntokens > f->max_step_tokens) f->max_step_tokens = pl->ntokens;
  int32_t *sampled = malloc(sizeof(int32_t) * (size_t)pl->nentries);
  int32_t *ctx = malloc(sizeof(int32_t) * MAXSEQ);
  for (int i = 0; i < pl->nentries; i++) {
    const StepEntry *e = &pl->entries[i];
    SeqInfo q;
    assert_int_equal(sched_seq(f->s, e->seq, &q), 0);
    assert_int_equal(q.state, SEQ_RUNNING);
    assert_int_equal(e->start, q.computed);
    assert_true(e->n >= 1 && e->start + e->n <= q.len);
    assert_int_equal(e->sample, e->start + e->n == q.len);
    assert_int_equal(e->table_len, q.table_len);
    assert_int_equal(e->table_len, (e->start + e->n + bs - 1) / bs);
    for (int k = 0; k < e->n; k++) {
      int t = e->first + k, pos = e->start + k, slot = pl->slots[t];
      assert_int_equal(pl->positions[t], pos);
      assert_int_equal(pl->entry_of[t], i);
      assert_int_equal(pl->tokens[t], q.tokens[pos]);
      int blk = slot / bs;
      /* The slot lies in the block the sequence holds for this position, which is its own (not shared,
       * not a registered prefix block): a step never writes into a block another sequence may read. */
      assert_int_equal(blk, q.table[pos / bs]);
      assert_int_equal(pl->block_tables[e->table_at + pos / bs], blk);
      assert_int_equal(slot % bs, pos % bs);
      assert_int_equal(kv_blocks_refcount(pool, blk), 1);
      assert_false(kv_blocks_is_registered(pool, blk));
      f->kv_tok[slot] = pl->tokens[t];
      f->kv_pos[slot] = pos;
    }
  }
  for (int i = 0; i < pl->nentries; i++) {
    const StepEntry *e = &pl->entries[i];
    sampled[i] = -1;
    if (!e->sample) continue;
    int n = e->start + e->n;
    for (int pos = 0; pos < n; pos++) {
      int slot = pl->block_tables[e->table_at + pos / bs] * bs + pos % bs;
      if (f->kv_pos[slot] != pos)
        fail_msg("sequence %d reads position %d from slot %d: holds %d", e->seq, pos, slot, f->kv_pos[slot]);
      ctx[pos] = f->kv_tok[slot];
    }
    sampled[i] = fake_next(ctx, n);
  }
  if (sched_commit(f->s, pl, sampled, &d)) fail_msg("sched_commit: %s", d.msg);
  for (int i = 0; i < pl->nentries; i++) {
    SeqInfo q;
    if (pl->entries[i].sample && is_stop(sampled[i]) && !sched_seq(f->s, pl->entries[i].seq, &q) &&
        q.state != SEQ_FINISHED)
      assert_int_equal(sched_finish(f->s, q.id, SEQ_FINISH_STOP, &d), 0);
  }
  check_sched(f->s);
  int n = pl->nentries;
  free(sampled);
  free(ctx);
  f->steps++;
  return n;
}

static void run_to_end(Fake *f, int nids) {
  for (int guard = 0; sched_has_work(f->s); guard++) {
    assert_true(guard < 100000);
    assert_int_not_equal(fake_step(f, nids), 0);
  }
  Diag d = {0};
  StepPlan *pl = &f->plan;
  assert_int_equal(sched_plan_step(f->s, pl, &d), 0);
  assert_int_equal(pl->nentries, 0);
}

/* The sequence's output equals its solo run (or, cancelled, is a prefix of it). */
static void expect_solo(const Fake *f, int id, int cancelled) {
  SeqInfo q;
  assert_int_equal(sched_seq(f->s, id, &q), 0);
  assert_int_equal(q.state, SEQ_FINISHED);
  int32_t want[MAXSEQ];
  int n = solo(q.tokens, q.prompt_len, q.max_new, want);
  if (cancelled) {
    assert_int_equal(q.finish, SEQ_FINISH_CANCELLED);
    assert_true(q.len <= n);
  } else {
    assert_int_equal(q.len, n);
    /* The commit finishes a sequence at max_new ("length") before the engine sees a stop token there. */
    assert_int_equal(q.finish, n == q.prompt_len + q.max_new ? SEQ_FINISH_LENGTH : SEQ_FINISH_STOP);
  }
  for (int i = 0; i < q.len; i++)
    if (q.tokens[i] != want[i]) fail_msg("sequence %d token %d: %d, alone %d", id, i, q.tokens[i], want[i]);
}

static void expect_pool_unheld(const Fake *f) {
  SchedStats st;
  sched_stats(f->s, &st);
  assert_int_equal(st.blocks_held, 0);
  assert_int_equal(st.blocks_free + st.blocks_cached, f->cfg.nblocks);
  int zero = 0;
  const int32_t *none[1] = {NULL};
  Diag d = {0};
  if (kv_blocks_check(sched_pool(f->s), none, &zero, 0, &d)) fail_msg("%s", d.msg);
}

static void fill_prompt(int32_t *p, int n, uint64_t seed) {
  for (int i = 0; i < n; i++) p[i] = (int32_t)(splitmix64(&seed) % VOCAB);
}

static int add(Fake *f, const int32_t *prompt, int n, int max_new) {
  Diag d = {0};
  int id = sched_add(f->s, prompt, n, max_new, &d);
  if (id < 0) fail_msg("sched_add: %s", d.msg);
  return id;
}

static SchedConfig config(int nblocks, int bs, int budget, int max_seqs) {
  return (SchedConfig){nblocks, bs, budget, max_seqs, MAXSEQ, VOCAB};
}

static void test_bad_config_and_requests(void **state) {
  Diag d = {0};
  SchedConfig c = config(4, 4, 2, 4); /* budget below max_seqs */
  assert_null(sched_new(&c, &d));
  assert_contains(d.msg, "max_batch_tokens >= max_seqs");
  Fake f;
  fake_init(&f, config(4, 4, 16, 4));
  int32_t p[32];
  fill_prompt(p, 32, 1);
  Diag e[6] = {0};
  assert_int_equal(sched_add(f.s, p, 0, 4, &e[0]), -1);
  assert_contains(e[0].msg, "at least 1 token");
  assert_int_equal(sched_add(f.s, p, 4, 0, &e[1]), -1);
  assert_contains(e[1].msg, "max_new >= 1");
  p[2] = VOCAB;
  assert_int_equal(sched_add(f.s, p, 4, 4, &e[2]), -1);
  assert_contains(e[2].msg, "prompt token 2 is 1000");
  p[2] = 5;
  assert_int_equal(sched_add(f.s, p, 4, MAXSEQ, &e[3]), -1);
  assert_contains(e[3].msg, "exceeds the context limit");
  /* 12 + 5 - 1 = 16 positions fit 4 blocks of 4; 12 + 6 - 1 do not. */
  assert_int_equal(sched_add(f.s, p, 12, 6, &e[4]), -1);
  assert_contains(e[4].msg, "needs 5 KV blocks of 4 tokens, the pool has only 4");
  int id = add(&f, p, 12, 5);
  run_to_end(&f, 1);
  expect_solo(&f, id, 0);
  assert_int_equal(sched_cancel(f.s, id, &e[5]), -1);
  assert_contains(e[5].msg, "finished already");
  fake_free(&f);
}

static void test_exact_outputs_together(void **state) {
  Fake f;
  fake_init(&f, config(64, 4, 64, 8));
  int32_t p[40];
  int ids[6];
  for (int i = 0; i < 6; i++) {
    fill_prompt(p, 40, 100 + (uint64_t)i);
    ids[i] = add(&f, p, 3 + 7 * i, 4 + 3 * i);
  }
  run_to_end(&f, 6);
  for (int i = 0; i < 6; i++) expect_solo(&f, ids[i], 0);
  SchedStats st;
  sched_stats(f.s, &st);
  assert_int_equal(st.finished, 6);
  assert_int_equal(st.preemptions, 0);
  long prompt_tokens = 0, new_tokens = 0;
  for (int i = 0; i < 6; i++) prompt_tokens += 3 + 7 * i, new_tokens += 4 + 3 * i;
  /* Every prompt token computed once, every generated token but the last of each sequence once. */
  assert_int_equal(st.prefill_tokens + st.decode_tokens, prompt_tokens + new_tokens - 6);
  assert_int_equal(st.decode_tokens, new_tokens - 6);
  expect_pool_unheld(&f);
  fake_free(&f);
}

static void test_token_budget_chunks_prefill(void **state) {
  Fake f;
  fake_init(&f, config(64, 4, 8, 4));
  int32_t p[40];
  fill_prompt(p, 40, 7);
  int a = add(&f, p, 30, 3);
  /* 30 prompt tokens at 8 a step: 4 steps before the first token is sampled. */
  for (int i = 0; i < 3; i++) {
    fake_step(&f, 1);
    SeqInfo q;
    sched_seq(f.s, a, &q);
    assert_int_equal(q.computed, 8 * (i + 1));
    assert_int_equal(q.len, 30);
  }
  fill_prompt(p, 40, 8);
  int b = add(&f, p, 20, 6);
  run_to_end(&f, 2);
  assert_int_equal(f.max_step_tokens, 8);
  expect_solo(&f, a, 0);
  expect_solo(&f, b, 0);
  fake_free(&f);
}

static void test_staggered_arrivals(void **state) {
  Fake f;
  fake_init(&f, config(40, 4, 12, 4));
  int32_t p[40];
  int ids[10], n = 0;
  for (int step = 0; n < 10 || sched_has_work(f.s); step++) {
    if (n < 10 && step % 3 == 0) {
      fill_prompt(p, 40, 300 + (uint64_t)n);
      ids[n] = add(&f, p, 5 + (n * 7) % 20, 3 + n);
      n++;
    }
    if (sched_has_work(f.s)) fake_step(&f, n);
    assert_true(step < 10000);
  }
  for (int i = 0; i < 10; i++) expect_solo(&f, ids[i], 0);
  expect_pool_unheld(&f);
  fake_free(&f);
}

static void test_preemption_tiny_pool(void **state) {
  Fake f;
  /* 6 blocks of 4: each sequence alone needs 4 (6 + 10 - 1 = 15 positions), four of them 16. */
  fake_init(&f, config(6, 4, 16, 4));
  int32_t p[8];
  int ids[4];
  for (int i = 0; i < 4; i++) {
    fill_prompt(p, 8, 500 + (uint64_t)i);
    ids[i] = add(&f, p, 6, 10);
  }
  run_to_end(&f, 4);
  SchedStats st;
  sched_stats(f.s, &st);
  assert_true(st.preemptions > 0);
  assert_true(st.recomputed_tokens > 0);
  for (int i = 0; i < 4; i++) expect_solo(&f, ids[i], 0);
  expect_pool_unheld(&f);
  fake_free(&f);
}

static void test_prefix_sharing(void **state) {
  Fake f;
  fake_init(&f, config(32, 4, 64, 4));
  int32_t pa[16], pb[16];
  fill_prompt(pa, 16, 900);
  memcpy(pb, pa, sizeof pa);
  pa[12] = 1, pa[13] = 2, pa[14] = 3; /* 3 shared blocks, then different tails */
  pb[12] = 4, pb[13] = 5;
  int a = add(&f, pa, 15, 20);
  fake_step(&f, 1); /* a's prefill: 15 tokens, its 3 full blocks registered */
  SchedStats st0, st1;
  sched_stats(f.s, &st0);
  assert_int_equal(st0.prefill_tokens, 15);
  int b = add(&f, pb, 14, 5);
  fake_step(&f, 2);
  sched_stats(f.s, &st1);
  assert_int_equal(st1.prefill_tokens - st0.prefill_tokens, 14 - 12); /* b computes only its tail */
  assert_int_equal(st1.prefix_tokens_reused, 12);
  SeqInfo qa, qb;
  sched_seq(f.s, a, &qa);
  sched_seq(f.s, b, &qb);
  for (int k = 0; k < 3; k++) {
    assert_int_equal(qa.table[k], qb.table[k]);
    assert_int_equal(kv_blocks_refcount(sched_pool(f.s), qa.table[k]), 2);
  }
  assert_int_not_equal(qa.table[3], qb.table[3]);
  /* A prompt that is exactly the 3 cached blocks: 2 are taken, the last block is computed in a block of
   * its own so its last token gives logits. */
  int c = add(&f, pb, 12, 3);
  SchedStats st2;
  fake_step(&f, 3);
  sched_stats(f.s, &st2);
  assert_int_equal(st2.prefix_tokens_reused, 12 + 8);
  SeqInfo qc;
  sched_seq(f.s, c, &qc);
  assert_int_equal(qc.table[0], qa.table[0]);
  assert_int_equal(qc.table[1], qa.table[1]);
  run_to_end(&f, 3);
  expect_solo(&f, a, 0);
  expect_solo(&f, b, 0);
  expect_solo(&f, c, 0);
  expect_pool_unheld(&f);
  fake_free(&f);
}

static void test_same_prompt_same_step_dedups(void **state) {
  Fake f;
  fake_init(&f, config(32, 4, 64, 4));
  int32_t p[16];
  fill_prompt(p, 16, 77);
  int a = add(&f, p, 13, 4), b = add(&f, p, 13, 4);
  fake_step(&f, 2); /* both prefill at once: nothing cached yet; the commit makes them share */
  SeqInfo qa, qb;
  sched_seq(f.s, a, &qa);
  sched_seq(f.s, b, &qb);
  for (int k = 0; k < 3; k++) assert_int_equal(qa.table[k], qb.table[k]);
  SchedStats st;
  sched_stats(f.s, &st);
  assert_int_equal(st.blocks_held, 3 + 2); /* 3 shared full blocks, each its own partial 4th */
  run_to_end(&f, 2);
  expect_solo(&f, a, 0);
  expect_solo(&f, b, 0);
  fake_free(&f);
}

static void test_cancel_frees_every_block(void **state) {
  Fake f;
  fake_init(&f, config(12, 4, 16, 3));
  int32_t p[20];
  int ids[6];
  for (int i = 0; i < 6; i++) {
    fill_prompt(p, 20, 40 + (uint64_t)i);
    ids[i] = add(&f, p, 9 + i, 8);
  }
  for (int i = 0; i < 3; i++) fake_step(&f, 6);
  SchedStats st;
  sched_stats(f.s, &st);
  assert_true(st.running > 0 && st.waiting > 0 && st.blocks_held > 0);
  Diag d = {0};
  /* Cancel one between plan and commit: its entry is skipped by the commit. */
  assert_int_equal(sched_plan_step(f.s, &f.plan, &d), 0);
  int victim = f.plan.entries[0].seq;
  assert_int_equal(sched_cancel(f.s, victim, &d), 0);
  check_sched(f.s);
  int32_t toks[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  assert_int_equal(sched_commit(f.s, &f.plan, toks, &d), 0);
  check_sched(f.s);
  for (int i = 0; i < 6; i++)
    if (ids[i] != victim) assert_int_equal(sched_cancel(f.s, ids[i], &d), 0);
  assert_false(sched_has_work(f.s));
  expect_pool_unheld(&f);
  sched_stats(f.s, &st);
  assert_int_equal(st.cancelled, 6);
  assert_int_equal(st.running + st.waiting, 0);
  for (int i = 0; i < 6; i++) {
    SeqInfo q;
    sched_seq(f.s, ids[i], &q);
    assert_int_equal(q.finish, SEQ_FINISH_CANCELLED);
    assert_int_equal(sched_forget(f.s, ids[i], &d), 0);
    assert_int_equal(sched_seq(f.s, ids[i], &q), -1);
  }
  check_sched(f.s);
  fake_free(&f);
}

static void test_bad_calls(void **state) {
  Fake f;
  fake_init(&f, config(8, 4, 16, 2));
  int32_t p[6] = {1, 2, 3, 4, 5, 6};
  int a = add(&f, p, 6, 3);
  Diag d = {0}, e1 = {0}, e2 = {0}, e3 = {0}, e4 = {0};
  assert_int_equal(sched_plan_step(f.s, &f.plan, &d), 0);
  assert_int_equal(sched_plan_step(f.s, &f.plan, &e1), -1);
  assert_contains(e1.msg, "not committed");
  int32_t bad[1] = {-1};
  assert_int_equal(sched_commit(f.s, &f.plan, bad, &e2), -1);
  assert_contains(e2.msg, "not a token id");
  check_sched(f.s);
  int32_t good[1] = {9};
  assert_int_equal(sched_commit(f.s, &f.plan, good, &d), 0);
  assert_int_equal(sched_commit(f.s, &f.plan, good, &e3), -1);
  assert_contains(e3.msg, "commit of step");
  assert_int_equal(sched_forget(f.s, a, &e4), -1);
  assert_contains(e4.msg, "not finished");
  SeqInfo q;
  sched_seq(f.s, a, &q);
  assert_int_equal(q.len, 7);
  assert_int_equal(q.tokens[6], 9);
  fake_free(&f);
}

/* Random arrivals (often sharing prefixes), prompt lengths, max_new, stops and cancellations. */
static void random_run(SchedConfig cfg, uint64_t seed, int nsteps, int *preemptions_out) {
  Fake f;
  fake_init(&f, cfg);
  uint64_t rs = seed;
  int32_t prefixes[4][64], p[MAXSEQ];
  for (int i = 0; i < 4; i++) fill_prompt(prefixes[i], 64, seed * 10 + (uint64_t)i);
  enum { MAXIDS = 4096 };
  static int cancelled[MAXIDS];
  int nids = 0, pool_tokens = cfg.nblocks * cfg.block_size;
  for (int step = 0; step < nsteps || sched_has_work(f.s); step++) {
    assert_true(step < nsteps + 20000);
    if (step < nsteps && nids < MAXIDS && splitmix64_unit(&rs) < 0.3) {
      int n = 1 + (int)(splitmix64(&rs) % 40), max_new = 1 + (int)(splitmix64(&rs) % 24);
      if (n + max_new - 1 > pool_tokens) n = pool_tokens - max_new + 1 > 0 ? pool_tokens - max_new + 1 : 1;
      if (n + max_new - 1 > pool_tokens) max_new = pool_tokens - n + 1;
      fill_prompt(p, n, splitmix64(&rs));
      if (splitmix64_unit(&rs) < 0.6) {
        int share = (int)(splitmix64(&rs) % (unsigned)(n + 1));
        memcpy(p, prefixes[splitmix64(&rs) % 4], (size_t)share * sizeof *p);
      }
      cancelled[nids] = 0;
      int id = add(&f, p, n, max_new);
      assert_int_equal(id, nids);
      nids++;
    }
    if (nids && splitmix64_unit(&rs) < 0.03) {
      int id = (int)(splitmix64(&rs) % (unsigned)nids);
      SeqInfo q;
      Diag d = {0};
      if (!sched_seq(f.s, id, &q) && q.state != SEQ_FINISHED) {
        assert_int_equal(sched_cancel(f.s, id, &d), 0);
        cancelled[id] = 1;
        check_sched(f.s);
      }
    }
    if (sched_has_work(f.s)) assert_int_not_equal(fake_step(&f, nids), 0);
  }
  for (int id = 0; id < nids; id++) expect_solo(&f, id, cancelled[id]);
  expect_pool_unheld(&f);
  SchedStats st;
  sched_stats(f.s, &st);
  assert_int_equal(st.finished, nids);
  printf("  %d blocks of %d, budget %d, %d seqs: %ld steps, %d requests (%ld cancelled), %ld prefill + %ld decode "
         "tokens, %ld reused from the prefix cache, %ld preemptions, %ld recomputed\n",
         cfg.nblocks, cfg.block_size, cfg.max_batch_tokens, cfg.max_seqs, f.steps, nids, st.cancelled,
         st.prefill_tokens, st.decode_tokens, st.prefix_tokens_reused, st.preemptions, st.recomputed_tokens);
  *preemptions_out += (int)st.preemptions;
  fake_free(&f);
}

static void test_randomized(void **state) {
  int pre_tiny = 0, pre_large = 0;
  stop_mod = 53;
  random_run(config(8, 4, 16, 4), 1, 3000, &pre_tiny);     /* tiny: constant preemption */
  random_run(config(13, 3, 7, 5), 2, 3000, &pre_tiny);     /* odd sizes */
  random_run(config(5, 16, 32, 3), 3, 1500, &pre_tiny);    /* big blocks, few of them */
  random_run(config(256, 4, 64, 16), 4, 3000, &pre_large); /* large */
  random_run(config(40, 1, 9, 9), 5, 1500, &pre_tiny);     /* one-token blocks, budget = max_seqs */
  stop_mod = 0;
  assert_true(pre_tiny > 0);
  printf("randomized: %d preemptions in the small pools, %d in the large ones\n", pre_tiny, pre_large);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_config_and_requests),
      cmocka_unit_test(test_exact_outputs_together),
      cmocka_unit_test(test_token_budget_chunks_prefill),
      cmocka_unit_test(test_staggered_arrivals),
      cmocka_unit_test(test_preemption_tiny_pool),
      cmocka_unit_test(test_prefix_sharing),
      cmocka_unit_test(test_same_prompt_same_step_dedups),
      cmocka_unit_test(test_cancel_frees_every_block),
      cmocka_unit_test(test_bad_calls),
      cmocka_unit_test(test_randomized),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
