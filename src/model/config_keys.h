/* Typed, range-checked reads of hyperparameters from a config.json object or from GGUF metadata. Every
 * error names the file and the key ("DIR/config.json: key 'max_position_embeddings' = 1099511627776 is too
 * large (at most 268435456)"). Shared by config.c and the architectures in arch/. */
#ifndef LATHE_MODEL_CONFIG_KEYS_H
#define LATHE_MODEL_CONFIG_KEYS_H
#include <jansson.h>
#include "../base/diag.h"

struct GgufFile;

/* A JSON object of a config file; prefix names nested objects in messages ("rope_scaling."). */
typedef struct HfObj {
  json_t *obj;
  const char *file;
  const char *prefix;
} HfObj;

/* Absent or null: an error when required, else *out keeps its default (returns 1). */
int hf_int(const HfObj *o, const char *key, int required, long long lo, long long hi, int *out, Diag *d);
int hf_num(const HfObj *o, const char *key, int required, double lo, double hi, double *out, Diag *d);
int hf_bool(const HfObj *o, const char *key, int *out, Diag *d);
/* A string key; absent or null gives *out = NULL (returns 1); another type is an error. */
int hf_str(const HfObj *o, const char *key, const char **out, Diag *d);

/* GGUF metadata "<arch>.<suffix>", the same rules. */
int gguf_key_int(const struct GgufFile *f, const char *arch, const char *suffix, int required, long long lo,
                 long long hi, int *out, Diag *d);
int gguf_key_num(const struct GgufFile *f, const char *arch, const char *suffix, int required, double lo, double hi,
                 double *out, Diag *d);
int gguf_key_str(const struct GgufFile *f, const char *arch, const char *suffix, const char **out, Diag *d);

/* Sane bounds shared by every architecture. */
#define HP_MAX_WIDTH (1LL << 20) /* hidden, intermediate, heads x head_dim */
#define HP_MAX_LAYERS 4096LL
#define HP_MAX_HEADS 4096LL
#define HP_MAX_VOCAB (1LL << 24)
#define HP_MAX_CTX (1LL << 28)
#define HP_MAX_ROPE_THETA 1e12
#endif
