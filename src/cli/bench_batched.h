/* lathe bench --concurrency: the batched engine's throughput and latency (bench_batched.c). */
#ifndef LATHE_CLI_BENCH_BATCHED_H
#define LATHE_CLI_BENCH_BATCHED_H
#include "../generate/model.h"

typedef struct BatchedBenchArgs {
  int concurrency, requests; /* requests running at once at most; requests in all */
  int prompt_lo, prompt_hi, gen_lo, gen_hi;
  int shared_prefix;    /* tokens every prompt starts with */
  double arrival_rate;  /* requests per second (Poisson); 0: all at once */
  int max_batch_tokens; /* the engine's token budget per step */
  uint64_t seed;
  int json;
} BatchedBenchArgs;

/* "N" or "MIN-MAX" for flag; 0 after reporting a usage error. */
int bench_range_parse(const char *s, const char *flag, int *lo, int *hi);
/* "all" (rate 0) or "poisson:RATE". */
int bench_arrivals_parse(const char *s, double *rate);
/* Runs the requests through an engine over m (loaded for batched steps) and prints the report. */
int bench_batched(Model *m, const BatchedBenchArgs *a, const char *name, Diag *d);
#endif
