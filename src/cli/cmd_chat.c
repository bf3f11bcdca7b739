/* lathe chat: an interactive, multi-turn conversation using the model's chat template. The KV cache
 * is kept between turns: each turn only the tokens after the longest common prefix are computed.
 * Line editing and history on a terminal (line_input.c), /commands, """ multi-line messages, Ctrl-C
 * to stop a reply, and the oldest turns dropped when the conversation outgrows the context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../backend/backend.h"
#include "../base/mem.h"
#include "gen_common.h"
#include "interrupt.h"
#include "line_input.h"

static const char HELP[] =
    "commands:\n"
    "  /help, /?           this text\n"
    "  /reset, /clear      forget the conversation (the system prompt stays)\n"
    "  /system TEXT        set the system prompt, keeping the conversation; /system alone shows it\n"
    "  /exit, /bye, /quit  leave (so does Ctrl-D)\n"
    "  \"\"\"                 starts a multi-line message, a line ending in \"\"\" ends it\n"
    "Ctrl-C stops a reply: what was printed stays in the conversation. Ctrl-C at the prompt leaves.\n"
    "When the conversation outgrows the context (--ctx) the oldest turns are dropped; the system\n"
    "prompt stays.\n";

static int stream_cb(void *ctx, int32_t id, const char *text) {
  StrBuf *reply = ctx;
  (void)id;
  sb_puts(reply, text);
  fputs(text, stdout);
  fflush(stdout);
  return 0;
}

/* The messages so far; a system prompt, when there is one, is msgs[0]. */
typedef struct Conversation {
  ChatMessage *msgs;
  char **owned; /* contents we strdup'ed */
  int n, cap;
} Conversation;

static void conv_insert(Conversation *c, int at, const char *role, const char *content) {
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->msgs = xrealloc(c->msgs, sizeof *c->msgs * (size_t)c->cap, "the chat history");
    c->owned = xrealloc(c->owned, sizeof *c->owned * (size_t)c->cap, "the chat history");
  }
  memmove(c->msgs + at + 1, c->msgs + at, sizeof *c->msgs * (size_t)(c->n - at));
  memmove(c->owned + at + 1, c->owned + at, sizeof *c->owned * (size_t)(c->n - at));
  c->owned[at] = xstrdup(content, "a chat message");
  c->msgs[at] = (ChatMessage){role, c->owned[at]};
  c->n++;
}

static void conv_add(Conversation *c, const char *role, const char *content) { conv_insert(c, c->n, role, content); }

/* Removes k messages from index at. */
static void conv_remove(Conversation *c, int at, int k) {
  if (k <= 0) return;
  for (int i = at; i < at + k; i++) free(c->owned[i]);
  memmove(c->msgs + at, c->msgs + at + k, sizeof *c->msgs * (size_t)(c->n - at - k));
  memmove(c->owned + at, c->owned + at + k, sizeof *c->owned * (size_t)(c->n - at - k));
  c->n -= k;
}

static int conv_has_system(const Conversation *c) { return c->n && !strcmp(c->msgs[0].role, "system"); }

/* Everything but the system prompt. */
static void conv_reset(Conversation *c) {
  int first = conv_has_system(c);
  conv_remove(c, first, c->n - first);
}

static void conv_set_system(Conversation *c, const char *text) {
  if (conv_has_system(c)) conv_remove(c, 0, 1);
  conv_insert(c, 0, "system", text);
}

/* Drops the oldest turn (a user message and the replies after it), never the system prompt nor the
 * last message (the one to answer). Returns 0 when there is no such turn. */
static int conv_drop_oldest_turn(Conversation *c) {
  int first = conv_has_system(c), end = first + 1;
  while (end < c->n - 1 && strcmp(c->msgs[end].role, "user")) end++;
  if (first >= c->n - 1) return 0;
  conv_remove(c, first, end - first);
  return 1;
}

static void conv_free(Conversation *c) {
  conv_remove(c, 0, c->n);
  free(c->msgs);
  free(c->owned);
}

typedef struct Chat {
  Model *m;
  GenArgs *a;
  Conversation conv;
  int32_t *cache_tokens; /* what the KV cache holds, in order */
  int ncache;
} Chat;

