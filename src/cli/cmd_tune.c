/* lathe tune: measure each kernel's schedules on the CPU or the GPU and keep every measurement in the tuning
 * database, which later compiles read (lathe compile --ir tile shows which schedule each kernel took). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../backend/cuda_driver.h"
#include "../generate/model.h"
#include "../model/config.h"
#include "../model/model_check.h"
#include "../model/presets.h"
#include "../tune/goldens.h"
#include "../tune/lookup.h"
#include "../tune/tune.h"
#include "cli.h"
#include "options.h"

static Backend *open_cpu(Diag *d) { return backend_cpu_new(d); }
static Backend *open_cuda(Diag *d) { return backend_cuda_new(d); }

/* The CUDA driver's version without initializing it (the tuning process must not hold a context: its
 * children measure). 0 when there is no driver. */
int cli_cuda_driver_version(void) {
  CudaDriver drv;
  Diag d = {0};
  int v = 0;
  if (!cuda_driver_load(&drv, &d)) return 0;
  if (drv.cuDriverGetVersion && drv.cuDriverGetVersion(&v) != 0) v = 0;
  cuda_driver_unload(&drv);
  return v;
}

const ScheduleSource *cli_tune_source(TuneLookup *l, Target t, int no_tune, const SymEnv *env) {
  char path[1024];
  l->db = NULL;
  if (no_tune || !tune_db_default_path(path, sizeof path)) return NULL;
  if (!tune_lookup_open(l, path, env, t == TARGET_CUDA ? cli_cuda_driver_version() : 0)) return NULL;
  return &l->source;
}

int cli_use_tuning(Compilation *c, TuneLookup *l, int no_tune, const SymEnv *env) {
  return (c->schedules = cli_tune_source(l, c->target, no_tune, env)) != NULL;
}

static void print_progress(void *ctx, const TuneProgress *p) {
  (void)ctx;
  fprintf(stderr, "lathe: tune %d/%d %s (x%d): %d/%d tried, best %.1f us (default %.1f us)", p->group + 1, p->ngroups,
          p->kernel, p->members, p->tried, p->candidates, p->best_us, p->default_us);
  if (p->left_s >= 0) fprintf(stderr, ", %.0f s left", p->left_s);
  fputc('\n', stderr);
}

static void free_env(SymEnv *env) {
  for (int i = 0; i < env->n; i++) free((char *)env->names[i]);
}

/* c through the tile stage: a built-in architecture's step (preset), a model file's (model_path; its weights
 * are not read) or a program; a model step measures a decode step (seq = 1, past) unless env says otherwise. */
static int build_program(Compilation *c, const ModelConfig *preset, const char *model_path, const ProgramArg *prog,
                         SymEnv *env, int past, int ctx, Diag *d) {
  if (!preset && !model_path) return compile_source(c, prog->text, ST_TILE, d);
  ModelConfig cfg = preset ? *preset : (ModelConfig){0};
  WeightStore *w = NULL;
  if (model_path && !(w = model_weights_open(model_path, &cfg, d))) return 0;
  /* the KV cache's length is part of the attention kernels' keys: it must be the using compile's */
  int max_ctx = ctx ? ctx : 4096;
  if (cfg.max_ctx > 0 && cfg.max_ctx < max_ctx) max_ctx = cfg.max_ctx;
  ModelBuildOptions bo = {max_ctx, DT_BF16, DT_F32, 0};
  ModelLoadOptions lo = {.target = c->target}; /* a model file's weights as lathe generate takes them by default */
  if (w) model_build_weights(&bo, w, &lo);
  int ok = (c->graph = model_build(&cfg, &bo, c->arena, c->pool, d)) && compile_graph(c, ST_TILE, d);
  weights_close(w);
  int64_t v;
  if (ok && !symenv_get(env, "seq", &v)) symenv_set(env, strdup("seq"), 1);
  if (ok && !symenv_get(env, "past", &v)) symenv_set(env, strdup("past"), past);
  int64_t seq = 1, at = 0;
  if (ok && symenv_get(env, "seq", &seq) && symenv_get(env, "past", &at) && seq + at > max_ctx) {
    /* a step past the KV cache's end writes nowhere sensible: its results, and the check, mean nothing */
    diag_error(d, 0, 0, "past (%lld) + seq (%lld) exceed the context of %d positions: raise --ctx or lower --past",
               (long long)at, (long long)seq, max_ctx);
    return 0;
  }
  return ok;
}

