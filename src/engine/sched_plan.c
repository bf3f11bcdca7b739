/* Building one step (sched_plan_step): decode tokens, then prefill chunks, then admissions, with blocks
 * allocated as positions are scheduled and preemption when the pool runs dry; then the StepPlan arrays. */
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "sched_internal.h"

void step_plan_init(StepPlan *p) { memset(p, 0, sizeof *p); }

void step_plan_free(StepPlan *p) {
  free(p->entries);
  free(p->tokens);
  free(p->positions);
  free(p->slots);
  free(p->entry_of);
  free(p->block_tables);
  step_plan_init(p);
}

typedef struct Planner {
  Sched *s;
  int budget;    /* tokens still allowed this step */
  int preempted; /* a sequence was preempted this step */
} Planner;

/* Allocates blocks so that seq can compute up to want more positions; returns how many it can (<= want,
 * 0 when not even one block could be had). Every block taken is needed by the positions returned. */
static int grow(Sched *s, Seq *seq, int want) {
  int bs = s->cfg.block_size;
  int have = seq->ntable * bs - seq->computed;
  while (have < want) {
    int id = kv_blocks_alloc(s->pool);
    if (id < 0) break;
    seq->table[seq->ntable++] = id;
    have += bs;
  }
  return have < want ? have : want;
}

static void add_decision(Planner *pl, Seq *seq, int n) {
  Sched *s = pl->s;
  s->dec[s->ndec++] = (Decision){seq, seq->computed, n};
  seq->planned = n;
  pl->budget -= n;
}

/* Stops victim (a running sequence): its decision in this step, if any, and all its blocks go; it waits
 * again at the front of the queue, keeping every token it has. */
static int preempt(Planner *pl, Seq *victim) {
  Sched *s = pl->s;
  for (int i = 0; i < s->ndec; i++)
    if (s->dec[i].seq == victim) {
      pl->budget += s->dec[i].n;
      memmove(&s->dec[i], &s->dec[i + 1], (size_t)(s->ndec - i - 1) * sizeof *s->dec);
      s->ndec--;
      break;
    }
  victim->planned = 0;
  sched_release_blocks(s, victim);
  victim->computed = 0;
  sched_remove_running(s, victim);
  victim->state = SEQ_WAITING;
  if (sched_push_waiting_front(s, victim)) return -1;
  s->st.preemptions++;
  pl->preempted = 1;
  return 0;
}

/* Schedules up to want positions of running seq, preempting the most recently admitted running sequence
 * while no block can be had; stops when seq itself was the one preempted. */
static int schedule_running(Planner *pl, Seq *seq, int want) {
  Sched *s = pl->s;
  for (;;) {
    int n = grow(s, seq, want);
    if (n > 0) {
      add_decision(pl, seq, n);
      return 0;
    }
    Seq *victim = s->running[s->nrunning - 1];
    if (preempt(pl, victim)) return -1;
    if (victim == seq) return 0;
  }
}

/* Admits waiting sequences in arrival order while the limits and the pool allow. */
static void admit(Planner *pl) {
  Sched *s = pl->s;
  int bs = s->cfg.block_size;
  while (s->nwaiting > 0 && s->nrunning < s->cfg.max_seqs && pl->budget > 0) {
    Seq *w = s->waiting[0];
    int m = w->no_prefix ? 0 : kv_blocks_lookup(s->pool, w->tok, w->len, (w->len - 1) / bs, w->table);
    w->ntable = m;
    w->computed = m * bs;
    int want = w->len - w->computed;
    int n = grow(s, w, want < pl->budget ? want : pl->budget);
    if (n == 0) {
      sched_release_blocks(s, w);
      w->computed = 0;
      return;
    }
    sched_pop_waiting_front(s);
    w->state = SEQ_RUNNING;
    w->admitted = ++s->admit_serial;
    s->running[s->nrunning++] = w;
    s->st.prefix_tokens_reused += (long)m * bs;
    add_decision(pl, w, n);
  }
}

