/* Loading the tokenizer from GGUF metadata (tokenizer.ggml.*): tokens, merges, token types (3 =
 * control -> special, 4 = user-defined -> added), BOS/EOS, add_bos_token, and the pre-tokenizer
 * named by tokenizer.ggml.pre. */
#include <stdlib.h>
#include <string.h>
#include "../model/gguf.h"
#include "../base/mem.h"
#include "tokenizer_internal.h"

static int setup_pre(Tokenizer *t, const char *pre, Diag *d) {
  if (!pre || strcmp(pre, "gpt2") == 0 || strcmp(pre, "default") == 0) return pre_add_bytelevel(t, 1, 0, d);
  if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0) {
    t->ignore_merges = 1; /* as Llama 3's tokenizer.json */
    return pre_add_split(t, TOK_PATTERN_LLAMA3, 0, SPLIT_ISOLATED, 0, d) && pre_add_bytelevel(t, 0, 0, d);
  }
  if (strcmp(pre, "qwen2") == 0)
    return pre_add_split(t, TOK_PATTERN_QWEN2, 0, SPLIT_ISOLATED, 0, d) && pre_add_bytelevel(t, 0, 0, d);
  if (strcmp(pre, "smollm") == 0)
    return pre_add_split(t, TOK_PATTERN_DIGITS, 0, SPLIT_ISOLATED, 0, d) && pre_add_bytelevel(t, 1, 0, d);
  diag_error(d, 0, 0, "gguf: tokenizer.ggml.pre '%s' is not supported (gpt2, llama-bpe, qwen2, smollm)", pre);
  return 0;
}

static int load_tokens(Tokenizer *t, const GgufFile *f, Diag *d) {
  GgufValueType et;
  size_t n, ntypes = 0;
  if (!gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n) || et != GGUF_STRING || n == 0 || n >= (1u << 24)) {
    diag_error(d, 0, 0, "gguf: tokenizer.ggml.tokens is missing or not a string array");
    return 0;
  }
  GgufValueType tt;
  if (!gguf_get_arr(f, "tokenizer.ggml.token_type", &tt, &ntypes) || tt == GGUF_STRING || tt == GGUF_ARRAY) ntypes = 0;
  tok_set_vocab_size(t, (int)n);
  for (size_t i = 0; i < n; i++) {
    const char *s = gguf_arr_str(f, "tokenizer.ggml.tokens", i);
    if (!s) {
      diag_error(d, 0, 0, "gguf: tokenizer.ggml.tokens[%zu] is not a string", i);
      return 0;
    }
    int64_t type = i < ntypes ? gguf_arr_int(f, "tokenizer.ggml.token_type", i) : 1;
    unsigned flags = type == 3 ? TOK_FLAG_ADDED | TOK_FLAG_SPECIAL : type == 4 ? TOK_FLAG_ADDED : 0;
    tok_define(t, (int32_t)i, s, strlen(s), flags);
  }
  return 1;
}

static int load_merges(Tokenizer *t, const GgufFile *f, Diag *d) {
  GgufValueType et;
  size_t n;
  if (!gguf_get_arr(f, "tokenizer.ggml.merges", &et, &n) || et != GGUF_STRING) {
    diag_error(d, 0, 0, "gguf: tokenizer.ggml.merges is missing or not a string array");
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    const char *s = gguf_arr_str(f, "tokenizer.ggml.merges", i), *sp = s ? strchr(s, ' ') : NULL;
    if (!sp) {
      diag_error(d, 0, 0, "gguf: tokenizer.ggml.merges[%zu] is not 'left right'", i);
      return 0;
    }
    tok_add_merge(t, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), (int32_t)i);
  }
  return 1;
}

static int token_id_key(const Tokenizer *t, const GgufFile *f, const char *key) {
  int64_t v;
  return gguf_get_int(f, key, &v) && v >= 0 && v < t->vocab_size ? (int)v : -1;
}

Tokenizer *tokenizer_from_gguf(const struct GgufFile *f, Diag *d) {
  const char *model = NULL, *pre = NULL;
  if (!gguf_get_str(f, "tokenizer.ggml.model", &model)) {
    diag_error(d, 0, 0, "gguf: no tokenizer (tokenizer.ggml.model is missing)");
    return NULL;
  }
  if (strcmp(model, "gpt2") != 0) {
    diag_error(d, 0, 0, "gguf: tokenizer.ggml.model '%s' is not supported (byte-level BPE 'gpt2' only)", model);
    return NULL;
  }
  gguf_get_str(f, "tokenizer.ggml.pre", &pre);
  Tokenizer *t = tok_new();
  int ok = setup_pre(t, pre, d) && load_tokens(t, f, d) && load_merges(t, f, d);
  if (ok) {
    t->bos = token_id_key(t, f, "tokenizer.ggml.bos_token_id");
    t->eos = token_id_key(t, f, "tokenizer.ggml.eos_token_id");
    int add_bos = 0;
    t->add_bos = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos) && add_bos;
    const char *tpl = NULL;
    if (gguf_get_str(f, "tokenizer.chat_template", &tpl)) { t->chat_template = xstrdup(tpl, "the chat template"); }
    ok = tok_finish(t, d);
  }
  if (!ok) {
    tokenizer_free(t);
    return NULL;
  }
  return t;
}