static void print_report(const TuneReport *rep, const TargetDesc *dev, Target target, const char *db_path) {
  printf("tuned on %s (%s), database %s\n", dev->name, target_name(target), db_path);
  printf("%-28s %7s %10s %12s %12s %8s  %s\n", "kernel", "kernels", "tried", "default us", "best us", "speedup",
         "stopped by");
  for (int i = 0; i < rep->n; i++) {
    const TuneKernelReport *k = &rep->k[i];
    char tried[32];
    snprintf(tried, sizeof tried, "%d/%d", k->tried, k->candidates);
    printf("%-28s %7d %10s %12.1f %12.1f %7.2fx  %s", k->name, k->members, tried, k->default_us, k->best_us,
           k->best_us > 0 ? k->default_us / k->best_us : 0, tune_stop_name(k->stop));
    if (k->wrong || k->faults || k->timeouts)
      printf(" (%d wrong, %d faults, %d timeouts)", k->wrong, k->faults, k->timeouts);
    printf("\n  best: %s\n", k->best);
  }
  if (rep->untuned) printf("%d kernel structures not tuned: the budget was spent\n", rep->untuned);
  if (rep->default_us > 0 && rep->tuned_us > 0)
    printf("program: default %.1f us, tuned %.1f us (%.2fx)\n", rep->default_us, rep->tuned_us,
           rep->default_us / rep->tuned_us);
  if (rep->parts_tuned_us > 0 && rep->tuned_us > 0) {
    double ratio = tune_assembled_ratio(rep);
    double def_ratio = rep->parts_default_us > 0 ? rep->default_us / rep->parts_default_us : 0;
    printf("parts: default %.1f us, tuned %.1f us (each structure's kernels timed alone, summed); assembled / parts: "
           "%.2f tuned, %.2f default\n",
           rep->parts_default_us, rep->parts_tuned_us, ratio, def_ratio);
    /* the step costs more than its parts on any device (launches, the host); tuning should not make that worse */
    if (def_ratio > 0 && ratio > def_ratio * 1.10)
      fprintf(stderr,
              "lathe: warning: the tuned step costs %.2fx the sum of its parts, the default %.2fx: the tuned kernels "
              "cost more together than alone (caches one leaves cold for the next?)\n",
              ratio, def_ratio);
  }
  if (rep->tuned_us > rep->default_us * 1.05 && rep->default_us > 0)
    fprintf(stderr,
            "lathe: warning: the tuned program measured slower than the defaults at the end: the device's timing is "
            "noisy (another load?) or the tuned kernels interact; lathe compile --no-tune keeps the defaults\n");
}

#ifndef LATHE_COMMIT
#define LATHE_COMMIT "" /* the Makefile gives cmd_tune.o the commit it was built at */
#endif

/* --export: the program's measurements at env's sizes as goldens. */
static int export_goldens(const Compilation *c, const SymEnv *env, TuneDb *db, const GoldensInfo *info,
                          const char *file, const char *device) {
  Diag d = {0};
  int kernels, measurements;
  if (!tune_goldens_export(c, env, db, info, file, &kernels, &measurements, &d)) {
    report(&d, file);
    return 0;
  }
  printf("exported %d kernel structures (%d measurements) on %s to %s\n", kernels, measurements, device, file);
  return 1;
}

