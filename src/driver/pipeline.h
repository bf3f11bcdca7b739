/* The one pipeline: program text -> graph -> tensor -> loop -> tile -> kernel -> code.
 * Every entry point (the CLI, tests, benchmarks, later model builders) compiles through here. */
#ifndef LATHE_PIPELINE_H
#define LATHE_PIPELINE_H
#include "../code/code.h"
#include "../graph/graph.h"

typedef enum Stage { ST_GRAPH, ST_TENSOR, ST_LOOP, ST_TILE, ST_KERNEL, ST_CODE, ST_COUNT } Stage;
const char *stage_name(Stage s);
int stage_parse(const char *s, Stage *out);

/* Where schedules other than the defaults come from (the tuning database: tune/lookup.h). lookup gives kernel
 * k's schedule (1) or none (0, the default stays); either way `why` says where it came from, for --ir tile. */
/* lookup gets the kernel's default schedule in *s and returns 1 with *s replaced (why: where it came from), or
 * 0 to keep the default (why: the reason). */
typedef struct ScheduleSource {
  void *ctx;
  int (*lookup)(void *ctx, const LProgram *p, const LKernel *k, const TargetDesc *dev, MatmulPrecision mm, Schedule *s,
                char *why, size_t nwhy);
} ScheduleSource;

typedef struct Compilation {
  Arena *arena;
  ExprPool *pool;
  Target target;
  TargetDesc device; /* target_default(target) unless the caller sets it (a backend's own, --device) */
  FusionPolicy fusion;
  MatmulPrecision matmul;          /* MM_HIGH unless the caller sets it before compiling */
  int batch_invariant;             /* tile_from_loop's batch-invariant schedules */
  const ScheduleSource *schedules; /* NULL: every kernel's default schedule (no database consulted) */
  Graph *graph;
  TProgram *tensor;
  LProgram *loop;
  TileProgram *tile;
  KProgram *kernel;
  StrBuf code;
  const LaunchTable *launch; /* with `code`: what the runtime takes (plan_new) */
} Compilation;

/* The default fusion choices for a target (fusion: NULL in compilation_new). */
FusionPolicy fusion_policy_for(Target t);
Compilation *compilation_new(Target t, const FusionPolicy *fusion);
void compilation_free(Compilation *c);
/* Parses src and lowers it through stage `upto` (inclusive). 0 with diag on error. */
int compile_source(Compilation *c, const char *src, Stage upto, Diag *d);
/* Lowers an already-built graph (c->graph) through stage `upto`. */
int compile_graph(Compilation *c, Stage upto, Diag *d);
/* Lowers c->loop (compiled through at least ST_LOOP) again with the given schedules, one per kernel (a
 * tuner's candidates), through `upto`; replaces c's tile, kernel and code stages. */
int compile_schedules(Compilation *c, const Schedule *given, Stage upto, Diag *d);
/* The printed form of a stage that was reached. */
void print_stage(StrBuf *b, const Compilation *c, Stage s);
#endif
