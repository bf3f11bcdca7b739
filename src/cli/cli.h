/* Shared pieces of the `lathe` command line. */
#ifndef LATHE_CLI_H
#define LATHE_CLI_H
#include <stdio.h>
#include "../base/diag.h"
#include "../driver/pipeline.h"

/* Exit codes: 0 success, 1 a --check mismatch, 2 bad usage or a program/compile/run error. */
enum { EXIT_OK = 0, EXIT_MISMATCH = 1, EXIT_ERROR = 2 };

typedef struct ProgramArg {
  const char *text; /* from -e, or the file's contents (malloc'ed, see program_arg_free) */
  const char *file; /* for messages: the file name, or "<-e>" */
  char *owned;
} ProgramArg;

/* Reads the program named by -e TEXT or a FILE argument. */
int program_arg_load(ProgramArg *p, const char *inline_text, const char *path);
void program_arg_free(ProgramArg *p);
/* All of f as a NUL-terminated string (malloc'ed), or NULL after reporting (what names f). */
char *read_all(FILE *f, const char *what);
/* Writes text, with a final newline, to path (stdout when NULL): into a temporary file beside it, renamed over
 * path only when every byte is written, so a failed write leaves no partial file and an earlier one intact.
 * Reports and returns 0 on failure. */
int write_text_file(const char *path, const char *text);
/* Installs the notice sink that prints the library's warnings, profiles and progress on stderr. */
void cli_install_notice_sink(void);
/* Prints "lathe: FILE:LINE:COL: error: MSG" to stderr. */
void report(const Diag *d, const char *file);
void report_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Routes the library's warnings ("lathe: warning: MSG") and fatal out-of-memory errors to stderr. */
void install_reporting(void);

/* "cpu", "cuda" or "auto" (cuda when a GPU is present, else cpu); sets *t to the target chosen. */
struct Backend;
struct Backend *open_backend(const char *name, Target *t, Diag *d);
/* The default model: $LATHE_MODEL, else the file `make model` installs in the cache directory. */
#define DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"
const char *default_model_path(void);
/* A .gguf file or a directory (a Hugging Face model) rather than a program. */
int is_model_path(const char *path);
/* MODEL as the user gave it: a path, or a cached model's name (ORG/NAME, ORG/NAME:FILE, FILE.gguf; see
 * `lathe list`) turned into its path. Returns arg itself when it names no cached model. */
const char *model_arg_resolve(const char *arg);
/* What compile and tune work on: a program (-e TEXT or FILE, read into *prog), a MODEL (*path resolved,
 * *model = 1) or --config NAME (*preset). Reports and returns 0 on a bad or ambiguous choice. */
struct ModelConfig;
int program_or_model_arg(const char *config, const char *inline_text, const char **path, struct ModelConfig *preset,
                         ProgramArg *prog, int *model);
/* --weights NAME (auto, native, f32, bf16 or f16; NULL = auto) into the load options; reports and returns 0
 * for anything else. */
struct ModelLoadOptions;
int weights_option(const char *name, struct ModelLoadOptions *lo);
/* --matmul-precision NAME (highest, high or medium; NULL = high); reports and returns 0 on a bad name. */
int matmul_option(const char *name, MatmulPrecision *out);

int cmd_compile(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_fit(int argc, char **argv);
/* --dim NAME=N (an OPT_CALL): adds NAME = N to the SymEnv at dest (the name strdup'ed). */
int cli_add_dim(void *dest, const char *name, const char *spec);
/* The CUDA driver's version without initializing CUDA (0: no driver). */
int cli_cuda_driver_version(void);
/* Unless no_tune: c takes the tuning database's measured schedules (when tune.db exists in the cache
 * directory), for the symbols' values in env (NULL: each kernel's latest). 1 when l was opened (close it
 * with tune_lookup_close after compiling). */
struct TuneLookup;
int cli_use_tuning(Compilation *c, struct TuneLookup *l, int no_tune, const SymEnv *env);
/* The same for a model's load options: the source to put in ModelLoadOptions.schedules, or NULL (then l
 * needs no closing; else tune_lookup_close once the model is compiled). */
const ScheduleSource *cli_tune_source(struct TuneLookup *l, Target t, int no_tune, const SymEnv *env);
int cmd_tune(int argc, char **argv);
/* The tune database's file: `given` (--db), else tune.db in the cache directory; reports and returns 0
 * when there is none. */
int cli_tune_db_path(const char *given, char *out, size_t n);
#endif
