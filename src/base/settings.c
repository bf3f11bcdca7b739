/* The settings table: one entry per environment variable lathe reads. Adding one is a new SettingId and a
 * row here; `lathe env` lists it from then on. */
#include "settings.h"
#include "../base/mem.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const SettingInfo table[SET_COUNT] = {
    {SET_MODEL, "LATHE_MODEL", SETTING_PATH, "", "$XDG_CACHE_HOME/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf",
     "the model generate, chat and bench use when none is given"},
    {SET_CACHE_DIR, "LATHE_CACHE_DIR", SETTING_PATH, "", "$XDG_CACHE_HOME/lathe, else ~/.cache/lathe",
     "where compiled kernels (CPU .so files, CUDA cubins) are cached"},
    {SET_CC, "LATHE_CC", SETTING_STRING, "cc", NULL, "the C compiler the CPU backend runs on generated C"},
    {SET_CPU_BANDWIDTH, "LATHE_CPU_BANDWIDTH", SETTING_NUMBER, "", "none: no floor on the CPU",
     "this machine's memory bandwidth in GB/s, for bench's decode floor on the CPU"},
    {SET_PROFILE, "LATHE_PROFILE", SETTING_CHOICE, "0", NULL,
     "1: device time per kernel function at exit; steps: where a decode step's time goes"},
    {SET_CUDA_DEVICE, "LATHE_CUDA_DEVICE", SETTING_INT, "0", NULL, "the ordinal of the GPU to run on"},
    {SET_CUDA_GRAPHS, "LATHE_CUDA_GRAPHS", SETTING_BOOL, "1", NULL,
     "0: decode steps launch kernels one by one, not as a CUDA graph"},
    {SET_BATCH_GRAPHS, "LATHE_BATCH_GRAPHS", SETTING_INT, "4096", NULL,
     "batched steps of up to this many tokens replay a CUDA graph, recorded once two steps in a row have as many "
     "tokens; 0: none"},
    {SET_GRAPH_GEMM, "LATHE_GRAPH_GEMM", SETTING_BOOL, "1", NULL,
     "0: CUDA graphs do not record cuBLASLt GEMMs (graph-replayed steps run lathe's own GEMMs)"},
    {SET_PDL, "LATHE_PDL", SETTING_BOOL, "1", NULL, "0: no programmatic dependent launch in the decode graph (sm_90)"},
    {SET_CUBLASLT, "LATHE_CUBLASLT", SETTING_BOOL, "1", NULL,
     "0: prefill GEMMs run as lathe's own kernels, not cuBLASLt"},
    {SET_CUBLASLT_TUNE, "LATHE_CUBLASLT_TUNE", SETTING_BOOL, "1", NULL,
     "0: take cuBLASLt's heuristic first algorithm instead of measuring the candidates"},
    {SET_FLASH_DECODE, "LATHE_FLASH_DECODE", SETTING_BOOL, "1", NULL,
     "0: attention as three kernels instead of one (CUDA: a decode step's flash-decoding; the CPU: every step)"},
    {SET_DECODE_FILL, "LATHE_DECODE_FILL", SETTING_INT, "8", NULL,
     "flash-decoding splits keys into chunks until about this many blocks run on each multiprocessor (1-64)"},
    {SET_DECODE_VEC, "LATHE_DECODE_VEC", SETTING_BOOL, "1", NULL,
     "0: flash-decoding reads k and v one element a load, not 16 bytes a load with the next tile in flight; on the "
     "CPU, one head a work item and no vectors of a register's width"},
    {SET_DECODE_TILES, "LATHE_DECODE_TILES", SETTING_INT, "1", NULL,
     "flash-decoding's 16-byte form gives each key chunk at least this many tiles of 32 keys (1-64)"},
    {SET_ROWS_IN_L2, "LATHE_ROWS_IN_L2", SETTING_BOOL, "1", NULL,
     "0: long-row normalizations (RMSNorm, LayerNorm, softmax) too big for L2 keep a warp per row"},
    {SET_STORE_VEC, "LATHE_STORE_VEC", SETTING_INT, "0", NULL,
     "CUDA normalizations (RMSNorm, LayerNorm, softmax) write their rows this many f32 a thread step (4: 16-byte "
     "loads and stores; 0: one element, the default) where the row splits evenly; to compare without tuning"},
    {SET_QUANT_UNROLL, "LATHE_QUANT_UNROLL", SETTING_INT, "4", NULL,
     "CUDA: at most this many 8-element vectors per loop step where a reduction reads quantized weights (2-16)"},
    {SET_QUANT_DOT, "LATHE_QUANT_DOT", SETTING_BOOL, "1", NULL,
     "0: CUDA sums over quantized weights decode each element to f32 and multiply it, instead of summing the "
     "blocks' integer values times the activations and applying the scales once per 8 elements"},
    {SET_GEMV_ROWS, "LATHE_GEMV_ROWS", SETTING_INT, "", "chosen per kernel: 2-8 for quantized weights, else 1",
     "CUDA decode GEMVs: each warp computes this many output rows (1, 2, 4 or 8), reading the activations once "
     "for all of them"},
    {SET_QUANT_GEMV, "LATHE_QUANT_GEMV", SETTING_BOOL, "0", NULL,
     "1: CUDA decode GEMVs over quantized weights run on integer tensor cores with the activations as 24-bit integers "
     "(three int8 digits) instead of multiplying f32 activations (the loop nest); off: in decode steps it was not faster"},
    {SET_QGEMV_PREFETCH, "LATHE_QGEMV_PREFETCH", SETTING_BOOL, "1", NULL,
     "0: the quantized GEMV waits for the kernel before it first, instead of prefetching its weights into L2 "
     "while that kernel finishes (sm_90)"},
    {SET_FUSE_PROJ, "LATHE_FUSE_PROJECTIONS", SETTING_BOOL, "", "1 for batched steps on CUDA, else 0",
     "1: a batched step computes q/k/v and gate/up each as one GEMM over the weights stacked at load"},
    {SET_CPU_INT_DOT, "LATHE_CPU_INT_DOT", SETTING_BOOL, "1", NULL,
     "0: CPU projections over quantized weights decode the blocks to f32 (as dequantized, slower) instead of "
     "integer dot products with the activations quantized to int16 per 32 elements"},
    {SET_CPU_INT_TILE, "LATHE_CPU_INT_TILE", SETTING_BOOL, "1", NULL,
     "0: register-blocked CPU projections over quantized weights (a prefill's) decode each weight row to f32 and "
     "multiply in f32 instead of integer dot products with a tile of 8 activation rows quantized to int16"},
    {SET_CPU_HALF_DOT, "LATHE_CPU_HALF_DOT", SETTING_BOOL, "1", NULL,
     "0: CPU projections over f16 weights convert each weight in the sum's loop (software conversion) instead of "
     "dot products of the rows, converted by the hardware, with f32 activation rows computed once"},
    {SET_NVRTC_UNITS, "LATHE_NVRTC_UNITS", SETTING_INT, "16", NULL,
     "at most this many CUDA translation units compiled in parallel (1: one unit)"},
    {SET_HF_ENDPOINT, "LATHE_HF_ENDPOINT", SETTING_STRING, "https://huggingface.co", NULL,
     "the Hugging Face hub (or a mirror) lathe pull downloads from"},
    {SET_HF_TOKEN, "HF_TOKEN", SETTING_STRING, "", "unset", "the token lathe pull sends for gated models", 1},
    {SET_CUDA_HOME, "CUDA_HOME", SETTING_PATH, "/usr/local/cuda", NULL,
     "the CUDA toolkit; NVRTC is loaded from its lib64"},
    {SET_XDG_CACHE_HOME, "XDG_CACHE_HOME", SETTING_PATH, "", "~/.cache", "the base of the cache and model directories"},
    {SET_HOME, "HOME", SETTING_PATH, "", "the home directory", "where ~/.cache is, when XDG_CACHE_HOME is unset"},
};

