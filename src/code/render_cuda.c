/* CUDA C for NVRTC: no #include at all (NVRTC runs with no include path); f16/bf16 conversions in
 * inline PTX, exact round-to-nearest-even as in the C renderer. */
#include <string.h>
#include "../backend/source_units.h"
#include "render_common.h"

static const char cuda_preamble[] =
    "typedef long long i64;\n"
    "struct alignas(8) lt_u2 { unsigned int x, y; };\n"
    "struct alignas(16) lt_u4 { unsigned int x, y, z, w; };\n"
    "\n"
    "static __device__ __forceinline__ float lt_f16_to_f32(unsigned short h) {\n"
    "  float f;\n"
    "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "  return f;\n"
    "}\n"
    "static __device__ __forceinline__ unsigned short lt_f32_to_f16(float f) {\n"
    "  unsigned short h;\n"
    "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "  return h;\n"
    "}\n"
    "static __device__ __forceinline__ float lt_bf16_to_f32(unsigned short h) {\n"
    "  return __uint_as_float(((unsigned int)h) << 16);\n"
    "}\n"
    "static __device__ __forceinline__ unsigned short lt_f32_to_bf16(float f) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "  unsigned short h;\n"
    "  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "  return h;\n"
    "#else\n"
    "  unsigned int x = __float_as_uint(f);\n"
    "  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);\n"
    "  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
    "#endif\n"
    "}\n"
    "static __device__ __forceinline__ float lt_f16_round(float f) { return lt_f16_to_f32(lt_f32_to_f16(f)); }\n"
    "static __device__ __forceinline__ float lt_bf16_round(float f) { return lt_bf16_to_f32(lt_f32_to_bf16(f)); }\n"
    "static __device__ __forceinline__ i64 lt_maxi(i64 a, i64 b) { return a > b ? a : b; }\n"
    "static __device__ __forceinline__ i64 lt_mini(i64 a, i64 b) { return a < b ? a : b; }\n"
    "static __device__ __forceinline__ i64 lt_absi(i64 a) { return a < 0 ? -a : a; }\n"
    "/* c += a (16x16 bf16) * b (16x8 bf16) on tensor cores; only tensor-core kernels (KS_MMA) call it */\n"
    "static __device__ __forceinline__ void lt_mma_bf16(float *c, const unsigned int *a, unsigned int b0, unsigned int b1) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, \"\n"
    "               \"{%0,%1,%2,%3};\" : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "#else\n"
    "  __trap(); /* bf16 mma needs sm_80 */\n"
    "#endif\n"
    "}\n"
    "/* Programmatic dependent launch (sm_90): every kernel lets the next one be scheduled, then waits\n"
    "   until the kernel before it has completed and its writes are visible. Without a programmatic\n"
    "   edge (ordinary launches, older GPUs) both are no-ops. */\n"
    "static __device__ __forceinline__ void lt_pdl(void) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
    "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "#endif\n"
    "}\n"
    "/* shared-memory staging of tensor-core kernels: addresses, 16-byte asynchronous copies, ldmatrix */\n"
    "static __device__ __forceinline__ unsigned int lt_smem_u32(const void *p) {\n"
    "  unsigned int r;\n"
    "  asm(\"{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }\" : \"=r\"(r) : \"l\"(p));\n"
    "  return r;\n"
    "}\n"
    "static __device__ __forceinline__ void lt_cp_async16(unsigned int dst, const void *src) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(dst), \"l\"(src) : \"memory\");\n"
    "#else\n"
    "  __trap();\n"
    "#endif\n"
    "}\n"
    "static __device__ __forceinline__ void lt_cp_async_commit(void) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "  asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n"
    "#endif\n"
    "}\n"
    "template <int N> static __device__ __forceinline__ void lt_cp_async_wait_group(void) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "  asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\");\n"
    "#endif\n"
    "}\n"
    "static __device__ __forceinline__ void lt_ldsm_x4(unsigned int *r, unsigned int addr) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "#else\n"
    "  __trap();\n"
    "#endif\n"
    "}\n"
    "static __device__ __forceinline__ void lt_ldsm_x4_trans(unsigned int *r, unsigned int addr) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3]) : \"r\"(addr));\n"
    "#else\n"
    "  __trap();\n"
    "#endif\n"
    "}\n"
    "/* two f32 values as a bf16 pair (the first in the low half), rounded, or split into hi + lo pairs */\n"
    "static __device__ __forceinline__ unsigned int lt_pack_bf16x2(float a, float b) {\n"
    "  return (unsigned int)lt_f32_to_bf16(a) | ((unsigned int)lt_f32_to_bf16(b) << 16);\n"
    "}\n"
    "static __device__ __forceinline__ void lt_split_bf16x2(float a, float b, unsigned int *hi, unsigned int *lo) {\n"
    "  const unsigned short ha = lt_f32_to_bf16(a), hb = lt_f32_to_bf16(b);\n"
    "  *hi = (unsigned int)ha | ((unsigned int)hb << 16);\n"
    "  *lo = lt_pack_bf16x2(a - lt_bf16_to_f32(ha), b - lt_bf16_to_f32(hb));\n"
    "}\n";

