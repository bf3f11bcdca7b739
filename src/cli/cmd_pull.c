/* `lathe pull ORG/NAME[:FILE]` and `lathe list`: models by name, from a Hugging Face-style hub into the
 * model cache (src/hub). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../hub/hub.h"
#include "cli.h"
#include "options.h"

/* A progress bar on a terminal; on a pipe, a line at each quarter of a file. */
typedef struct Bar {
  int tty, quiet;
  char file[256];
  int last_quarter;
  double t0, last_draw;
} Bar;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void on_bytes(void *user, const char *file, int64_t done, int64_t total) {
  Bar *b = user;
  if (b->quiet) return;
  double t = now_s();
  if (strcmp(b->file, file)) {
    if (b->tty && b->file[0]) fputc('\n', stderr);
    snprintf(b->file, sizeof b->file, "%s", file);
    b->last_quarter = -1;
    b->t0 = t;
    b->last_draw = 0;
  }
  double pct = total > 0 ? 100.0 * (double)done / (double)total : 0;
  if (b->tty) {
    if (t - b->last_draw < 0.1 && done != total) return;
    b->last_draw = t;
    int w = 30, fill = total > 0 ? (int)(w * done / total) : 0;
    char bar[64];
    for (int i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
    bar[w] = 0;
    double rate = t > b->t0 ? (double)done / (t - b->t0) / 1e6 : 0;
    fprintf(stderr, "\r%-32.32s [%s] %5.1f%% %8.1f / %.1f MB %7.1f MB/s", file, bar, pct, done / 1e6, total / 1e6,
            rate);
  } else { /* a log: a line when a file is done, and at each quarter of a large one */
    int q = total > 0 ? (int)(4 * done / total) : 0;
    if (q != b->last_quarter && (q == 4 || (q > 0 && total >= (16 << 20)))) {
      b->last_quarter = q;
      fprintf(stderr, "%s: %3.0f%% of %.1f MB\n", file, pct, total / 1e6);
    }
  }
}

static void on_note(void *user, const char *msg) {
  Bar *b = user;
  if (b->quiet) return;
  if (b->tty && b->file[0]) fputc('\n', stderr);
  b->file[0] = 0;
  fprintf(stderr, "pull: %s\n", msg);
}

int cmd_pull(int argc, char **argv) {
  const char *spec = NULL, *rev = NULL, *dir = NULL;
  int quiet = 0;
  Opt opts[] = {
      {"--revision", NULL, OPT_STR, "REV", "branch, tag or commit", &rev, .def = "main"},
      {"--dir", NULL, OPT_STR, "DIR", "download into DIR instead of the model cache", &dir},
      {"--quiet", "-q", OPT_FLAG, NULL, "no progress output", &quiet},
  };
  CmdSpec cs = {"pull",
                "ORG/NAME[:FILE] [options]",
                "Download a Hugging Face model repository (config, tokenizer and safetensors files) or, with :FILE,\n"
                "one file of it (a GGUF by name, or by a quantization tag such as :Q4_K_M) into the model cache,\n"
                "resuming a partial download and checking every file's size and checksum.",
                opts,
                sizeof opts / sizeof opts[0],
                "ORG/NAME[:FILE]",
                &spec,
                "Environment: LATHE_HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (gated models)."};
  int r = opts_parse(&cs, argc, argv);
  if (r != OPTS_OK) return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  if (!spec) {
    report_msg("pull: give a model as ORG/NAME or ORG/NAME:FILE (see lathe pull --help)");
    return EXIT_ERROR;
  }
  Diag d = {0};
  HubRef ref;
  if (!hub_ref_parse(spec, &ref, &d)) {
    report(&d, NULL);
    return EXIT_ERROR;
  }
  Bar bar = {.tty = isatty(2), .quiet = quiet};
  HubProgress prog = {on_bytes, on_note, &bar};
  HubPullOptions po = {.revision = rev, .dest = dir};
  char path[4096];
  int ok = hub_pull(&ref, &po, &prog, path, sizeof path, &d);
  if (bar.tty && bar.file[0] && !quiet) fputc('\n', stderr);
  if (!ok) {
    report(&d, NULL);
    return EXIT_ERROR;
  }
  printf("%s\n", path);
  return EXIT_OK;
}

int cmd_list(int argc, char **argv) {
  int json = 0;
  Opt opts[] = {{"--json", NULL, OPT_FLAG, NULL, "one JSON array of {name, path, bytes, complete}", &json}};
  char summary[4300];
  snprintf(summary, sizeof summary,
           "The models in the cache (%s): pulled repositories, GGUF files and the\n"
           "default model. Each NAME works as MODEL in generate, chat, bench and compile.",
           hub_models_dir());
  CmdSpec cs = {"list", "[--json]", summary, opts, 1, NULL, NULL, NULL};
  int r = opts_parse(&cs, argc, argv);
  if (r != OPTS_OK) return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  Diag d = {0};
  int n = 0;
  HubCachedModel *m = hub_list(&n, &d);
  if (d.set) {
    report(&d, NULL);
    return EXIT_ERROR;
  }
  if (json) printf("[");
  else if (n) printf("%-56s %10s  %-16s %s\n", "NAME", "SIZE", "MODIFIED", "STATUS");
  for (int i = 0; i < n; i++) {
    char when[32];
    time_t t = (time_t)m[i].mtime;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
    if (json)
      printf("%s{\"name\": \"%s\", \"path\": \"%s\", \"bytes\": %lld, \"complete\": %s}", i ? ", " : "", m[i].name,
             m[i].path, (long long)m[i].bytes, m[i].complete ? "true" : "false");
    else
      printf("%-56s %8.1f MB  %-16s %s\n", m[i].name, m[i].bytes / 1e6, when,
             m[i].complete ? "" : "incomplete (pull again to resume)");
  }
  if (json) printf("]\n");
  else if (!n) fprintf(stderr, "no models in %s (lathe pull ORG/NAME fetches one)\n", hub_models_dir());
  free(m);
  return EXIT_OK;
}
