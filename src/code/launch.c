/* The launch table (launch.h) of a rendered kernel program: the kernel stage's launch facts copied into
 * plain data, so the runtime needs nothing of the kernel or code stages. */
#include "code.h"
#include <string.h>

static const LaunchKernel *launch_kernel(const KKernel *kk, Arena *a);

static const LaunchGemmLib *launch_lib(const KGemmLib *l, Arena *a) {
  LaunchGemmLib *g = ARENA_NEW(a, LaunchGemmLib);
  g->nw = l->nw;
  for (int w = 0; w < l->nw && w < 2; w++) {
    g->w_param[w] = l->w_param[w];
    g->w_rows[w] = l->w_rows[w];
    g->w_at[w] = l->w_at[w];
  }
  g->k = l->k;
  g->a_parts = l->a_parts;
  g->m = l->m;
  g->planes_at = l->planes_at;
  g->epilogue = l->epilogue ? launch_kernel(l->epilogue, a) : NULL;
  g->a_sig = l->a_sig;
  g->a_bufs = l->a_bufs;
  g->na_bufs = l->a_sig ? l->na_bufs : -1;
  g->direct_out = l->direct_out;
  g->direct_add = l->direct_add;
  return g;
}

static void fill_kernel(LaunchKernel *lk, const KKernel *kk, Arena *a) {
  lk->name = kk->name;
  lk->fn = kk->code_name ? kk->code_name : kk->name;
  lk->nparams = kk->nparams;
  for (int i = 0; i < kk->nparams; i++) lk->params[i] = (LaunchParam){kk->params[i].buf, kk->params[i].is_output};
  lk->nsyms = kk->nsyms;
  for (int i = 0; i < kk->nsyms; i++) lk->syms[i] = kk->syms[i];
  lk->grid = kk->grid;
  lk->block = kk->block;
  lk->skip = kk->skip;
  lk->scratch = kk->scratch;
  lk->pre = kk->pre ? launch_kernel(kk->pre, a) : NULL;
  lk->alt = kk->alt ? launch_kernel(kk->alt, a) : NULL;
  lk->alt_when = kk->alt_when;
  lk->lib = kk->lib ? launch_lib(kk->lib, a) : NULL;
  lk->tensor_cores = kk->tensor_cores;
}

static const LaunchKernel *launch_kernel(const KKernel *kk, Arena *a) {
  LaunchKernel *lk = ARENA_NEW(a, LaunchKernel);
  fill_kernel(lk, kk, a);
  return lk;
}

const LaunchTable *code_launch_table(const KProgram *kp, Arena *a) {
  const LProgram *lp = kp->loop;
  LaunchTable *t = ARENA_NEW(a, LaunchTable);
  t->symbols_in_memory = code_symbols_in_memory(kp->target);
  LaunchBuf *bufs = ARENA_ARRAY(a, LaunchBuf, lp->nbufs ? lp->nbufs : 1);
  for (int i = 0; i < lp->nbufs; i++) {
    const LBuf *b = &lp->bufs[i];
    bufs[i] = (LaunchBuf){b->name, b->dtype, b->shape,
                          b->kind == BUF_INPUT    ? LB_INPUT
                          : b->kind == BUF_OUTPUT ? LB_OUTPUT
                                                  : LB_TEMP};
  }
  t->bufs = bufs;
  t->nbufs = lp->nbufs;
  int *io = ARENA_ARRAY(a, int, lp->ninputs + lp->noutputs + 1);
  memcpy(io, lp->inputs, sizeof(int) * (size_t)lp->ninputs);
  memcpy(io + lp->ninputs, lp->outputs, sizeof(int) * (size_t)lp->noutputs);
  t->inputs = io;
  t->ninputs = lp->ninputs;
  t->outputs = io + lp->ninputs;
  t->noutputs = lp->noutputs;
  const char **syms = ARENA_ARRAY(a, const char *, lp->nsymbols + 1);
  for (int i = 0; i < lp->nsymbols; i++) syms[i] = lp->symbols[i];
  t->symbols = syms;
  t->nsymbols = lp->nsymbols;
  LaunchKernel *ks = ARENA_ARRAY(a, LaunchKernel, kp->nkernels ? kp->nkernels : 1);
  for (int k = 0; k < kp->nkernels; k++) fill_kernel(&ks[k], &kp->kernels[k], a);
  t->kernels = ks;
  t->nkernels = kp->nkernels;
  return t;
}

int code_render_program(const KProgram *kp, Arena *a, StrBuf *out, const LaunchTable **launch, Diag *d) {
  if (!render_code(out, kp, d)) return 0;
  *launch = code_launch_table(kp, a);
  return 1;
}
