/* libFuzzer target over the tokenizer.json loader: any input must give a tokenizer or one diag,
 * never a crash or a leak; a tokenizer that loads must encode and decode a fixed text. The input is
 * split at the first NUL byte into tokenizer.json and tokenizer_config.json (when present).
 * Build: clang -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Isrc, this file and the library
 * sources of src/base, src/ir, src/tokenizer and src/model; -ljansson -lpcre2-8 -lutf8proc -lm. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *json = (const char *)data, *config = NULL;
  size_t json_n = size, config_n = 0;
  const uint8_t *nul = memchr(data, 0, size);
  if (nul) {
    json_n = (size_t)(nul - data);
    config = (const char *)nul + 1;
    config_n = size - json_n - 1;
  }
  Diag d = {0};
  Tokenizer *t = tokenizer_from_hf_json(json, json_n, config, config_n, &d);
  if (!t) {
    if (!d.set) abort(); /* a failure must say why */
    return 0;
  }
  int32_t *ids = NULL;
  int n = 0;
  if (tokenizer_encode(t, "Hello, world! 123 <|im_start|>user\n\xf0\x9f\x98\x80 \xff", 1, &ids, &n, &d)) {
    StrBuf out = {0};
    tokenizer_decode(t, ids, n, 0, &out);
    ChatMessage m = {"user", "hi"};
    chat_render(t, tokenizer_chat_template(t), &m, 1, 1, &out, &d);
    sb_free(&out);
    free(ids);
  }
  tokenizer_free(t);
  return 0;
}
