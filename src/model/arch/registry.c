/* The architecture registry (arch.h): adding one is a new arch/<name>.c with its ArchDesc, a ModelArch entry
 * and a line in the table below. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "../../base/arena.h"
#include "../config.h"
#include "arch.h"

extern const ArchDesc ARCH_DESC_LLAMA, ARCH_DESC_QWEN2, ARCH_DESC_QWEN3, ARCH_DESC_MISTRAL;

/* Indexed by ModelArch. */
static const ArchDesc *const ARCHS[ARCH_COUNT] = {
    [ARCH_LLAMA] = &ARCH_DESC_LLAMA,
    [ARCH_QWEN2] = &ARCH_DESC_QWEN2,
    [ARCH_QWEN3] = &ARCH_DESC_QWEN3,
    [ARCH_MISTRAL] = &ARCH_DESC_MISTRAL,
};

const ArchDesc *arch_find(const char *name) {
  for (int i = 0; i < ARCH_COUNT; i++)
    if (!strcmp(name, ARCHS[i]->name) || !strcmp(name, ARCHS[i]->hf_class)) return ARCHS[i];
  return NULL;
}

const ArchDesc *arch_get(ModelArch id) { return id >= 0 && id < ARCH_COUNT ? ARCHS[id] : NULL; }

const char *arch_supported(void) { return "llama, mistral, qwen2, qwen3"; }

Graph *model_build(const ModelConfig *c, const ModelBuildOptions *o, Arena *arena, ExprPool *pool, Diag *d) {
  const ArchDesc *a = arch_get(c->arch);
  if (!a) {
    diag_error(d, 0, 0, "model config has no known architecture (%d)", (int)c->arch);
    return NULL;
  }
  return a->build(c, o, arena, pool, d);
}

int model_input_is_weight(const char *name) {
  return strcmp(name, "ids") && strcmp(name, "pos") && strcmp(name, "rope.inv_freq") && strncmp(name, "cache.", 6);
}

/* Layer index and the part after it of "<prefix><N>.<part>"; NULL if name is not of that form. */
static const char *layer_part(const char *name, const char *prefix, long *layer) {
  size_t pl = strlen(prefix);
  if (strncmp(name, prefix, pl) != 0) return NULL;
  char *end;
  errno = 0;
  long n = strtol(name + pl, &end, 10);
  if (!isdigit((unsigned char)name[pl]) || *end != '.' || errno) return NULL;
  *layer = n;
  return end + 1;
}

/* Maps "<from_prefix>N.<part>.weight|bias" to "<to_prefix>N.<mapped part>.weight|bias" through the pairs. */
static const char *map_name(const ArchDesc *a, Arena *arena, const char *name, int to_hf) {
  for (const TensorNamePair *t = a->top; t->gguf; t++)
    if (!strcmp(name, to_hf ? t->gguf : t->hf)) return to_hf ? t->hf : t->gguf;
  long n;
  const char *part = layer_part(name, to_hf ? "blk." : "model.layers.", &n), *dot = part ? strrchr(part, '.') : NULL;
  if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0)) return NULL;
  for (const TensorNamePair *t = a->layer; t->gguf; t++) {
    const char *from = to_hf ? t->gguf : t->hf, *to = to_hf ? t->hf : t->gguf;
    if (strlen(from) == (size_t)(dot - part) && !strncmp(part, from, (size_t)(dot - part)))
      return arena_printf(arena, "%s%ld.%s%s", to_hf ? "model.layers." : "blk.", n, to, dot);
  }
  return NULL;
}

const char *arch_gguf_to_hf(const ArchDesc *a, Arena *arena, const char *g) { return map_name(a, arena, g, 1); }
const char *arch_hf_to_gguf(const ArchDesc *a, Arena *arena, const char *hf) { return map_name(a, arena, hf, 0); }
