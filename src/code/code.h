/* Code stage: source text for one target from the kernel stage.
 *
 * ABI of generated code (the backends rely on it):
 *  - C (cpu): per kernel, `void NAME(void *const *lt_bufs, const int64_t *lt_syms)` with external linkage;
 *    lt_bufs[i] is the i-th KParam's buffer, lt_syms[j] the value of KKernel.syms[j].
 *  - CUDA: per kernel, `extern "C" __global__ void NAME(T0 *b0, ..., const long long *lt_syms)` with
 *    the buffer parameters in KParam order, then, if the kernel uses symbols, a device pointer to the
 *    program's symbol table (LProgram.symbols order) from which it reads their values; launched with
 *    grid = KKernel.grid (evaluated with the symbol values) blocks of KKernel.block threads. Symbols
 *    in memory keep a replayed CUDA graph's arguments fixed while `past` changes every step.
 *    Each kernel is preceded by a line SOURCE_UNIT_MARK (backend/source_units.h) and calls only the
 *    helpers before the first such line, so the backend may compile groups of kernels as separate
 *    translation units, in parallel.
 *  f16 and bf16 are stored as 16-bit integers and converted by helpers the source defines itself,
 *  so neither target needs headers beyond the C standard library (NVRTC needs none at all).
 */
#ifndef LATHE_CODE_H
#define LATHE_CODE_H
#include "../base/diag.h"
#include "../kernel/kernel.h"
#include "launch.h"

/* The whole program as one translation unit. Returns 0 and sets diag if a primitive is not
 * available on the target. */
int render_c(StrBuf *out, const KProgram *kp, Diag *d);
int render_cuda(StrBuf *out, const KProgram *kp, Diag *d);
int render_code(StrBuf *out, const KProgram *kp, Diag *d); /* by kp->target */
/* The source and its launch table (launch.h, allocated in arena): what the runtime takes. */
int code_render_program(const KProgram *kp, Arena *arena, StrBuf *out, const LaunchTable **launch, Diag *d);
const LaunchTable *code_launch_table(const KProgram *kp, Arena *arena);
/* Whether kernels of target t read symbols from a device table (1) or take them by value (0). */
int code_symbols_in_memory(Target t);
/* Finds kernels whose code is identical up to buffer names (a transformer's layers) and points their
 * code_name at the first one, so each distinct kernel is compiled once. Returns the number of distinct
 * kernels, or -1 on error. */
int code_dedupe(KProgram *kp, Diag *d);
#endif
