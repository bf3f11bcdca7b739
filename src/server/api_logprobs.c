/* The logprobs objects of completions and chat answers, and the embeddings answer (api_response.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "../base/mem.h"
#include "../base/strbuf.h"
#include "api_response.h"

/* A token's own bytes (decoded alone), and them as a JSON string with invalid UTF-8 as U+FFFD. */
static json_t *token_string(const Tokenizer *tok, int32_t id, StrBuf *bytes) {
  sb_clear(bytes);
  if (tok) tokenizer_decode(tok, &id, 1, 0, bytes);
  StrBuf ok = {0};
  const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)sb_str(bytes);
  utf8proc_ssize_t left = (utf8proc_ssize_t)bytes->len;
  while (left > 0) {
    utf8proc_int32_t c;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &c);
    if (n <= 0 || c == 0) {
      sb_puts(&ok, "\xEF\xBF\xBD");
      n = 1;
    } else {
      char piece[8];
      memcpy(piece, p, (size_t)n);
      piece[n] = 0;
      sb_puts(&ok, piece);
    }
    p += n;
    left -= n;
  }
  json_t *s = json_string(sb_str(&ok));
  sb_free(&ok);
  return s ? s : json_string("");
}

static json_t *bytes_json(const StrBuf *b) {
  json_t *a = json_array();
  for (size_t i = 0; i < b->len; i++) json_array_append_new(a, json_integer((unsigned char)b->data[i]));
  return a;
}

/* -9999 for -inf, as OpenAI writes a logprob too small to print (JSON has no infinity); NaN (a prompt's first
 * token, which nothing predicts) is null */
static json_t *logprob_json(float lp) { return isnan(lp) ? json_null() : json_real(isfinite(lp) ? lp : -9999.0); }

