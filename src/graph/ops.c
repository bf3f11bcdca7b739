/* The graph ops' names, arities and parameters, expanded from ops.def. */
#include <stddef.h>
#include <string.h>
#include "graph.h"

#define IN(n)                                                                                                          \
  { n, GP_TENSOR, 0, 0, 0 }
#define AXES(n)                                                                                                        \
  { n, GP_AXES, offsetof(GAttr, axes), 0, 0 }
#define AXIS(n, d, pf)                                                                                                 \
  { n, GP_AXIS, offsetof(GAttr, axis), d, pf }
#define PERM(n)                                                                                                        \
  { n, GP_PERM, offsetof(GAttr, axes), 0, 0 }
#define NUM(n, f, d, pf)                                                                                               \
  { n, GP_NUM, offsetof(GAttr, f), d, pf }
#define FLAG(n, f, pf)                                                                                                 \
  { n, GP_FLAG, offsetof(GAttr, f), 0, pf }
#define INDEX(n, f, pf)                                                                                                \
  { n, GP_INDEX, offsetof(GAttr, f), 0, pf }
#define POSITION(n, f)                                                                                                 \
  { n, GP_POSITION, offsetof(GAttr, f), 0, 0 }
#define SHAPE(n)                                                                                                       \
  { n, GP_SHAPE, offsetof(GAttr, shape), 0, 0 }
#define DTYPE(n)                                                                                                       \
  { n, GP_DTYPE, offsetof(GAttr, dtype), 0, 0 }
#define COUNT_PARAMS(...) (int)(sizeof((GParam[]){{0}, __VA_ARGS__}) / sizeof(GParam) - 1)

static const GOpInfo table[G_OP_COUNT] = {
#define OP(E, NAME, LO, HI, INFER, REF, LOWER, ...) [G_##E] = {NAME, LO, HI, COUNT_PARAMS(__VA_ARGS__), {__VA_ARGS__}},
#include "ops.def"
#undef OP
};

const GOpInfo *gop_info(GOp op) { return (unsigned)op < G_OP_COUNT ? &table[op] : NULL; }

const char *gop_name(GOp op) { return (unsigned)op < G_OP_COUNT && table[op].name ? table[op].name : "?"; }

GAttr gop_default_attr(GOp op) {
  GAttr a;
  memset(&a, 0, sizeof a);
  const GOpInfo *info = gop_info(op);
  for (int i = 0; info && i < info->nparams; i++) {
    const GParam *p = &info->params[i];
    if (p->kind == GP_NUM) *(double *)((char *)&a + p->offset) = p->dflt;
    if (p->kind == GP_AXIS) *(int *)((char *)&a + p->offset) = (int)p->dflt;
  }
  return a;
}

int gparam_required(const GOpInfo *info, int i) {
  const GParam *p = &info->params[i];
  switch (p->kind) {
  case GP_TENSOR: {
    int k = 0; /* operands before this one */
    for (int j = 0; j < i; j++) k += info->params[j].kind == GP_TENSOR;
    return k < info->min_in;
  }
  case GP_AXIS: return (p->flags & GPF_REQUIRED) != 0;
  case GP_INDEX: return !(p->flags & GPF_OPTIONAL);
  case GP_POSITION:
  case GP_SHAPE:
  case GP_DTYPE:
  case GP_PERM:
  case GP_SWAP: return 1;
  default: return 0;
  }
}
