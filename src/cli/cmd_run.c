/* lathe run: compile, run on random inputs, optionally check against the reference and time it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../driver/execute.h"
#include "../base/mem.h"
#include "cli.h"

typedef struct RunOpts {
  const char *inline_text, *path, *target;
  int check, bench, iters, warmup;
  uint64_t seed;
  SymEnv env;
  int fuse_recompute, no_fuse;
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

static int parse_args(int argc, char **argv, RunOpts *o) {
  memset(o, 0, sizeof *o);
  o->target = "cpu";
  o->iters = 50;
  o->warmup = 5;
  o->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_next = i + 1 < argc;
    long long v;
    if (!strcmp(a, "-e") && has_next) o->inline_text = argv[++i];
    else if (!strcmp(a, "--target") && has_next) o->target = argv[++i];
    else if (!strcmp(a, "--check")) o->check = 1;
    else if (!strcmp(a, "--bench")) o->bench = 1;
    else if (!strcmp(a, "--fuse-recompute")) o->fuse_recompute = 1;
    else if (!strcmp(a, "--matmul-precision") && has_next) {
      if (!matmul_option(argv[++i], &o->matmul)) return 0;
    }
    else if (!strcmp(a, "--no-fuse")) o->no_fuse = 1;
    else if ((!strcmp(a, "--iters") || !strcmp(a, "--warmup") || !strcmp(a, "--seed")) && has_next) {
      if (!parse_int(argv[++i], a[2] == 'w' ? 0 : 1, 1000000000LL, &v)) {
        report_msg("%s needs a positive integer, got '%s'", a, argv[i]);
        return 0;
      }
      if (a[2] == 'i') o->iters = (int)v;
      else if (a[2] == 'w') o->warmup = (int)v;
      else o->seed = (uint64_t)v;
    } else if (!strcmp(a, "--dim") && has_next) {
      const char *spec = argv[++i], *eq = strchr(spec, '=');
      if (!eq || eq == spec || !parse_int(eq + 1, 0, (1LL << 40), &v)) {
        report_msg("--dim expects NAME=N with N >= 0, got '%s'", spec);
        return 0;
      }
      if (o->env.n >= 16) {
        report_msg("too many --dim values (at most 16)");
        return 0;
      }
      symenv_set(&o->env, xstrndup(spec, (size_t)(eq - spec), "a --dim name"), v);
    } else if (a[0] == '-' && a[1]) {
      report_msg("unknown or incomplete option '%s' for run (see lathe --help)", a);
      return 0;
    } else if (!o->path) o->path = a;
    else {
      report_msg("unexpected argument '%s'", a);
      return 0;
    }
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
  for (int64_t i = 0; i < n; i++) printf("%s%.6g", i ? ", " : "", host_get(t, i));
  printf("%s]\n", t->numel > n ? ", ..." : "");
}

int cmd_run(int argc, char **argv) {
  RunOpts o;
  if (!parse_args(argc, argv, &o)) {
    free_env_names(&o.env);
    return EXIT_ERROR;
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
  Execution x = {0};
  int rc = EXIT_ERROR;
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
      double tol = check_tolerance(x.out[i].dtype, o.matmul);
      int ok = err[i] <= tol;
      printf("check %s: max relative error %.3g (tolerance %.3g, %s, %s%s) %s\n", lp->bufs[lp->outputs[i]].name,
             err[i], tol, dtype_name(x.out[i].dtype), target_name(target),
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
  execution_free(&x);
  if (be) be->ops->destroy(be);
  compilation_free(c);
  program_arg_free(&prog);
  free_env_names(&o.env);
  return rc;
}
