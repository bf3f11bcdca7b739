/* Loading a Hugging Face tokenizer.json (+ tokenizer_config.json): BPE model (vocab, merges,
 * ignore_merges), added tokens, normalizer, pre-tokenizer steps, BOS from the post-processor or the
 * config, and the chat template. Anything not byte-level BPE is refused with one diag. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer_internal.h"
#include "../base/mem.h"

static const char *str_field(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static int bool_field(json_t *o, const char *key, int dflt) {
  json_t *v = json_object_get(o, key);
  return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static int load_vocab(Tokenizer *t, json_t *vocab, Diag *d) {
  const char *key;
  json_t *v;
  json_object_foreach(vocab, key, v) {
    json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
    if (id < 0 || id >= (1 << 24)) {
      diag_error(d, 0, 0, "tokenizer.json: model.vocab entry '%.60s' has an invalid id", key);
      return 0;
    }
    tok_define(t, (int32_t)id, key, strlen(key), 0);
  }
  return 1;
}

static int load_added(Tokenizer *t, json_t *added, Diag *d) {
  if (!added || json_is_null(added)) return 1;
  if (!json_is_array(added)) {
    diag_error(d, 0, 0, "tokenizer.json: added_tokens is not an array");
    return 0;
  }
  size_t i;
  json_t *a;
  json_array_foreach(added, i, a) {
    json_t *id = json_object_get(a, "id");
    const char *content = str_field(a, "content");
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 24) || !content) {
      diag_error(d, 0, 0, "tokenizer.json: added_tokens[%zu] needs an 'id' and a 'content'", i);
      return 0;
    }
    unsigned flags = TOK_FLAG_ADDED | (bool_field(a, "special", 0) ? TOK_FLAG_SPECIAL : 0);
    tok_define(t, (int32_t)json_integer_value(id), content, strlen(content), flags);
  }
  return 1;
}

static int load_merges(Tokenizer *t, json_t *merges, Diag *d) {
  size_t i;
  json_t *m;
  json_array_foreach(merges, i, m) {
    if (json_is_string(m)) { /* "left right" (older files) */
      const char *s = json_string_value(m), *sp = strchr(s, ' ');
      if (!sp) {
        diag_error(d, 0, 0, "tokenizer.json: model.merges[%zu] '%.60s' is not 'left right'", i, s);
        return 0;
      }
      tok_add_merge(t, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), (int32_t)i);
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) { /* ["left", "right"] */
      const char *l = json_string_value(json_array_get(m, 0)), *r = json_string_value(json_array_get(m, 1));
      tok_add_merge(t, l, strlen(l), r, strlen(r), (int32_t)i);
    } else {
      diag_error(d, 0, 0, "tokenizer.json: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", i);
      return 0;
    }
  }
  return 1;
}

static int load_normalizer(Tokenizer *t, json_t *n, Diag *d) {
  if (!n || json_is_null(n)) return 1;
  const char *type = str_field(n, "type");
  if (type && strcmp(type, "Sequence") == 0) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(n, "normalizers"), i, c) if (!load_normalizer(t, c, d)) return 0;
    return 1;
  }
  static const struct {
    const char *name;
    Normalization norm;
  } forms[] = {{"NFC", NORM_NFC}, {"NFD", NORM_NFD}, {"NFKC", NORM_NFKC}, {"NFKD", NORM_NFKD}};
  for (size_t i = 0; type && i < sizeof forms / sizeof forms[0]; i++) {
    if (strcmp(type, forms[i].name) != 0) continue;
    if (t->norm != NORM_NONE && t->norm != forms[i].norm) break;
    t->norm = forms[i].norm;
    return 1;
  }
  diag_error(d, 0, 0, "tokenizer.json: normalizer type '%s' is not supported", type ? type : "?");
  return 0;
}

static int parse_behavior(const char *s, SplitBehavior *b) {
  static const struct {
    const char *name;
    SplitBehavior b;
  } names[] = {{"Isolated", SPLIT_ISOLATED},
               {"Removed", SPLIT_REMOVED},
               {"MergedWithPrevious", SPLIT_MERGED_PREV},
               {"MergedWithNext", SPLIT_MERGED_NEXT},
               {"Contiguous", SPLIT_CONTIGUOUS}};
  for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
    if (strcmp(s, names[i].name) == 0) return *b = names[i].b, 1;
  return 0;
}