/* Overrides: owned copies, set by setting_set. */
static char *override[SET_COUNT];
static int overridden[SET_COUNT];

const SettingInfo *setting_info(SettingId id) { return id >= 0 && id < SET_COUNT ? &table[id] : NULL; }

const SettingInfo *setting_find(const char *name) {
  for (int i = 0; i < SET_COUNT; i++)
    if (!strcmp(table[i].name, name)) return &table[i];
  return NULL;
}

const char *setting_type_name(SettingType t) {
  switch (t) {
  case SETTING_STRING: return "string";
  case SETTING_PATH: return "path";
  case SETTING_BOOL: return "bool";
  case SETTING_INT: return "integer";
  case SETTING_NUMBER: return "number";
  case SETTING_CHOICE: return "choice";
  }
  return "?";
}

const char *setting_str(SettingId id) {
  if (id < 0 || id >= SET_COUNT) return NULL;
  const char *v = overridden[id] ? override[id] : getenv(table[id].name);
  return v && *v ? v : NULL;
}

const char *setting_source(SettingId id) {
  if (id < 0 || id >= SET_COUNT) return "default";
  if (overridden[id]) return override[id] && *override[id] ? "set" : "default";
  return setting_str(id) ? "env" : "default";
}

int setting_bool(SettingId id, int def) {
  const char *v = setting_str(id);
  if (!v) return def;
  return !(!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"));
}

double setting_number(SettingId id, double def, int *ok) {
  const char *v = setting_str(id);
  if (ok) *ok = 1;
  if (!v) return def;
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end) {
    if (ok) *ok = 0;
    return def;
  }
  return x;
}

long setting_int(SettingId id, long def, int *ok) {
  const char *v = setting_str(id);
  if (ok) *ok = 1;
  if (!v) return def;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end) {
    if (ok) *ok = 0;
    return def;
  }
  return x;
}

void setting_set(SettingId id, const char *value) {
  if (id < 0 || id >= SET_COUNT) return;
  free(override[id]);
  override[id] = value ? xstrdup(value, "a setting") : NULL;
  overridden[id] = value != NULL;
}

int settings_cache_root(char *out, size_t n) {
  const char *v;
  int len;
  if ((v = setting_str(SET_CACHE_DIR))) len = snprintf(out, n, "%s", v);
  else if ((v = setting_str(SET_XDG_CACHE_HOME))) len = snprintf(out, n, "%s/lathe", v);
  else if ((v = setting_str(SET_HOME))) len = snprintf(out, n, "%s/.cache/lathe", v);
  else return 0;
  if (len < 0 || (size_t)len >= n) return 0;
  while (len > 1 && out[len - 1] == '/') out[--len] = '\0';
  return 1;
}
