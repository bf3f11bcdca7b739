/* The Jinja chat-template interpreter: the corpus of real models' templates (tests/fixtures/chat_templates)
 * rendered over varied message lists must give exactly the text Python's jinja2 gives as transformers runs it
 * (the expected outputs are made by scripts/chat-template-expected.sh and committed), plus the language's
 * features one by one and its errors (with line and column) and limits. */
#include "testutil.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tokenizer/jinja.h"
#include "tokenizer/tokenizer.h"

#define DIR "tests/fixtures/chat_templates"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = 0;
  fclose(f);
  return s;
}

static struct tm fixed_now(void) { /* scripts/chat_template_expected.py's FIXED_NOW */
  struct tm t = {0};
  t.tm_year = 2026 - 1900, t.tm_mon = 2, t.tm_mday = 14, t.tm_hour = 9, t.tm_min = 26, t.tm_sec = 53;
  t.tm_wday = 6, t.tm_yday = 72;
  return t;
}

/* Renders tpl; returns the malloc'ed text, or NULL with the error in *d. */
static char *render_with(const char *tpl, const ChatMessage *m, int n, int agp, const JinjaLimits *lim, Diag *d) {
  StrBuf out = {0};
  struct tm now = fixed_now();
  *d = (Diag){0};
  if (!chat_template_render_with(tpl, m, n, agp, "<s>", "</s>", lim, &now, &out, d)) {
    sb_free(&out);
    return NULL;
  }
  char *s = strdup(sb_str(&out));
  sb_free(&out);
  return s;
}

static char *render(const char *tpl, Diag *d) {
  static const ChatMessage msgs[] = {{"system", "Be brief."}, {"user", "Hi there"}, {"assistant", "Hello!"}};
  return render_with(tpl, msgs, 3, 1, NULL, d);
}

static void expect_text(const char *tpl, const char *want) {
  Diag d;
  char *got = render(tpl, &d);
  if (!got) fail_msg("template %s failed: %d:%d %s", tpl, d.line, d.col, d.msg);
  if (strcmp(got, want)) fail_msg("template %s\n  gave [%s]\n  want [%s]", tpl, got, want);
  free(got);
}

static void expect_error(const char *tpl, int line, int col, const char *msg) {
  Diag d;
  char *got = render(tpl, &d);
  if (got) fail_msg("template %s rendered [%s], expected an error", tpl, got);
  assert_contains(d.msg, msg);
  if (line && (d.line != line || d.col != col))
    fail_msg("template %s: error at %d:%d, expected %d:%d (%s)", tpl, d.line, d.col, line, col, d.msg);
}

static void test_corpus(void **state) {
  (void)state;
  json_error_t err;
  json_t *corpus = json_load_file(DIR "/corpus.json", 0, &err), *cases = json_load_file(DIR "/cases.json", 0, &err);
  assert_non_null(corpus);
  assert_non_null(cases);
  size_t ti, ci, checked = 0, failures = 0;
  json_t *entry, *c;
  json_array_foreach(corpus, ti, entry) {
    const char *name = json_string_value(json_object_get(entry, "name"));
    char path[512];
    snprintf(path, sizeof path, DIR "/%s.jinja", name);
    char *tpl = slurp(path);
    snprintf(path, sizeof path, DIR "/%s.expected.json", name);
    json_t *expected = json_load_file(path, 0, &err);
    if (!expected) fail_msg("%s: %s", path, err.text);
    json_array_foreach(cases, ci, c) {
      const char *cname = json_string_value(json_object_get(c, "name"));
      json_t *msgs = json_object_get(c, "messages"), *want = json_object_get(expected, cname);
      assert_non_null(want);
      int n = (int)json_array_size(msgs);
      ChatMessage *m = calloc((size_t)n + 1, sizeof *m);
      for (int i = 0; i < n; i++) {
        m[i].role = json_string_value(json_object_get(json_array_get(msgs, (size_t)i), "role"));
        m[i].content = json_string_value(json_object_get(json_array_get(msgs, (size_t)i), "content"));
      }
      StrBuf out = {0};
      Diag d = {0};
      struct tm now = fixed_now();
      int ok = chat_template_render_with(tpl, m, n, json_is_true(json_object_get(c, "agp")),
                                         json_string_value(json_object_get(entry, "bos")),
                                         json_string_value(json_object_get(entry, "eos")), NULL, &now, &out, &d);
      const char *text = json_string_value(json_object_get(want, "text"));
      const char *raised = json_string_value(json_object_get(want, "raise"));
      checked++;
      if (text && (!ok || strcmp(sb_str(&out), text))) {
        failures++;
        print_message("%s / %s:\n  C     : %s\n  jinja2: [%s]\n", name, cname, ok ? sb_str(&out) : d.msg, text);
      } else if (!text && ok) {
        failures++;
        print_message("%s / %s: C rendered [%s], jinja2 failed: %s\n", name, cname, sb_str(&out),
                      raised ? raised : json_string_value(json_object_get(want, "error")));
      } else if (raised) {
        char msg[600];
        snprintf(msg, sizeof msg, "raise_exception: %s", raised);
        if (!strstr(d.msg, msg)) {
          failures++;
          print_message("%s / %s: C error '%s', jinja2 raised '%s'\n", name, cname, d.msg, raised);
        }
      }
      sb_free(&out);
      free(m);
    }
    json_decref(expected);
    free(tpl);
  }
  print_message("chat template corpus: %zu templates x %zu cases, %zu mismatches\n", json_array_size(corpus),
                json_array_size(cases), failures);
  assert_int_equal(failures, 0);
  assert_true(checked >= 15 * 19);
  json_decref(corpus);
  json_decref(cases);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
