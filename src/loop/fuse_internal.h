/* Internal to the loop stage's fusion (fuse.c builds one kernel, fuse_fixpoint.c finds the realized set).
 *
 * While the realized set is being found, a load names a *virtual* buffer that does not change when other
 * nodes are realized: inputs and outputs have their final ids, the temporary of tensor node i is
 * `vbuf_temp(b, i)`. The final ids (temporaries numbered in node order after the outputs) are given once
 * the set is stable, so a kernel built in an earlier attempt stays valid as long as nothing it reached
 * was realized since. */
#ifndef LATHE_FUSE_INTERNAL_H
#define LATHE_FUSE_INTERNAL_H
#include "loop.h"

#define MAX_COSTLY 64
/* Longest chain of tensor nodes inlined below a kernel's root (a map of a map of ...): the node that
 * would be the next one is realized instead, so the expansion's recursion and the depth of every kernel
 * expression stay bounded however long the program is (a transformer reaches 14). */
#define FUSE_MAX_DEPTH 64

typedef struct MemoEntry {
  unsigned stamp; /* the build it belongs to (entries of other builds are empty) */
  int node;
  int nidx;
  Expr *idx[LT_MAX_RANK];
  Expr *value;
} MemoEntry;

typedef struct PhaseKey {
  int node;
  Expr *idx[LT_MAX_RANK];
} PhaseKey;

typedef struct Builder {
  const TProgram *t;
  ExprPool *pool;
  const FusionPolicy *pol;
  char *realized;         /* per tensor node */
  int *node_buf;          /* per tensor node: virtual buffer holding its value, or -1 */
  const DType *buf_dtype; /* per virtual buffer */
  int temp_base;          /* virtual id of node 0's temporary (inputs + outputs) */
  int *expanded_by;       /* per tensor node: the kernel that inlined its reduction-bearing value, or -1 */
  int cur_kernel;
  /* the kernel being built */
  LKernel *k;
  unsigned outer_mask; /* vars usable by a phase index at the current nesting (output vars) */
  int in_phase;        /* expanding a reduction body */
  struct {
    int node;
    uint64_t vars;
  } costly[MAX_COSTLY]; /* transcendental maps inlined into reduction bodies, with the vars they use */
  int ncostly;
  int shared_candidate; /* outermost multi-input node shared by two kernels, to get a buffer, or -1 */
  int shared_acc;       /* outermost such node that has several consumers in the graph, or -1 */
  int *consumers;       /* per tensor node: distinct computing consumers, looking through views
                           (program outputs count as one) */
  int override_locked;  /* the nest-conflict realization settled on a node with several consumers */
  int locked_node;      /* that node */
  int nest_conflict;    /* the pending realization is a reduction read inside another reduction's loop */
  PhaseKey keys[L_MAX_PHASES];
  /* (node, index) -> value inside the kernel being built: open addressing, cleared by bumping `stamp` */
  MemoEntry *memo;
  unsigned memo_cap, memo_used, stamp;
  /* What the build depends on, for reusing it in later attempts: every node it reached (whose
   * realization it read) and every node it marked in expanded_by. */
  unsigned *seen; /* per tensor node: the stamp of the last build that reached it */
  int *reached, nreached, capreached;
  int *tracked, ntracked, captracked;
  int depth;        /* nodes being expanded (recursion depth of expand) */
  long builds;      /* kernel builds done (statistics for tests and benchmarks) */
  int want_realize; /* node to realize before retrying, or -1 */
  int fail;         /* set with the diag on hard errors */
  Diag *d;
} Builder;

static inline int vbuf_temp(const Builder *b, int node) { return b->temp_base + node; }

/* fuse.c: builds the kernel computing `root` into virtual buffer `out_buf` (of dtype out_dtype and rank
 * out_rank), or copying buffer copy_from (>= 0) into it. Returns 1 on success, 0 if a node must be
 * realized first (b->want_realize) or on error (b->fail). */
int fuse_build_kernel(Builder *b, LKernel *k, int root, int out_buf, DType out_dtype, int out_rank, int copy_from);
/* For each node, how many different non-view nodes read it, directly or through views. */
int *fuse_count_consumers(const TProgram *t);
/* Names the kernel's variables i*, j*, r* (parallel, inner, reduction). */
void fuse_name_vars(LProgram *p, LKernel *k);
const char *fuse_kernel_base_name(const TNode *n);
#endif
