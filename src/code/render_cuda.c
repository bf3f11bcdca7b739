/* CUDA C for NVRTC: no #include at all (NVRTC runs with no include path); f16/bf16 conversions in
 * inline PTX, exact round-to-nearest-even as in the C renderer. */
#include <string.h>
#include "../backend/source_units.h"
#include "render_common.h"
#include "templates.h"

/* The helpers every kernel may call: src/code/templates/preamble.cuh, embedded at build time. */
#define cuda_preamble lt_embed_preamble

void rc_cuda_kernel(Render *R, const KKernel *kk) {
  StrBuf *o = R->out;
  if (!rc_kernel_begin(R, kk)) {
    rc_kernel_end(R);
    return;
  }
  int block = kk->block > 0 ? kk->block : 1;
  sb_puts(o, "\n" SOURCE_UNIT_MARK);
  if (kk->min_blocks > 0)
    sb_printf(o, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", block, kk->min_blocks, kk->name);
  else sb_printf(o, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", block, kk->name);
  for (int i = 0; i < kk->nparams; i++) {
    const KParam *p = &kk->params[i];
    sb_printf(o, "%s%s%s *__restrict__ %s", i ? ", " : "", p->is_output ? "" : "const ",
              rc_storage_type(R, R->lp->bufs[p->buf].dtype), R->buf_name[p->buf]);
  }
  if (kk->nsyms) sb_printf(o, "%sconst i64 *__restrict__ lt_syms", kk->nparams ? ", " : "");
  if (kk->scratch) sb_printf(o, "%sunsigned int *__restrict__ lt_scratch", kk->nparams || kk->nsyms ? ", " : "");
  sb_puts(o, ") {\n");
  if (!kk->late_pdl) sb_puts(o, "  lt_pdl();\n");
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

/* Which template kernels (TPL_ bits) the statement tree s uses. */
enum { TPL_FLASH_DECODE = 1, TPL_FLASH = 2, TPL_MMA = 4, TPL_QGEMV = 8 };
static int stmt_templates(const KStmt *s) {
  if (!s) return 0;
  int t = s->kind == KS_FLASH && s->flash ? (s->flash->decode ? TPL_FLASH_DECODE : TPL_FLASH) : 0;
  if (s->kind == KS_MMA) t |= s->mma && s->mma->role == MMA_QGEMV ? TPL_QGEMV : TPL_MMA;
  for (int i = 0; i < s->nbody; i++) t |= stmt_templates(s->body[i]);
  return t;
}

static int kernel_templates(const KKernel *kk) {
  if (!kk) return 0;
  int t = stmt_templates(kk->body);
  if (kk->alt) t |= kernel_templates(kk->alt) | kernel_templates(kk->alt->pre);
  if (kk->lib) t |= kernel_templates(kk->lib->epilogue);
  return t;
}

int render_cuda(StrBuf *out, const KProgram *kp, Diag *d) {
  Render R = {0};
  R.out = out;
  R.kp = kp;
  R.d = d;
  R.dl = &rc_dialect_cuda;
  sb_puts(out, cuda_preamble);
  /* the template kernels the program instantiates, before the first unit mark: every unit may call them */
  int tpl = 0;
  for (int i = 0; i < kp->nkernels; i++) tpl |= kernel_templates(&kp->kernels[i]);
  if (tpl & TPL_MMA) sb_puts(out, lt_embed_mma);
  if (tpl & TPL_FLASH) sb_puts(out, lt_embed_flash);
  if (tpl & TPL_FLASH_DECODE) sb_puts(out, lt_embed_flash_decode);
  if (tpl & TPL_QGEMV) sb_puts(out, lt_embed_qgemv);
  rc_put_quant_decoders(out, kp, 1);
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
