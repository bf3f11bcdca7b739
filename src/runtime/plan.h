/* A plan: what a compile produces and `lathe run` executes. It owns the generated source, the
 * compiled module and the buffer table, and runs the kernels in order for given symbol values. */
#ifndef LATHE_PLAN_H
#define LATHE_PLAN_H
#include "../backend/backend.h"
#include "../code/launch.h"

typedef struct Plan Plan;

/* Compiles the code stage's source with backend b; the plan runs it by the launch table (borrowed: it
 * must outlive the plan). */
Plan *plan_new(const LaunchTable *lt, const char *source, Backend *b, Diag *d);
void plan_free(Plan *p);
/* Host buffers in the program's input order / output order, in each buffer's storage dtype and
 * row-major layout, sized by the shapes evaluated with env; a NULL output is not copied back. */
int plan_run(Plan *p, const SymEnv *env, void *const *inputs, void *const *outputs, Diag *d);
/* Runs it `iters` times after `warmup` runs and reports the median wall time of one run in ms
 * (inputs already on the device; excludes transfers). */
int plan_bench(Plan *p, const SymEnv *env, void *const *inputs, int warmup, int iters, double *median_ms, Diag *d);
/* The same runs, each run's milliseconds into times[0..iters-1] (in run order). */
int plan_bench_times(Plan *p, const SymEnv *env, void *const *inputs, int warmup, int iters, double *times, Diag *d);
/* Times kernels alone: launch-table slots slots[0..nslots) (a tuner's kernel and those it may absorb), after a
 * plan_run at the same sizes left their inputs in the device buffers, `warmup` untimed runs then `iters`, each
 * run's ms into times. On CUDA one graph of just those kernels per run, timed by device events; elsewhere the
 * wall clock of launching them to a sync. Temporaries that share memory with later kernels' may hold those
 * kernels' values by then: right for timing, not for reading results. */
int plan_bench_slots(Plan *p, const SymEnv *env, const int *slots, int nslots, int warmup, int iters, double *times,
                     Diag *d);
const char *plan_source(const Plan *p);
/* Gives program input `input` a device buffer that persists across runs, filled from host (zeros when
 * host is NULL): weights, and state such as KV caches that cache_write updates in place. plan_run and
 * plan_bench then ignore inputs[input]. Sizes are evaluated with env. */
int plan_bind_input(Plan *p, int input, const void *host, const SymEnv *env, Diag *d);
/* As plan_bind_input, but on the CPU backend the plan reads `host` itself (bytes long; it must outlive the
 * plan and stay unchanged): a memory-mapped weight is used where it lies, with no copy. Elsewhere it is
 * uploaded. */
int plan_bind_input_host(Plan *p, int input, const void *host, size_t bytes, const SymEnv *env, Diag *d);
/* Runs whose symbol `sym` has value `value` (decode steps: seq = 1) replay one recorded graph on
 * backends that offer it (CUDA graphs), updating only the kernels whose arguments changed; other runs
 * and other backends launch kernel by kernel. */
void plan_use_graphs(Plan *p, const char *sym, int64_t value);
/* Graph replay for every run whose `sym` is 1..max: one recorded graph per value (and choice of kernel
 * variants), up to 16, the least recently used replaced; such runs use the generated GEMMs, not a library's. */
void plan_use_graphs_upto(Plan *p, const char *sym, int64_t max);
/* How many runs replayed a recorded graph so far. */
long plan_graph_replays(const Plan *p);
/* Device bytes of the workspace (temporaries, outputs kept across runs, the tensor-core GEMMs' scratch). */
size_t plan_workspace_bytes(const Plan *p);
/* Whether the plan's prefill GEMMs run through the backend's library (cuBLASLt) rather than the
 * generated tensor-core kernels. */
int plan_gemm_library(const Plan *p);
/* LATHE_PROFILE=1: the report of the runs so far, headed by `what` (NULL: no report), after which the
 * counts start again (the rest is reported when the plan is freed); nothing when not profiling. */
void plan_profile_report(Plan *p, const char *what);
/* The device buffer holding program output `output` after the last run (until the next run), for
 * work that continues on the device (sampling); NULL if there has been no run. */
const void *plan_output_device(const Plan *p, int output);
/* Index of the program input named `name`, or -1. */
int plan_input_index(const Plan *p, const char *name);
#endif