int cmd_tune(int argc, char **argv) {
  const char *inline_text = NULL, *path = NULL, *config = NULL, *target_arg = "cpu", *db_arg = NULL,
             *matmul_name = NULL, *export_path = NULL, *commit = NULL, *device_override = NULL;
  int random_weights = 0, seed = 1, past = 128, ctx = 0, no_prior = 0;
  TuneOptions o = {{64, 16, 0, 0.03, 5}, 2, 300, {0}, 1, NULL, 0, print_progress, NULL};
  Opt opts[] = {
      {"-e", NULL, OPT_STR, "PROGRAM", "the program's text (instead of a FILE)", &inline_text},
      {"--config", NULL, OPT_STR, "NAME", "a built-in architecture's step (with --random-weights)", &config},
      {"--random-weights", NULL, OPT_FLAG, NULL,
       "random weights (the only kind tuning needs: times do not depend on them)", &random_weights},
      {"--target", NULL, OPT_STR, "cpu|cuda", "the backend to measure on", &target_arg},
      {"--dim", NULL, OPT_CALL, "NAME=N", "a symbolic dimension's value while measuring (repeat for each)", &o.env,
       .call = cli_add_dim},
      {"--past", NULL, OPT_INT, "N", "a model step's past positions unless --dim gives them", &past, 0, 1 << 20},
      {"--ctx", NULL, OPT_INT, "N",
       "a model's context length (its KV cache), as the compiles that use the result have it (lathe bench: the "
       "longer of prompt + gen-len and prefill-len, plus 8; default 4096)",
       &ctx, 1, 1 << 20},
      {"--max-candidates", NULL, OPT_INT, "N", "candidates measured per kernel structure, the default included",
       &o.lim.max_candidates, 1, 100000},
      {"--patience", NULL, OPT_INT, "N", "stop a kernel's search after N candidates in a row no faster (0: never)",
       &o.lim.patience, 0, 100000},
      {"--budget-s", NULL, OPT_NUM, "S", "stop starting measurements after S seconds in all (0: no limit)",
       &o.lim.budget_s, 0, 1e7},
      {"--repeats", NULL, OPT_INT, "N", "timed runs per measurement (the median is kept)", &o.lim.repeats, 1, 100000},
      {"--warmup", NULL, OPT_INT, "N", "untimed runs before each measurement", &o.warmup, 0, 100000},
      {"--timeout-s", NULL, OPT_NUM, "S", "a candidate still compiling or running after S seconds is killed",
       &o.timeout_s, 1, 1e6},
      {"--seed", NULL, OPT_INT, "N", "the seed of the random inputs", &seed, 1, 1000000000},
      {"--matmul-precision", NULL, OPT_STR, "high|highest|medium",
       "tensor-core GEMMs on CUDA (see lathe generate --help)", &matmul_name, .def = "high"},
      {"--db", NULL, OPT_STR, "FILE", "the tuning database (default: tune.db in the cache directory)", &db_arg},
      {"--export", NULL, OPT_STR, "FILE",
       "tune nothing: write the program's measurements at these sizes as goldens (per kernel structure its measured "
       "pool, the best, its features; the device, date and commit)",
       &export_path},
      {"--device-override", NULL, OPT_STR, "FIELD=V,...",
       "choose and search the schedules for the measured device with these fields changed (sms=66,smem_per_sm=100K: "
       "a smaller device's choices, timed on this one; fields as lathe compile --device NAME:FIELD=V); the "
       "measurements are kept under that description's identity",
       &device_override},
      {"--no-prior", NULL, OPT_FLAG, NULL,
       "search in the nearest-first order alone (default: the built-in prior of the target, where fitted, picks the "
       "second candidate and orders the nearest ones)",
       &no_prior},
      {"--commit", NULL, OPT_STR, "TEXT", "the commit --export records (default: the one lathe was built at)", &commit},
  };
  CmdSpec spec = {"tune",
                  "(-e PROGRAM | FILE.lt | MODEL | --config NAME --random-weights) [options]",
                  "Search each kernel's schedule space on the device: every candidate compiled, checked against the\n"
                  "default schedules' outputs and timed in a child process; every measurement goes into the tuning\n"
                  "database, and later compiles for the same device take the fastest (--no-tune: not).",
                  opts,
                  sizeof opts / sizeof opts[0],
                  "FILE",
                  &path,
                  NULL};
  int r = opts_parse(&spec, argc, argv);
  if (r != OPTS_OK) {
    free_env(&o.env);
    return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  }
  int rc = EXIT_ERROR;
  ProgramArg prog = {0};
  Compilation *c = NULL;
  TuneDb *db = NULL;
  TuneReport rep = {0};
  Diag d = {0};
  MatmulPrecision matmul;
  Target target;
  ModelConfig preset = {0};
  o.seed = (uint64_t)seed;
  if (!matmul_option(matmul_name, &matmul)) goto done;
  if (!target_parse(target_arg, &target)) {
    report_msg("unknown target '%s' (expected cpu or cuda)", target_arg);
    goto done;
  }
  if (config && !random_weights && !inline_text && !path) {
    report_msg("--config %s tunes with random weights: add --random-weights", config);
    goto done;
  }
  int model;
  if (!program_or_model_arg(config, inline_text, &path, &preset, &prog, &model)) goto done;
  char db_path[1024];
  if (!cli_tune_db_path(db_arg, db_path, sizeof db_path)) goto done;
  if (!(db = tune_db_open(db_path, &d))) {
    report(&d, NULL);
    goto done;
  }
  o.open_backend = target == TARGET_CUDA ? open_cuda : open_cpu;
  o.prior = no_prior ? NULL : prior_builtin_for(target);
  if (target == TARGET_CUDA) o.driver = cli_cuda_driver_version();
  TargetDesc dev;
  if (!tune_query_device(o.open_backend, o.timeout_s, &dev, &d)) {
    report(&d, NULL);
    goto done;
  }
  if (device_override) {
    char name[64];
    snprintf(name, sizeof name, "%s", dev.name);
    int n = snprintf(dev.name, sizeof dev.name, "%s:%s", name, device_override);
    if (n >= (int)sizeof dev.name) snprintf(dev.name, sizeof dev.name, "%.62s*", name); /* still not the device's */
    if (!target_override(&dev, device_override, &d)) {
      report_msg("--device-override %s: %s", device_override, d.msg);
      goto done;
    }
  }
  c = compilation_new(target, NULL);
  c->device = dev;
  c->matmul = matmul;
  if (!build_program(c, config ? &preset : NULL, model ? path : NULL, &prog, &o.env, past, ctx, &d)) {
    report(&d, config ? config : model ? path : prog.file);
    goto done;
  }
  for (int s = 0; s < c->graph->nsymbols; s++) {
    int64_t v;
    if (!symenv_get(&o.env, c->graph->symbols[s], &v)) {
      report_msg("symbolic dimension '%s' has no value; pass --dim %s=N", c->graph->symbols[s], c->graph->symbols[s]);
      goto done;
    }
  }
  if (export_path) {
    GoldensInfo info = {config ? config : model ? path : prog.text, commit ? commit : LATHE_COMMIT, o.driver};
    rc = export_goldens(c, &o.env, db, &info, export_path, dev.name) ? EXIT_OK : EXIT_ERROR;
    goto done;
  }
  if (!tune_compilation(c, db, &o, &rep, &d)) {
    report(&d, config ? config : model ? path : prog.file);
    goto done;
  }
  print_report(&rep, &dev, target, db_path);
  rc = EXIT_OK;
done:
  free(rep.k);
  tune_db_close(db);
  compilation_free(c);
  program_arg_free(&prog);
  free_env(&o.env);
  return rc;
}
