/* `lathe quantize`: a model read through the WeightStore (Hugging Face directory or GGUF, so any
 * input lathe loads, dequantized to f32 first) written as a GGUF v3 file in llama.cpp's conventions:
 * GGUF tensor names, ggml dimension order, llama.cpp's q/k row permutation for the "llama"
 * architecture, the metadata keys llama.cpp's loader reads, and the tokenizer copied from a GGUF input.
 *
 * Type rule (as llama-quantize's mixtures):
 *   - 1-D tensors (norms, biases, rope_freqs) stay f32;
 *   - q8_0, q4_0, q4_1, q6_k: every matrix in that type, except the LM head (output.weight, or
 *     token_embd.weight when tied) which gets q6_k for all but q8_0;
 *   - q4_k_m / q5_k_m: q4_k / q5_k for every matrix, q6_k for the LM head and for attn_v and ffn_down
 *     in the layers llama.cpp's use_more_bits picks: the first and last eighth of the layers and every
 *     third layer between (i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2);
 *   - a row length that is not a multiple of the type's block: q4_k → q5_0, q5_k → q5_1, q6_k → q8_0
 *     (llama.cpp's fallbacks), and when the row is not a multiple of 32 either, f16;
 *   - f16, bf16, f32: every matrix, the LM head too, in that type (llama-quantize's F16 / BF16 / F32).
 * A Hugging Face directory's tokenizer is not converted (lathe cannot yet write tokenizer.ggml.* from
 * tokenizer.json); the file then carries bos/eos ids only and `lathe generate` needs a token-id input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/notice.h"
#include "gguf.h"
#include "gguf_write.h"
#include "quantize.h"
#include "weights.h"

static const struct {
  const char *name;
  QuantScheme s;
  int base, file_type; /* llama.cpp's LLAMA_FTYPE_MOSTLY_* */
} schemes[] = {{"q8_0", QUANT_Q8_0, GGML_Q8_0, 7},      {"q4_0", QUANT_Q4_0, GGML_Q4_0, 2},
               {"q4_1", QUANT_Q4_1, GGML_Q4_1, 3},      {"q4_k_m", QUANT_Q4_K_M, GGML_Q4_K, 15},
               {"q5_k_m", QUANT_Q5_K_M, GGML_Q5_K, 17}, {"q6_k", QUANT_Q6_K, GGML_Q6_K, 18},
               {"f16", QUANT_F16, GGML_F16, 1},         {"bf16", QUANT_BF16, GGML_BF16, 32},
               {"f32", QUANT_F32, GGML_F32, 0}};
enum { N_SCHEMES = sizeof schemes / sizeof schemes[0] };

static int scheme_named(const char *name, int n, QuantScheme *out) {
  for (int i = 0; i < n; i++)
    if (strcmp(name, schemes[i].name) == 0) {
      *out = schemes[i].s;
      return 1;
    }
  return 0;
}

int quant_scheme_from_name(const char *name, QuantScheme *out) { return scheme_named(name, QUANT_F16, out); }
int quant_output_from_name(const char *name, QuantScheme *out) { return scheme_named(name, N_SCHEMES, out); }
const char *quant_scheme_name(QuantScheme s) { return schemes[s].name; }
const char *quant_scheme_names(void) { return "q8_0, q4_0, q4_1, q4_k_m, q5_k_m, q6_k"; }
const char *quant_output_names(void) { return "q8_0, q4_0, q4_1, q4_k_m, q5_k_m, q6_k, f16, bf16, f32"; }

static int use_more_bits(int layer, int n) { return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2; }

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

int quant_tensor_type(QuantScheme s, const char *name, int n_dims, int64_t row_len, int layer, int n_layers,
                      int is_output, int *fallback) {
  *fallback = 0;
  if (n_dims < 2) return GGML_F32;
  int t = schemes[s].base;
  if (s >= QUANT_F16) return t;
  if (is_output && s != QUANT_Q8_0) t = GGML_Q6_K;
  if ((s == QUANT_Q4_K_M || s == QUANT_Q5_K_M) && layer >= 0 &&
      (has_suffix(name, ".attn_v.weight") || has_suffix(name, ".ffn_down.weight")) && use_more_bits(layer, n_layers))
    t = GGML_Q6_K;
  int be;
  ggml_type_block(t, &be, NULL);
  if (row_len % be == 0) return t;
  *fallback = 1;
  t = t == GGML_Q4_K ? GGML_Q5_0 : t == GGML_Q5_K ? GGML_Q5_1 : t == GGML_Q6_K ? GGML_Q8_0 : t;
  return row_len % 32 == 0 ? t : GGML_F16;
}

