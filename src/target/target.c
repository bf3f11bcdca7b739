/* Target descriptions: the built-in named devices, the host CPU's query, checks and printing. */
#include "target.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *target_name(Target t) { return t == TARGET_CUDA ? "cuda" : "cpu"; }

int target_parse(const char *s, Target *out) {
  if (!strcmp(s, "cpu")) *out = TARGET_CPU;
  else if (!strcmp(s, "cuda")) *out = TARGET_CUDA;
  else return 0;
  return 1;
}

/* Published figures (NVIDIA's data sheets and what cuDeviceGetAttribute reports on each device); the
 * memory clock is the one whose double data rate over the bus gives the published bandwidth. */
static const TargetDesc builtin_gpus[] = {
    /* H200 SXM: 132 SMs, 228 KB shared per SM (227 KB per block opted in), 50 MB L2, 6144-bit HBM3e
     * at 4.8 TB/s */
    {.kind = TARGET_CUDA,
     .name = "h200",
     .cc_major = 9,
     .cc_minor = 0,
     .sms = 132,
     .warp_size = 32,
     .max_threads_per_block = 1024,
     .max_threads_per_sm = 2048,
     .smem_per_block = 49152,
     .smem_per_block_optin = 232448,
     .smem_per_sm = 233472,
     .regs_per_block = 65536,
     .regs_per_sm = 65536,
     .mem_clock_khz = 3125000,
     .bus_width_bits = 6144,
     .l2_bytes = 50ll << 20},
    /* A100 SXM4 80 GB: 108 SMs, 164 KB shared per SM (163 KB per block), 40 MB L2, 5120-bit HBM2e at
     * 2.04 TB/s */
    {.kind = TARGET_CUDA,
     .name = "a100",
     .cc_major = 8,
     .cc_minor = 0,
     .sms = 108,
     .warp_size = 32,
     .max_threads_per_block = 1024,
     .max_threads_per_sm = 2048,
     .smem_per_block = 49152,
     .smem_per_block_optin = 166912,
     .smem_per_sm = 167936,
     .regs_per_block = 65536,
     .regs_per_sm = 65536,
     .mem_clock_khz = 1593000,
     .bus_width_bits = 5120,
     .l2_bytes = 40ll << 20},
    /* L4: 58 SMs (Ada, sm_89), 1536 threads and 100 KB shared per SM (99 KB per block), 48 MB L2,
     * 192-bit GDDR6 at 300 GB/s */
    {.kind = TARGET_CUDA,
     .name = "l4",
     .cc_major = 8,
     .cc_minor = 9,
     .sms = 58,
     .warp_size = 32,
     .max_threads_per_block = 1024,
     .max_threads_per_sm = 1536,
     .smem_per_block = 49152,
     .smem_per_block_optin = 101376,
     .smem_per_sm = 102400,
     .regs_per_block = 65536,
     .regs_per_sm = 65536,
     .mem_clock_khz = 6251000,
     .bus_width_bits = 192,
     .l2_bytes = 48ll << 20},
    /* T4: 40 SMs (Turing, sm_75: no bf16 mma), 1024 threads and 64 KB shared per SM, 4 MB L2,
     * 256-bit GDDR6 at 320 GB/s */
    {.kind = TARGET_CUDA,
     .name = "t4",
     .cc_major = 7,
     .cc_minor = 5,
     .sms = 40,
     .warp_size = 32,
     .max_threads_per_block = 1024,
     .max_threads_per_sm = 1024,
     .smem_per_block = 49152,
     .smem_per_block_optin = 65536,
     .smem_per_sm = 65536,
     .regs_per_block = 65536,
     .regs_per_sm = 65536,
     .mem_clock_khz = 5001000,
     .bus_width_bits = 256,
     .l2_bytes = 4ll << 20},
};
#define NBUILTIN (int)(sizeof builtin_gpus / sizeof builtin_gpus[0])

int target_builtin(const char *name, TargetDesc *out) {
  for (int i = 0; i < NBUILTIN; i++)
    if (!strcmp(name, builtin_gpus[i].name)) {
      *out = builtin_gpus[i];
      return 1;
    }
  if (!strcmp(name, "host")) {
    target_host(out);
    return 1;
  }
  return 0;
}

const char *target_builtin_names(Target kind) { return kind == TARGET_CUDA ? "h200, a100, l4, t4" : "host"; }

