/* lathe generate: complete a prompt with a model, streaming tokens to stdout. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../backend/backend.h"
#include <unistd.h>
#include "../base/mem.h"
#include "gen_common.h"
#include "generate_batched.h"
#include "interrupt.h"

/* The prompt is echoed only once the first token arrives, so a prompt that fails (too long for the
 * context, a bad token id) leaves stdout empty rather than looking like a partial completion. A chat
 * prompt (--chat) is not echoed: the reply is what follows the template's markup, not the prompt. */
typedef struct Stream {
  const char *echo; /* the prompt text to print first, or NULL */
  int started;
  int ids; /* the model has no tokenizer: print the token ids, comma-separated */
  int nprinted;
} Stream;

static void stream_start(Stream *s) {
  if (s->started) return;
  s->started = 1;
  if (s->echo) fputs(s->echo, stdout);
}

static int stream_cb(void *ctx, int32_t id, const char *text) {
  Stream *s = ctx;
  stream_start(s);
  if (s->ids) {
    if (id >= 0) printf("%s%d", s->nprinted++ ? "," : "", id);
  } else {
    fputs(text, stdout);
  }
  fflush(stdout);
  return 0;
}

/* "1,2,3" -> ids */
static int parse_tokens(const char *s, int32_t **ids, int *n) {
  int cap = 16;
  *n = 0;
  *ids = xmalloc(sizeof(int32_t) * (size_t)cap, "the prompt tokens");
  for (const char *p = s; *p;) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || end == p || v < 0 || v > 0x7fffffff || (*end && *end != ',')) {
      report_msg("--prompt-tokens expects comma-separated non-negative integers, got '%s'", s);
      free(*ids);
      *ids = NULL;
      return 0;
    }
    if (*n == cap) *ids = xrealloc(*ids, sizeof(int32_t) * (size_t)(cap *= 2), "the prompt tokens");
    (*ids)[(*n)++] = (int32_t)v;
    p = *end ? end + 1 : end;
  }
  return 1;
}

static int encode_prompt(const GenArgs *a, const Model *m, int32_t **ids, int *n) {
  if (!m->tok) {
    report_msg("the model has no tokenizer (no tokenizer.json); give --prompt-tokens instead of --prompt");
    return 0;
  }
  return gen_encode_text(a, m, a->prompt, ids, n);
}

/* The prompt from --prompt-file, `--prompt -` or a piped standard input (into a->prompt). */
static int read_prompt(GenArgs *a) {
  int from_stdin =
      (a->prompt && !strcmp(a->prompt, "-")) || (!a->prompt && !a->prompt_file && !a->prompt_tokens && !isatty(0));
  if (!from_stdin && !a->prompt_file) return 1;
  const char *what = from_stdin ? "standard input" : a->prompt_file;
  FILE *f = from_stdin ? stdin : fopen(a->prompt_file, "rb");
  if (!f) {
    report_msg("cannot open --prompt-file %s: %s", a->prompt_file, strerror(errno));
    return 0;
  }
  a->prompt_owned = read_all(f, what);
  if (f != stdin) fclose(f);
  if (!a->prompt_owned) return 0;
  /* one trailing newline (a file's last line, an echo) is not part of the prompt */
  size_t n = strlen(a->prompt_owned);
  if (n && a->prompt_owned[n - 1] == '\n') a->prompt_owned[--n] = 0;
  if (n && a->prompt_owned[n - 1] == '\r') a->prompt_owned[--n] = 0;
  if (!n) {
    report_msg("the prompt from %s is empty", what);
    return 0;
  }
  a->prompt = a->prompt_owned;
  return 1;
}

