/* lathe bench: prefill time, decode tokens/s, % of the memory-bandwidth floor, cold and warm compile
 * time and device memory, for a model file or a built-in configuration with random weights. */
#include <dirent.h>
#include "../base/clock.h"
#include "../base/mem.h"
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../backend/backend.h"
#include "../generate/model.h"
#include "../generate/sampler.h"
#include "../model/presets.h"
#include "../model/quantize.h"
#include "../base/settings.h"
#include "bench_batched.h"
#include "gen_common.h"
#include "../tune/lookup.h"
#include "cli.h"
#include "options.h"

typedef struct BenchArgs {
  const char *model, *config, *target, *dtype, *weights, *matmul, *prompt_arg, *gen_arg, *arrivals, *kv_dtype,
      *dequantized;
  int random_weights, prompt_len, gen_len, prefill_len, ctx, json, reps, bandwidth_given, fuse_recompute;
  double bandwidth_gbs, kv_memory_gb;
  int concurrency, requests, kv_block, shared_prefix, max_batch_tokens, batch_invariant, no_tune;
  BatchedBenchArgs batched;
} BenchArgs;

/* 1 to go on, 0 after a usage error, 2 after printing the help */
static int parse(int argc, char **argv, BenchArgs *a) {
  *a = (BenchArgs){.target = "auto",
                   .dtype = "bf16",
                   .prompt_len = 128,
                   .gen_len = 256,
                   .prefill_len = 512,
                   .bandwidth_gbs = 0,
                   .reps = 3,
                   .prompt_arg = "128",
                   .gen_arg = "256",
                   .arrivals = "all",
                   .kv_block = 16,
                   .max_batch_tokens = 2048};
  const char *pos = NULL;
  Opt opts[] = {
      {"--model", "-m", OPT_STR, "MODEL", "the model (as the positional MODEL)", &a->model,
       .def = "the default model, see lathe env"},
      {"--config", NULL, OPT_STR, "NAME",
       "a built-in architecture instead of a model: qwen3-0.6b, llama-3.2-1b, "
       "qwen3-8b or smollm2-135m (with --random-weights)",
       &a->config},
      {"--random-weights", NULL, OPT_FLAG, NULL, "random weights for --config", &a->random_weights},
      {"--dtype", NULL, OPT_STR, "f32|f16|bf16", "the weights' type with --config", &a->dtype},
      {"--target", NULL, OPT_STR, "auto|cuda|cpu", "where to run (auto: cuda when a GPU is present)", &a->target},
      {"--prompt-len", NULL, OPT_STR, "N",
       "prompt tokens before the timed decode steps (with --concurrency: N or MIN-MAX)", &a->prompt_arg},
      {"--gen-len", NULL, OPT_STR, "N", "timed decode steps (with --concurrency: new tokens per request, N or MIN-MAX)",
       &a->gen_arg},
      {"--prefill-len", NULL, OPT_INT, "N", "tokens of the timed prefill step (0: none)", &a->prefill_len, 0, 1 << 20},
      {"--reps", NULL, OPT_INT, "N", "timed prefill runs (the median is reported)", &a->reps, 1, 100},
      {"--ctx", "-c", OPT_INT, "N", "the context (KV cache positions)", &a->ctx, 8, 1 << 22,
       .def = "what the lengths need, + 8"},
      {"--bandwidth", NULL, OPT_NUM, "GB/s", "memory bandwidth of the decode floor", &a->bandwidth_gbs, 1e-3, 1e6,
       .def = "CUDA: 4130, an H200's copy bandwidth; CPU: $LATHE_CPU_BANDWIDTH, else no floor"},
      {"--weights", NULL, OPT_STR, "auto|native|f32|bf16|f16|QUANT",
       "weight storage (see lathe generate --help); with --config also a lathe quantize --type (q4_k_m, q8_0, ...): "
       "the random weights quantized at load by its type rule and read as blocks",
       &a->weights, .def = "auto"},
      {"--dequantized", NULL, OPT_STR, "f32|bf16|f16",
       "with --config and --weights QUANT: the same quantized values given to the kernels as this type (the "
       "reference for the blocks)",
       &a->dequantized},
      {"--matmul-precision", NULL, OPT_STR, "high|highest|medium", "CUDA prefill GEMMs (see lathe generate --help)",
       &a->matmul, .def = "high"},
      {"--fuse-recompute", NULL, OPT_FLAG, NULL, "the fusion policy that recomputes a reduction in its consumers",
       &a->fuse_recompute},
      {"--json", NULL, OPT_FLAG, NULL, "print one JSON object", &a->json},
      {"--no-tune", NULL, OPT_FLAG, NULL, "the default schedules, ignoring the tuning database", &a->no_tune},
      {"--concurrency", NULL, OPT_INT, "N",
       "the batched engine instead: requests at once (output tok/s, step time, time to first token, inter-token "
       "latency)",
       &a->concurrency, 1, 4096},
      {"--requests", NULL, OPT_INT, "N", "with --concurrency: requests in all", &a->requests, 1, 1 << 20,
       .def = "the concurrency"},
      {"--arrivals", NULL, OPT_STR, "all|poisson:RATE", "with --concurrency: when requests arrive (RATE per second)",
       &a->arrivals},
      {"--shared-prefix", NULL, OPT_INT, "N", "with --concurrency: tokens every prompt starts with", &a->shared_prefix,
       0, 1 << 20},
      {"--max-batch-tokens", NULL, OPT_INT, "N", "with --concurrency: tokens per engine step", &a->max_batch_tokens, 1,
       1 << 20},
      {"--kv-block", NULL, OPT_INT, "N", "with --concurrency: positions per KV cache block", &a->kv_block, 1, 1024},
      {"--batch-invariant", NULL, OPT_FLAG, NULL,
       "with --concurrency: schedules whose results for a sequence do not depend on the rest of the batch",
       &a->batch_invariant},
      {"--kv-dtype", NULL, OPT_STR, "f32|bf16", "with --concurrency: the KV cache's element type", &a->kv_dtype,
       .def = "bf16 on CUDA, f32 on the CPU"},
      {"--kv-memory", NULL, OPT_NUM, "GB", "with --concurrency: the KV cache pool's size", &a->kv_memory_gb, 1e-6, 1e6,
       .def = "90% of the GPU memory the weights leave free; on the CPU 25%, at most 4 GB"},
  };
  CmdSpec spec = {"bench",
                  "[MODEL | --config NAME --random-weights] [options]",
                  "Prefill time, decode tokens/s, % of the memory-bandwidth floor, cold and warm compile time and\n"
                  "memory, for a model or a built-in architecture with random weights.",
                  opts,
                  sizeof opts / sizeof opts[0],
                  "MODEL",
                  &pos,
                  "The floor is the decode speed at which a step only reads the bytes it needs (the weights, one\n"
                  "row of an untied embedding table) at the given bandwidth."};
  int r = opts_parse(&spec, argc, argv);
  if (r != OPTS_OK) return r == OPTS_HELP ? 2 : 0;
  if (pos && a->model) {
    report_msg("unexpected argument '%s': the model is already given with --model %s", pos, a->model);
    return 0;
  }
  if (pos) a->model = pos;
  a->bandwidth_given = opts_seen(&spec, "--bandwidth") > 0;
  if (a->model && a->config) {
    report_msg("give a MODEL path or --config NAME --random-weights, not both (configs: %s)", model_preset_names());
    return 0;
  }
  if (a->concurrency) {
    BatchedBenchArgs *b = &a->batched;
    *b = (BatchedBenchArgs){.concurrency = a->concurrency,
                            .requests = a->requests ? a->requests : a->concurrency,
                            .shared_prefix = a->shared_prefix,
                            .max_batch_tokens = a->max_batch_tokens,
                            .json = a->json};
    if (!bench_range_parse(a->prompt_arg, "--prompt-len", &b->prompt_lo, &b->prompt_hi) ||
        !bench_range_parse(a->gen_arg, "--gen-len", &b->gen_lo, &b->gen_hi) ||
        !bench_arrivals_parse(a->arrivals, &b->arrival_rate))
      return 0;
  } else {
    const char *batched_only[] = {"--requests", "--arrivals",  "--shared-prefix", "--max-batch-tokens",
                                  "--kv-block", "--kv-memory", "--kv-dtype",      "--batch-invariant"};
    for (size_t i = 0; i < sizeof batched_only / sizeof batched_only[0]; i++)
      if (opts_seen(&spec, batched_only[i])) {
        report_msg("%s applies to the batched bench only: add --concurrency N", batched_only[i]);
        return 0;
      }
    int lo, hi;
    if (!bench_range_parse(a->prompt_arg, "--prompt-len", &lo, &hi) || lo != hi) {
      if (lo != hi) report_msg("--prompt-len: a range (%s) needs --concurrency", a->prompt_arg);
      return 0;
    }
    a->prompt_len = lo;
    if (!bench_range_parse(a->gen_arg, "--gen-len", &lo, &hi) || lo != hi) {
      if (lo != hi) report_msg("--gen-len: a range (%s) needs --concurrency", a->gen_arg);
      return 0;
    }
    a->gen_len = lo;
  }
  if (!a->model && !a->config) a->model = default_model_path(); /* as generate and chat do */
  else if (a->model) a->model = model_arg_resolve(a->model);
  if (a->config && !a->random_weights) {
    report_msg("--config runs with random weights; add --random-weights");
    return 0;
  }
  QuantScheme qs;
  int quant = a->weights && quant_scheme_from_name(a->weights, &qs);
  if (quant && !a->config) {
    report_msg("--weights %s applies to --config only (a GGUF's blocks are read with --weights native)", a->weights);
    return 0;
  }
  if (a->dequantized && !quant) {
    report_msg("--dequantized needs --config and --weights QUANT (one of %s)", quant_scheme_names());
    return 0;
  }
  if (!a->config && (a->random_weights || opts_seen(&spec, "--dtype"))) {
    report_msg("%s applies to --config only (a model's weights keep their own type; see --weights)",
               a->random_weights ? "--random-weights" : "--dtype");
    return 0;
  }
  return 1;
}

