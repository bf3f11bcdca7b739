/* The scheduler's state, shared by scheduler.c (requests, commit, queries, checks) and sched_plan.c
 * (building a step). Not part of the engine's API. */
#ifndef LATHE_SCHED_INTERNAL_H
#define LATHE_SCHED_INTERNAL_H
#include "scheduler.h"

typedef struct Seq {
  int id;
  SeqState state;
  SeqFinish finish;
  int32_t *tok; /* prompt then generated tokens; room for prompt_len + max_new */
  int len, prompt_len, max_new;
  int computed;   /* positions whose K/V are in its blocks */
  int high_water; /* the most positions ever computed (recomputes after a preemption are counted) */
  int planned;    /* positions in the uncommitted plan, 0 otherwise */
  int32_t *table; /* block ids; room for every block the sequence can ever need */
  int ntable;
  long admitted; /* admission serial: larger is more recent */
  int no_prefix; /* computes every position itself (sched_no_prefix) */
} Seq;

/* One sequence's share of the step being planned. */
typedef struct Decision {
  Seq *seq;
  int start, n;
} Decision;

struct Sched {
  SchedConfig cfg;
  KvBlockPool *pool;
  Seq **seqs; /* by id; NULL once forgotten */
  int nseqs, cap_seqs;
  Seq **running; /* admission order, at most max_seqs */
  int nrunning;
  Seq **waiting; /* front first */
  int nwaiting, cap_waiting;
  int nfinished;
  long step, admit_serial;
  int plan_open; /* a plan was made and not yet committed */
  SchedStats st;
  Decision *dec; /* planning scratch, max_seqs */
  int ndec;
};

/* Releases every block of seq, last first (tail blocks then leave the LRU first). */
void sched_release_blocks(Sched *s, Seq *seq);
void sched_remove_running(Sched *s, Seq *seq);
/* Puts seq at the front of the waiting queue (a preempted sequence). -1 when memory runs out. */
int sched_push_waiting_front(Sched *s, Seq *seq);
void sched_pop_waiting_front(Sched *s);
#endif
