/* Chat prompts: the model's own Jinja chat template, run by the interpreter of jinja*.c with the
 * variables transformers' apply_chat_template passes (messages, add_generation_prompt, bos_token,
 * eos_token, tools = none). A model that ships no template gets ChatML only when its vocabulary has
 * <|im_start|> (hand-written below); otherwise that is an error, as is a template that cannot run. */
#include <stdlib.h>
#include <string.h>
#include "jinja.h"
#include "tokenizer_internal.h"
#include "../base/mem.h"

typedef struct ChatVars {
  const ChatMessage *msgs;
  int n, add_generation_prompt;
  const char *bos, *eos;
} ChatVars;

static JValue make_vars(JCtx *c, void *arg) {
  const ChatVars *cv = arg;
  JValue vars = jv_dict(c, JV_DICT), msgs = jv_list(c, (size_t)cv->n);
  for (int i = 0; i < cv->n; i++) {
    JValue m = jv_dict(c, JV_DICT);
    jv_dict_set(c, m.u.d, jv_cstr("role"), jv_cstr(cv->msgs[i].role));
    jv_dict_set(c, m.u.d, jv_cstr("content"), jv_cstr(cv->msgs[i].content));
    msgs.u.l->v[i] = m;
  }
  jv_dict_set(c, vars.u.d, jv_cstr("messages"), msgs);
  jv_dict_set(c, vars.u.d, jv_cstr("add_generation_prompt"), jv_bool(cv->add_generation_prompt));
  jv_dict_set(c, vars.u.d, jv_cstr("bos_token"), jv_cstr(cv->bos ? cv->bos : ""));
  jv_dict_set(c, vars.u.d, jv_cstr("eos_token"), jv_cstr(cv->eos ? cv->eos : ""));
  jv_dict_set(c, vars.u.d, jv_cstr("tools"), jv_none());
  jv_dict_set(c, vars.u.d, jv_cstr("documents"), jv_none());
  return vars;
}

static int check_messages(const ChatMessage *msgs, int n, Diag *d) {
  if (n < 0 || (n > 0 && !msgs)) {
    diag_error(d, 0, 0, "chat: invalid message list");
    return 0;
  }
  for (int i = 0; i < n; i++) {
    if (!msgs[i].role || !msgs[i].content || !msgs[i].role[0]) {
      diag_error(d, 0, 0, "chat: message %d has no role or content", i);
      return 0;
    }
  }
  return 1;
}

int chat_template_render_with(const char *template_text, const ChatMessage *msgs, int n, int add_generation_prompt,
                              const char *bos, const char *eos, const JinjaLimits *lim, const struct tm *now,
                              StrBuf *out, Diag *d) {
  if (!check_messages(msgs, n, d)) return 0;
  ChatVars cv = {msgs, n, add_generation_prompt != 0, bos, eos};
  return jinja_render(template_text, make_vars, &cv, lim, now, out, d);
}

int chat_template_render(const char *template_text, const ChatMessage *msgs, int n, int add_generation_prompt,
                         const char *bos, const char *eos, StrBuf *out, Diag *d) {
  return chat_template_render_with(template_text, msgs, n, add_generation_prompt, bos, eos, NULL, NULL, out, d);
}

const char *tokenizer_chat_template(const Tokenizer *t) { return t ? t->chat_template : NULL; }

static char *token_text(const Tokenizer *t, int id) {
  StrBuf b = {0};
  if (id >= 0) {
    int32_t one = id;
    tokenizer_decode(t, &one, 1, 0, &b);
  }
  char *s = xstrdup(sb_str(&b), "a special token");
  sb_free(&b);
  return s;
}

int chat_render(const Tokenizer *t, const char *template_text, const ChatMessage *msgs, int n,
                int add_generation_prompt, StrBuf *out, Diag *d) {
  if (!check_messages(msgs, n, d)) return 0;
  sb_puts(out, ""); /* the result is a valid (possibly empty) string */
  if (!template_text) template_text = tokenizer_chat_template(t);
  if (template_text) {
    char *bos = t ? token_text(t, tokenizer_bos(t)) : NULL, *eos = t ? token_text(t, tokenizer_eos(t)) : NULL;
    int ok = chat_template_render(template_text, msgs, n, add_generation_prompt, bos, eos, out, d);
    free(bos), free(eos);
    return ok;
  }
  if (!t || tokenizer_token_id(t, "<|im_start|>") < 0) {
    diag_error(d, 0, 0, "chat: the model ships no chat template (give one with --chat-template FILE)");
    return 0;
  }
  /* No template but a ChatML vocabulary: the format those models are trained on. */
  for (int i = 0; i < n; i++) sb_printf(out, "<|im_start|>%s\n%s<|im_end|>\n", msgs[i].role, msgs[i].content);
  if (add_generation_prompt) sb_puts(out, "<|im_start|>assistant\n");
  return 1;
}
