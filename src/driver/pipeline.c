#include "pipeline.h"
#include "../base/mem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../frontend/frontend.h"

static const char *stage_names[ST_COUNT] = {"graph", "tensor", "loop", "tile", "kernel", "code"};

const char *stage_name(Stage s) { return s < ST_COUNT ? stage_names[s] : "?"; }

int stage_parse(const char *s, Stage *out) {
  for (int i = 0; i < ST_COUNT; i++)
    if (!strcmp(s, stage_names[i])) {
      *out = (Stage)i;
      return 1;
    }
  return 0;
}

FusionPolicy fusion_policy_for(Target t) {
  FusionPolicy p = fusion_policy_default();
  /* On the GPU a decode-time GEMV is bound by its weights: recomputing a norm's output (x * scale * w,
   * three inputs) inside the q, k and v projections costs less than a kernel that stores it. */
  if (t == TARGET_CUDA) p.shared_max_inputs = 3;
  /* On the CPU a GEMV's dot products are its time: RoPE reading the q and k projections at two positions made
   * each point compute two of them; the projection in its own kernel computes each once. */
  if (t == TARGET_CPU) p.realize_reread = 1;
  return p;
}

Compilation *compilation_new(Target t, const FusionPolicy *fusion) {
  Compilation *c = xcalloc(1, sizeof *c, "a compilation");
  c->arena = arena_new();
  c->pool = expr_pool_new(c->arena);
  c->target = t;
  c->device = target_default(t);
  c->fusion = fusion ? *fusion : fusion_policy_for(t);
  return c;
}

void compilation_free(Compilation *c) {
  if (!c) return;
  sb_free(&c->code);
  arena_free(c->arena);
  free(c);
}

/* The stages after the tile stage. */
static int lower_tile(Compilation *c, Stage upto, Diag *d) {
  if (upto == ST_TILE) return 1;
  if (!(c->kernel = kernel_from_tile(c->tile, d))) return 0;
  if (code_dedupe(c->kernel, d) < 0) return 0;
  if (upto == ST_KERNEL) return 1;
  return code_render_program(c->kernel, c->arena, &c->code, &c->launch, d);
}

/* Each kernel's schedule from c->schedules where it has one that is legal here (else the default), and
 * where each came from. */
static int take_sourced_schedules(Compilation *c, Diag *d) {
  const int n = c->loop->nkernels;
  Schedule *given = ARENA_ARRAY(c->arena, Schedule, n ? n : 1);
  const char **why = ARENA_ARRAY(c->arena, const char *, n ? n : 1);
  for (int i = 0; i < n; i++) {
    const LKernel *k = &c->loop->kernels[i];
    char text[800] = "";
    given[i] = c->tile->kernels[i].s;
    Schedule s = given[i]; /* the default, which the source may rank others against */
    if (c->schedules->lookup(c->schedules->ctx, c->loop, k, &c->device, c->matmul, &s, text, sizeof text)) {
      Diag illegal = {0};
      if (schedule_check(c->loop, k, &c->device, &s, &illegal)) given[i] = s;
      else snprintf(text, sizeof text, "default (the measured schedule is not legal here: %s)", illegal.msg);
    }
    why[i] = arena_strdup(c->arena, text);
  }
  TileProgram *tp = tile_from_schedules(c->loop, &c->device, &c->fusion, c->matmul, given, d);
  if (!tp) return 0;
  for (int i = 0; i < n; i++) tp->kernels[i].origin = why[i];
  c->tile = tp;
  return 1;
}

int compile_graph(Compilation *c, Stage upto, Diag *d) {
  if (upto == ST_GRAPH) return 1;
  if (!(c->tensor = tensor_from_graph(c->graph, d))) return 0;
  if (upto == ST_TENSOR) return 1;
  if (!(c->loop = loop_from_tensor(c->tensor, &c->fusion, d))) return 0;
  if (upto == ST_LOOP) return 1;
  if (c->device.kind != c->target) {
    diag_error(d, 0, 0, "device %s is a %s device, not %s", c->device.name, target_name(c->device.kind),
               target_name(c->target));
    return 0;
  }
  if (!(c->tile = tile_from_loop(c->loop, &c->device, &c->fusion, c->matmul, c->batch_invariant, d))) return 0;
  if (c->schedules && !c->batch_invariant && !take_sourced_schedules(c, d)) return 0;
  return lower_tile(c, upto, d);
}

int compile_schedules(Compilation *c, const Schedule *given, Stage upto, Diag *d) {
  if (!(c->tile = tile_from_schedules(c->loop, &c->device, &c->fusion, c->matmul, given, d))) return 0;
  c->kernel = NULL;
  sb_free(&c->code);
  c->launch = NULL;
  return lower_tile(c, upto, d);
}

int compile_source(Compilation *c, const char *src, Stage upto, Diag *d) {
  if (!(c->graph = parse_program(src, c->arena, c->pool, d))) return 0;
  return compile_graph(c, upto, d);
}

void print_stage(StrBuf *b, const Compilation *c, Stage s) {
  switch (s) {
  case ST_GRAPH: graph_print(b, c->graph); break;
  case ST_TENSOR: tensor_print(b, c->tensor); break;
  case ST_LOOP: loop_print(b, c->loop); break;
  case ST_TILE: tile_print(b, c->tile); break;
  case ST_KERNEL: kernel_print(b, c->kernel); break;
  case ST_CODE: sb_puts(b, sb_str((StrBuf *)&c->code)); break;
  default: break;
  }
}