static int reserve(Diag *d, void **p, int *cap, int need, size_t elem, const char *what) {
  if (need <= *cap) return 0;
  int n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void *q = mem_realloc(d, *p, (size_t)n * elem, what);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

/* Writes the decisions into out. */
static int materialize(Sched *s, StepPlan *out, Diag *d) {
  int ntok = 0, ntab = 0, bs = s->cfg.block_size;
  for (int i = 0; i < s->ndec; i++) {
    ntok += s->dec[i].n;
    ntab += s->dec[i].seq->ntable;
  }
  if (reserve(d, (void **)&out->entries, &out->cap_entries, s->ndec, sizeof *out->entries, "step plan") ||
      reserve(d, (void **)&out->block_tables, &out->cap_table, ntab, sizeof(int32_t), "step plan"))
    return -1;
  if (ntok > out->cap_tokens) {
    int cap = out->cap_tokens ? out->cap_tokens : 16;
    while (cap < ntok) cap *= 2;
    int32_t **arrays[4] = {&out->tokens, &out->positions, &out->slots, &out->entry_of};
    for (int a = 0; a < 4; a++) {
      int32_t *q = mem_realloc(d, *arrays[a], (size_t)cap * sizeof(int32_t), "step plan");
      if (!q) return -1;
      *arrays[a] = q;
    }
    out->cap_tokens = cap;
  }
  out->step = s->step;
  out->nentries = s->ndec;
  out->ntokens = ntok;
  out->ntable = ntab;
  out->max_table_len = 0;
  int t = 0, at = 0;
  for (int i = 0; i < s->ndec; i++) {
    const Decision *dc = &s->dec[i];
    const Seq *q = dc->seq;
    out->entries[i] = (StepEntry){q->id, dc->start, dc->n, t, at, q->ntable, dc->start + dc->n == q->len};
    memcpy(out->block_tables + at, q->table, (size_t)q->ntable * sizeof(int32_t));
    at += q->ntable;
    if (q->ntable > out->max_table_len) out->max_table_len = q->ntable;
    for (int k = 0; k < dc->n; k++, t++) {
      int pos = dc->start + k;
      out->tokens[t] = q->tok[pos];
      out->positions[t] = pos;
      out->slots[t] = q->table[pos / bs] * bs + pos % bs;
      out->entry_of[t] = i;
    }
  }
  return 0;
}

static int free_blocks(const Sched *s) {
  KvBlockStats st;
  kv_blocks_stats(s->pool, &st);
  return st.free;
}

int sched_plan_step(Sched *s, StepPlan *out, Diag *d) {
  if (s->plan_open) {
    diag_error(d, 0, 0, "scheduler: step %ld was planned but not committed", s->step);
    return -1;
  }
  Planner pl = {s, s->cfg.max_batch_tokens, 0};
  s->ndec = 0;
  /* Decode: every running sequence whose known tokens are all computed but the last. */
  for (int i = 0; i < s->nrunning; i++) {
    Seq *q = s->running[i];
    if (q->computed == q->len - 1 && schedule_running(&pl, q, 1)) goto oom;
  }
  /* Prefill chunks (new prompts, recomputes) of running sequences, oldest first. */
  for (int i = 0; i < s->nrunning && pl.budget > 0; i++) {
    Seq *q = s->running[i];
    if (q->planned || q->computed >= q->len - 1) continue;
    int want = q->len - q->computed;
    if (schedule_running(&pl, q, want < pl.budget ? want : pl.budget)) goto oom;
  }
  /* No admission after a preemption, so that a victim is not taken straight back. (Rarely matters: a
   * preemption happens only when no block is free or cached, and the victim's released blocks go to the
   * sequence that needed one and back to the victim's own prefix, leaving none for its next chunk.) */
  if (!pl.preempted) admit(&pl);
  if (s->ndec == 0 && (s->nrunning || s->nwaiting)) {
    diag_error(d, 0, 0,
               "scheduler bug: nothing could be scheduled although %d sequences run and %d wait (%d of %d blocks "
               "free)",
               s->nrunning, s->nwaiting, free_blocks(s), kv_blocks_nblocks(s->pool));
    return -1;
  }
  s->step++;
  if (materialize(s, out, d)) return -1;
  s->plan_open = s->ndec > 0;
  s->st.steps += s->ndec > 0;
  return 0;
oom:
  diag_error(d, 0, 0, "out of memory: scheduler waiting queue");
  return -1;
}
