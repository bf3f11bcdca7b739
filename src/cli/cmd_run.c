/* lathe run: compile, run on random inputs, optionally check against the reference and time it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../driver/execute.h"
#include "../base/mem.h"
#include "../tune/lookup.h"
#include "cli.h"
#include "options.h"

typedef struct RunOpts {
  const char *inline_text, *path, *target;
  int check, bench, iters, warmup;
  uint64_t seed;
  SymEnv env;
  int fuse_recompute, no_fuse, no_tune;
  MatmulPrecision matmul;
} RunOpts;

static int parse_int(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

int cli_add_dim(void *dest, const char *name, const char *spec) {
  SymEnv *env = dest;
  const char *eq = strchr(spec, '=');
  long long v;
  if (!eq || eq == spec || !parse_int(eq + 1, 0, (1LL << 40), &v)) {
    report_msg("%s expects NAME=N with N >= 0, got '%s'", name, spec);
    return 0;
  }
  if (env->n >= 16) {
    report_msg("too many %s values (at most 16)", name);
    return 0;
  }
  symenv_set(env, xstrndup(spec, (size_t)(eq - spec), "a --dim name"), v);
  return 1;
}

/* 1 to go on, 0 after a usage error, 2 after printing the help */
static int parse_args(int argc, char **argv, RunOpts *o) {
  memset(o, 0, sizeof *o);
  o->target = "cpu";
  o->iters = 50;
  o->warmup = 5;
  int seed = 1;
  const char *matmul = NULL;
  Opt opts[] = {
      {"-e", NULL, OPT_STR, "PROGRAM", "the program's text (instead of a FILE)", &o->inline_text},
      {"--target", NULL, OPT_STR, "cpu|cuda|auto", "where to run", &o->target},
      {"--dim", NULL, OPT_CALL, "NAME=N", "the value of a symbolic dimension (repeat for each)", &o->env,
       .call = cli_add_dim},
      {"--seed", NULL, OPT_INT, "N", "the seed of the random inputs", &seed, 1, 1000000000},
      {"--check", NULL, OPT_FLAG, NULL, "compare every output with a float64 reference (exit 1 on a mismatch)",
       &o->check},
      {"--bench", NULL, OPT_FLAG, NULL, "report the median time of the compiled program", &o->bench},
      {"--iters", NULL, OPT_INT, "N", "timed runs of --bench", &o->iters, 1, 1000000000},
      {"--warmup", NULL, OPT_INT, "N", "untimed runs before --bench's", &o->warmup, 0, 1000000000},
      {"--fuse-recompute", NULL, OPT_FLAG, NULL, "allow fusions that recompute a reduction", &o->fuse_recompute},
      {"--no-tune", NULL, OPT_FLAG, NULL, "the default schedules, ignoring the tuning database", &o->no_tune},
      {"--no-fuse", NULL, OPT_FLAG, NULL, "one kernel per reduction (no reduction fusion)", &o->no_fuse},
      {"--matmul-precision", NULL, OPT_STR, "high|highest|medium",
       "tensor-core GEMMs on CUDA (see lathe generate "
       "--help)",
       &matmul, .def = "high"},
  };
  CmdSpec spec = {"run",
                  "(-e PROGRAM | FILE.lt) [options]",
                  "Compile a tensor program and run it on random inputs; print its outputs, or check them, or time\n"
                  "it.",
                  opts,
                  sizeof opts / sizeof opts[0],
                  "FILE",
                  &o->path,
                  NULL};
  int r = opts_parse(&spec, argc, argv);
  if (r != OPTS_OK) return r == OPTS_HELP ? 2 : 0;
  o->seed = (uint64_t)seed;
  if (!matmul_option(matmul, &o->matmul)) return 0;
  if (!o->bench && (opts_seen(&spec, "--iters") || opts_seen(&spec, "--warmup"))) {
    report_msg("%s applies to --bench only", opts_seen(&spec, "--iters") ? "--iters" : "--warmup");
    return 0;
  }
  return 1;
}

static void free_env_names(SymEnv *env) {
  for (int i = 0; i < env->n; i++) free((char *)env->names[i]);
}

/* Every --dim must name a symbol of the program, and every symbol needs a value. */
static int check_dims(const Graph *g, const SymEnv *env) {
  for (int i = 0; i < env->n; i++) {
    int known = 0;
    for (int s = 0; s < g->nsymbols; s++) known |= !strcmp(g->symbols[s], env->names[i]);
    if (!known) {
      report_msg("--dim %s: the program has no symbolic dimension named '%s'", env->names[i], env->names[i]);
      return 0;
    }
  }
  for (int s = 0; s < g->nsymbols; s++) {
    int64_t v;
    if (!symenv_get(env, g->symbols[s], &v)) {
      report_msg("symbolic dimension '%s' has no value; pass --dim %s=N", g->symbols[s], g->symbols[s]);
      return 0;
    }
  }
  return 1;
}

