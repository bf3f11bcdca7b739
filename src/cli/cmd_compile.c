/* lathe compile: print any stage of the pipeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../model/config.h"
#include "../model/presets.h"
#include "../model/quantize.h"
#include "../generate/random_weights.h"
#include "../model/model_check.h"
#include "../generate/model.h"
#include "../tile/space.h"
#include "../tune/lookup.h"
#include "cli.h"
#include "options.h"

/* The device the schedules are chosen for: --device NAME[:FIELD=VALUE,...]'s built-in description, with any
 * overrides (no device is opened), which sets the target, or the target's default. */
static int schedule_device(const char *device, int target_given, Target *target, TargetDesc *desc) {
  *desc = target_default(*target);
  if (!device) return 1;
  Diag d = {0};
  if (!target_from_spec(device, desc, &d)) {
    report_msg("--device %s: %s", device, d.msg);
    return 0;
  }
  if (target_given && desc->kind != *target) {
    report_msg("--device %s is a %s device, not --target %s", device, target_name(desc->kind), target_name(*target));
    return 0;
  }
  *target = desc->kind;
  return 1;
}

/* Compiles to `stage` one of: a built-in architecture (preset; as `lathe bench --config` runs it, bf16 weights, or
 * the blocks of quantize scheme `scheme` when >= 0), a model's whole forward step built from its config (model_path;
 * its weights are not read; their types as model_load takes them under lo), or a program's text. */
static int compile_input(Compilation *c, const ModelConfig *preset, int scheme, const char *model_path,
                         const ModelLoadOptions *lo, const char *text, int kv_block, DType kv_dtype, Stage stage,
                         Diag *d) {
  ModelBuildOptions bo = {4096, DT_BF16, kv_dtype, kv_block};
  bo.fuse_projections = model_fuse_projections(kv_block > 0, c->target);
  if (preset) {
    RandomQuant rq = {preset, scheme};
    if (scheme >= 0) {
      bo.weight_type = random_quant_weight_type;
      bo.weight_type_ctx = &rq;
    }
    return (c->graph = model_build(preset, &bo, c->arena, c->pool, d)) && compile_graph(c, stage, d);
  }
  if (model_path) {
    ModelConfig cfg;
    WeightStore *w = model_weights_open(model_path, &cfg, d);
    if (!w) return 0;
    bo.max_ctx = cfg.max_ctx > 0 && cfg.max_ctx < 4096 ? cfg.max_ctx : 4096;
    model_build_weights(&bo, w, lo);
    int ok = (c->graph = model_build(&cfg, &bo, c->arena, c->pool, d)) && compile_graph(c, stage, d);
    weights_close(w);
    return ok;
  }
  return compile_source(c, text, stage, d);
}

/* --weights: with --config a quantize scheme (*scheme), with a model lathe generate's choice (lo). */
static int compile_weights_option(const char *weights, int config, int model, int *scheme, ModelLoadOptions *lo) {
  QuantScheme qs;
  if (!weights) return 1;
  if (model) return weights_option(weights, lo);
  if (config && quant_scheme_from_name(weights, &qs)) {
    *scheme = (int)qs;
    return 1;
  }
  if (config) report_msg("unknown --weights '%s' (expected one of %s)", weights, quant_scheme_names());
  else report_msg("--weights applies to a model or --config only");
  return 0;
}

/* --kv-dtype: f32 or bf16, the latter only for a paged cache (model.c refuses it for one sequence's cache). */
static int kv_dtype_option(const char *name, int kv_block, DType *out) {
  if (name && (!dtype_parse(name, out) || (*out != DT_F32 && *out != DT_BF16))) {
    report_msg("--kv-dtype expects f32 or bf16, got '%s'", name);
    return 0;
  }
  if (*out != DT_F32 && !kv_block) {
    report_msg("--kv-dtype %s needs --kv-block (a paged cache)", name);
    return 0;
  }
  return 1;
}

