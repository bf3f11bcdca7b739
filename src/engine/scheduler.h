/* Iteration-level continuous batching over the paged KV block pool (kv_blocks.h). The scheduler holds the
 * requests (sequences) and their block tables and decides, step by step, which token positions of which
 * sequences the model computes; it never runs a model and never samples: the engine runs each StepPlan and
 * hands back the tokens it sampled (sched_commit).
 *
 * A step (sched_plan_step): first every running sequence in decode state (all but its last known token
 * computed) gets its 1 token, in admission order; then running sequences with more uncomputed tokens
 * (a chunked prefill, or the recompute of a preempted one) get chunks, in admission order, up to
 * max_batch_tokens in all; then waiting sequences are admitted in arrival order while max_seqs, the token
 * budget and the free blocks allow (none in a step that preempted, so a victim is not taken straight back).
 * An admitted sequence first takes the longest chain of its full blocks found in the prefix cache and starts
 * computing after them; the lookup covers at most (len - 1) / block_size blocks, so at least its last known
 * token is always computed (its logits give the next token) and a step never writes into a shared block:
 * a fully cached prompt of a multiple of block_size tokens recomputes its last block in a block of its own.
 *
 * Blocks: a sequence holds ceil((computed + planned) / block_size) blocks. When one is needed and the pool
 * has none (no free block, no cached one to evict), the most recently admitted running sequence is preempted:
 * all its blocks are released (its registered full blocks stay cached for its recompute), it goes to the
 * front of the waiting queue with all its tokens (prompt and generated: generated tokens are kept, never
 * sampled again), and is recomputed when admitted again. sched_add refuses a sequence that could not fit in
 * the whole pool alone, so everything admitted can finish; a step that can schedule nothing while work
 * remains is reported as an error (a bug), never a hang.
 *
 * Full blocks are registered in the prefix cache when a commit completes them. Cancel and finish release a
 * sequence's blocks at once, also between plan and commit: the commit then skips that sequence's entry.
 *
 * Threads: none of these calls is thread-safe; the engine calls them all from one thread (or serializes
 * them), including adds and cancels that arrive while a step runs. */
#ifndef LATHE_SCHEDULER_H
#define LATHE_SCHEDULER_H
#include <stdint.h>
#include "../base/diag.h"
#include "kv_blocks.h"

typedef struct Sched Sched;

typedef enum { SEQ_WAITING, SEQ_RUNNING, SEQ_FINISHED } SeqState;
typedef enum { SEQ_NOT_FINISHED, SEQ_FINISH_LENGTH, SEQ_FINISH_STOP, SEQ_FINISH_CANCELLED } SeqFinish;
/* "running"...; "length", "stop", "cancelled", "" for SEQ_NOT_FINISHED. */
const char *seq_state_name(SeqState s);
const char *seq_finish_name(SeqFinish f);

typedef struct SchedConfig {
  int nblocks, block_size; /* the block pool */
  int max_batch_tokens;    /* tokens computed per step, all sequences together; >= max_seqs */
  int max_seqs;            /* running sequences at once */
  int max_context;         /* prompt + max_new of one sequence */
  int vocab_size;          /* token ids must lie in [0, vocab_size); 0: only >= 0 is checked */
} SchedConfig;

/* One sequence's part of a step: it computes positions [start, start + n), which are consecutive. */
typedef struct StepEntry {
  int seq;                 /* sequence id */
  int start, n;            /* positions */
  int first;               /* index of its first token in the plan's per-token arrays */
  int table_at, table_len; /* its block table: block_tables[table_at .. table_at + table_len) */
  /* sample: 1 when the entry ends at the sequence's last known token: the engine samples its next token from
   * the logits of the entry's last row (token first + n - 1) and passes it to sched_commit. */
  int sample;
} StepEntry;

typedef struct StepPlan {
  long step; /* which step this is; sched_commit takes only the plan of the last sched_plan_step */
  int nentries, ntokens;
  StepEntry *entries;
  /* Per token (ntokens each, entries' tokens in entry order): the token id, its position in its sequence,
   * its KV slot (block_table[pos / block_size] * block_size + pos % block_size) and its entry's index. */
  int32_t *tokens, *positions, *slots, *entry_of;
  int32_t *block_tables; /* every entry's block table, concatenated */
  int ntable, max_table_len;
  int cap_entries, cap_tokens, cap_table; /* allocated sizes */
} StepPlan;

