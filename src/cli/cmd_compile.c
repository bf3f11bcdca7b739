/* lathe compile: print any stage of the pipeline. */
#include <stdio.h>
#include <string.h>
#include "../model/llama.h"
#include "../model/presets.h"
#include "../model/weights.h"
#include "cli.h"

int cmd_compile(int argc, char **argv) {
  const char *inline_text = NULL, *path = NULL, *out_path = NULL, *config = NULL;
  Stage stage = ST_CODE;
  Target target = TARGET_CPU;
  int fuse_recompute = 0, no_fuse = 0;
  MatmulPrecision matmul = MM_HIGH;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_next = i + 1 < argc;
    if (!strcmp(a, "-e") && has_next) inline_text = argv[++i];
    else if (!strcmp(a, "--ir") && has_next) {
      if (!stage_parse(argv[++i], &stage)) {
        report_msg("unknown stage '%s' for --ir (expected graph, tensor, loop, tile, kernel or code)", argv[i]);
        return EXIT_ERROR;
      }
    } else if (!strcmp(a, "--target") && has_next) {
      if (!target_parse(argv[++i], &target)) {
        report_msg("unknown target '%s' (expected cpu or cuda)", argv[i]);
        return EXIT_ERROR;
      }
    } else if (!strcmp(a, "-o") && has_next) out_path = argv[++i];
    else if (!strcmp(a, "--config") && has_next) config = argv[++i];
    else if (!strcmp(a, "--fuse-recompute")) fuse_recompute = 1;
    else if (!strcmp(a, "--matmul-precision") && has_next) {
      if (!matmul_option(argv[++i], &matmul)) return EXIT_ERROR;
    }
    else if (!strcmp(a, "--no-fuse")) no_fuse = 1;
    else if (a[0] == '-' && a[1]) {
      report_msg("unknown or incomplete option '%s' for compile (see lathe --help)", a);
      return EXIT_ERROR;
    } else if (!path) path = a;
    else {
      report_msg("unexpected argument '%s'", a);
      return EXIT_ERROR;
    }
  }
  ProgramArg prog = {0};
  ModelConfig preset;
  if (config && (inline_text || path)) {
    report_msg("give a program, a MODEL or --config NAME, not several");
    return EXIT_ERROR;
  }
  if (config && !model_preset(config, &preset)) {
    report_msg("unknown --config '%s' (known: %s)", config, model_preset_names());
    return EXIT_ERROR;
  }
  if (!inline_text && path) path = model_arg_resolve(path);
  int model = !inline_text && path && is_model_path(path);
  if (!config && !model && !program_arg_load(&prog, inline_text, path)) return EXIT_ERROR;
  FusionPolicy fusion = fusion_policy_for(target);
  if (fuse_recompute) fusion.allow_recompute = 1;
  if (no_fuse) fusion.fuse_reductions = 0;
  Compilation *c = compilation_new(target, &fusion);
  c->matmul = matmul;
  Diag d = {0};
  int rc = EXIT_OK, ok;
  if (config) { /* a built-in architecture, as `lathe bench --config` runs it (bf16 weights) */
    ModelBuildOptions bo = {4096, DT_BF16, DT_F32};
    ok = (c->graph = llama_build(&preset, &bo, c->arena, c->pool, &d)) && compile_graph(c, stage, &d);
  } else if (model) { /* the whole model's forward step, built from its config (weights are not read) */
    ModelConfig cfg;
    WeightStore *w = weights_open(path, &cfg, &d);
    ModelBuildOptions bo = {cfg.max_ctx > 0 && cfg.max_ctx < 4096 ? cfg.max_ctx : 4096, DT_F32, DT_F32};
    ok = w && (c->graph = llama_build(&cfg, &bo, c->arena, c->pool, &d)) && compile_graph(c, stage, &d);
    weights_close(w);
  } else {
    ok = compile_source(c, prog.text, stage, &d);
  }
  if (!ok) {
    report(&d, config ? config : model ? path : prog.file);
    rc = EXIT_ERROR;
  } else {
    StrBuf b = {0};
    print_stage(&b, c, stage);
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) {
      report_msg("cannot write %s", out_path);
      rc = EXIT_ERROR;
    } else {
      fputs(sb_str(&b), f);
      if (b.len && b.data[b.len - 1] != '\n') fputc('\n', f);
      if (f != stdout && fclose(f)) {
        report_msg("cannot write %s", out_path);
        rc = EXIT_ERROR;
      }
    }
    sb_free(&b);
  }
  compilation_free(c);
  program_arg_free(&prog);
  return rc;
}