/* A fresh cache directory for the cold compile, removed afterwards. */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  closedir(d);
  rmdir(dir);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The benchmark itself, the model loaded with lo (the tuning database's schedules in it when there is one). */
static int bench_model(const BenchArgs *ap, const ModelConfig *cfgp, DType wdt, Backend *be,
                       const ModelLoadOptions *lop, double bw, Diag *dp) {
  BenchArgs a = *ap;
  ModelConfig cfg = *cfgp;
  ModelLoadOptions lo = *lop;
  Diag d = *dp;
  const Target t = lo.target;
  int need = a.prompt_len + a.gen_len > a.prefill_len ? a.prompt_len + a.gen_len : a.prefill_len;
  if (a.concurrency) need = a.batched.prompt_hi + a.batched.gen_hi;
  if (a.concurrency) {
    lo.kv_block = a.kv_block;
    lo.kv_memory = (size_t)(a.kv_memory_gb * 1e9);
    lo.kv_seqs = a.concurrency;
    lo.batch_invariant = a.batch_invariant;
    lo.kv_dtype = t == TARGET_CUDA ? DT_BF16 : DT_F32;
    if (a.kv_dtype && (!dtype_parse(a.kv_dtype, &lo.kv_dtype) || (lo.kv_dtype != DT_F32 && lo.kv_dtype != DT_BF16))) {
      report_msg("--kv-dtype expects f32 or bf16, got '%s'", a.kv_dtype);
      be->ops->destroy(be);
      return EXIT_ERROR;
    }
    Model *m = a.config ? model_new_random(&cfg, wdt, be, &lo, &d) : model_load(a.model, be, &lo, &d);
    if (m) gen_print_kv_pool(m);
    int ok = m && bench_batched(m, &a.batched, a.config ? a.config : a.model, &d);
    if (!ok) report(&d, m ? NULL : a.model);
    model_free(m);
    be->ops->destroy(be);
    return ok ? EXIT_OK : EXIT_ERROR;
  }
  /* cold compile: an empty cache directory */
  char cold_dir[] = "/tmp/lathe-bench-XXXXXX";
  int have_tmp = mkdtemp(cold_dir) != NULL;
  if (have_tmp) setting_set(SET_CACHE_DIR, cold_dir);
  Model *m = a.config ? model_new_random(&cfg, wdt, be, &lo, &d) : model_load(a.model, be, &lo, &d);
  int rc = EXIT_ERROR;
  int32_t *ids = NULL;
  double cold_ms = m ? m->compile_ms : 0, warm_ms = 0;
  if (!m) {
    report(&d, a.model);
    goto done;
  }
  /* warm compile: the same program again, now found in the cache */
  {
    Compilation *c = model_compilation_new(&lo);
    c->device = be->target;
    ModelBuildOptions bo = m->build;
    double t0 = now_ms();
    Plan *p = NULL;
    if ((c->graph = model_build(&m->cfg, &bo, c->arena, c->pool, &d)) && compile_graph(c, ST_CODE, &d))
      p = plan_new(c->launch, sb_str(&c->code), be, &d);
    warm_ms = now_ms() - t0;
    plan_free(p);
    compilation_free(c);
    if (!p) {
      report(&d, NULL);
      goto done;
    }
  }
  ids = xmalloc(sizeof(int32_t) * (size_t)need, "the prompt tokens");
  for (int i = 0; i < need; i++) ids[i] = (int32_t)((i * 7919 + 13) % m->cfg.vocab);
  /* prefill: one step over prefill_len tokens (warm-up once, then the median of reps) */
  double prefill_ms = 0, logits_rms = 0;
  enum { N_LOGIT_SAMPLES = 64, N_TOKENS_KEPT = 32 };
  float logit_samples[N_LOGIT_SAMPLES];
  int32_t kept[N_TOKENS_KEPT];
  int have_logits = 0;
  if (a.prefill_len > 0) {
    double times[100];
    if (!model_step(m, ids, a.prefill_len, 0, &d)) goto fail;
    plan_profile_report(m->plan, NULL); /* LATHE_PROFILE=1: the warm-up run is not counted */
    for (int r = 0; r < a.reps; r++) {
      double t0 = now_ms();
      if (!model_step(m, ids, a.prefill_len, 0, &d)) goto fail;
      times[r] = now_ms() - t0;
    }
    qsort(times, (size_t)a.reps, sizeof(double), cmp_double);
    prefill_ms = times[a.reps / 2];
    char what[64];
    snprintf(what, sizeof what, "the %d-token prefill", a.prefill_len);
    plan_profile_report(m->plan, what); /* then the decode runs, when the model is freed */
    /* for comparing weight formats: the prefill's last logits at evenly spaced ids, and their rms */
    double sq = 0;
    for (int i = 0; i < m->cfg.vocab; i++) sq += (double)m->logits[i] * m->logits[i];
    logits_rms = sqrt(sq / m->cfg.vocab);
    for (int i = 0; i < N_LOGIT_SAMPLES; i++) logit_samples[i] = m->logits[(int64_t)i * m->cfg.vocab / N_LOGIT_SAMPLES];
    have_logits = 1;
  }
  /* decode: prompt_len prefill, then gen_len greedy steps (the argmax on the device, as `lathe
   * generate --greedy` runs them). Two untimed steps first: the first decode step records the replay
   * graph, a one-time cost per model, as PyTorch's warm-up captures its own. */
  int32_t next = -1;
  if (!model_step_greedy(m, ids, a.prompt_len, 0, &next, &d)) goto fail;
  for (int i = 0; i < 2 && a.prompt_len + i < m->max_ctx; i++)
    if (!model_step_greedy(m, &next, 1, a.prompt_len + i, &next, &d)) goto fail;
  if (!model_step_greedy(m, ids, a.prompt_len, 0, &next, &d)) goto fail; /* again: the steps below rewrite the cache */
  double t0 = now_ms();
  for (int i = 0; i < a.gen_len; i++) {
    if (!model_step_greedy(m, &next, 1, a.prompt_len + i, &next, &d)) goto fail;
    if (i < N_TOKENS_KEPT) kept[i] = next;
  }
  double decode_ms = now_ms() - t0, tok_s = a.gen_len * 1e3 / decode_ms;
  /* the same steps with lathe generate's default sampler (on the device on CUDA); one untimed step
   * first, which prepares the sampler */
  Sampler smp;
  SamplerOptions so = sampler_defaults();
  sampler_init(&smp, &so);
  int ok = model_step_sample(m, ids, a.prompt_len, 0, &smp, &next, &d);
  double t1 = now_ms();
  for (int i = 0; ok && i < a.gen_len; i++) ok = model_step_sample(m, &next, 1, a.prompt_len + i, &smp, &next, &d);
  double sampled_tok_s = a.gen_len * 1e3 / (now_ms() - t1);
  sampler_free(&smp);
  if (!ok) goto fail;
  size_t wb, kb, ws;
  model_memory(m, &wb, &kb, &ws);
  size_t read_bytes = model_step_read_bytes(&m->cfg, wb, m->embed_dtype);
  double floor_tok_s = bw > 0 ? bw * 1e9 / (double)read_bytes : 0;
  const char *name = a.config ? a.config : a.model;
  /* the weights as asked for: a quantization scheme of random weights (dequantized or as blocks) */
  char wname[64];
  if (lo.random_quant)
    snprintf(wname, sizeof wname, "%s%s%s", quant_scheme_name((QuantScheme)(lo.random_quant - 1)),
             lo.random_dequantized ? " dequantized to " : "", lo.random_dequantized ? dtype_name(m->weight_dtype) : "");
  else snprintf(wname, sizeof wname, "%s", model_weights_form(m));
  if (a.json) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:o, s:o, s:f, s:f, s:o, s:I, s:I, s:I, s:I}",
                          "model", name, "target", target_name(t), "weights_dtype", wname, "prompt_len", a.prompt_len,
                          "gen_len", a.gen_len, "prefill_len", a.prefill_len, "prefill_ms", prefill_ms, "decode_tok_s",
                          tok_s, "floor_tok_s", bw > 0 ? json_real(floor_tok_s) : json_null(), "pct_of_floor",
                          bw > 0 ? json_real(100 * tok_s / floor_tok_s) : json_null(), "cold_compile_ms", cold_ms,
                          "warm_compile_ms", warm_ms, "bandwidth_gbs", bw > 0 ? json_real(bw) : json_null(),
                          "weight_bytes", (json_int_t)wb, "step_read_bytes", (json_int_t)read_bytes, "kv_cache_bytes",
                          (json_int_t)kb, "workspace_bytes", (json_int_t)ws);
    json_object_set_new(o, "kernels", json_integer(m->comp->kernel->nkernels));
    json_object_set_new(o, "sampled_decode_tok_s", json_real(sampled_tok_s));
    json_object_set_new(o, "fuse_recompute", json_boolean(lo.fuse_recompute));
    json_t *toks = json_array(), *samples = json_array();
    for (int i = 0; i < a.gen_len && i < N_TOKENS_KEPT; i++) json_array_append_new(toks, json_integer(kept[i]));
    for (int i = 0; have_logits && i < N_LOGIT_SAMPLES; i++)
      json_array_append_new(samples, json_real(logit_samples[i]));
    json_object_set_new(o, "greedy_tokens", toks);
    json_object_set_new(o, "prefill_logits_sample", samples);
    json_object_set_new(o, "prefill_logits_rms", have_logits ? json_real(logits_rms) : json_null());
    if (t == TARGET_CUDA) {
      json_object_set_new(o, "matmul_precision", json_string(matmul_precision_name(lo.matmul)));
      json_object_set_new(o, "prefill_gemm", json_string(plan_gemm_library(m->plan) ? "cublaslt" : "generated"));
    }
    char *s = json_dumps(o, JSON_COMPACT);
    if (!s) {
      report_msg("out of memory: the JSON output");
      exit(EXIT_ERROR);
    }
    puts(s);
    free(s);
    json_decref(o);
  } else {
    printf("model %s on %s, %s weights, %d kernels per step\n", name, target_name(t), wname, m->comp->kernel->nkernels);
    printf("  prefill %d tokens: %.2f ms (%.0f tok/s)", a.prefill_len, prefill_ms,
           prefill_ms > 0 ? a.prefill_len * 1e3 / prefill_ms : 0);
    if (t == TARGET_CUDA)
      printf(", matmul precision %s, GEMMs %s", matmul_precision_name(lo.matmul),
             plan_gemm_library(m->plan) ? "cuBLASLt" : "generated");
    putchar('\n');
    printf("  decode after %d: %d tokens, %.1f tok/s (%.3f ms/token)\n", a.prompt_len, a.gen_len, tok_s,
           decode_ms / a.gen_len);
    printf("  decode sampled (temperature %.1f, top-k %d, top-p %.1f, %s): %.1f tok/s\n", so.temperature, so.top_k,
           so.top_p, t == TARGET_CUDA ? "on the device" : "on the host", sampled_tok_s);
    if (!(bw > 0)) /* a CPU's bandwidth is unknown here */
      printf("  floor: pass --bandwidth GB/s or set LATHE_CPU_BANDWIDTH (this machine's memory bandwidth) to "
             "compare with it\n");
    else
      printf("  floor: %.1f tok/s (%.2f GB read per step at %.0f GB/s) -> %.1f%% of floor\n", floor_tok_s,
             read_bytes / 1e9, bw, 100 * tok_s / floor_tok_s);
    printf("  compile: cold %.0f ms, warm %.0f ms\n", cold_ms, warm_ms);
    printf("  device memory held: weights %.1f MB, KV cache %.1f MB, workspace %.1f MB (%.1f%% over weights+KV)\n",
           wb / 1e6, kb / 1e6, ws / 1e6, 100.0 * (double)ws / (double)(wb + kb));
  }
  rc = EXIT_OK;
  goto done;