TargetDesc target_default(Target kind) {
  TargetDesc t;
  if (kind == TARGET_CUDA) t = builtin_gpus[0];
  else target_host(&t);
  return t;
}

/* The fields an override may set: where each lives and which kind of device has it. */
typedef struct OverrideField {
  const char *name;
  Target kind;
  size_t off;
  int wide; /* an int64_t field (cache sizes), else int */
} OverrideField;

#define OF(n, k, f, w)                                                                                                 \
  { n, k, offsetof(TargetDesc, f), w }
static const OverrideField override_fields[] = {
    OF("sms", TARGET_CUDA, sms, 0),
    OF("threads_per_block", TARGET_CUDA, max_threads_per_block, 0),
    OF("threads_per_sm", TARGET_CUDA, max_threads_per_sm, 0),
    OF("smem_per_block", TARGET_CUDA, smem_per_block, 0),
    OF("smem_optin", TARGET_CUDA, smem_per_block_optin, 0),
    OF("smem_per_sm", TARGET_CUDA, smem_per_sm, 0),
    OF("regs_per_block", TARGET_CUDA, regs_per_block, 0),
    OF("regs_per_sm", TARGET_CUDA, regs_per_sm, 0),
    OF("mem_clock_khz", TARGET_CUDA, mem_clock_khz, 0),
    OF("bus_bits", TARGET_CUDA, bus_width_bits, 0),
    OF("cores", TARGET_CPU, cores, 0),
    OF("vector_bytes", TARGET_CPU, vector_bytes, 0),
    OF("l1d", TARGET_CPU, l1d_bytes, 1),
    OF("l3", TARGET_CPU, l3_bytes, 1),
};
#undef OF

/* A non-negative count with an optional K / M suffix (x1024, x1048576). */
static int parse_size(const char *s, size_t n, int64_t *out) {
  int64_t v = 0, unit = 1;
  size_t i = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    v = v * 10 + (s[i] - '0');
    if (v > (1ll << 40)) return 0;
  }
  if (!i) return 0;
  if (i < n && (s[i] == 'K' || s[i] == 'k')) unit = 1 << 10, i++;
  else if (i < n && (s[i] == 'M' || s[i] == 'm')) unit = 1 << 20, i++;
  if (i != n) return 0;
  *out = v * unit;
  return 1;
}

static int override_one(TargetDesc *t, const char *word, size_t n, Diag *d) {
  const char *eq = memchr(word, '=', n);
  if (!eq || eq == word) {
    diag_error(d, 0, 0, "device override '%.*s' is not FIELD=VALUE", (int)n, word);
    return 0;
  }
  size_t klen = (size_t)(eq - word), vlen = n - klen - 1;
  const char *val = eq + 1;
  if (klen == 2 && !strncmp(word, "cc", 2) && t->kind == TARGET_CUDA) { /* compute capability MAJOR.MINOR */
    const char *dot = memchr(val, '.', vlen);
    int64_t major, minor;
    if (!dot || !parse_size(val, (size_t)(dot - val), &major) ||
        !parse_size(dot + 1, vlen - (size_t)(dot - val) - 1, &minor) || major > 99 || minor > 9) {
      diag_error(d, 0, 0, "device override cc=%.*s: expected MAJOR.MINOR (8.0)", (int)vlen, val);
      return 0;
    }
    t->cc_major = (int)major, t->cc_minor = (int)minor;
    return 1;
  }
  int64_t v;
  if (!parse_size(val, vlen, &v)) {
    diag_error(d, 0, 0, "device override %.*s: '%.*s' is not a count (an optional K or M suffix)", (int)klen, word,
               (int)vlen, val);
    return 0;
  }
  if (klen == 2 && !strncmp(word, "l2", 2)) {
    t->l2_bytes = v;
    return 1;
  }
  for (size_t i = 0; i < sizeof override_fields / sizeof override_fields[0]; i++) {
    const OverrideField *f = &override_fields[i];
    if (strlen(f->name) != klen || strncmp(f->name, word, klen) || f->kind != t->kind) continue;
    if (f->wide) *(int64_t *)((char *)t + f->off) = v;
    else if (v > 0x7fffffff) break;
    else *(int *)((char *)t + f->off) = (int)v;
    return 1;
  }
  diag_error(d, 0, 0, "device override '%.*s': no such %s field (%s)", (int)klen, word, target_name(t->kind),
             t->kind == TARGET_CUDA ? "sms, threads_per_block, threads_per_sm, smem_per_block, smem_optin, "
                                      "smem_per_sm, regs_per_block, regs_per_sm, mem_clock_khz, bus_bits, l2, cc"
                                    : "cores, vector_bytes, l1d, l2, l3");
  return 0;
}

