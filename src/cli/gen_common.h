/* Options and model opening shared by `lathe generate` and `lathe chat`. */
#ifndef LATHE_GEN_COMMON_H
#define LATHE_GEN_COMMON_H
#include "../generate/generate.h"
#include "cli.h"

typedef struct GenArgs {
  const char *model, *target, *prompt, *prompt_tokens, *prompt_file, *system;
  int json, chat_template, ctx, quiet;
  const char *weights; /* --weights: auto (NULL), f32, bf16 or f16 */
  const char *matmul;  /* --matmul-precision: high (NULL), highest or medium */
  GenerateOptions gen;
  int seed_given;
  /* which sampling options the command line set (the others may come from generation_config.json) */
  int temperature_given, top_k_given, top_p_given;
  const char *sampling_from;      /* "generation_config.json" when it supplied a default, else "lathe" */
  char *prompt_owned;             /* a prompt read from a file or standard input */
  int concurrency;                /* generate: > 0 runs each line of the prompt as its own request, batched */
  int kv_block;                   /* > 0: the model is loaded for the batched engine (a paged KV cache) */
  int batch_invariant;            /* generate --concurrency --batch-invariant, serve --batch-invariant */
  double kv_memory_gb;            /* serve --kv-memory: the paged pool's size (0: the default fraction) */
  int no_tune;                    /* the default schedules, ignoring the tuning database */
  int hidden_output;              /* serve: the batched step also outputs the final hidden states (embeddings) */
  const char *kv_dtype;           /* serve --kv-dtype: the paged pool's f32, bf16 or auto (gen_kv_dtype); NULL: f32 */
  const char *chat_template_file; /* --chat-template FILE */
  char *chat_template_text;       /* its text (NULL: the model's own template) */
} GenArgs;

/* Parses the options of `cmd` ("generate" or "chat"); returns 0 after reporting a usage error, 1 to go on.
 * -h / --help prints the command's help and exits 0 (nothing is held yet). */
int gen_parse_args(int argc, char **argv, GenArgs *a, const char *cmd);
/* Opens the backend and loads the model (or reports why not); applies the model's generation_config.json
 * to the sampling options the command line left unset. */
Model *gen_open_model(GenArgs *a, struct Backend **be);
/* "lathe: sampling: temperature T, top-k K, top-p P, seed S (random)" on stderr. */
void gen_print_sampling(const GenArgs *a);
void gen_print_stats(const Model *m, const GenerateStats *st);
/* "lathe: KV cache: N blocks of B positions (T tokens), DTYPE, X GB" on stderr (a batched model). */
void gen_print_kv_pool(const Model *m);
void gen_args_free(GenArgs *a);
/* --kv-dtype NAME on target t: f32, bf16, or auto (bf16 on CUDA, where a step reads half the bytes; f32 elsewhere);
 * reports and returns 0 for anything else. */
int gen_kv_dtype(const char *name, Target t, DType *out);
/* Reports a chat_render error: "lathe: FILE:LINE:COL: error: ..." with the --chat-template file or "chat template". */
void gen_report_chat(const GenArgs *a, const Diag *d);
/* text as the model's tokens (m has a tokenizer): through the chat template with --chat (and --system), then
 * encoded; reports the error and returns 0 on failure. */
int gen_encode_text(const GenArgs *a, const Model *m, const char *text, int32_t **ids, int *n);
#endif
