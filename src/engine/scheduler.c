/* The scheduler's requests and bookkeeping (scheduler.h): adding, cancelling and finishing sequences, the
 * commit after a step, queries, statistics and the invariant check. Planning is in sched_plan.c. */
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "sched_internal.h"

const char *seq_state_name(SeqState st) {
  return st == SEQ_WAITING ? "waiting" : st == SEQ_RUNNING ? "running" : "finished";
}

const char *seq_finish_name(SeqFinish f) {
  switch (f) {
  case SEQ_FINISH_LENGTH: return "length";
  case SEQ_FINISH_STOP: return "stop";
  case SEQ_FINISH_CANCELLED: return "cancelled";
  default: return "";
  }
}

Sched *sched_new(const SchedConfig *cfg, Diag *d) {
  const SchedConfig *c = cfg;
  if (c->max_seqs < 1 || c->max_batch_tokens < c->max_seqs || c->max_context < 2 || c->vocab_size < 0) {
    diag_error(d, 0, 0,
               "scheduler: needs max_seqs >= 1 (got %d), max_batch_tokens >= max_seqs (got %d), max_context >= 2 "
               "(got %d) and vocab_size >= 0 (got %d)",
               c->max_seqs, c->max_batch_tokens, c->max_context, c->vocab_size);
    return NULL;
  }
  Sched *s = mem_calloc(d, 1, sizeof *s, "scheduler");
  if (!s) return NULL;
  s->cfg = *c;
  s->pool = kv_blocks_new(c->nblocks, c->block_size, d);
  s->running = s->pool ? mem_calloc(d, (size_t)c->max_seqs, sizeof *s->running, "scheduler") : NULL;
  s->dec = s->running ? mem_calloc(d, (size_t)c->max_seqs, sizeof *s->dec, "scheduler") : NULL;
  if (!s->dec) {
    sched_free(s);
    return NULL;
  }
  return s;
}

static void seq_free(Seq *q) {
  if (!q) return;
  free(q->tok);
  free(q->table);
  free(q);
}

void sched_free(Sched *s) {
  if (!s) return;
  for (int i = 0; i < s->nseqs; i++) seq_free(s->seqs[i]);
  free(s->seqs);
  free(s->running);
  free(s->waiting);
  free(s->dec);
  kv_blocks_free(s->pool);
  free(s);
}

const KvBlockPool *sched_pool(const Sched *s) { return s->pool; }