int target_override(TargetDesc *t, const char *list, Diag *d) {
  for (const char *w = list; *w;) {
    const char *end = strchr(w, ',');
    size_t n = end ? (size_t)(end - w) : strlen(w);
    if (!override_one(t, w, n, d)) return 0;
    w += n + (end != NULL);
  }
  /* the opt-in shared memory is at least the static one, and no block gets more than a multiprocessor holds */
  if (t->kind == TARGET_CUDA) {
    if (t->smem_per_block_optin < t->smem_per_block) t->smem_per_block_optin = t->smem_per_block;
    if (t->smem_per_sm > 0 && t->smem_per_block_optin > t->smem_per_sm) t->smem_per_block_optin = t->smem_per_sm;
    if (t->smem_per_sm > 0 && t->smem_per_block > t->smem_per_sm) {
      diag_error(d, 0, 0, "device %s: %d bytes of shared memory per block but %d per multiprocessor", t->name,
                 t->smem_per_block, t->smem_per_sm);
      return 0;
    }
  }
  return target_check(t, d);
}

int target_from_spec(const char *spec, TargetDesc *out, Diag *d) {
  const char *colon = strchr(spec, ':');
  char base[64];
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
  snprintf(base, sizeof base, "%.*s", (int)(n < sizeof base ? n : sizeof base - 1), spec);
  if (n >= sizeof base || !target_builtin(base, out)) {
    diag_error(d, 0, 0, "unknown device '%s' (known: %s for cuda; %s for cpu)", base, target_builtin_names(TARGET_CUDA),
               target_builtin_names(TARGET_CPU));
    return 0;
  }
  if (!colon) return 1;
  if (!colon[1]) {
    diag_error(d, 0, 0, "device '%s': nothing after ':' (expected FIELD=VALUE,...)", spec);
    return 0;
  }
  snprintf(out->name, sizeof out->name, "%s", spec); /* a changed description is not the built-in one */
  return target_override(out, colon + 1, d);
}

/* A cache size from /sys (index0 L1d ... index3 L3), e.g. "48K"; 0 if absent. */
static int64_t sys_cache_bytes(int level, const char *type) {
  for (int i = 0; i < 8; i++) {
    char path[128], buf[32] = {0};
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int lv = 0;
    int got = fscanf(f, "%d", &lv);
    fclose(f);
    if (got != 1 || lv != level) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if (!(f = fopen(path, "r"))) continue;
    got = fscanf(f, "%31s", buf);
    fclose(f);
    if (got != 1 || (strcmp(buf, type) && strcmp(buf, "Unified"))) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!(f = fopen(path, "r"))) continue;
    long long v = 0;
    char unit = 0;
    got = fscanf(f, "%lld%c", &v, &unit);
    fclose(f);
    if (got < 1) continue;
    return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : v;
  }
  return 0;
}

static int64_t cache_bytes(int level, const char *type, int sc_name) {
  long v = sc_name >= 0 ? sysconf(sc_name) : -1;
  return v > 0 ? v : sys_cache_bytes(level, type);
}

void target_host(TargetDesc *out) {
  *out = (TargetDesc){.kind = TARGET_CPU};
  snprintf(out->name, sizeof out->name, "host");
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  out->cores = n > 0 ? (int)n : 1;
  out->vector_bytes = 16; /* SSE2 / NEON: every x86-64 and aarch64 CPU */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) out->vector_bytes = 64;
  else if (__builtin_cpu_supports("avx2")) out->vector_bytes = 32;
#endif
#ifdef _SC_LEVEL1_DCACHE_SIZE
  out->l1d_bytes = cache_bytes(1, "Data", _SC_LEVEL1_DCACHE_SIZE);
  out->l2_bytes = cache_bytes(2, "Unified", _SC_LEVEL2_CACHE_SIZE);
  out->l3_bytes = cache_bytes(3, "Unified", _SC_LEVEL3_CACHE_SIZE);
