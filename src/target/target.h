/* Target description: what the compiler may know about the device it compiles for. The backend fills it
 * from the device (CUDA: cuDeviceGetAttribute; CPU: sysconf and /sys), or a compile without a device
 * takes a named built-in description (target_builtin: "h200", "a100", "l4", "t4"; "host" for the CPU).
 * The tile stage reads it to choose schedules, the kernel and code stages read the limits it records;
 * no stage below holds a device fact of its own. */
#ifndef LATHE_TARGET_H
#define LATHE_TARGET_H
#include <stdint.h>
#include "../base/diag.h"
#include "../base/strbuf.h"

typedef enum Target { TARGET_CPU, TARGET_CUDA } Target;
const char *target_name(Target t);
int target_parse(const char *s, Target *out);

typedef struct TargetDesc {
  Target kind;
  char name[64]; /* a built-in name ("h200") or the device's own ("NVIDIA H200") */
  /* CUDA (0 on the CPU) */
  int cc_major, cc_minor; /* compute capability: sm_<major><minor> */
  int sms;                /* multiprocessors */
  int warp_size;
  int max_threads_per_block;
  int max_threads_per_sm;
  int smem_per_block;       /* bytes of shared memory a block has without opting in (static arrays) */
  int smem_per_block_optin; /* the most a block may opt in to (dynamic shared memory) */
  int smem_per_sm;
  int regs_per_block, regs_per_sm; /* 32-bit registers */
  int mem_clock_khz, bus_width_bits;
  /* CPU (0 on CUDA) */
  int cores;
  int vector_bytes; /* the widest SIMD register the compiler may assume (16 SSE/NEON, 32 AVX2, 64 AVX-512) */
  int64_t l1d_bytes, l3_bytes;
  /* both */
  int64_t l2_bytes;
} TargetDesc;

/* A named built-in description (1), or 0 when `name` is none of target_builtin_names(). */
int target_builtin(const char *name, TargetDesc *out);
/* A description from text: a built-in name, optionally followed by ':' and comma-separated FIELD=VALUE overrides
 * (the device the schedules are chosen for, made smaller or larger: "h200:sms=66,smem_per_sm=100K"). Fields:
 * sms, threads_per_block, threads_per_sm, smem_per_block, smem_optin, smem_per_sm, regs_per_block, regs_per_sm,
 * mem_clock_khz, bus_bits, l2, cc (8.0) on CUDA; cores, vector_bytes, l1d, l2, l3 on the CPU; sizes take a K or M
 * suffix. The result passes target_check; its name is the text (so the tuning database keeps it apart). 0 with
 * d saying which word is wrong (an unknown name: d names the built-ins). */
int target_from_spec(const char *spec, TargetDesc *out, Diag *d);
/* Applies `list` (FIELD=VALUE,... as in target_from_spec) to t, then target_check; 0 with d. */
int target_override(TargetDesc *t, const char *list, Diag *d);
/* The built-in names for a kind, comma-separated ("h200, a100, l4, t4" / "host"). */
const char *target_builtin_names(Target kind);
/* The description a compile without a device uses: h200 for CUDA, the host for the CPU. */
TargetDesc target_default(Target kind);
/* The CPU this process runs on: cores, vector width (cpuid through the compiler's builtins) and caches. */
void target_host(TargetDesc *out);
/* Refuses a description whose facts the stages rely on are missing or impossible (a backend's query
 * that failed, a hand-written description): 1 legal, 0 with d saying which field. */
int target_check(const TargetDesc *t, Diag *d);
/* bf16 mma.sync (m16n8k16): compute capability 8.0 or newer */
int target_has_bf16_mma(const TargetDesc *t);
/* The NVRTC architecture, "sm_90", into buf. */
void target_arch(const TargetDesc *t, char *buf, int cap);
/* Blocks of `threads` threads using `regs` registers each and `smem` bytes of shared memory that one
 * multiprocessor holds at once (at least 1 where one block fits at all, else 0). */
int target_resident_blocks(const TargetDesc *t, int threads, int regs, int smem);
/* Peak memory bandwidth in GB/s from the memory clock and bus width (double data rate); 0 if unknown. */
double target_bandwidth_gbs(const TargetDesc *t);
/* One line for `--ir tile`:  device h200: sm_90, 132 SMs, ... */
void target_print(StrBuf *b, const TargetDesc *t);
#endif