fail:
  report(&d, NULL);
done:
  free(ids);
  model_free(m);
  be->ops->destroy(be);
  if (have_tmp) {
    remove_dir(cold_dir);
    setting_set(SET_CACHE_DIR, NULL);
  }
  return rc;
}

int cmd_bench(int argc, char **argv) {
  BenchArgs a;
  int parsed = parse(argc, argv, &a);
  if (parsed != 1) return parsed == 2 ? EXIT_OK : EXIT_ERROR;
  DType wdt;
  if (!dtype_parse(a.dtype, &wdt) || dtype_is_quant(wdt) || !dtype_is_float(wdt)) {
    report_msg("--dtype expects f32, f16 or bf16, got '%s'", a.dtype);
    return EXIT_ERROR;
  }
  ModelConfig cfg;
  if (a.config && !model_preset(a.config, &cfg)) {
    report_msg("unknown --config '%s' (known: %s)", a.config, model_preset_names());
    return EXIT_ERROR;
  }
  Diag d = {0};
  Target t;
  Backend *be = open_backend(a.target, &t, &d);
  if (!be) {
    report(&d, NULL);
    return EXIT_ERROR;
  }
  /* the floor's bandwidth: a CPU's is unknown unless given; CUDA's default is the H200's */
  double bw = a.bandwidth_gbs;
  int bw_ok = 1;
  if (!a.bandwidth_given) bw = t == TARGET_CUDA ? 4130 : setting_number(SET_CPU_BANDWIDTH, 0, &bw_ok);
  if (!bw_ok || bw < 0) {
    report_msg("LATHE_CPU_BANDWIDTH=%s: expected GB/s, a number > 0", setting_str(SET_CPU_BANDWIDTH));
    be->ops->destroy(be);
    return EXIT_ERROR;
  }
  int need = a.prompt_len + a.gen_len > a.prefill_len ? a.prompt_len + a.gen_len : a.prefill_len;
  if (a.concurrency) need = a.batched.prompt_hi + a.batched.gen_hi;
  ModelLoadOptions lo = {t, a.ctx ? a.ctx : need + 8, a.json, 0, DT_F32};
  lo.fuse_recompute = a.fuse_recompute;
  QuantScheme qs;
  int quant = a.weights && quant_scheme_from_name(a.weights, &qs);
  if (quant) {
    lo.random_quant = (int)qs + 1;
    if (a.dequantized) {
      if (!dtype_parse(a.dequantized, &wdt) || dtype_is_quant(wdt) || !dtype_is_float(wdt)) {
        report_msg("--dequantized expects f32, f16 or bf16, got '%s'", a.dequantized);
        be->ops->destroy(be);
        return EXIT_ERROR;
      }
      lo.random_dequantized = 1;
    }
  }
  if ((!quant && !weights_option(a.weights, &lo)) || !matmul_option(a.matmul, &lo.matmul)) {
    be->ops->destroy(be);
    return EXIT_ERROR;
  }
  /* measured schedules: the database is opened here, before the cold compile moves the cache directory */
  TuneLookup tl;
  lo.schedules = cli_tune_source(&tl, t, a.no_tune, NULL);
  int rc = bench_model(&a, a.config ? &cfg : &(ModelConfig){0}, wdt, be, &lo, bw, &d);
  if (lo.schedules) tune_lookup_close(&tl);
  return rc;
}
