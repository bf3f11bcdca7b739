/* lathe bench: prefill time, decode tokens/s, % of the memory-bandwidth floor, cold and warm compile
 * time and device memory, for a model file or a built-in configuration with random weights. */
#include <dirent.h>
#include "../base/clock.h"
#include "../base/mem.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../backend/backend.h"
#include "../generate/model.h"
#include "../generate/sampler.h"
#include "../model/presets.h"
#include "cli.h"

typedef struct BenchArgs {
  const char *model, *config, *target, *dtype, *weights, *matmul;
  int random_weights, prompt_len, gen_len, prefill_len, ctx, json, reps, bandwidth_given, fuse_recompute;
  double bandwidth_gbs;
} BenchArgs;


static int int_arg(const char *opt, const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    report_msg("%s expects an integer in [%d, %d], got '%s'", opt, lo, hi, s);
    return 0;
  }
  *out = (int)v;
  return 1;
}

static int parse(int argc, char **argv, BenchArgs *a) {
  *a = (BenchArgs){.target = "auto", .dtype = "bf16", .prompt_len = 128, .gen_len = 256, .prefill_len = 512,
                   .bandwidth_gbs = 4130, .reps = 3};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(o, "--config") && has) a->config = argv[++i];
    else if (!strcmp(o, "--random-weights")) a->random_weights = 1;
    else if (!strcmp(o, "--target") && has) a->target = argv[++i];
    else if (!strcmp(o, "--dtype") && has) a->dtype = argv[++i];
    else if (!strcmp(o, "--weights") && has) a->weights = argv[++i];
    else if (!strcmp(o, "--matmul-precision") && has) a->matmul = argv[++i];
    else if (!strcmp(o, "--json")) a->json = 1;
    else if (!strcmp(o, "--fuse-recompute")) a->fuse_recompute = 1;
    else if (!strcmp(o, "--prompt-len") && has) { if (!int_arg(o, argv[++i], 1, 1 << 20, &a->prompt_len)) return 0; }
    else if (!strcmp(o, "--gen-len") && has) { if (!int_arg(o, argv[++i], 1, 1 << 20, &a->gen_len)) return 0; }
    else if (!strcmp(o, "--prefill-len") && has) { if (!int_arg(o, argv[++i], 0, 1 << 20, &a->prefill_len)) return 0; }
    else if (!strcmp(o, "--ctx") && has) { if (!int_arg(o, argv[++i], 8, 1 << 22, &a->ctx)) return 0; }
    else if (!strcmp(o, "--reps") && has) { if (!int_arg(o, argv[++i], 1, 100, &a->reps)) return 0; }
    else if (!strcmp(o, "--bandwidth") && has) {
      a->bandwidth_gbs = atof(argv[++i]);
      a->bandwidth_given = 1;
      if (!(a->bandwidth_gbs > 0)) {
        report_msg("--bandwidth expects GB/s > 0");
        return 0;
      }
    } else if (o[0] == '-' && o[1]) {
      report_msg("unknown or incomplete option '%s' for bench (see lathe --help)", o);
      return 0;
    } else if (!a->model) a->model = o;
    else {
      report_msg("unexpected argument '%s'", o);
      return 0;
    }
  }
  if (a->model && a->config) {
    report_msg("give a MODEL path or --config NAME --random-weights, not both (configs: %s)", model_preset_names());
    return 0;
  }
  if (!a->model && !a->config) a->model = default_model_path(); /* as generate and chat do */
  else if (a->model) a->model = model_arg_resolve(a->model);
  if (a->config && !a->random_weights) {
    report_msg("--config runs with random weights; add --random-weights");
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

int cmd_bench(int argc, char **argv) {
  BenchArgs a;
  if (!parse(argc, argv, &a)) return EXIT_ERROR;
  DType wdt;
  if (!dtype_parse(a.dtype, &wdt) || !dtype_is_float(wdt)) {
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
  int need = a.prompt_len + a.gen_len > a.prefill_len ? a.prompt_len + a.gen_len : a.prefill_len;
  ModelLoadOptions lo = {t, a.ctx ? a.ctx : need + 8, a.json, 0, DT_F32};
  lo.fuse_recompute = a.fuse_recompute;
  if (!weights_option(a.weights, &lo) || !matmul_option(a.matmul, &lo.matmul)) {
    be->ops->destroy(be);
    return EXIT_ERROR;
  }
  /* cold compile: an empty cache directory */
  char cold_dir[] = "/tmp/lathe-bench-XXXXXX";
  const char *old_cache = getenv("LATHE_CACHE_DIR");
  char *saved = old_cache ? xstrdup(old_cache, "the cache directory name") : NULL;
  int have_tmp = mkdtemp(cold_dir) != NULL;
  if (have_tmp) setenv("LATHE_CACHE_DIR", cold_dir, 1);
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
    ModelBuildOptions bo = {m->max_ctx, m->weight_dtype, DT_F32};
    double t0 = now_ms();
    Plan *p = NULL;
    if ((c->graph = llama_build(&m->cfg, &bo, c->arena, c->pool, &d)) && compile_graph(c, ST_CODE, &d))
      p = plan_new(c->kernel, be, &d);
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
  double prefill_ms = 0;
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
  for (int i = 0; i < a.gen_len; i++)
    if (!model_step_greedy(m, &next, 1, a.prompt_len + i, &next, &d)) goto fail;
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
  double floor_tok_s = a.bandwidth_gbs * 1e9 / (double)wb;
  const char *name = a.config ? a.config : a.model;
  if (a.json) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I}", "model",
                          name, "target", target_name(t), "weights_dtype", dtype_name(m->weight_dtype), "prompt_len",
                          a.prompt_len, "gen_len", a.gen_len, "prefill_len", a.prefill_len, "prefill_ms", prefill_ms,
                          "decode_tok_s", tok_s, "floor_tok_s", floor_tok_s, "pct_of_floor",
                          100 * tok_s / floor_tok_s, "cold_compile_ms", cold_ms, "warm_compile_ms", warm_ms,
                          "bandwidth_gbs", a.bandwidth_gbs, "weight_bytes", (json_int_t)wb, "kv_cache_bytes",
                          (json_int_t)kb, "workspace_bytes", (json_int_t)ws);
    json_object_set_new(o, "kernels", json_integer(m->comp->kernel->nkernels));
    json_object_set_new(o, "sampled_decode_tok_s", json_real(sampled_tok_s));
    json_object_set_new(o, "fuse_recompute", json_boolean(lo.fuse_recompute));
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
    printf("model %s on %s, %s weights, %d kernels per step\n", name, target_name(t), dtype_name(m->weight_dtype),
           m->comp->kernel->nkernels);
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
    if (t == TARGET_CPU && !a.bandwidth_given) /* the default is the H200's; a CPU's is unknown here */
      printf("  floor: pass --bandwidth GB/s (this machine's memory bandwidth) to compare with it\n");
    else
      printf("  floor: %.1f tok/s (%.2f GB of weights at %.0f GB/s) -> %.1f%% of floor\n", floor_tok_s, wb / 1e9,
             a.bandwidth_gbs, 100 * tok_s / floor_tok_s);
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
    if (saved) setenv("LATHE_CACHE_DIR", saved, 1);
    else unsetenv("LATHE_CACHE_DIR");
  }
  free(saved);
  return rc;
}
