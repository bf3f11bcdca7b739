/* lathe fit: the learned prior fitted to the goldens (tune/prior.h), written as JSON for the build to embed;
 * --gate: the reproduction gate of the prior lathe was built with, against the goldens. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../tune/goldens.h"
#include "../tune/prior.h"
#include "cli.h"
#include "options.h"

#define GATE_MIN_POOL 4 /* kernels with fewer ok measurements say little about a ranking */

static void print_gate(const char *what, const Prior *p, const PriorKernel *k, int n, int *counted, int *passed) {
  unsigned char *missed = calloc((size_t)n + 1, 1);
  prior_gate(p, k, n, GATE_MIN_POOL, counted, passed, missed);
  printf("%s: for %d of %d kernels (%.1f%%) the prior's pick among the measured schedules is in the measured best half"
         " (kernels with at least %d ok measurements; %d in all)\n",
         what, *passed, *counted, *counted ? 100.0 * *passed / *counted : 0, GATE_MIN_POOL, n);
  for (int i = 0; missed && i < n; i++)
    if (missed[i]) printf("  missed: %s (%d measurements)\n", k[i].name, k[i].n);
  free(missed);
}

int cmd_fit(int argc, char **argv) {
  const char *from = "goldens", *out = NULL, *target = "cpu", *prior_path = NULL;
  int gate = 0, reach = 0;
  double bar = 90, l2 = 1e-6;
  Opt opts[] = {
      {"--from", NULL, OPT_STR, "DIR|FILE", "goldens to fit on (a file, or every *.json in a directory)", &from,
       .def = "goldens"},
      {"--target", NULL, OPT_STR, "cpu|cuda", "fit on (or gate against) the goldens measured on this target", &target,
       .def = "cpu"},
      {"--out", NULL, OPT_STR, "FILE",
       "where the fitted prior goes (the build embeds goldens/prior.json for the CPU, goldens/prior-cuda.json for CUDA)",
       &out, .def = "goldens/prior.json, goldens/prior-cuda.json with --target cuda"},
      {"--gate", NULL, OPT_FLAG, NULL,
       "fit nothing: check the prior lathe was built with against the goldens (exit 1 below the bar)", &gate},
      {"--bar", NULL, OPT_NUM, "PCT", "the gate's bar: kernels whose pick is in the best half", &bar, 0, 100,
       .def = "90"},
      {"--reach", NULL, OPT_INT, "N",
       "the fitted prior picks only schedules within N knobs of the default (0: anywhere); stored with it", &reach, 0,
       64, .def = "0"},
      {"--l2", NULL, OPT_NUM, "L", "the fit's L2 penalty on the weights (larger: a smoother, less certain prior)", &l2,
       0, 0.02, .def = "1e-6"},
      {"--prior", NULL, OPT_STR, "FILE", "with --gate: check this prior file instead of the built-in one", &prior_path},
  };
  CmdSpec spec = {"fit",
                  "[--from DIR|FILE] [--target cpu|cuda] [--out FILE] [--reach N] [--l2 L] [--gate [--prior FILE]]",
                  "Fit the learned prior (a pairwise ranking model over kernel, schedule and target features) to the\n"
                  "goldens' measurements and write it as JSON; compiles that consult a tuning database use it where\n"
                  "no measurement exists. --gate checks the built-in prior instead: for each goldens kernel, is its\n"
                  "pick among the measured schedules in their faster half? Each target has its own prior, fitted on\n"
                  "the goldens measured on it (their \"target\" field).",
                  opts,
                  sizeof opts / sizeof opts[0],
                  NULL,
                  NULL,
                  NULL};
  int r = opts_parse(&spec, argc, argv);
  if (r != OPTS_OK) return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  Target t;
  if (!strcmp(target, "cpu")) t = TARGET_CPU;
  else if (!strcmp(target, "cuda")) t = TARGET_CUDA;
  else {
    report_msg("--target: '%s' is not cpu or cuda", target);
    return EXIT_ERROR;
  }
  if (prior_path && !gate) {
    report_msg("--prior names a prior to check: it needs --gate");
    return EXIT_ERROR;
  }
  const char *prior_file = t == TARGET_CUDA ? "goldens/prior-cuda.json" : "goldens/prior.json";
  if (!out) out = prior_file;
  Diag d = {0};
  PriorKernel *k = NULL;
  int n = 0, counted, passed;
  if (!tune_goldens_load(from, target, &k, &n, &d)) {
    report(&d, NULL);
    prior_kernels_free(k, n);
    return EXIT_ERROR;
  }
  if (!n) {
    prior_kernels_free(k, n);
    report_msg("%s: no goldens measured on %s (bench/tune_h200.sh makes CUDA ones)", from, target);
    return EXIT_ERROR;
  }
  if (gate) {
    Prior given;
    const Prior *p = prior_builtin_for(t);
    if (prior_path) {
      FILE *f = fopen(prior_path, "rb");
      char *text = f ? read_all(f, prior_path) : NULL;
      if (f) fclose(f);
      else report_msg("cannot open %s: %s", prior_path, strerror(errno));
      int ok = text && prior_parse(text, prior_path, &given, &d);
      free(text);
      if (!ok) {
        if (text) report(&d, NULL);
        prior_kernels_free(k, n);
        return EXIT_ERROR;
      }
      p = &given;
    }
    if (!p->loaded && prior_path) {
      prior_kernels_free(k, n);
      report_msg("%s: an empty prior (no weights): nothing to check", prior_path);
      return EXIT_ERROR;
    }
    if (!p->loaded) {
      prior_kernels_free(k, n);
      report_msg("lathe was built without a %s prior (%s is empty): run lathe fit%s, then rebuild", target, prior_file,
                 t == TARGET_CUDA ? " --target cuda" : "");
      return EXIT_ERROR;
    }
    print_gate("prior gate", p, k, n, &counted, &passed);
    prior_kernels_free(k, n);
    if (!counted) {
      report_msg("no goldens kernel has %d ok measurements: nothing to check", GATE_MIN_POOL);
      return EXIT_ERROR;
    }
    return 100.0 * passed / counted >= bar ? EXIT_OK : 1;
  }
  Prior p;
  prior_fit(k, n, l2, &p);
  p.reach = reach;
  print_gate("fitted", &p, k, n, &counted, &passed);
  char *text = prior_to_json(&p);
  if (!text) report_msg("cannot write %s: the prior could not be made JSON", out);
  int ok = text && write_text_file(out, text);
  free(text);
  prior_kernels_free(k, n);
  if (!ok) return EXIT_ERROR;
  printf("prior fitted on %d pairs of %d kernels written to %s (rebuild lathe to embed it)\n", p.pairs, p.kernels, out);
  return EXIT_OK;
}