/* Hugging Face per-layer names and their GGUF counterparts. */
static const struct {
  const char *hf, *gguf;
} layer_parts[] = {{"input_layernorm.weight", "attn_norm.weight"},
                   {"self_attn.q_proj.weight", "attn_q.weight"},
                   {"self_attn.q_proj.bias", "attn_q.bias"},
                   {"self_attn.k_proj.weight", "attn_k.weight"},
                   {"self_attn.k_proj.bias", "attn_k.bias"},
                   {"self_attn.v_proj.weight", "attn_v.weight"},
                   {"self_attn.v_proj.bias", "attn_v.bias"},
                   {"self_attn.o_proj.weight", "attn_output.weight"},
                   {"self_attn.q_norm.weight", "attn_q_norm.weight"},
                   {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                   {"post_attention_layernorm.weight", "ffn_norm.weight"},
                   {"mlp.gate_proj.weight", "ffn_gate.weight"},
                   {"mlp.up_proj.weight", "ffn_up.weight"},
                   {"mlp.down_proj.weight", "ffn_down.weight"}};
enum { N_PARTS = sizeof layer_parts / sizeof layer_parts[0] };

static const char *gguf_arch(const ModelConfig *c) {
  return c->arch == ARCH_QWEN2 ? "qwen2" : c->arch == ARCH_QWEN3 ? "qwen3" : "llama";
}

static void meta_u32(GgufWriter *w, const char *arch, const char *suffix, uint32_t v) {
  char key[160];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  gguf_writer_u32(w, key, v);
}

static void meta_f32(GgufWriter *w, const char *arch, const char *suffix, double v) {
  char key[160];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  gguf_writer_f32(w, key, (float)v);
}

static const char *base_name(const char *path) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  static char buf[256];
  size_t start = n;
  while (start > 0 && path[start - 1] != '/') start--;
  snprintf(buf, sizeof buf, "%.*s", (int)(n - start), path + start);
  if (has_suffix(buf, ".gguf")) buf[strlen(buf) - 5] = 0;
  return buf;
}

/* Metadata: a GGUF input's pairs are copied (its hyperparameters and tokenizer) but for the keys this
 * file redefines; a Hugging Face input's come from its config. */
static int write_metadata(GgufWriter *w, WeightStore *ws, const ModelConfig *c, const char *in, QuantScheme s,
                          QuantReport *rep) {
  GgufFile *g = weights_gguf(ws);
  const char *arch = gguf_arch(c);
  if (g) {
    for (size_t i = 0; i < gguf_kv_count(g); i++) {
      const char *key = gguf_kv_key(g, i);
      if (!strcmp(key, "general.file_type") || !strcmp(key, "general.quantization_version") ||
          !strcmp(key, "general.alignment"))
        continue;
      GgufValueType type;
      const void *bytes;
      size_t len;
      gguf_kv_raw(g, i, &type, &bytes, &len);
      gguf_writer_raw(w, key, type, bytes, len);
    }
    rep->tokenizer = gguf_writer_has_key(w, "tokenizer.ggml.model");
  } else {
    gguf_writer_str(w, "general.architecture", arch);
    gguf_writer_str(w, "general.name", base_name(in));
    meta_u32(w, arch, "context_length", (uint32_t)c->max_ctx);
    meta_u32(w, arch, "embedding_length", (uint32_t)c->hidden);
    meta_u32(w, arch, "block_count", (uint32_t)c->layers);
    meta_u32(w, arch, "feed_forward_length", (uint32_t)c->intermediate);
    meta_u32(w, arch, "attention.head_count", (uint32_t)c->heads);
    meta_u32(w, arch, "attention.head_count_kv", (uint32_t)c->kv_heads);
    meta_u32(w, arch, "attention.key_length", (uint32_t)c->head_dim);
    meta_u32(w, arch, "attention.value_length", (uint32_t)c->head_dim);
    meta_u32(w, arch, "rope.dimension_count", (uint32_t)c->head_dim);
    meta_u32(w, arch, "vocab_size", (uint32_t)c->vocab);
    meta_f32(w, arch, "attention.layer_norm_rms_epsilon", c->rms_eps);
    meta_f32(w, arch, "rope.freq_base", c->rope_theta);
    if (c->rope_llama3) meta_u32(w, arch, "rope.scaling.original_context_length", (uint32_t)c->rope_orig_ctx);
    if (c->bos_id >= 0) gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_id);
    if (c->eos_id >= 0) gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_id);
    rep->tokenizer = 0;
  }
  gguf_writer_u32(w, "general.quantization_version", 2);
  gguf_writer_u32(w, "general.file_type", (uint32_t)schemes[s].file_type);
  return 1;
}

