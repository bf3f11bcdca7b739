/* Built-in model configurations (for benchmarks with random weights): qwen3-0.6b, llama-3.2-1b,
 * qwen3-8b, smollm2-135m, with the published architectures' sizes. */
#ifndef LATHE_PRESETS_H
#define LATHE_PRESETS_H
#include "config.h"

/* 1 and fills c if name is known; 0 otherwise. */
int model_preset(const char *name, ModelConfig *c);
/* Comma-separated list of the names, for messages. */
const char *model_preset_names(void);
#endif