/* Messages rendered with the chat template and encoded, ready to answer the last one. */
static int encode_messages(Chat *c, const ChatMessage *msgs, int nmsgs, int32_t **ids, int *n) {
  Diag d = {0};
  StrBuf text = {0};
  free(*ids);
  *ids = NULL;
  int ok = chat_render(c->m->tok, c->a->chat_template_text, msgs, nmsgs, 1, &text, &d) &&
           tokenizer_encode(c->m->tok, sb_str(&text), 0, ids, n, &d); /* the template writes any BOS */
  if (!ok) gen_report_chat(c->a, &d);
  sb_free(&text);
  return ok;
}

static int encode_conversation(Chat *c, int32_t **ids, int *n) {
  return encode_messages(c, c->conv.msgs, c->conv.n, ids, n);
}

/* Encodes the conversation, first dropping its oldest turns while the prompt leaves no room for a
 * reply of --max-tokens (or a quarter of the context, when less). Returns 1 with the prompt in ids/n;
 * 0 when even the last message alone does not fit (reported, nothing dropped, *fatal = 0) or on an
 * error (*fatal = 1). */
static int fit_context(Chat *c, int32_t **ids, int *n, int *fatal) {
  int ctx = c->m->max_ctx, room = c->a->gen.max_tokens < ctx / 4 ? c->a->gen.max_tokens : ctx / 4;
  if (room < 1) room = 1;
  *fatal = 0;
  if (!encode_conversation(c, ids, n)) return !(*fatal = 1);
  if (*n + room <= ctx) return 1;
  /* the least the prompt can be: the system prompt and the last message */
  ChatMessage least[2];
  int nleast = 0, has_system = conv_has_system(&c->conv);
  if (has_system) least[nleast++] = c->conv.msgs[0];
  least[nleast++] = c->conv.msgs[c->conv.n - 1];
  int first_n = *n;
  if (!encode_messages(c, least, nleast, ids, n)) return !(*fatal = 1);
  if (*n >= ctx) {
    report_msg("the message does not fit the context: %d tokens%s, the context holds %d (--ctx); it was not sent", *n,
               has_system ? " with the system prompt" : "", ctx);
    return 0;
  }
  int dropped = 0;
  do {
    if (!conv_drop_oldest_turn(&c->conv)) break;
    dropped++;
    if (!encode_conversation(c, ids, n)) return !(*fatal = 1);
  } while (*n + room > ctx);
  if (dropped)
    fprintf(stderr, "lathe: the conversation (%d tokens) outgrew the context (%d tokens): dropped the oldest %d %s\n",
            first_n, ctx, dropped, dropped == 1 ? "turn" : "turns");
  return 1;
}

/* Answers the conversation's last (user) message, streaming the reply. Returns 0 on an error that
 * ends the chat. */
static int answer(Chat *c) {
  int32_t *ids = NULL, *out = NULL;
  int n = 0, nout = 0, fatal = 0;
  if (!fit_context(c, &ids, &n, &fatal)) {
    conv_remove(&c->conv, c->conv.n - 1, 1);
    free(ids);
    return !fatal;
  }
  int common = 0;
  while (common < c->ncache && common < n && c->cache_tokens[common] == ids[common]) common++;
  int cached = common;
  Diag d = {0};
  StrBuf reply = {0};
  GenerateStats st;
  interrupt_arm();
  c->a->gen.interrupt = &interrupt_flag;
  int ok = generate(c->m, ids, n, &cached, &c->a->gen, stream_cb, &reply, &out, &nout, &st, &d);
  fputc('\n', stdout);
  fflush(stdout);
  if (!ok) {
    /* the history stays; the message that failed goes, and the cache is recomputed next turn */
    report(&d, NULL);
    conv_remove(&c->conv, c->conv.n - 1, 1);
    c->ncache = 0;
  } else {
    if (!c->a->quiet) gen_print_stats(c->m, &st);
    /* A reply stopped by Ctrl-C is kept as far as it went (that is what the user saw), unless it had
     * not begun: then its message goes too. */
    if (!strcmp(st.stop_reason, "interrupted") && !nout) conv_remove(&c->conv, c->conv.n - 1, 1);
    else conv_add(&c->conv, "assistant", sb_str(&reply));
    /* The cache now holds the prompt and all but the last generated token. */
    c->cache_tokens = xrealloc(c->cache_tokens, sizeof(int32_t) * (size_t)(n + nout + 1), "the chat tokens");
    memcpy(c->cache_tokens, ids, sizeof(int32_t) * (size_t)n);
    if (nout) memcpy(c->cache_tokens + n, out, sizeof(int32_t) * (size_t)nout);
    c->ncache = cached;
  }
  sb_free(&reply);
  free(ids);
  free(out);
  return 1;
}