static void print_output(const char *name, const HostTensor *t) {
  printf("%s: %s[", name, dtype_name(t->dtype));
  for (int i = 0; i < t->rank; i++) printf("%s%lld", i ? "," : "", (long long)t->dims[i]);
  printf("] = [");
  int64_t n = t->numel < 8 ? t->numel : 8;
  for (int64_t i = 0; i < n; i++) {
    /* integers exactly (a double holds only 53 bits) */
    if (t->dtype == DT_I64) printf("%s%lld", i ? ", " : "", (long long)((const int64_t *)t->data)[i]);
    else if (t->dtype == DT_I32) printf("%s%d", i ? ", " : "", ((const int32_t *)t->data)[i]);
    else printf("%s%.6g", i ? ", " : "", host_get(t, i));
  }
  printf("%s]\n", t->numel > n ? ", ..." : "");
}

int cmd_run(int argc, char **argv) {
  RunOpts o;
  int parsed = parse_args(argc, argv, &o);
  if (parsed != 1) {
    free_env_names(&o.env);
    return parsed == 2 ? EXIT_OK : EXIT_ERROR;
  }
  ProgramArg prog;
  if (!program_arg_load(&prog, o.inline_text, o.path)) {
    free_env_names(&o.env);
    return EXIT_ERROR;
  }
  Diag d = {0};
  Target target = TARGET_CPU;
  Backend *be = open_backend(o.target, &target, &d);
  FusionPolicy fusion = fusion_policy_for(target);
  if (o.fuse_recompute) fusion.allow_recompute = 1;
  if (o.no_fuse) fusion.fuse_reductions = 0;
  Compilation *c = compilation_new(target, &fusion);
  c->matmul = o.matmul;
  if (be) c->device = be->target; /* schedules for the device the plan runs on */
  Execution x = {0};
  int rc = EXIT_ERROR;
  TuneLookup tl;
  int tuned = be && cli_use_tuning(c, &tl, o.no_tune, &o.env);
  if (!be) {
    report(&d, NULL);
    goto done;
  }
  if (!compile_source(c, prog.text, ST_CODE, &d)) {
    report(&d, prog.file);
    goto done;
  }
  if (!check_dims(c->graph, &o.env)) goto done;
  if (!execute_program(c, be, &o.env, o.seed, &x, &d)) {
    report(&d, prog.file);
    goto done;
  }
  const LProgram *lp = c->loop;
  rc = EXIT_OK;
  if (o.check) {
    double err[LT_MAX_OUTPUTS];
    if (!execute_check(c, &x, &o.env, err, &d)) {
      report(&d, prog.file);
      rc = EXIT_ERROR;
      goto done;
    }
    for (int i = 0; i < x.nout; i++) {
      const double tol = check_tolerance(x.out[i].dtype, o.matmul);
      int ok = err[i] <= tol;
      printf("check %s: max relative error %.3g (tolerance %.3g, %s, %s%s) %s\n", lp->bufs[lp->outputs[i]].name, err[i],
             tol, dtype_name(x.out[i].dtype), target_name(target),
             o.matmul == MM_MEDIUM ? ", matmul precision medium" : "", ok ? "ok" : "MISMATCH");
      if (!ok) rc = EXIT_MISMATCH;
    }
  } else if (!o.bench) {
    for (int i = 0; i < x.nout; i++) print_output(lp->bufs[lp->outputs[i]].name, &x.out[i]);
  }
  if (o.bench) {
    double ms;
    if (!plan_bench(x.plan, &o.env, x.in_ptr, o.warmup, o.iters, &ms, &d)) {
      report(&d, prog.file);
      rc = EXIT_ERROR;
      goto done;
    }
    printf("bench: %d kernel%s, median %.4f ms over %d runs (%d warmup) on %s\n", c->kernel->nkernels,
           c->kernel->nkernels == 1 ? "" : "s", ms, o.iters, o.warmup, target_name(target));
  }
done:
  if (tuned) tune_lookup_close(&tl);
  execution_free(&x);
  if (be) be->ops->destroy(be);
  compilation_free(c);
  program_arg_free(&prog);
  free_env_names(&o.env);
  return rc;
}