/* UTF-8 characters in s[0..n) */
static long chars(const char *s, size_t n) {
  long c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

static json_t *chat_entry(const Tokenizer *tok, int32_t id, float lp, StrBuf *b) {
  json_t *o = json_object();
  json_object_set_new(o, "token", token_string(tok, id, b));
  json_object_set_new(o, "logprob", logprob_json(lp));
  json_object_set_new(o, "bytes", bytes_json(b));
  return o;
}

json_t *api_logprobs_json(ApiKind kind, const Tokenizer *tok, const TokenLogprob *t, int from, int to, const char *text,
                          long base) {
  StrBuf b = {0};
  json_t *o = json_object();
  if (kind == API_CHAT) {
    json_t *content = json_array();
    for (int k = from; k < to; k++) {
      json_t *e = chat_entry(tok, t[k].token, t[k].logprob, &b), *top = json_array();
      for (int j = 0; j < t[k].ntop; j++)
        json_array_append_new(top, chat_entry(tok, t[k].top_ids[j], t[k].top_lp[j], &b));
      json_object_set_new(e, "top_logprobs", top);
      json_array_append_new(content, e);
    }
    json_object_set_new(o, "content", content);
    sb_free(&b);
    return o;
  }
  json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offsets = json_array();
  size_t at = from ? t[from - 1].end : 0;
  long offset = base + chars(text, at);
  for (int k = from; k < to; k++) {
    json_array_append_new(tokens, token_string(tok, t[k].token, &b));
    json_array_append_new(lps, logprob_json(t[k].logprob));
    json_array_append_new(offsets, json_integer(offset));
    offset += chars(text + at, t[k].end - at);
    at = t[k].end;
    if (t[k].ntop < 0) { /* no alternatives at all (the prompt's first token) */
      json_array_append_new(tops, json_null());
      continue;
    }
    json_t *top = json_object();
    for (int j = 0; j < t[k].ntop; j++) {
      json_t *s = token_string(tok, t[k].top_ids[j], &b);
      json_object_set_new(top, json_string_value(s), logprob_json(t[k].top_lp[j]));
      json_decref(s);
    }
    json_t *s = token_string(tok, t[k].token, &b); /* the chosen token is always listed, as OpenAI does */
    if (!json_object_get(top, json_string_value(s)))
      json_object_set_new(top, json_string_value(s), logprob_json(t[k].logprob));
    json_decref(s);
    json_array_append_new(tops, top);
  }
  json_object_set_new(o, "tokens", tokens);
  json_object_set_new(o, "token_logprobs", lps);
  json_object_set_new(o, "top_logprobs", tops);
  json_object_set_new(o, "text_offset", offsets);
  sb_free(&b);
  return o;
}

long api_text_chars(const char *s) { return chars(s, strlen(s)); }

json_t *api_prompt_logprobs_json(const Tokenizer *tok, const int32_t *prompt, int n, const TokenLogprob *rec, int nrec,
                                 int skip_special) {
  TokenLogprob *t = xcalloc((size_t)n, sizeof *t, "the prompt's logprobs");
  StrBuf text = {0};
  DecodeState ds = {0};
  for (int i = 0; i < n; i++) {
    if (i == 0 || i - 1 >= nrec) {
      t[i].token = prompt[i];
      t[i].logprob = NAN;
      t[i].ntop = -1;
    } else {
      t[i] = rec[i - 1];
    }
    if (tok) tokenizer_decode_step(tok, &ds, prompt[i], skip_special, &text);
    if (i == n - 1) tokenizer_decode_flush(&ds, &text);
    t[i].end = text.len;
  }
  json_t *o = api_logprobs_json(API_COMPLETION, tok, t, 0, n, sb_str(&text), 0);
  sb_free(&text);
  free(t);
  return o;
}

void api_logprobs_append(json_t *a, json_t *b) {
  const char *key;
  json_t *v;
  json_object_foreach(b, key, v) {
    json_t *have = json_object_get(a, key);
    if (json_is_array(have)) json_array_extend(have, v);
  }
  json_decref(b);
}

static char *base64(const unsigned char *p, size_t n) {
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *out = xmalloc((n + 2) / 3 * 4 + 1, "base64"), *o = out;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    *o++ = al[v >> 18 & 63];
    *o++ = al[v >> 12 & 63];
    *o++ = i + 1 < n ? al[v >> 6 & 63] : '=';
    *o++ = i + 2 < n ? al[v & 63] : '=';
  }
  *o = 0;
  return out;
}

char *api_embeddings_body(const char *model, const float *vectors, int n, int dim, int b64, int prompt_tokens) {
  json_t *data = json_array();
  for (int i = 0; i < n; i++) {
    const float *v = vectors + (size_t)i * (size_t)dim;
    json_t *e = json_object(), *vec;
    json_object_set_new(e, "object", json_string("embedding"));
    json_object_set_new(e, "index", json_integer(i));
    if (b64) {
      unsigned char *le = xmalloc(sizeof(float) * (size_t)dim, "an embedding");
      for (int j = 0; j < dim; j++) { /* little-endian f32, whatever the host's order */
        uint32_t x;
        memcpy(&x, &v[j], 4);
        for (int k = 0; k < 4; k++) le[4 * j + k] = (unsigned char)(x >> (8 * k));
      }
      char *s = base64(le, sizeof(float) * (size_t)dim);
      vec = json_string(s);
      free(s);
      free(le);
    } else {
      vec = json_array();
      for (int j = 0; j < dim; j++) json_array_append_new(vec, json_real(v[j]));
    }
    json_object_set_new(e, "embedding", vec);
    json_array_append_new(data, e);
  }
  json_t *usage = json_object();
  json_object_set_new(usage, "prompt_tokens", json_integer(prompt_tokens));
  json_object_set_new(usage, "total_tokens", json_integer(prompt_tokens));
  json_t *o = json_object();
  json_object_set_new(o, "object", json_string("list"));
  json_object_set_new(o, "data", data);
  json_object_set_new(o, "model", json_string(model));
  json_object_set_new(o, "usage", usage);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s ? s : xstrdup("{}", "a response");
}
