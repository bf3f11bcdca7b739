#include "random_weights.h"
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"
#include "../model/gguf.h"
#include "../model/quantize.h"

enum { PATTERN = 65521 }; /* prime, so rows do not line up with the pattern and blocks repeat every PATTERN */

static const float *pattern(void) {
  static float block[PATTERN];
  static int ready;
  if (!ready) {
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < PATTERN; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      block[i] = (float)(((double)(x >> 11) / 9007199254740992.0 * 2 - 1) * 0.0346);
    }
    ready = 1;
  }
  return block;
}

float random_weight_value(int64_t i) { return pattern()[i % PATTERN]; }

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

DType random_quant_weight_type(void *ctx, const char *name, int rank, int64_t row_len, DType fallback) {
  const RandomQuant *q = ctx;
  /* the rule reads GGUF names: the parts it singles out, the layer and whether this is the LM head */
  int layer = -1;
  if (!strncmp(name, "model.layers.", 13)) layer = atoi(name + 13);
  const char *gguf = has_suffix(name, ".self_attn.v_proj.weight") ? "blk.attn_v.weight"
                     : has_suffix(name, ".mlp.down_proj.weight")  ? "blk.ffn_down.weight"
                                                                  : name;
  int is_output =
      !strcmp(name, "lm_head.weight") || (q->cfg->tied_embeddings && !strcmp(name, "model.embed_tokens.weight"));
  int fell_back;
  int t = quant_tensor_type((QuantScheme)q->scheme, gguf, rank, row_len, layer, q->cfg->layers, is_output, &fell_back);
  DType out;
  return ggml_type_dtype(t, &out) && dtype_is_quant(out) ? out : fallback;
}

/* Block k of any tensor is block k % PATTERN of the period (block k starts at element k * B, and B is prime to
 * PATTERN). The period's first `have` blocks, quantized and dequantized, are kept per type and extended as
 * larger tensors need them: the blocks are made once, however many tensors read them. */
typedef struct Period {
  unsigned char *blocks;
  float *values;
  int64_t have;
} Period;

static const Period *period(DType quant, int64_t need, Diag *d) {
  static Period cache[DT_COUNT];
  Period *p = &cache[quant];
  if (need > PATTERN) need = PATTERN;
  if (p->have >= need) return p;
  int be = dtype_block_elems(quant), type = ggml_type_of_dtype(quant);
  size_t bb = dtype_block_bytes(quant);
  unsigned char *nb = mem_realloc(d, p->blocks, bb * (size_t)need, "random weights");
  if (!nb) return NULL;
  p->blocks = nb;
  float *nv = mem_realloc(d, p->values, sizeof(float) * (size_t)be * (size_t)need, "random weights");
  if (!nv) return NULL;
  p->values = nv;
  const float *pat = pattern();
  int64_t from = p->have * be, n = (need - p->have) * be;
  float *src = p->values + from;
  for (int64_t i = 0; i < n; i++) src[i] = pat[(from + i) % PATTERN];
  unsigned char *blocks = p->blocks + (size_t)p->have * bb;
  if (!ggml_quantize(type, src, blocks, n, d) || !ggml_dequantize(type, blocks, src, n, d)) return NULL;
  p->have = need;
  return p;
}

int random_weights_fill(const char *name, DType store, DType quant, void *dst, int64_t n, Diag *d) {
  int is_norm = has_suffix(name, "norm.weight");
  if (!dtype_is_quant(quant) || is_norm) {
    const float *pat = pattern();
    for (int64_t i = 0; i < n; i++) {
      float v = is_norm ? 1.0f : pat[i % PATTERN];
      if (store == DT_BF16) ((uint16_t *)dst)[i] = f32_to_bf16(v);
      else if (store == DT_F16) ((uint16_t *)dst)[i] = f32_to_f16(v);
      else ((float *)dst)[i] = v;
    }
    return 1;
  }
  int be = dtype_block_elems(quant);
  if (n % be) {
    diag_error(d, 0, 0, "random weights '%s': %lld elements are not whole %s blocks", name, (long long)n,
               dtype_name(quant));
    return 0;
  }
  const Period *p = period(quant, n / be, d);
  if (!p) return 0;
  if (store == quant) {
    size_t bb = dtype_block_bytes(quant);
    int64_t nblocks = n / be;
    for (int64_t k = 0; k < nblocks; k += PATTERN) {
      int64_t run = nblocks - k < PATTERN ? nblocks - k : PATTERN;
      memcpy((unsigned char *)dst + (size_t)k * bb, p->blocks, (size_t)run * bb);
    }
    return 1;
  }
  int64_t span = (int64_t)PATTERN * be;
  for (int64_t i = 0; i < n; i++) {
    float v = p->values[i % span];
    if (store == DT_BF16) ((uint16_t *)dst)[i] = f32_to_bf16(v);
    else if (store == DT_F16) ((uint16_t *)dst)[i] = f32_to_f16(v);
    else ((float *)dst)[i] = v;
  }
  return 1;
}
