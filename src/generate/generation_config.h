/* A Hugging Face model's generation_config.json: the sampling it was published with (temperature,
 * top_k, top_p, do_sample), used as the defaults of a run that does not set them. */
#ifndef LATHE_GENERATION_CONFIG_H
#define LATHE_GENERATION_CONFIG_H
#include "../base/diag.h"

typedef struct GenerationConfig {
  int has_temperature, has_top_k, has_top_p, has_do_sample;
  double temperature, top_p;
  int top_k, do_sample;
} GenerationConfig;

/* Reads MODEL_DIR/generation_config.json into *g (zeroed first). Returns 1 when read, 0 when there is none
 * (a .gguf file, or a directory without one: not an error), -1 with d set when it is not valid JSON. */
int generation_config_read(const char *model_dir, GenerationConfig *g, Diag *d);
#endif
