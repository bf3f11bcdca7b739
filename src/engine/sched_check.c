/* sched_check (scheduler.h): the scheduler's invariants, checked by the tests after every step. */
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "sched_internal.h"

static int check_seq_blocks(const Sched *s, const Seq *q, Diag *d) {
  const KvBlockPool *p = s->pool;
  int bs = s->cfg.block_size;
  if (q->computed < 0 || q->computed >= q->len || q->planned < 0 || q->computed + q->planned > q->len) {
    diag_error(d, 0, 0, "scheduler: sequence %d has computed %d, planned %d of %d tokens", q->id, q->computed,
               q->planned, q->len);
    return -1;
  }
  int want = (q->computed + q->planned + bs - 1) / bs;
  if (q->ntable != want) {
    diag_error(d, 0, 0, "scheduler: sequence %d holds %d blocks for %d positions, not %d", q->id, q->ntable,
               q->computed + q->planned, want);
    return -1;
  }
  for (int k = 0; k < q->ntable; k++) {
    int id = q->table[k], full = (k + 1) * bs <= q->computed;
    for (int j = 0; j < k; j++)
      if (q->table[j] == id) {
        diag_error(d, 0, 0, "scheduler: sequence %d holds block %d twice (at %d and %d)", q->id, id, j, k);
        return -1;
      }
    const int32_t *reg = kv_blocks_tokens(p, id);
    if (full != (reg != NULL)) {
      diag_error(d, 0, 0, "scheduler: block %d (%d of sequence %d) is %sfull but %sregistered", id, k, q->id,
                 full ? "" : "not ", reg ? "" : "not ");
      return -1;
    }
    if (reg && memcmp(reg, q->tok + (size_t)k * bs, (size_t)bs * sizeof *reg)) {
      diag_error(d, 0, 0, "scheduler: block %d (%d of sequence %d) is registered with other tokens", id, k, q->id);
      return -1;
    }
    if (kv_blocks_refcount(p, id) > 1 && !reg) {
      diag_error(d, 0, 0, "scheduler: block %d is shared but not a registered prefix block", id);
      return -1;
    }
  }
  return 0;
}

static int check_queues(const Sched *s, Diag *d) {
  int nrun = 0, nwait = 0, nfin = 0, forgotten = 0;
  for (int i = 0; i < s->nseqs; i++) {
    const Seq *q = s->seqs[i];
    if (!q) {
      forgotten++;
      continue;
    }
    nrun += q->state == SEQ_RUNNING;
    nwait += q->state == SEQ_WAITING;
    nfin += q->state == SEQ_FINISHED;
    int ngen = q->len - q->prompt_len;
    if (ngen < 0 || ngen > q->max_new || (q->state != SEQ_FINISHED && ngen == q->max_new) ||
        (q->state != SEQ_RUNNING && (q->ntable || q->planned || q->computed))) {
      diag_error(d, 0, 0, "scheduler: sequence %d (%s) has %d of %d new tokens, %d blocks, computed %d", q->id,
                 seq_state_name(q->state), ngen, q->max_new, q->ntable, q->computed);
      return -1;
    }
  }
  if (nrun != s->nrunning || nwait != s->nwaiting || nfin + forgotten != s->nfinished || nrun > s->cfg.max_seqs) {
    diag_error(d, 0, 0, "scheduler: queues hold %d running, %d waiting, %d finished; the sequences say %d, %d, %d",
               s->nrunning, s->nwaiting, s->nfinished, nrun, nwait, nfin + forgotten);
    return -1;
  }
  for (int i = 0; i < s->nrunning; i++)
    if (s->running[i]->state != SEQ_RUNNING || (i && s->running[i]->admitted <= s->running[i - 1]->admitted)) {
      diag_error(d, 0, 0, "scheduler: running queue out of admission order at %d", i);
      return -1;
    }
  for (int i = 0; i < s->nwaiting; i++)
    if (s->waiting[i]->state != SEQ_WAITING) {
      diag_error(d, 0, 0, "scheduler: sequence %d in the waiting queue is %s", s->waiting[i]->id,
                 seq_state_name(s->waiting[i]->state));
      return -1;
    }
  return 0;
}

int sched_check(const Sched *s, Diag *d) {
  if (check_queues(s, d)) return -1;
  const int32_t **tables = mem_calloc(d, (size_t)s->cfg.max_seqs, sizeof *tables, "scheduler check");
  int *lens = tables ? mem_calloc(d, (size_t)s->cfg.max_seqs, sizeof *lens, "scheduler check") : NULL;
  int rc = lens ? 0 : -1;
  for (int i = 0; i < s->nrunning && !rc; i++) {
    rc = check_seq_blocks(s, s->running[i], d);
    tables[i] = s->running[i]->table;
    lens[i] = s->running[i]->ntable;
  }
  if (!rc) rc = kv_blocks_check(s->pool, (const int32_t *const *)tables, lens, s->nrunning, d);
  free(tables);
  free(lens);
  return rc;
}
