/* Chat templates: the two prompt formats the supported models use, rendered directly in C. The
 * model's Jinja template text is only inspected (which format, and ChatML's default system prompt),
 * never executed. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer_internal.h"
#include "../base/mem.h"

/* Finds a literal '<|im_start|>system\n...<|im_end|>' whose body is plain text (not an expression such
 * as "' + messages[0]['content'] + '"): that body is what the template injects when the conversation
 * does not start with a system message. Accepts a real newline or a "\n" escape in the template. */
char *chat_default_system(const char *tpl) {
  static const char head[] = "<|im_start|>system";
  for (const char *p = strstr(tpl, head); p; p = strstr(p + 1, head)) {
    if (p == tpl || (p[-1] != '\'' && p[-1] != '"')) continue;
    const char *body = p + strlen(head);
    if (*body == '\n') body++;
    else if (body[0] == '\\' && body[1] == 'n') body += 2;
    else continue;
    const char *end = strstr(body, "<|im_end|>");
    if (!end || end == body) continue;
    size_t n = (size_t)(end - body);
    if (memchr(body, '\'', n) || memchr(body, '"', n) || memchr(body, '{', n)) continue;
    char *out = xmalloc(n + 1, "the chat text"), *w = out;
    for (size_t i = 0; i < n; i++) {
      if (body[i] == '\\' && i + 1 < n && body[i + 1] == 'n') *w++ = '\n', i++;
      else *w++ = body[i];
    }
    *w = 0;
    return out;
  }
  return NULL;
}

ChatTemplate tokenizer_chat_template(const Tokenizer *t) {
  if (t->chat_template) {
    if (strstr(t->chat_template, "<|start_header_id|>")) return CHAT_LLAMA3;
    if (strstr(t->chat_template, "<|im_start|>")) return CHAT_CHATML;
  }
  if (tokenizer_token_id(t, "<|start_header_id|>") >= 0 && tokenizer_token_id(t, "<|im_start|>") < 0)
    return CHAT_LLAMA3;
  return CHAT_CHATML;
}

int chat_render(const Tokenizer *t, ChatTemplate tpl, const ChatMessage *msgs, int n, int add_generation_prompt,
                StrBuf *out, Diag *d) {
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
  sb_puts(out, ""); /* the result is a valid (possibly empty) string */
  switch (tpl) {
  case CHAT_CHATML:
    if (t && t->default_system && n > 0 && strcmp(msgs[0].role, "system") != 0)
      sb_printf(out, "<|im_start|>system\n%s<|im_end|>\n", t->default_system);
    for (int i = 0; i < n; i++) sb_printf(out, "<|im_start|>%s\n%s<|im_end|>\n", msgs[i].role, msgs[i].content);
    if (add_generation_prompt) sb_puts(out, "<|im_start|>assistant\n");
    return 1;
  case CHAT_LLAMA3:
    for (int i = 0; i < n; i++)
      sb_printf(out, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", msgs[i].role, msgs[i].content);
    if (add_generation_prompt) sb_puts(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 1;
  }
  diag_error(d, 0, 0, "chat: unknown template %d", (int)tpl);
  return 0;
}