static int grow_array(Diag *d, void **p, int *cap, int need, size_t elem, const char *what) {
  if (need <= *cap) return 0;
  int n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void *q = mem_realloc(d, *p, (size_t)n * elem, what);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

int sched_add(Sched *s, const int32_t *prompt, int n, int max_new, Diag *d) {
  const SchedConfig *c = &s->cfg;
  if (n < 1 || max_new < 1) {
    diag_error(d, 0, 0, "scheduler: a request needs a prompt of at least 1 token (got %d) and max_new >= 1 (got %d)", n,
               max_new);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (prompt[i] < 0 || (c->vocab_size && prompt[i] >= c->vocab_size)) {
      diag_error(d, 0, 0, "scheduler: prompt token %d is %d, not a token id (vocabulary of %d)", i, prompt[i],
                 c->vocab_size);
      return -1;
    }
  if ((long)n + max_new > c->max_context) {
    diag_error(d, 0, 0, "scheduler: prompt of %d tokens + %d new ones exceeds the context limit of %d", n, max_new,
               c->max_context);
    return -1;
  }
  /* The last sampled token is never computed: a sequence holds at most n + max_new - 1 positions. */
  int need = (n + max_new - 1 + c->block_size - 1) / c->block_size;
  if (need > c->nblocks) {
    diag_error(d, 0, 0,
               "scheduler: prompt of %d tokens + %d new ones needs %d KV blocks of %d tokens, the pool has only %d", n,
               max_new, need, c->block_size, c->nblocks);
    return -1;
  }
  if (grow_array(d, (void **)&s->seqs, &s->cap_seqs, s->nseqs + 1, sizeof *s->seqs, "scheduler") ||
      grow_array(d, (void **)&s->waiting, &s->cap_waiting, s->nwaiting + 1, sizeof *s->waiting, "scheduler"))
    return -1;
  Seq *q = mem_calloc(d, 1, sizeof *q, "scheduler sequence");
  if (!q) return -1;
  q->tok = mem_alloc(d, (size_t)(n + max_new) * sizeof *q->tok, "scheduler sequence tokens");
  q->table = q->tok ? mem_alloc(d, (size_t)need * sizeof *q->table, "scheduler block table") : NULL;
  if (!q->table) {
    seq_free(q);
    return -1;
  }
  memcpy(q->tok, prompt, (size_t)n * sizeof *q->tok);
  q->id = s->nseqs;
  q->len = q->prompt_len = n;
  q->max_new = max_new;
  q->state = SEQ_WAITING;
  s->seqs[s->nseqs++] = q;
  s->waiting[s->nwaiting++] = q;
  return q->id;
}

void sched_release_blocks(Sched *s, Seq *q) {
  for (int i = q->ntable - 1; i >= 0; i--) kv_blocks_release(s->pool, q->table[i], NULL);
  q->ntable = 0;
}

void sched_remove_running(Sched *s, Seq *q) {
  for (int i = 0; i < s->nrunning; i++)
    if (s->running[i] == q) {
      memmove(&s->running[i], &s->running[i + 1], (size_t)(s->nrunning - i - 1) * sizeof *s->running);
      s->nrunning--;
      return;
    }
}

int sched_push_waiting_front(Sched *s, Seq *q) {
  if (grow_array(NULL, (void **)&s->waiting, &s->cap_waiting, s->nwaiting + 1, sizeof *s->waiting, "scheduler"))
    return -1;
  memmove(&s->waiting[1], &s->waiting[0], (size_t)s->nwaiting * sizeof *s->waiting);
  s->waiting[0] = q;
  s->nwaiting++;
  return 0;
}

void sched_pop_waiting_front(Sched *s) {
  memmove(&s->waiting[0], &s->waiting[1], (size_t)(s->nwaiting - 1) * sizeof *s->waiting);
  s->nwaiting--;
}

static Seq *find_seq(const Sched *s, int id) { return id >= 0 && id < s->nseqs ? s->seqs[id] : NULL; }

static void finish(Sched *s, Seq *q, SeqFinish reason) {
  sched_release_blocks(s, q);
  if (q->state == SEQ_RUNNING) sched_remove_running(s, q);
  for (int i = 0; q->state == SEQ_WAITING && i < s->nwaiting; i++)
    if (s->waiting[i] == q) {
      memmove(&s->waiting[i], &s->waiting[i + 1], (size_t)(s->nwaiting - i - 1) * sizeof *s->waiting);
      s->nwaiting--;
      break;
    }
  q->state = SEQ_FINISHED;
  q->finish = reason;
  q->planned = q->computed = 0; /* its K/V are gone with its blocks */
  s->nfinished++;
  if (reason == SEQ_FINISH_CANCELLED) s->st.cancelled++;
}

int sched_finish(Sched *s, int id, SeqFinish reason, Diag *d) {
  Seq *q = find_seq(s, id);
  if (!q || q->state == SEQ_FINISHED) {
    diag_error(d, 0, 0, "scheduler: cannot finish sequence %d: %s", id, q ? "it has finished already" : "no such id");
    return -1;
  }
  if (reason != SEQ_FINISH_LENGTH && reason != SEQ_FINISH_STOP && reason != SEQ_FINISH_CANCELLED) {
    diag_error(d, 0, 0, "scheduler: %d is not a reason to finish sequence %d", (int)reason, id);
    return -1;
  }
  finish(s, q, reason);
  return 0;
}

int sched_cancel(Sched *s, int id, Diag *d) { return sched_finish(s, id, SEQ_FINISH_CANCELLED, d); }

int sched_no_prefix(Sched *s, int id, Diag *d) {
  Seq *q = find_seq(s, id);
  if (!q || q->state != SEQ_WAITING || q->computed) {
    diag_error(d, 0, 0, "scheduler: sequence %d is not waiting to be admitted", id);
    return -1;
  }
  q->no_prefix = 1;
  return 0;
}

/* The entry's sequence when the commit applies to it: still running with this very entry planned. */
static Seq *entry_seq(const Sched *s, const StepEntry *e) {
  Seq *q = find_seq(s, e->seq);
  return q && q->state == SEQ_RUNNING && q->planned == e->n && q->computed == e->start ? q : NULL;
}

/* Registers seq's blocks that the positions [from, computed) completed, each after the one before it. */
static int register_full_blocks(Sched *s, Seq *q, int from, Diag *d) {
  int bs = s->cfg.block_size;
  for (int k = from / bs; k < q->computed / bs; k++) {
    if (kv_blocks_is_registered(s->pool, q->table[k])) continue;
    int id = kv_blocks_register(s->pool, q->table[k], k ? q->table[k - 1] : -1, q->tok + (size_t)k * bs, d);
    if (id < 0) return -1;
    q->table[k] = id;
  }
  return 0;
}

int sched_commit(Sched *s, const StepPlan *plan, const int32_t *new_tokens, Diag *d) {
  if (!s->plan_open || plan->step != s->step) {
    diag_error(d, 0, 0, "scheduler: commit of step %ld, but the open step is %s%ld", plan->step,
               s->plan_open ? "" : "none, the last was ", s->step);
    return -1;
  }
  const SchedConfig *c = &s->cfg;
  for (int i = 0; i < plan->nentries; i++) {
    const StepEntry *e = &plan->entries[i];
    int t = new_tokens ? new_tokens[i] : -1;
    if (e->sample && entry_seq(s, e) && (t < 0 || (c->vocab_size && t >= c->vocab_size))) {
      diag_error(d, 0, 0, "scheduler: sampled token %d of sequence %d (entry %d) is not a token id", t, e->seq, i);
      return -1;
    }
  }
  for (int i = 0; i < plan->nentries; i++) {
    const StepEntry *e = &plan->entries[i];
    Seq *q = entry_seq(s, e);
    if (!q) continue; /* cancelled or finished since the plan */
    int decode = e->n == 1 && e->start == q->len - 1 && e->start >= q->prompt_len;
    if (decode) s->st.decode_tokens++;
    else s->st.prefill_tokens += e->n;
    int redone = (q->high_water < e->start + e->n ? q->high_water : e->start + e->n) - e->start;
    if (redone > 0) s->st.recomputed_tokens += redone;
    q->computed += e->n;
    q->planned = 0;
    if (q->computed > q->high_water) q->high_water = q->computed;
    if (register_full_blocks(s, q, e->start, d)) return -1;
    if (!e->sample) continue;
    q->tok[q->len++] = new_tokens[i];
    if (q->len - q->prompt_len == q->max_new) finish(s, q, SEQ_FINISH_LENGTH);
  }
  s->plan_open = 0;
  return 0;
}

int sched_has_work(const Sched *s) { return s->nrunning > 0 || s->nwaiting > 0; }

int sched_seq(const Sched *s, int id, SeqInfo *out) {
  const Seq *q = find_seq(s, id);
  if (!q) return -1;
  *out = (SeqInfo){q->id,      q->state,    q->finish, q->prompt_len, q->len,
                   q->max_new, q->computed, q->tok,    q->table,      q->ntable};
  return 0;
}

int sched_forget(Sched *s, int id, Diag *d) {
  Seq *q = find_seq(s, id);
  if (!q || q->state != SEQ_FINISHED) {
    diag_error(d, 0, 0, "scheduler: cannot forget sequence %d: %s", id, q ? "it has not finished" : "no such id");
    return -1;
  }
  seq_free(q);
  s->seqs[id] = NULL;
  return 0;
}

void sched_stats(const Sched *s, SchedStats *out) {
  KvBlockStats b;
  kv_blocks_stats(s->pool, &b);
  *out = s->st;
  out->running = s->nrunning;
  out->waiting = s->nwaiting;
  out->finished = s->nfinished;
  out->blocks_held = b.held;
  out->blocks_cached = b.cached;
  out->blocks_free = b.free;
}
