#include "presets.h"
#include <stdio.h>
#include <string.h>

typedef struct Preset {
  const char *name;
  ModelConfig c;
} Preset;

static const Preset presets[] = {
    {"qwen3-0.6b",
     {.arch = ARCH_QWEN3,
      .arch_name = "qwen3",
      .hidden = 1024,
      .layers = 28,
      .heads = 16,
      .kv_heads = 8,
      .head_dim = 128,
      .intermediate = 3072,
      .vocab = 151936,
      .max_ctx = 40960,
      .rms_eps = 1e-6,
      .rope_theta = 1000000,
      .tied_embeddings = 1,
      .qk_norm = 1,
      .bos_id = -1,
      .eos_id = -1}},
    {"llama-3.2-1b",
     {.arch = ARCH_LLAMA,
      .arch_name = "llama",
      .hidden = 2048,
      .layers = 16,
      .heads = 32,
      .kv_heads = 8,
      .head_dim = 64,
      .intermediate = 8192,
      .vocab = 128256,
      .max_ctx = 131072,
      .rms_eps = 1e-5,
      .rope_theta = 500000,
      .rope_llama3 = 1,
      .rope_factor = 32,
      .rope_low_freq = 1,
      .rope_high_freq = 4,
      .rope_orig_ctx = 8192,
      .tied_embeddings = 1,
      .bos_id = -1,
      .eos_id = -1}},
    {"qwen3-8b",
     {.arch = ARCH_QWEN3,
      .arch_name = "qwen3",
      .hidden = 4096,
      .layers = 36,
      .heads = 32,
      .kv_heads = 8,
      .head_dim = 128,
      .intermediate = 12288,
      .vocab = 151936,
      .max_ctx = 40960,
      .rms_eps = 1e-6,
      .rope_theta = 1000000,
      .tied_embeddings = 0,
      .qk_norm = 1,
      .bos_id = -1,
      .eos_id = -1}},
    {"smollm2-135m",
     {.arch = ARCH_LLAMA,
      .arch_name = "llama",
      .hidden = 576,
      .layers = 30,
      .heads = 9,
      .kv_heads = 3,
      .head_dim = 64,
      .intermediate = 1536,
      .vocab = 49152,
      .max_ctx = 8192,
      .rms_eps = 1e-5,
      .rope_theta = 100000,
      .tied_embeddings = 1,
      .bos_id = -1,
      .eos_id = -1}},
};

int model_preset(const char *name, ModelConfig *c) {
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
    if (!strcmp(presets[i].name, name)) {
      *c = presets[i].c;
      return 1;
    }
  return 0;
}

const char *model_preset_names(void) { return "qwen3-0.6b, llama-3.2-1b, qwen3-8b, smollm2-135m"; }
