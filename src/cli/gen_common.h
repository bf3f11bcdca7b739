/* Options and model opening shared by `lathe generate` and `lathe chat`. */
#ifndef LATHE_GEN_COMMON_H
#define LATHE_GEN_COMMON_H
#include "../generate/generate.h"
#include "cli.h"

typedef struct GenArgs {
  const char *model, *target, *prompt, *prompt_tokens, *system;
  int json, chat_template, ctx, quiet;
  const char *weights; /* --weights: auto (NULL), f32, bf16 or f16 */
  const char *matmul;  /* --matmul-precision: high (NULL), highest or medium */
  GenerateOptions gen;
  int seed_given;
} GenArgs;

/* Parses the options both commands take; returns 0 after reporting a usage error. */
int gen_parse_args(int argc, char **argv, GenArgs *a, const char *cmd);
/* Opens the backend and loads the model (or reports why not). */
Model *gen_open_model(const GenArgs *a, struct Backend **be);
void gen_print_stats(const Model *m, const GenerateStats *st);
#endif