static int load_pretokenizer(Tokenizer *t, json_t *p, int *saw_bytelevel, Diag *d) {
  const char *type = str_field(p, "type");
  if (!type) {
    diag_error(d, 0, 0, "tokenizer.json: pre_tokenizer without a 'type'");
    return 0;
  }
  if (strcmp(type, "Sequence") == 0) {
    json_t *list = json_object_get(p, "pretokenizers");
    size_t i;
    json_t *c;
    if (!json_is_array(list)) {
      diag_error(d, 0, 0, "tokenizer.json: pre_tokenizer Sequence without 'pretokenizers'");
      return 0;
    }
    json_array_foreach(list, i, c) if (!load_pretokenizer(t, c, saw_bytelevel, d)) return 0;
    return 1;
  }
  if (strcmp(type, "ByteLevel") == 0) {
    *saw_bytelevel = 1;
    return pre_add_bytelevel(t, bool_field(p, "use_regex", 1), bool_field(p, "add_prefix_space", 0), d);
  }
  if (strcmp(type, "Digits") == 0)
    return pre_add_split(t, bool_field(p, "individual_digits", 0) ? TOK_PATTERN_DIGITS : "\\p{N}+", 0, SPLIT_ISOLATED,
                         0, d);
  if (strcmp(type, "Split") == 0) {
    json_t *pat = json_object_get(p, "pattern");
    const char *re = str_field(pat, "Regex"), *lit = str_field(pat, "String");
    SplitBehavior b;
    if ((!re && !lit) || !parse_behavior(str_field(p, "behavior"), &b)) {
      diag_error(d, 0, 0, "tokenizer.json: Split pre_tokenizer needs a Regex or String pattern and a known behavior");
      return 0;
    }
    return pre_add_split(t, re ? re : lit, !re, b, bool_field(p, "invert", 0), d);
  }
  diag_error(d, 0, 0, "tokenizer.json: pre_tokenizer type '%s' is not supported (byte-level BPE only)", type);
  return 0;
}

/* A TemplateProcessing whose single-sequence template starts with a special token adds that as BOS. */
static void load_post_processor(Tokenizer *t, json_t *p) {
  const char *type = str_field(p, "type");
  if (!type) return;
  if (strcmp(type, "Sequence") == 0) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(p, "processors"), i, c) load_post_processor(t, c);
    return;
  }
  if (strcmp(type, "TemplateProcessing") != 0) return;
  json_t *first = json_array_get(json_object_get(p, "single"), 0);
  const char *name = str_field(json_object_get(first, "SpecialToken"), "id");
  if (!name) return;
  json_t *ids = json_object_get(json_object_get(json_object_get(p, "special_tokens"), name), "ids");
  int id = json_is_integer(json_array_get(ids, 0)) ? (int)json_integer_value(json_array_get(ids, 0))
                                                   : tokenizer_token_id(t, name);
  if (id >= 0 && id < t->vocab_size) t->bos = id, t->add_bos = 1;
}

/* "bos_token": "<s>" or {"content": "<s>", ...} */
static int config_token(const Tokenizer *t, json_t *cfg, const char *key) {
  json_t *v = json_object_get(cfg, key);
  const char *s = json_is_string(v) ? json_string_value(v) : str_field(v, "content");
  return s ? tokenizer_token_id(t, s) : -1;
}

static void load_config(Tokenizer *t, json_t *cfg) {
  int bos = config_token(t, cfg, "bos_token"), eos = config_token(t, cfg, "eos_token");
  if (bos >= 0) t->bos = bos;
  if (eos >= 0) t->eos = eos;
  t->add_bos = bool_field(cfg, "add_bos_token", t->add_bos);
  json_t *tpl = json_object_get(cfg, "chat_template");
  const char *text = json_is_string(tpl) ? json_string_value(tpl) : NULL;
  if (json_is_array(tpl)) { /* [{"name": "default", "template": "..."}, ...] */
    size_t i;
    json_t *c;
    json_array_foreach(tpl, i, c) {
      const char *name = str_field(c, "name");
      if (!text || (name && strcmp(name, "default") == 0)) text = str_field(c, "template");
    }
  }
  if (text) {
    free(t->chat_template);
    t->chat_template = xstrdup(text, "the chat template");
  }
}

