#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../backend/backend.h"
#include "../base/notice.h"
#include "../base/settings.h"
#include "../base/mem.h"
#include "../generate/model.h"
#include "cli.h"
#include "../hub/hub.h"
#include "../model/presets.h"

static int put_text(FILE *f, const char *text, size_t n, int newline) {
  return fwrite(text, 1, n, f) == n && (!newline || fputc('\n', f) != EOF);
}

/* Text into the file `name`, created or truncated, and closed; on failure 0 and errno's value in *err. *opened:
 * whether the file was opened (so created, where it was new). */
static int write_to(const char *name, const char *text, size_t n, int newline, int *opened, int *err) {
  FILE *f = fopen(name, "w");
  int ok = f && put_text(f, text, n, newline);
  *opened = f != NULL, *err = errno;
  if (f && fclose(f) != 0 && ok) ok = 0, *err = errno;
  return ok;
}

/* Text into path (stdout without one). A regular file (or a new one) is written whole through a temporary and a
 * rename, so a reader never sees half of it; anything else (a device such as /dev/null, a FIFO, a symbolic link)
 * is written in place: a rename would replace the device node or the link itself. */
int write_text_file(const char *path, const char *text) {
  size_t n = strlen(text);
  int newline = n == 0 || text[n - 1] != '\n';
  if (!path) return put_text(stdout, text, n, newline);
  struct stat st;
  char *tmp = NULL;
  if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) {
    size_t cap = strlen(path) + 32;
    tmp = xmalloc(cap, "a temporary file name");
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
  }
  int opened = 0, err = 0;
  int ok = write_to(tmp ? tmp : path, text, n, newline, &opened, &err);
  if (ok && tmp && rename(tmp, path) != 0) ok = 0, err = errno;
  if (!ok) {
    if (tmp && opened) remove(tmp);
    report_msg("cannot write %s: %s", path, strerror(err));
  }
  free(tmp);
  return ok;
}

int program_arg_load(ProgramArg *p, const char *inline_text, const char *path) {
  memset(p, 0, sizeof *p);
  if (inline_text && path) {
    report_msg("give the program either with -e or as a file, not both");
    return 0;
  }
  if (inline_text) {
    p->text = inline_text;
    p->file = "<-e>";
    return 1;
  }
  if (!path) {
    report_msg("no program: give one with -e \"...\" or as a .lt file");
    return 0;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    report_msg("cannot open %s: %s", path, strerror(errno));
    return 0;
  }
  char *buf = read_all(f, path);
  fclose(f);
  if (!buf) return 0;
  p->owned = buf;
  p->text = buf;
  p->file = path;
  return 1;
}

void program_arg_free(ProgramArg *p) { free(p->owned); }

char *read_all(FILE *f, const char *what) {
  size_t cap = 4096, n = 0;
  char *buf = xmalloc(cap, "the program text");
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (cap - n - 1 == 0) {
      char *nb = xrealloc(buf, cap *= 2, "the program text");
      if (!nb) free(buf);
      buf = nb;
    }
  }
  if (!buf || ferror(f)) {
    free(buf);
    report_msg("cannot read %s", what);
    return NULL;
  }
  buf[n] = 0;
  if (strlen(buf) != n) {
    free(buf);
    report_msg("%s: contains a NUL byte; is it text?", what);
    return NULL;
  }
  return buf;
}

/* Progress lines are redrawn in place on a terminal and not shown elsewhere. */
static int progress_open;

static void print_notice(void *ctx, const Notice *n) {
  (void)ctx;
  int tty = isatty(2);
  if (n->kind == NOTICE_PROGRESS) {
    if (!tty) return;
    fprintf(stderr, "\rlathe: %s %d/%d", n->text, n->done, n->total);
    progress_open = 1;
    return;
  }
  if (progress_open) fputc('\n', stderr), progress_open = 0;
  if (n->kind == NOTICE_PROGRESS_END) return;
  if (n->kind == NOTICE_PROFILE) fprintf(stderr, "%s\n", n->text);
  else fprintf(stderr, "lathe: warning: %s\n", n->text);
}

void cli_install_notice_sink(void) { notice_set_sink(print_notice, NULL); }

void report(const Diag *d, const char *file) {
  char msg[700];
  diag_format(d, file, msg, sizeof msg);
  fprintf(stderr, "lathe: %s\n", msg);
}

void report_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("lathe: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* An allocation that failed where no Diag reaches: the one error line, exit 2 (without exit handlers, which
 * might allocate). */
static void die_out_of_memory(const char *msg) {
  fflush(stdout);
  fprintf(stderr, "lathe: error: %s\n", msg);
  _exit(EXIT_ERROR);
}

void install_reporting(void) { mem_set_oom_handler(die_out_of_memory); }

Backend *open_backend(const char *name, Target *t, Diag *d) {
  if (!strcmp(name, "cpu")) {
    *t = TARGET_CPU;
    return backend_cpu_new(d);
  }
  if (!strcmp(name, "cuda") || !strcmp(name, "auto")) {
    Diag dc = {0};
    Backend *b = backend_cuda_new(&dc);
    if (b) {
      *t = TARGET_CUDA;
      return b;
    }
    if (!strcmp(name, "cuda")) {
      *d = dc;
      return NULL;
    }
    *t = TARGET_CPU;
    return backend_cpu_new(d);
  }
  diag_error(d, 0, 0, "unknown target '%s' (expected cpu, cuda or auto)", name);
  return NULL;
}

const char *default_model_path(void) {
  static char buf[4096];
  const char *env = setting_str(SET_MODEL);
  if (env) return env;
  snprintf(buf, sizeof buf, "%.4000s/%s", hub_models_dir(), DEFAULT_MODEL_FILE);
  return buf;
}

const char *model_arg_resolve(const char *arg) {
  static char buf[4096];
  return hub_resolve(arg, buf, sizeof buf) ? buf : arg;
}

int program_or_model_arg(const char *config, const char *inline_text, const char **path, ModelConfig *preset,
                         ProgramArg *prog, int *model) {
  *model = 0;
  if (config && (inline_text || *path)) {
    report_msg("give a program, a MODEL or --config NAME, not several");
    return 0;
  }
  if (config && !model_preset(config, preset)) {
    report_msg("unknown --config '%s' (known: %s)", config, model_preset_names());
    return 0;
  }
  if (!inline_text && *path) *path = model_arg_resolve(*path);
  *model = !inline_text && *path && is_model_path(*path);
  return config || *model || program_arg_load(prog, inline_text, *path);
}

int is_model_path(const char *path) {
  size_t n = strlen(path);
  if (n > 5 && !strcmp(path + n - 5, ".gguf")) return 1;
  if (n > 12 && !strcmp(path + n - 12, ".safetensors")) return 1; /* a weights file: its directory is the model */
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int matmul_option(const char *name, MatmulPrecision *out) {
  *out = MM_HIGH;
  if (!name || matmul_precision_parse(name, out)) return 1;
  report_msg("unknown --matmul-precision '%s' (expected highest, high or medium)", name);
  return 0;
}

int weights_option(const char *name, ModelLoadOptions *lo) {
  if (!name || !strcmp(name, "auto")) return 1;
  if (!strcmp(name, "native")) {
    lo->weights_native = 1;
    return 1;
  }
  DType t;
  if (!dtype_parse(name, &t) || (t != DT_F32 && t != DT_BF16 && t != DT_F16)) {
    report_msg("unknown --weights '%s' (expected auto, native, f32, bf16 or f16)", name);
    return 0;
  }
  lo->weight_dtype_set = 1;
  lo->weight_dtype = t;
  return 1;
}
