#include "execute.h"
#include <string.h>

int execute_program(const Compilation *c, Backend *be, const SymEnv *env, uint64_t seed, Execution *x, Diag *d) {
  memset(x, 0, sizeof *x);
  if (!graph_check_sizes(c->graph, env, d)) return 0; /* before compiling: sizes that overflow, empty argmax */
  for (int i = 0; i < c->loop->nbufs; i++) /* intermediates too (attention's scores), before any allocation */
    if (shape_numel_eval(&c->loop->bufs[i].shape, env) < 0) {
      diag_error(d, 0, 0, "buffer '%s' would have more than 2^56 elements at these sizes", c->loop->bufs[i].name);
      return 0;
    }
  if (!(x->plan = plan_new(c->launch, sb_str((StrBuf *)&c->code), be, d))) return 0;
  if (!make_inputs(c->graph, env, seed, x->in, x->ref_in, d)) return 0;
  x->nin = c->graph->ninputs;
  const LProgram *lp = c->loop;
  void *outp[LT_MAX_OUTPUTS];
  for (int i = 0; i < lp->noutputs; i++) {
    const LBuf *b = &lp->bufs[lp->outputs[i]];
    if (!host_tensor_alloc(&x->out[i], b->dtype, &b->shape, env, d)) return 0;
    x->nout++;
    outp[i] = x->out[i].data;
  }
  for (int i = 0; i < x->nin; i++) x->in_ptr[i] = x->in[i].data;
  return plan_run(x->plan, env, x->in_ptr, outp, d);
}

int execute_check(const Compilation *c, const Execution *x, const SymEnv *env, double *err, Diag *d) {
  RefTensor ref[LT_MAX_OUTPUTS] = {0};
  if (!ref_eval(c->graph, env, x->ref_in, ref, d)) return 0;
  for (int i = 0; i < x->nout; i++) {
    err[i] = compare_output(&x->out[i], &ref[i]);
    ref_tensor_free(&ref[i]);
  }
  return 1;
}

void execution_free(Execution *x) {
  for (int i = 0; i < x->nin; i++) {
    host_tensor_free(&x->in[i]);
    ref_tensor_free(&x->ref_in[i]);
  }
  for (int i = 0; i < x->nout; i++) host_tensor_free(&x->out[i]);
  plan_free(x->plan);
  memset(x, 0, sizeof *x);
}
