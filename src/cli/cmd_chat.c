/* lathe chat: an interactive, multi-turn conversation using the model's chat template. The KV cache
 * is kept between turns: each turn only the tokens after the longest common prefix are computed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../backend/backend.h"
#include "../base/mem.h"
#include "gen_common.h"

static int stream_cb(void *ctx, int32_t id, const char *text) {
  StrBuf *reply = ctx;
  (void)id;
  sb_puts(reply, text);
  fputs(text, stdout);
  fflush(stdout);
  return 0;
}

typedef struct Conversation {
  ChatMessage *msgs;
  char **owned; /* contents we strdup'ed */
  int n, cap;
} Conversation;

static void conv_add(Conversation *c, const char *role, const char *content) {
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->msgs = xrealloc(c->msgs, sizeof *c->msgs * (size_t)c->cap, "the chat history");
    c->owned = xrealloc(c->owned, sizeof *c->owned * (size_t)c->cap, "the chat history");
  }
  c->owned[c->n] = xstrdup(content, "a chat message");
  c->msgs[c->n] = (ChatMessage){role, c->owned[c->n]};
  c->n++;
}

static void conv_clear(Conversation *c) {
  for (int i = 0; i < c->n; i++) free(c->owned[i]);
  c->n = 0;
}

int cmd_chat(int argc, char **argv) {
  GenArgs a;
  if (!gen_parse_args(argc, argv, &a, "chat")) return EXIT_ERROR;
  Backend *be = NULL;
  Model *m = gen_open_model(&a, &be);
  if (!m) return EXIT_ERROR;
  if (!m->tok) {
    report_msg("the model has no tokenizer (no tokenizer.json), so it cannot chat");
    model_free(m);
    be->ops->destroy(be);
    return EXIT_ERROR;
  }
  int tty = isatty(0);
  if (tty) fprintf(stderr, "lathe chat: type a message; /reset starts over, /exit or Ctrl-D quits.\n");
  Conversation conv = {0};
  if (a.system) conv_add(&conv, "system", a.system);
  int32_t *cache_tokens = NULL; /* what the KV cache holds, in order */
  int ncache = 0, rc = EXIT_OK;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  for (;;) {
    if (tty) fputs("> ", stdout), fflush(stdout);
    if ((len = getline(&line, &cap, stdin)) < 0) break;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (!len) continue;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
    if (!strcmp(line, "/reset")) {
      conv_clear(&conv);
      if (a.system) conv_add(&conv, "system", a.system);
      ncache = 0;
      continue;
    }
    conv_add(&conv, "user", line);
    Diag d = {0};
    StrBuf text = {0}, reply = {0};
    int32_t *ids = NULL, *out = NULL;
    int n = 0, nout = 0;
    GenerateStats st;
    if (!chat_render(m->tok, tokenizer_chat_template(m->tok), conv.msgs, conv.n, 1, &text, &d) ||
        !tokenizer_encode(m->tok, sb_str(&text), 1, &ids, &n, &d)) {
      report(&d, NULL);
      rc = EXIT_ERROR;
      sb_free(&text);
      free(ids);
      break;
    }
    int common = 0;
    while (common < ncache && common < n && cache_tokens[common] == ids[common]) common++;
    int cached = common;
    if (!generate(m, ids, n, &cached, &a.gen, stream_cb, &reply, &out, &nout, &st, &d)) {
      fputc('\n', stdout);
      report(&d, NULL);
      /* A full context ends the conversation's usefulness; start over rather than exit. */
      conv_clear(&conv);
      if (a.system) conv_add(&conv, "system", a.system);
      ncache = 0;
    } else {
      fputc('\n', stdout);
      if (!a.quiet) gen_print_stats(m, &st);
      conv_add(&conv, "assistant", sb_str(&reply));
      /* The cache now holds the prompt and all but the last generated token. */
      cache_tokens = xrealloc(cache_tokens, sizeof(int32_t) * (size_t)(n + nout + 1), "the chat tokens");
      memcpy(cache_tokens, ids, sizeof(int32_t) * (size_t)n);
      memcpy(cache_tokens + n, out, sizeof(int32_t) * (size_t)nout);
      ncache = cached;
    }
    sb_free(&text);
    sb_free(&reply);
    free(ids);
    free(out);
  }
  free(line);
  conv_clear(&conv);
  free(conv.msgs);
  free(conv.owned);
  free(cache_tokens);
  model_free(m);
  if (be) be->ops->destroy(be);
  return rc;
}