void rc_cuda_kernel(Render *R, const KKernel *kk) {
  StrBuf *o = R->out;
  if (!rc_kernel_begin(R, kk)) {
    rc_kernel_end(R);
    return;
  }
  int block = kk->block > 0 ? kk->block : 1;
  sb_puts(o, "\n" SOURCE_UNIT_MARK);
  sb_printf(o, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block, kk->name);
  for (int i = 0; i < kk->nparams; i++) {
    const KParam *p = &kk->params[i];
    sb_printf(o, "%s%s%s *__restrict__ %s", i ? ", " : "", p->is_output ? "" : "const ",
              rc_storage_type(R, R->lp->bufs[p->buf].dtype), R->buf_name[p->buf]);
  }
  if (kk->nsyms) sb_printf(o, "%sconst i64 *__restrict__ lt_syms", kk->nparams ? ", " : "");
  if (kk->scratch) sb_printf(o, "%sunsigned int *__restrict__ lt_scratch", kk->nparams || kk->nsyms ? ", " : "");
  sb_puts(o, ") {\n");
  sb_puts(o, "  lt_pdl();\n");
  for (int i = 0; i < kk->nsyms; i++) {
    int at = 0;
    while (at < R->lp->nsymbols && strcmp(R->lp->symbols[at], kk->syms[i])) at++;
    if (at == R->lp->nsymbols) {
      rc_fail(R, "symbol %s is not one of the program's symbols", kk->syms[i]);
      break;
    }
    sb_printf(o, "  const i64 %s = lt_syms[%d];\n", R->sym_name[i], at);
  }
  rc_body(R, 1);
  sb_puts(o, "}\n");
  rc_kernel_end(R);
}

int code_symbols_in_memory(Target t) { return t == TARGET_CUDA; }

int render_cuda(StrBuf *out, const KProgram *kp, Diag *d) {
  Render R = {0};
  R.out = out;
  R.kp = kp;
  R.d = d;
  R.cuda = 1;
  sb_puts(out, cuda_preamble);
  for (int i = 0; i < kp->nkernels && !R.failed; i++) {
    const KKernel *kk = &kp->kernels[i];
    if (!kk->code_name && !kk->skip) rc_cuda_kernel(&R, kk);
    if (kk->alt && !kk->alt->code_name && !kk->alt->skip && !R.failed) rc_cuda_kernel(&R, kk->alt);
    if (kk->alt && kk->alt->pre && !kk->alt->pre->code_name && !R.failed) rc_cuda_kernel(&R, kk->alt->pre);
    if (kk->alt && kk->alt->lib && !kk->alt->lib->epilogue->code_name && !R.failed)
      rc_cuda_kernel(&R, kk->alt->lib->epilogue);
  }
  return !R.failed;
}