/* llama.cpp's rope_freqs.weight for Llama 3 RoPE scaling: the per-frequency divisor (the formula
 * config.c checks a GGUF's table against). */
static void llama3_rope_freqs(const ModelConfig *c, float *out) {
  int half = c->head_dim / 2;
  double low_wl = c->rope_orig_ctx / c->rope_low_freq, high_wl = c->rope_orig_ctx / c->rope_high_freq;
  for (int i = 0; i < half; i++) {
    double wavelen = 2 * M_PI / pow(c->rope_theta, -2.0 * i / c->head_dim), f;
    if (wavelen < high_wl) f = 1.0;
    else if (wavelen > low_wl) f = c->rope_factor;
    else {
      double smooth = (c->rope_orig_ctx / wavelen - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
      f = 1.0 / ((1 - smooth) / c->rope_factor + smooth);
    }
    out[i] = (float)f;
  }
}

typedef struct Job {
  const char *hf, *gguf; /* source name in the store, GGUF name */
  int layer, permute_heads, is_output;
} Job;

/* Quantizes one tensor (f32 rows in src, PyTorch dims) and hands it to the writer. */
static int put_tensor(GgufWriter *w, const Job *j, const WeightInfo *info, float *src, const ModelConfig *c,
                      QuantScheme s, QuantReport *rep, Diag *d) {
  int n_dims = info->rank;
  int64_t ne[4], n = 1;
  for (int k = 0; k < n_dims; k++) {
    ne[k] = info->dims[n_dims - 1 - k];
    n *= ne[k];
  }
  int64_t row_len = ne[0], rows = row_len ? n / row_len : 0;
  if (j->permute_heads) {
    /* llama.cpp's permutation: GGUF row g (head h, position p) is HF row h*hd + (p%2)*hd/2 + p/2. */
    int64_t r = n_dims >= 2 ? rows : n, len = n_dims >= 2 ? row_len : 1, hd = r / j->permute_heads;
    float *tmp = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!tmp) {
      diag_error(d, 0, 0, "out of memory permuting '%s'", j->hf);
      return 0;
    }
    for (int64_t g = 0; g < r; g++) {
      int64_t hf = g / hd * hd + (g % hd % 2) * (hd / 2) + g % hd / 2;
      memcpy(tmp + g * len, src + hf * len, sizeof(float) * (size_t)len);
    }
    memcpy(src, tmp, sizeof(float) * (size_t)n);
    free(tmp);
  }
  int fallback;
  int type = quant_tensor_type(s, j->gguf, n_dims, row_len, j->layer, c->layers, j->is_output, &fallback);
  int be;
  size_t bb;
  ggml_type_block(type, &be, &bb);
  size_t nbytes = (size_t)(n / be) * bb;
  void *buf = malloc(nbytes ? nbytes : 1);
  if (!buf) {
    diag_error(d, 0, 0, "out of memory quantizing '%s'", j->hf);
    return 0;
  }
  int ok = ggml_quantize(type, src, buf, n, d) && gguf_writer_tensor(w, j->gguf, type, n_dims, ne, buf, nbytes, d);
  free(buf);
  if (ok) {
    rep->n_tensors++;
    rep->n_fallback += fallback;
    rep->n_by_type[type]++;
    rep->in_params += n;
  }
  return ok;
}