#else
  out->l1d_bytes = cache_bytes(1, "Data", -1);
  out->l2_bytes = cache_bytes(2, "Unified", -1);
  out->l3_bytes = cache_bytes(3, "Unified", -1);
#endif
}

int target_check(const TargetDesc *t, Diag *d) {
  const char *who = t->name[0] ? t->name : "?";
  if (t->kind == TARGET_CPU) {
    if (t->cores < 1 || t->vector_bytes < 4 || (t->vector_bytes & (t->vector_bytes - 1))) {
      diag_error(d, 0, 0, "device %s: %d cores and %d-byte vectors is not a CPU description", who, t->cores,
                 t->vector_bytes);
      return 0;
    }
    return 1;
  }
  struct {
    const char *what;
    int v;
  } need[] = {{"multiprocessors", t->sms},
              {"warp size", t->warp_size},
              {"threads per block", t->max_threads_per_block},
              {"threads per multiprocessor", t->max_threads_per_sm},
              {"shared memory per block", t->smem_per_block},
              {"shared memory per multiprocessor", t->smem_per_sm},
              {"registers per multiprocessor", t->regs_per_sm},
              {"compute capability", t->cc_major}};
  for (int i = 0; i < (int)(sizeof need / sizeof need[0]); i++)
    if (need[i].v <= 0) {
      diag_error(d, 0, 0, "device %s: %s is %d (the device did not report it)", who, need[i].what, need[i].v);
      return 0;
    }
  if (t->warp_size != 32) { /* the kernels' shuffles and lane arithmetic are written for 32 lanes */
    diag_error(d, 0, 0, "device %s: warp size %d (the generated kernels need 32)", who, t->warp_size);
    return 0;
  }
  if (t->max_threads_per_block % t->warp_size || t->max_threads_per_block > t->max_threads_per_sm) {
    diag_error(d, 0, 0, "device %s: %d threads per block with %d per multiprocessor and warps of %d", who,
               t->max_threads_per_block, t->max_threads_per_sm, t->warp_size);
    return 0;
  }
  return 1;
}

int target_has_bf16_mma(const TargetDesc *t) { return t->kind == TARGET_CUDA && t->cc_major >= 8; }

void target_arch(const TargetDesc *t, char *buf, int cap) {
  snprintf(buf, (size_t)cap, "sm_%d%d", t->cc_major, t->cc_minor);
}

int target_resident_blocks(const TargetDesc *t, int threads, int regs, int smem) {
  if (threads < 1 || threads > t->max_threads_per_block) return 0;
  int n = t->max_threads_per_sm / threads;
  if (regs > 0 && t->regs_per_sm > 0) {
    int by_regs = t->regs_per_sm / (threads * regs);
    if (by_regs < n) n = by_regs;
  }
  if (smem > 0) {
    if (smem > t->smem_per_block_optin && smem > t->smem_per_block) return 0;
    int by_smem = t->smem_per_sm / smem;
    if (by_smem < n) n = by_smem;
  }
  return n;
}

double target_bandwidth_gbs(const TargetDesc *t) {
  return 2.0 * t->mem_clock_khz * 1e3 * (t->bus_width_bits / 8) / 1e9;
}

void target_print(StrBuf *b, const TargetDesc *t) {
  if (t->kind == TARGET_CPU) {
    sb_printf(b, "device %s: %d cores, %d-byte vectors, L1d %lld KB, L2 %lld KB, L3 %lld KB", t->name, t->cores,
              t->vector_bytes, (long long)(t->l1d_bytes >> 10), (long long)(t->l2_bytes >> 10),
              (long long)(t->l3_bytes >> 10));
    return;
  }
  sb_printf(b,
            "device %s: sm_%d%d, %d SMs, warp %d, %d threads/block, %d threads/SM, shared %d KB/block "
            "(%d KB opt-in) %d KB/SM, %d registers/SM, L2 %lld MB, %.0f GB/s%s",
            t->name, t->cc_major, t->cc_minor, t->sms, t->warp_size, t->max_threads_per_block, t->max_threads_per_sm,
            t->smem_per_block >> 10, t->smem_per_block_optin >> 10, t->smem_per_sm >> 10, t->regs_per_sm,
            (long long)(t->l2_bytes >> 20), target_bandwidth_gbs(t),
            target_has_bf16_mma(t) ? ", bf16 mma" : ", no bf16 mma");
}
