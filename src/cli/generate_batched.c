/* lathe generate --concurrency N: every line of the prompt is a request of its own; the batched engine
 * completes up to N at once and each completion is printed on its own line, in input order (newlines in a
 * completion written as \n, backslashes as \\), or as one JSON object per line with --json. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/clock.h"
#include "../base/mem.h"
#include "../engine/engine.h"
#include "gen_common.h"
#include "generate_batched.h"
#include "interrupt.h"

typedef struct Line {
  int32_t *prompt;
  int nprompt, id, done;
  const char *reason;
} Line;

/* The prompt's lines (empty ones skipped), encoded. */
static int split_lines(const GenArgs *a, const Model *m, Line **out, int *n) {
  *out = NULL;
  *n = 0;
  if (!m->tok) {
    report_msg("--concurrency reads text prompts, one per line, and the model has no tokenizer");
    return 0;
  }
  int cap = 0;
  const char *p = a->prompt;
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t line = e ? (size_t)(e - p) : strlen(p), len = line;
    if (len && p[len - 1] == '\r') len--;
    if (len) {
      char *text = xmalloc(len + 1, "a prompt line");
      memcpy(text, p, len);
      text[len] = 0;
      if (*n == cap) *out = xrealloc(*out, sizeof **out * (size_t)(cap = cap ? 2 * cap : 16), "the prompt lines");
      Line *l = &(*out)[(*n)++];
      memset(l, 0, sizeof *l);
      int ok = gen_encode_text(a, m, text, &l->prompt, &l->nprompt);
      free(text);
      if (!ok) return 0;
    }
    p += line + (e != NULL);
  }
  if (!*n) report_msg("the prompt has no non-empty lines");
  return *n > 0;
}

static void put_escaped(const char *s) {
  for (; *s; s++) {
    if (*s == '\n') fputs("\\n", stdout);
    else if (*s == '\\') fputs("\\\\", stdout);
    else putchar(*s);
  }
}

static void print_line(const Engine *e, const Model *m, const Line *l, int index, int json) {
  int n;
  const int32_t *tok = engine_output(e, l->id, &n);
  StrBuf text = {0};
  tokenizer_decode(m->tok, tok, n, 1, &text);
  if (json) {
    json_t *o = json_object(), *t = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(t, json_integer(tok[i]));
    json_object_set_new(o, "index", json_integer(index));
    json_object_set_new(o, "text", json_string(sb_str(&text)));
    json_object_set_new(o, "tokens", t);
    json_object_set_new(o, "prompt_tokens", json_integer(l->nprompt));
    json_object_set_new(o, "stop_reason", json_string(l->reason));
    char *s = json_dumps(o, JSON_COMPACT);
    if (s) puts(s);
    free(s);
    json_decref(o);
  } else {
    put_escaped(sb_str(&text));
    putchar('\n');
  }
  fflush(stdout);
  sb_free(&text);
}

int generate_batched(GenArgs *a) {
  if (!a->prompt) {
    report_msg("--concurrency reads text prompts, one per line: give --prompt-file FILE, --prompt or standard input");
    return EXIT_ERROR;
  }
  a->kv_block = 16;
  Backend *be = NULL;
  Model *m = gen_open_model(a, &be);
  if (!m) return EXIT_ERROR;
  Line *lines = NULL;
  int nlines = 0, rc = EXIT_ERROR;
  Engine *e = NULL;
  Diag d = {0};
  if (!split_lines(a, m, &lines, &nlines)) goto done;
  EngineOptions eo = {0, a->concurrency};
  if (!(e = engine_new(m, &eo, &d))) {
    report(&d, NULL);
    goto done;
  }
  for (int i = 0; i < nlines; i++) {
    EngineRequest r = {lines[i].prompt, lines[i].nprompt, a->gen.max_tokens, a->gen.sampling,
                       a->gen.stop,     a->gen.nstop,     a->gen.ignore_eos};
    r.sampling.seed += (uint64_t)i; /* the same prompt twice gets two samples */
    if (r.max_tokens < 1) r.max_tokens = 1;
    if ((lines[i].id = engine_add(e, &r, &d)) < 0) {
      char where[32];
      snprintf(where, sizeof where, "line %d", i + 1);
      report(&d, where);
      goto done;
    }
  }
  interrupt_arm();
  double t0 = now_ms();
  int printed = 0;
  while (engine_has_work(e)) {
    if (interrupt_flag) {
      for (int i = 0; i < nlines; i++)
        if (!lines[i].done) engine_cancel(e, lines[i].id, &(Diag){0});
      interrupt_flag = 0;
    }
    const EngineEvent *ev;
    int nev;
    if (!engine_step(e, &ev, &nev, &d)) {
      report(&d, NULL);
      goto done;
    }
    for (int k = 0; k < nev; k++)
      if (ev[k].kind == EV_FINISHED)
        for (int i = 0; i < nlines; i++)
          if (lines[i].id == ev[k].id) lines[i].done = 1, lines[i].reason = ev[k].reason;
    for (; printed < nlines && lines[printed].done; printed++) print_line(e, m, &lines[printed], printed, a->json);
  }
  EngineStats st;
  engine_stats(e, &st);
  if (!a->quiet)
    fprintf(stderr, "lathe: %d prompts, %ld tokens generated in %.2f s (%.1f tok/s), %ld steps, up to %d at once\n",
            nlines, st.generated, (now_ms() - t0) / 1e3, st.tok_per_s, st.steps, a->concurrency);
  rc = EXIT_OK;
  for (int i = 0; i < nlines; i++)
    if (lines[i].reason && !strcmp(lines[i].reason, "cancelled")) rc = EXIT_INTERRUPTED;
done:
  engine_free(e);
  for (int i = 0; i < nlines; i++) free(lines[i].prompt);
  free(lines);
  model_free(m);
  if (be) be->ops->destroy(be);
  return rc;
}
