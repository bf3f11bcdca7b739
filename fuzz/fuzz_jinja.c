/* libFuzzer target over the Jinja chat-template interpreter: any template text must render or give one
 * diag with a position, never a crash, a hang or a leak (small limits keep each input fast). Seeds: the
 * templates of tests/fixtures/chat_templates; dictionary: fuzz/jinja.dict.
 * Build: clang -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Isrc, this file and the library
 * sources of src/base and src/tokenizer; -ljansson -lpcre2-8 -lutf8proc -lm. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer/jinja.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  static const ChatMessage msgs[] = {{"system", "Be brief."},
                                     {"user", "Hi <think>x</think> é"},
                                     {"assistant", "Hello!"},
                                     {"user", ""}};
  JinjaLimits lim = {64, 200000, 1 << 20, 32u << 20};
  struct tm now = {0};
  now.tm_year = 126, now.tm_mday = 1;
  StrBuf out = {0};
  Diag d = {0};
  int ok = chat_template_render_with(text, msgs, 4, 1, "<s>", "</s>", &lim, &now, &out, &d);
  if (!ok && !d.set) abort(); /* a failure must say why */
  if (ok && out.len > lim.max_output) abort();
  sb_free(&out);
  free(text);
  return 0;
}