void step_plan_init(StepPlan *p);
void step_plan_free(StepPlan *p);

typedef struct SchedStats {
  int running, waiting, finished; /* finished: every sequence that finished, forgotten ones included */
  int blocks_held, blocks_cached, blocks_free;
  long steps;
  long prefill_tokens;       /* computed tokens other than decode ones, recomputes included */
  long decode_tokens;        /* generated tokens computed as the 1 token of a sequence in decode state */
  long recomputed_tokens;    /* of prefill_tokens: positions computed again after a preemption */
  long prefix_tokens_reused; /* positions taken from the prefix cache at admission instead of computed */
  long preemptions, cancelled;
} SchedStats;

/* What the engine may read of one sequence; tokens and table stay valid until the next scheduler call. */
typedef struct SeqInfo {
  int id;
  SeqState state;
  SeqFinish finish;
  int prompt_len, len, max_new; /* len: known tokens, prompt and generated */
  int computed;                 /* tokens whose K/V are in its blocks */
  const int32_t *tokens;        /* len */
  const int32_t *table;         /* table_len block ids */
  int table_len;
} SeqInfo;

/* NULL with an error in d for a bad configuration. */
Sched *sched_new(const SchedConfig *cfg, Diag *d);
void sched_free(Sched *s);
const KvBlockPool *sched_pool(const Sched *s);

/* Queues a request (the prompt is copied); returns its id (0, 1, 2, ... in order of adding), or -1 with an
 * error in d: an empty prompt, max_new < 1, a token id out of range, prompt + max_new over max_context,
 * or more blocks than the pool has (ceil((n + max_new - 1) / block_size) > nblocks). */
int sched_add(Sched *s, const int32_t *prompt, int n, int max_new, Diag *d);
/* A waiting sequence takes nothing from the prefix cache at admission: it computes every position itself (an
 * embedding that pools every position's hidden state). -1 with an error for an unknown or admitted one. */
int sched_no_prefix(Sched *s, int id, Diag *d);
/* Finishes a waiting or running sequence now ("cancelled"; sched_finish with the engine's reason, e.g.
 * SEQ_FINISH_STOP for a stop string or end-of-sequence token it found) and releases its blocks at once.
 * -1 with an error for an unknown id or a sequence already finished. */
int sched_cancel(Sched *s, int id, Diag *d);
int sched_finish(Sched *s, int id, SeqFinish reason, Diag *d);

/* Plans the next step into out (its arrays are reused). out->nentries == 0 when nothing is left to do.
 * -1 with an error in d when the last plan was not committed, or when work remains but nothing could be
 * scheduled (a scheduler bug, reported instead of hanging). */
int sched_plan_step(Sched *s, StepPlan *out, Diag *d);
/* After the engine ran plan: marks its positions computed, registers the blocks it filled in the prefix
 * cache, appends new_tokens[i] to entry i's sequence for each entry with sample (the others' values are
 * ignored) and finishes the sequences that reached max_new ("length", also when that last token is one the
 * engine would stop at: the engine finishes with its own reason only sequences still running). -1 with an error in d,
 * changing nothing, for a plan that is not the latest uncommitted one or a sampled token out of range. */
int sched_commit(Sched *s, const StepPlan *plan, const int32_t *new_tokens, Diag *d);

/* 1 while a sequence waits or runs. */
int sched_has_work(const Sched *s);
/* -1 for an id never added or forgotten. */
int sched_seq(const Sched *s, int id, SeqInfo *out);
/* Drops a finished sequence's record (its tokens); its id is not reused. -1 with an error otherwise. */
int sched_forget(Sched *s, int id, Diag *d);
void sched_stats(const Sched *s, SchedStats *out);

/* Verifies the scheduler's invariants and the pool's (kv_blocks_check with every block table as the
 * holders): queues and states agree; a running sequence holds ceil((computed + planned) / block_size)
 * distinct blocks and has computed < len; every full computed block is registered with exactly the
 * sequence's tokens; a block held twice is such a registered block; waiting and finished sequences hold
 * none. 0, or -1 with the first violation in d. */
int sched_check(const Sched *s, Diag *d);
#endif
