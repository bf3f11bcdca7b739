/* `--ir tensor` printer: one line per node, `name = prim(args) : dtype[shape]  # origin`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensor.h"
#include "../base/hash.h"
#include "../base/mem.h"

/* A user name is shown unless an earlier node already showed it, or it looks like another node's
 * generated name (t<digits>): then the node prints as t<id>, so every printed name is unique. */
typedef struct NameSet {
  const char **slot; /* open addressing, cap a power of two above twice the names */
  size_t cap;
} NameSet;

/* Adds nm; 0 if it was there already. */
static int name_set_add(NameSet *s, const char *nm) {
  size_t i = hash_str(HASH_SEED, nm) & (s->cap - 1);
  for (; s->slot[i]; i = (i + 1) & (s->cap - 1))
    if (!strcmp(s->slot[i], nm)) return 0;
  s->slot[i] = nm;
  return 1;
}

static int usable_name(const TProgram *p, int id, NameSet *shown) {
  const char *nm = p->nodes[id].name;
  if (!nm || !*nm) return 0;
  if (nm[0] == 't' && nm[1] && strspn(nm + 1, "0123456789") == strlen(nm + 1)) return atoi(nm + 1) == id;
  return name_set_add(shown, nm);
}

static void print_axes(StrBuf *b, unsigned axes) {
  sb_puts(b, "axes=[");
  for (int k = 0, first = 1; k < 32; k++)
    if (axes & (1u << k)) {
      sb_printf(b, first ? "%d" : ",%d", k);
      first = 0;
    }
  sb_putc(b, ']');
}

void tensor_print(StrBuf *b, const TProgram *p) {
  const char **shown = xcalloc((size_t)(p->n ? p->n : 1), sizeof *shown, "the tensor printer");
  char(*gen)[24] = xcalloc((size_t)(p->n ? p->n : 1), sizeof *gen, "the tensor printer");
  NameSet names = {.cap = 64};
  while (names.cap < 2 * (size_t)p->n + 2) names.cap *= 2;
  names.slot = xcalloc(names.cap, sizeof *names.slot, "the tensor printer");
  for (int i = 0; i < p->n; i++) {
    if (usable_name(p, i, &names)) shown[i] = p->nodes[i].name;
    else {
      snprintf(gen[i], sizeof gen[i], "t%d", i);
      shown[i] = gen[i];
    }
  }
  for (int i = 0; i < p->n; i++) {
    const TNode *t = &p->nodes[i];
    sb_printf(b, "%s = ", shown[i]);
    switch (t->kind) {
    case T_INPUT: sb_puts(b, "input"); break;
    case T_MAP:
      sb_puts(b, "map(");
      ex_print(b, t->fn, NULL);
      for (int s = 0; s < t->nsrc; s++) sb_printf(b, ", %s", shown[t->src[s]]);
      sb_putc(b, ')');
      break;
    case T_REDUCE: {
      static const char *ops[] = {"add", "max", "min"};
      sb_printf(b, "reduce(%s, %s, ", ops[t->rop], shown[t->src[0]]);
      print_axes(b, t->axes);
      sb_putc(b, ')');
      break;
    }
    case T_CONTRACT:
      sb_printf(b, "contract(%s, %s, ", shown[t->src[0]], shown[t->src[1]]);
      print_axes(b, t->axes);
      sb_putc(b, ')');
      break;
    case T_GATHER: sb_printf(b, "gather(%s, %s)", shown[t->src[0]], shown[t->src[1]]); break;
    case T_UPDATE:
    case T_VIEW: {
      sb_printf(b, t->kind == T_VIEW ? "view(%s, [" : "update(%s, ", shown[t->src[0]]);
      if (t->kind == T_UPDATE && t->nsrc == 3) sb_printf(b, "%s, a0 = %s, at [", shown[t->src[1]], shown[t->src[2]]);
      else if (t->kind == T_UPDATE) sb_printf(b, "%s, at [", shown[t->src[1]]);
      int rank = p->nodes[t->src[0]].shape.rank;
      for (int d = 0; d < rank; d++) {
        if (d) sb_puts(b, ", ");
        ex_print(b, t->idx[d], NULL);
      }
      sb_putc(b, ']');
      if (t->valid) {
        sb_puts(b, " if ");
        ex_print(b, t->valid, NULL);
      }
      sb_putc(b, ')');
      break;
    }
    }
    sb_printf(b, " : %s", dtype_name(t->dtype));
    shape_print(b, &t->shape);
    if (t->origin) sb_printf(b, "  # %s", t->origin);
    sb_putc(b, '\n');
  }
  sb_puts(b, "return");
  for (int j = 0; j < p->noutputs; j++) sb_printf(b, j ? ", %s" : " %s", shown[p->outputs[j]]);
  sb_putc(b, '\n');
  free(shown);
  free(gen);
  free(names.slot);
}