static int ends_with_quotes(const char *s) {
  size_t n = strlen(s);
  return n >= 3 && !strcmp(s + n - 3, "\"\"\"");
}

/* Reads the next message into msg: one line, or the lines from one starting with """ to one ending
 * with """ (joined with newlines; text beside the quotes belongs to the message, as in Ollama).
 * Returns 0 at the end of the input before a message, or on Ctrl-C. */
static int read_message(LineInput *in, StrBuf *msg) {
  sb_clear(msg);
  const char *line = line_input_read(in, "> ");
  if (!line) return 0;
  if (strncmp(line, "\"\"\"", 3)) {
    sb_puts(msg, line);
    return 1;
  }
  const char *rest = line + 3;
  if (ends_with_quotes(rest)) { /* """text""" on one line */
    sb_printf(msg, "%.*s", (int)strlen(rest) - 3, rest);
    return 1;
  }
  sb_puts(msg, rest);
  int parts = *rest != 0;
  while ((line = line_input_read(in, "... "))) {
    int last = ends_with_quotes(line);
    int len = (int)strlen(line) - (last ? 3 : 0);
    if (len || !last) sb_printf(msg, "%s%.*s", parts++ ? "\n" : "", len, line);
    if (last) return 1;
  }
  return !interrupt_flag; /* Ctrl-C inside the quotes leaves; the end of the input ends the message */
}

/* Runs a /command; returns 0 when it leaves the chat. */
static int command(Chat *c, const char *line) {
  const char *arg = strchr(line, ' ');
  size_t len = arg ? (size_t)(arg - line) : strlen(line);
  while (arg && *arg == ' ') arg++;
  if (arg && !*arg) arg = NULL;
#define IS(name) (len == strlen(name) && !strncmp(line, name, len))
  if (IS("/exit") || IS("/bye") || IS("/quit")) return 0;
  if (IS("/help") || IS("/?")) {
    fputs(HELP, stdout);
  } else if (IS("/reset") || IS("/clear")) {
    conv_reset(&c->conv);
    fprintf(stderr, "lathe: the conversation is cleared%s\n",
            conv_has_system(&c->conv) ? " (the system prompt stays)" : "");
  } else if (IS("/system")) {
    if (arg) {
      conv_set_system(&c->conv, arg);
      fprintf(stderr, "lathe: the system prompt is set\n");
    } else if (conv_has_system(&c->conv)) {
      printf("%s\n", c->conv.msgs[0].content);
    } else {
      fprintf(stderr, "lathe: there is no system prompt (/system TEXT sets one)\n");
    }
  } else {
    fprintf(stderr, "lathe: unknown command '%.*s' (/help lists them)\n", (int)len, line);
  }
#undef IS
  return 1;
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
  LineInput in;
  line_input_open(&in);
  if (line_input_editing(&in))
    fprintf(stderr, "lathe chat: type a message; /help lists the commands; Ctrl-D or /bye leaves.\n");
  Chat c = {m, &a, {0}, NULL, 0};
  if (a.system) conv_add(&c.conv, "system", a.system);
  int rc = EXIT_OK;
  StrBuf msg = {0};
  for (;;) {
    interrupt_arm(); /* Ctrl-C at the prompt: the read returns and the chat ends */
    if (!read_message(&in, &msg)) {
      if (line_input_editing(&in)) fputc('\n', stdout); /* the shell's prompt on a line of its own */
      break;
    }
    const char *text = sb_str(&msg);
    if (!text[strspn(text, " \t\n")]) continue;
    if (text[0] == '/') {
      if (!command(&c, text)) break;
      continue;
    }
    conv_add(&c.conv, "user", text);
    if (!answer(&c)) {
      rc = EXIT_ERROR;
      break;
    }
  }
  sb_free(&msg);
  line_input_close(&in);
  conv_free(&c.conv);
  free(c.cache_tokens);
  model_free(m);
  if (be) be->ops->destroy(be);
  return rc;
}
