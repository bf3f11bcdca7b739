/* Internal to the plan runtime (plan*.c): the plan and the state of one run. */
#ifndef LATHE_PLAN_INTERNAL_H
#define LATHE_PLAN_INTERNAL_H
#include "plan.h"

/* Kernel arguments: the buffer parameters, then (CUDA) the symbol table's device pointer, then the
 * scratch where the kernel has one. */
#define ARG_STRIDE (LAUNCH_MAX_PARAMS + 2)

/* Everything one set of symbol values needs: device buffers and per-kernel arguments. */
typedef struct RunState {
  int nbufs;
  size_t *bytes;            /* by buffer (LaunchTable.bufs) */
  void **dev;               /* by buffer (LaunchTable.bufs) */
  void **args;              /* nkernels * ARG_STRIDE: buffers, then the symbol table when symbols are in memory */
  int *nargs;               /* per kernel: arguments passed */
  int64_t *syms;            /* nkernels * 16: by-value symbols (none when they are in memory) */
  int *nsyms;               /* per kernel: by-value symbols passed */
  const LaunchKernel **use; /* per kernel: the kernel or its variant (LaunchKernel.alt), chosen by the sizes */
  int any_variant;
  size_t *io_at;           /* per buffer: offset in the per-run block, 0 = not in it (offset 0 holds the symbols) */
  size_t io_used;          /* bytes of the block this run uploads */
  int64_t *grids;          /* nkernels */
  int64_t *pre_grids;      /* nkernels: grid of the chosen kernel's pre-pass (LaunchKernel.pre) */
  int64_t *need;           /* nkernels: scratch bytes of the chosen kernel */
  int64_t *lib_m;          /* nkernels: rows of the library GEMMs that replace the chosen kernel (LaunchKernel.lib),
                              0 = none (the kernel runs itself) */
  int64_t *epi_grids;      /* nkernels: grid of the library form's epilogue */
  unsigned char *skip_pre; /* nkernels: the pre-pass's planes are already in the scratch (plan.c) */
  int64_t graph_key;       /* value of the plan's graph symbol in this run (-1 if none) */
} RunState;

/* A kernel slot's profiled parts: the pre-pass, the kernel, the library GEMMs that replace it, the
 * library form's epilogue. */
enum { PROF_PRE, PROF_KERNEL, PROF_LIBRARY, PROF_EPILOGUE, PROF_PARTS };

#define IO_BYTES 4096 /* the per-run block: symbol table and small inputs */
#define IO_SMALL 256  /* inputs up to this size travel in it */

enum { PLAN_GRAPHS = 16 };
/* One recorded launch list: its key (the graph symbol's value and the variant choice), the graph, and the
 * arguments, symbols and grids its nodes were last given. */
typedef struct PlanGraph {
  int64_t key;
  uint64_t sig; /* the variants chosen, the library GEMMs' rows and where their operands lie */
  BackendGraph *graph;
  void **args;
  int64_t *syms, *grids, *pre_grids;
  int *node, *pre_node; /* kernel slot -> graph node of the kernel and of its pre-pass (-1: none) */
  long used;
} PlanGraph;