int cmd_generate(int argc, char **argv) {
  GenArgs a;
  if (!gen_parse_args(argc, argv, &a, "generate")) return EXIT_ERROR;
  if ((a.prompt != NULL) + (a.prompt_file != NULL) + (a.prompt_tokens != NULL) > 1) {
    report_msg("give exactly one of --prompt TEXT, --prompt-file FILE or --prompt-tokens 1,2,3");
    return EXIT_ERROR;
  }
  if (!read_prompt(&a)) {
    gen_args_free(&a);
    return EXIT_ERROR;
  }
  if (!a.prompt && !a.prompt_tokens) {
    report_msg("give exactly one of --prompt TEXT, --prompt-file FILE or --prompt-tokens 1,2,3 (or pipe the "
               "prompt into standard input)");
    return EXIT_ERROR;
  }
  if (a.batch_invariant && !a.concurrency) {
    report_msg("--batch-invariant applies to batched generation: add --concurrency N");
    gen_args_free(&a);
    return EXIT_ERROR;
  }
  if (a.concurrency) {
    if (a.prompt_tokens) {
      report_msg("--concurrency reads text prompts, one per line (--prompt-file, --prompt or standard input), not "
                 "--prompt-tokens");
      gen_args_free(&a);
      return EXIT_ERROR;
    }
    int rc = generate_batched(&a);
    gen_args_free(&a);
    return rc;
  }
  if (a.prompt_tokens && a.chat_template) {
    report_msg("--chat renders a text prompt through the chat template: give --prompt, not --prompt-tokens");
    return EXIT_ERROR;
  }
  int rc = EXIT_ERROR, nprompt = 0, nout = 0;
  int32_t *prompt = NULL, *out = NULL;
  /* Token ids are checked before the (slow) model load; text needs the model's tokenizer. */
  if (a.prompt_tokens && !parse_tokens(a.prompt_tokens, &prompt, &nprompt)) return EXIT_ERROR;
  Backend *be = NULL;
  Model *m = gen_open_model(&a, &be);
  if (!m) {
    free(prompt);
    gen_args_free(&a);
    return EXIT_ERROR;
  }
  Diag d = {0};
  GenerateStats st;
  Stream stream = {a.prompt_tokens || a.chat_template ? NULL : a.prompt, 0, m->tok == NULL, 0};
  if (!a.prompt_tokens && !encode_prompt(&a, m, &prompt, &nprompt)) goto done;
  if (!nprompt) {
    report_msg("the prompt encodes to no tokens");
    goto done;
  }
  /* Ctrl-C from here on stops the completion and still prints it and the statistics (exit 130). */
  interrupt_arm();
  a.gen.interrupt = &interrupt_flag;
  if (!generate(m, prompt, nprompt, NULL, &a.gen, a.json ? NULL : stream_cb, &stream, &out, &nout, &st, &d)) {
    if (stream.started) fputc('\n', stdout);
    report(&d, NULL);
    goto done;
  }
  if (a.json) {
    json_t *o = json_object(), *pt = json_array(), *gt = json_array(), *stats = json_object();
    for (int i = 0; i < nprompt; i++) json_array_append_new(pt, json_integer(prompt[i]));
    for (int i = 0; i < nout; i++) json_array_append_new(gt, json_integer(out[i]));
    StrBuf text = {0};
    if (m->tok) tokenizer_decode(m->tok, out, nout, 1, &text);
    json_object_set_new(o, "prompt_tokens", pt);
    json_object_set_new(o, "tokens", gt);
    json_object_set_new(o, "text", json_string(sb_str(&text)));
    json_object_set_new(o, "stop_reason", json_string(st.stop_reason));
    json_object_set_new(o, "weights", json_string(model_weights_form(m)));
    const SamplerOptions *so = &a.gen.sampling;
    json_object_set_new(o, "sampling",
                        json_pack("{s:b, s:f, s:i, s:f, s:I, s:s}", "greedy", sampler_is_greedy(so), "temperature",
                                  so->temperature, "top_k", so->top_k, "top_p", so->top_p, "seed", (json_int_t)so->seed,
                                  "defaults_from", a.sampling_from));
    json_object_set_new(stats, "load_ms", json_real(m->load_ms));
    json_object_set_new(stats, "prefill_ms", json_real(st.prefill_ms));
    json_object_set_new(stats, "decode_ms", json_real(st.decode_ms));
    json_object_set_new(stats, "decode_tokens_per_s",
                        json_real(st.decode_ms > 0 ? st.generated * 1e3 / st.decode_ms : 0));
    json_object_set_new(o, "stats", stats);
    char *s = json_dumps(o, JSON_COMPACT);
    if (!s) {
      report_msg("out of memory: the JSON output");
      exit(EXIT_ERROR);
    }
    puts(s);
    free(s);
    sb_free(&text);
    json_decref(o);
  } else {
    stream_start(&stream);
    fputc('\n', stdout);
    if (!a.quiet) gen_print_stats(m, &st);
  }
  rc = strcmp(st.stop_reason, "interrupted") ? EXIT_OK : EXIT_INTERRUPTED;
done:
  free(prompt);
  free(out);
  model_free(m);
  if (be) be->ops->destroy(be);
  gen_args_free(&a);
  return rc;
}