int quantize_model(const char *in, const char *out, QuantScheme s, QuantReport *rep, Diag *d) {
  memset(rep, 0, sizeof *rep);
  ModelConfig c;
  WeightStore *ws = weights_open(in, &c, d);
  if (!ws) return 0;
  GgufWriter *w = gguf_writer_new();
  int n_jobs_max = 4 + c.layers * N_PARTS, n_jobs = 0;
  Job *jobs = calloc((size_t)n_jobs_max, sizeof *jobs);
  char **names = calloc((size_t)n_jobs_max, sizeof *names);
  int ok = w && jobs && names;
  if (!ok) diag_error(d, 0, 0, "out of memory");
  int permuted = c.arch == ARCH_LLAMA || c.arch == ARCH_MISTRAL;
  int has_output = weights_has(ws, "lm_head.weight", NULL);
  if (ok) {
    write_metadata(w, ws, &c, in, s, rep);
    /* GGUF's order: rope table, embeddings, the blocks, final norm, LM head. */
    jobs[n_jobs++] = (Job){"model.embed_tokens.weight", "token_embd.weight", -1, 0, !has_output};
    for (int l = 0; l < c.layers; l++)
      for (int p = 0; p < N_PARTS; p++) {
        char hf[160], gg[160];
        snprintf(hf, sizeof hf, "model.layers.%d.%s", l, layer_parts[p].hf);
        snprintf(gg, sizeof gg, "blk.%d.%s", l, layer_parts[p].gguf);
        if (!weights_has(ws, hf, NULL)) continue;
        names[n_jobs] = malloc(strlen(hf) + strlen(gg) + 2);
        if (!names[n_jobs]) {
          ok = 0;
          break;
        }
        strcpy(names[n_jobs], hf);
        strcpy(names[n_jobs] + strlen(hf) + 1, gg);
        int heads = strstr(hf, ".q_proj.") ? c.heads : strstr(hf, ".k_proj.") ? c.kv_heads : 0;
        jobs[n_jobs] = (Job){names[n_jobs], names[n_jobs] + strlen(hf) + 1, l, permuted ? heads : 0, 0};
        n_jobs++;
      }
    jobs[n_jobs++] = (Job){"model.norm.weight", "output_norm.weight", -1, 0, 0};
    if (has_output) jobs[n_jobs++] = (Job){"lm_head.weight", "output.weight", -1, 0, 1};
  }
  if (ok && (c.rope_llama3 || weights_has(ws, "rope_freqs.weight", NULL))) {
    int half = c.head_dim / 2;
    float *fr = malloc(sizeof(float) * (size_t)half);
    ok = fr != NULL;
    if (ok && weights_has(ws, "rope_freqs.weight", NULL)) ok = weights_read(ws, "rope_freqs.weight", DT_F32, fr, d);
    else if (ok) llama3_rope_freqs(&c, fr);
    int64_t ne[1] = {half};
    if (ok) ok = gguf_writer_tensor(w, "rope_freqs.weight", GGML_F32, 1, ne, fr, sizeof(float) * (size_t)half, d);
    free(fr);
  }
  for (int i = 0; ok && i < n_jobs; i++) {
    WeightInfo info;
    if (!weights_has(ws, jobs[i].hf, &info)) {
      diag_error(d, 0, 0, "%s: the model has no tensor '%s'", in, jobs[i].hf);
      ok = 0;
      break;
    }
    int64_t n = 1;
    for (int k = 0; k < info.rank; k++) n *= info.dims[k];
    float *src = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!src) {
      diag_error(d, 0, 0, "out of memory reading '%s'", jobs[i].hf);
      ok = 0;
      break;
    }
    ok = weights_read(ws, jobs[i].hf, DT_F32, src, d) && put_tensor(w, &jobs[i], &info, src, &c, s, rep, d);
    free(src);
    notice_progress("quantize", i + 1, n_jobs);
  }
  notice(NOTICE_PROGRESS_END, "quantize");
  if (ok) {
    rep->out_bytes = gguf_writer_write(w, out, d);
    ok = rep->out_bytes > 0;
  }
  for (int i = 0; names && i < n_jobs; i++) free(names[i]);
  free(names);
  free(jobs);
  gguf_writer_free(w);
  weights_close(ws);
  return ok;
}