struct Plan {
  const LaunchTable *lt; /* borrowed: lives in the compilation's arena, which must outlive the plan */
  Backend *b;            /* borrowed */
  BackendModule *m;
  char *source;
  /* LATHE_PROFILE=1: device time per kernel slot and part (PROF_PARTS each), summed over runs
   * (graphs off), and the name of what ran as that part in the latest run */
  double *kernel_ms;
  const char **prof_name;
  int runs;
  /* LATHE_PROFILE=steps: where the wall time of graph-replayed runs goes (graphs on) */
  int step_profile, step_runs, step_updates;
  double step_prep_ms, step_update_ms, step_launch_ms, step_wait_ms, step_gpu_ms, step_out_ms;
  void **bound; /* per program input: persistent device buffer (weights, state) or NULL */
  void **ws;    /* per buffer: buffers kept across runs for non-bound inputs and outputs */
  size_t *ws_bytes;
  /* Temporaries share one arena, placed by liveness: two temporaries overlap in memory only if no
   * kernel runs while both are live. Offsets are planned for each buffer's capacity and re-planned
   * only when a buffer outgrows it (capacities grow geometrically as `past` grows). */
  int *first_use, *last_use; /* per buffer: kernel index range, -1 if unused */
  size_t *cap, *offset;      /* per buffer */
  void *arena;
  size_t arena_bytes;
  /* Graph replay: runs whose `graph_sym` equals `graph_key` (decode steps: seq = 1), or is at most
   * graph_upto (a batched plan's small steps), replay a recorded graph, one per value of the symbol and
   * choice of variants (up to PLAN_GRAPHS, the least recently used replaced); between replays only the nodes
   * whose arguments or grid changed are updated. */
  const char *graph_sym;
  int64_t graph_key, graph_upto;
  int64_t last_key;  /* the previous run's key and variants: a batched plan records a graph for a key */
  uint64_t last_sig; /* only when two runs in a row share it (a one-off mix of tokens runs one by one) */
  long graph_replays;
  int graph_library; /* graphs record library GEMMs (the backend can, and recording one has not failed) */
  PlanGraph graphs[PLAN_GRAPHS];
  long graph_clock;
  int graph_failed;
  size_t *bound_bytes;
  unsigned char *borrowed; /* per program input: bound[i] is the caller's host memory (plan_bind_input_host) */
  /* Where generated kernels read symbols from memory (code_symbols_in_memory): the program's symbol
   * values on the device, uploaded before each run that changes them, so a replayed graph's
   * arguments stay the same from one decode step to the next. */
  void *sym_table;
  int tensor_cores; /* the device runs bf16 mma.sync (CUDA, sm_80 or newer) */
  int gemm_library; /* the backend's library GEMM runs (cuBLASLt): tensor-core GEMMs that have a
                       library form (LaunchKernel.lib) use it; -1 = not asked yet */
  /* Scratch for kernels that ask for it (LaunchKernel.scratch: the tensor-core GEMM's bf16 copy of A), one
   * buffer for all of them since they run one after another; grown geometrically. */
  void *scratch;
  size_t scratch_bytes;
  /* plan_deps.c: per buffer and per kernel slot, the program symbols (bit j = lp->symbols[j]) its
   * sizes, grids and conditions depend on; and the symbol values of the last complete run. */
  uint64_t *dep_buf, *dep_kernel;
  int64_t *last_sym;
  uint64_t last_present;
  int have_last;
  RunState rs; /* arrays reused by every run (state_init) */
  /* Small per-run data (the symbol table, then inputs of at most IO_SMALL bytes: a decode step's token
   * and position) share one device block and go up in one copy: each copy is a synchronising driver
   * call, a few microseconds of a decode step. */
  char *io_dev;
  unsigned char *io_host;
  size_t io_syms; /* bytes at the block's start for the symbol table */
};

/* plan_memory.c: offsets of the temporaries in the shared arena (re-planned when one outgrows its
 * capacity) and their device pointers for this run. */
int plan_place_temporaries(Plan *p, RunState *s, Diag *d);
/* plan_deps.c: dependency masks (0 when out of memory); the symbols whose values differ from the last
 * complete run (all of them when there is none), with this run's values; remembering a run. */
int plan_deps_init(Plan *p);
uint64_t plan_changed_symbols(Plan *p, const SymEnv *env, int64_t *values, uint64_t *present);
void plan_remember_symbols(Plan *p, const int64_t *values, uint64_t present);
void plan_deps_free(Plan *p);
/* plan_launch.c: whether a run of graph symbol value `key` replays a graph; freeing a recorded one. */
int plan_graph_wanted(const Plan *p, int64_t key);
void plan_graph_free(Plan *p, PlanGraph *g);
/* plan_launch.c: the run's kernels, as one graph replay where possible, else one launch each. */
int plan_launch_all(Plan *p, RunState *s, Diag *d);
/* plan_launch.c: slots[0..n) alone (their pre-passes, kernels or library forms, in that order), `warmup` runs
 * then `iters` timed ones: one graph of them where the backend has graphs, timed by its device timers where
 * it has them (else the wall clock to a sync); each run's ms into times. */
int plan_time_slots(Plan *p, RunState *s, const int *slots, int n, int warmup, int iters, double *times, Diag *d);
/* LATHE_PROFILE=1 / =steps reports, printed when the plan is freed. */
void plan_print_profile(const Plan *p, const char *what);
void plan_print_step_profile(const Plan *p);
#endif