static int load_model(Tokenizer *t, json_t *root, Diag *d) {
  json_t *model = json_object_get(root, "model");
  if (!json_is_object(model)) {
    diag_error(d, 0, 0, "tokenizer.json: missing 'model'");
    return 0;
  }
  const char *type = str_field(model, "type");
  if (type && strcmp(type, "BPE") != 0) {
    diag_error(d, 0, 0, "tokenizer.json: model type '%s' is not supported (byte-level BPE only)", type);
    return 0;
  }
  json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
  if (!json_is_object(vocab)) {
    diag_error(d, 0, 0, "tokenizer.json: missing model.vocab");
    return 0;
  }
  if (!json_is_array(merges)) {
    diag_error(d, 0, 0, "tokenizer.json: missing model.merges");
    return 0;
  }
  t->ignore_merges = bool_field(model, "ignore_merges", 0);
  tok_set_vocab_size(t, (int)json_object_size(vocab));
  /* Added tokens after the vocab: their flags win where they share an id with a vocab entry. */
  return load_vocab(t, vocab, d) && load_added(t, json_object_get(root, "added_tokens"), d) &&
         load_merges(t, merges, d);
}

Tokenizer *tokenizer_from_hf_json(const char *json, size_t n, const char *config_json, size_t config_n, Diag *d) {
  json_error_t err;
  json_t *root = json_loadb(json, n, 0, &err);
  if (!root) {
    diag_error(d, err.line > 0 ? err.line : 0, err.column > 0 ? err.column : 0, "tokenizer.json: not valid JSON: %s",
               err.text);
    return NULL;
  }
  Tokenizer *t = tok_new();
  int ok = 1, saw_bytelevel = 0;
  if (!json_is_object(root)) {
    diag_error(d, 0, 0, "tokenizer.json: the top level is not an object");
    ok = 0;
  }
  ok = ok && load_model(t, root, d) && load_normalizer(t, json_object_get(root, "normalizer"), d);
  json_t *pre = ok ? json_object_get(root, "pre_tokenizer") : NULL;
  if (ok && pre && !json_is_null(pre)) ok = load_pretokenizer(t, pre, &saw_bytelevel, d);
  if (ok && !saw_bytelevel) {
    diag_error(d, 0, 0, "tokenizer.json: pre_tokenizer has no ByteLevel step (byte-level BPE only)");
    ok = 0;
  }
  if (ok) {
    load_post_processor(t, json_object_get(root, "post_processor"));
    if (config_json) {
      json_t *cfg = json_loadb(config_json, config_n, 0, &err);
      if (!cfg) {
        diag_error(d, err.line > 0 ? err.line : 0, err.column > 0 ? err.column : 0,
                   "tokenizer_config.json: not valid JSON: %s", err.text);
        ok = 0;
      } else {
        if (json_is_object(cfg)) load_config(t, cfg);
        json_decref(cfg);
      }
    }
  }
  json_decref(root);
  if (ok && t->eos < 0) { /* no config: the usual end-of-text names */
    static const char *const names[] = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && t->eos < 0; i++) t->eos = tokenizer_token_id(t, names[i]);
  }
  if (ok) ok = tok_finish(t, d);
  if (!ok) {
    tokenizer_free(t);
    return NULL;
  }
  return t;
}

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      char *nb = xrealloc(buf, cap, "the tokenizer file");
      buf = nb;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return NULL;
  }
  *n = len;
  return buf;
}

Tokenizer *tokenizer_from_hf_dir(const char *dir, Diag *d) {
  size_t plen = strlen(dir) + 32;
  char *path = xmalloc(plen, "a tokenizer path");
  snprintf(path, plen, "%s/tokenizer.json", dir);
  size_t n = 0, cn = 0;
  char *json = read_file(path, &n);
  if (!json) {
    diag_error(d, 0, 0, "cannot read %s: %s", path, strerror(errno));
    free(path);
    return NULL;
  }
  snprintf(path, plen, "%s/tokenizer_config.json", dir);
  char *cfg = read_file(path, &cn); /* optional */
  Tokenizer *t = tokenizer_from_hf_json(json, n, cfg, cn, d);
  /* transformers writes the template to chat_template.jinja (newer saves) and reads that file first */
  snprintf(path, plen, "%s/chat_template.jinja", dir);
  size_t tn = 0;
  char *tpl = t ? read_file(path, &tn) : NULL;
  if (tpl) {
    free(t->chat_template);
    t->chat_template = xstrndup(tpl, tn, "the chat template");
    free(tpl);
  }
  free(json), free(cfg), free(path);
  return t;
}