int cmd_compile(int argc, char **argv) {
  const char *inline_text = NULL, *path = NULL, *out_path = NULL, *config = NULL, *stage_name = "code",
             *target_name_arg = NULL, *matmul_name = NULL, *device = NULL, *weights = NULL, *kv_dtype_name = NULL;
  Stage stage = ST_CODE;
  Target target = TARGET_CPU;
  int target_given = 0;
  int fuse_recompute = 0, no_fuse = 0, kv_block = 0, candidates = 0, no_tune = 0;
  SymEnv dims = {0};
  MatmulPrecision matmul = MM_HIGH;
  Opt opts[] = {
      {"-e", NULL, OPT_STR, "PROGRAM", "the program's text (instead of a FILE)", &inline_text},
      {"--config", NULL, OPT_STR, "NAME",
       "a built-in model architecture with bf16 weights: qwen3-0.6b, "
       "llama-3.2-1b, qwen3-8b or smollm2-135m",
       &config},
      {"--ir", NULL, OPT_STR, "STAGE", "the stage to print: graph, tensor, loop, tile, kernel or code", &stage_name},
      {"--target", NULL, OPT_STR, "cpu|cuda", "the backend to compile for", &target_name_arg, .def = "cpu"},
      {"--candidates", NULL, OPT_FLAG, NULL, "with --ir tile: also print each kernel's schedule space", &candidates},
      {"--no-tune", NULL, OPT_FLAG, NULL, "the default schedules, ignoring the tuning database", &no_tune},
      {"--dim", NULL, OPT_CALL, "NAME=N",
       "take the tuning database's measurements made at this value of a symbolic dimension (repeat for each; "
       "default: each kernel's latest)",
       &dims, .call = cli_add_dim},
      {"--output", "-o", OPT_STR, "OUT", "write to OUT instead of stdout", &out_path},
      {"--fuse-recompute", NULL, OPT_FLAG, NULL,
       "allow fusions that recompute a reduction (norm -> linear "
       "prologue)",
       &fuse_recompute},
      {"--no-fuse", NULL, OPT_FLAG, NULL, "one kernel per reduction (no reduction fusion)", &no_fuse},
      {"--device", NULL, OPT_STR, "NAME[:FIELD=V,...]",
       "the device schedules are chosen for: h200 (CUDA's default), a100, l4, t4 "
       "(built-in descriptions, no GPU needed) or host (the CPU), with fields changed after ':' "
       "(h200:sms=66,smem_per_sm=100K; fields sms, threads_per_block, threads_per_sm, smem_per_block, smem_optin, "
       "smem_per_sm, regs_per_block, regs_per_sm, mem_clock_khz, bus_bits, l2, cc; cores, vector_bytes, l1d, l2, "
       "l3 for host); implies --target cuda for a GPU",
       &device},
      {"--matmul-precision", NULL, OPT_STR, "high|highest|medium",
       "tensor-core GEMMs on CUDA (see lathe generate "
       "--help)",
       &matmul_name, .def = "high"},
      {"--weights", NULL, OPT_STR, "auto|native|f32|bf16|f16|QUANT",
       "with a MODEL: the weight storage lathe generate --weights gives (default: auto); with --config: the "
       "matrices in the blocks a lathe quantize --type (q4_k_m, q8_0, ...) gives them, as "
       "lathe bench --config NAME --random-weights --weights QUANT reads them",
       &weights},
      {"--kv-block", NULL, OPT_INT, "N",
       "a model's batched step over a paged KV cache of N-position blocks (as the engine runs it) instead of "
       "one sequence's step",
       &kv_block, 0, 1024, .def = "0"},
      {"--kv-dtype", NULL, OPT_STR, "f32|bf16",
       "with --kv-block: the paged cache's element type (lathe bench --concurrency uses bf16 on CUDA)", &kv_dtype_name,
       .def = "f32"},
  };
  CmdSpec spec = {"compile",
                  "(-e PROGRAM | FILE.lt | MODEL | --config NAME) [options]",
                  "Compile a tensor program, a model's forward step (MODEL: a .gguf file or a Hugging Face\n"
                  "directory; its weights are not read) or a built-in architecture, and print one stage.",
                  opts,
                  sizeof opts / sizeof opts[0],
                  "FILE",
                  &path,
                  NULL};
  int r = opts_parse(&spec, argc, argv);
  if (r != OPTS_OK) return r == OPTS_HELP ? EXIT_OK : EXIT_ERROR;
  if (!stage_parse(stage_name, &stage)) {
    report_msg("unknown stage '%s' for --ir (expected graph, tensor, loop, tile, kernel or code)", stage_name);
    return EXIT_ERROR;
  }
  target_given = target_name_arg != NULL;
  if (target_given && !target_parse(target_name_arg, &target)) {
    report_msg("unknown target '%s' (expected cpu or cuda)", target_name_arg);
    return EXIT_ERROR;
  }
  if (!matmul_option(matmul_name, &matmul)) return EXIT_ERROR;
  if (candidates && stage != ST_TILE) {
    report_msg("--candidates needs --ir tile");
    return EXIT_ERROR;
  }
  DType kv_dtype = DT_F32;
  if (!kv_dtype_option(kv_dtype_name, kv_block, &kv_dtype)) return EXIT_ERROR;
  ProgramArg prog = {0};
  ModelConfig preset;
  int model;
  if (!program_or_model_arg(config, inline_text, &path, &preset, &prog, &model)) return EXIT_ERROR;
  TargetDesc desc;
  int scheme = -1;
  ModelLoadOptions lo = {0};
  if (!schedule_device(device, target_given, &target, &desc) ||
      !compile_weights_option(weights, config != NULL, model, &scheme, &lo)) {
    program_arg_free(&prog);
    return EXIT_ERROR;
  }
  lo.target = target;
  FusionPolicy fusion = fusion_policy_for(target);
  if (fuse_recompute) fusion.allow_recompute = 1;
  if (no_fuse) fusion.fuse_reductions = 0;
  Compilation *c = compilation_new(target, &fusion);
  c->matmul = matmul;
  c->device = desc;
  Diag d = {0};
  int rc = EXIT_OK, ok;
  TuneLookup tl;
  int tuned = cli_use_tuning(c, &tl, no_tune, dims.n ? &dims : NULL);
  ok = compile_input(c, config ? &preset : NULL, scheme, model ? path : NULL, &lo, prog.text, kv_block, kv_dtype, stage,
                     &d);
  if (!ok) {
    report(&d, config ? config : model ? path : prog.file);
    rc = EXIT_ERROR;
  } else {
    StrBuf b = {0};
    print_stage(&b, c, stage);
    if (candidates && !tile_print_candidates(&b, c->tile, &d)) {
      report(&d, config ? config : model ? path : prog.file);
      rc = EXIT_ERROR;
    }
    if (!write_text_file(out_path, sb_str(&b))) rc = EXIT_ERROR;
    sb_free(&b);
  }
  if (tuned) tune_lookup_close(&tl);
  compilation_free(c);
  program_arg_free(&prog);
  for (int i = 0; i < dims.n; i++) free((char *)dims.names[i]);
  return rc;
}
