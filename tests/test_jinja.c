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
  if (line && (d.line != line || (col && d.col != col)))
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
        const char *got = ok ? sb_str(&out) : d.msg;
        size_t at = 0;
        while (got[at] && got[at] == text[at]) at++;
        size_t from = at > 40 ? at - 40 : 0;
        print_message("%s / %s: differs at byte %zu:\n  C     : [%.80s]\n  jinja2: [%.80s]\n", name, cname, at,
                      got + from, text + from);
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

/* The language, a feature at a time (messages: system "Be brief.", user "Hi there", assistant "Hello!"). */
static void test_features(void **state) {
  (void)state;
  expect_text("{{ messages[1].content }}|{{ messages[-1]['role'] }}|{{ messages | length }}", "Hi there|assistant|3");
  expect_text("{% for m in messages %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{% endfor %}",
              "1TrueFalse2FalseFalse3FalseTrue");
  expect_text("{% for m in [] %}x{% else %}empty{% endfor %}", "empty");
  expect_text("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}", "a1b2");
  expect_text("{% set x = 1 %}{% for m in messages %}{% set x = 2 %}{% endfor %}{{ x }}", "1"); /* loop scope */
  expect_text("{% set ns = namespace(x=1) %}{% for m in messages %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}",
              "4");
  expect_text("{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "<1B><23>");
  expect_text("{{ 'a' if messages else 'b' }}{{ 'c' if not messages else 'd' }}", "ad");
  expect_text("{{ [1, 2, 3][::-1] }} {{ 'hello'[1:3] }} {{ 'héllo'[1] }}", "[3, 2, 1] el é");
  expect_text("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 8 }} {{ 1 / 4 }} {{ 'x' ~ 1 }}", "7 3 2 256 0.25 x1");
  expect_text("{{ 'a' in 'cat' }} {{ 3 not in [1, 2] }} {{ 1 < 2 <= 2 }}", "True True True");
  expect_text("{{ '  hi  ' | trim }}|{{ 'Hi' | upper }}|{{ ['a', 'b'] | join('-') }}|{{ x | default('d') }}",
              "hi|HI|a-b|d");
  expect_text("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
              "['Hi there']");
  expect_text("{{ {'a': [1, none, true], 'b': 'é\"'} | tojson }}", "{\"a\": [1, null, true], \"b\": \"é\\\"\"}");
  expect_text("{{ [1] | tojson(indent=2) }}", "[\n  1\n]");
  expect_text("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ 3 is odd }}",
              "False True True True True");
  expect_text("{{ 'a,b'.split(',') }} {{ ' x '.strip() }} {{ 'abc'.startswith('a') }} {{ 'A'.lower() }}",
              "['a', 'b'] x True a");
  expect_text("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools }}", "<s></s>TrueNone");
  expect_text("{{ strftime_now('%d %b %Y') }}", "14 Mar 2026");
  expect_text("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
              "{{ i }}{% endfor %}",
              "02");
  expect_text("{% set b %}x{{ 1 }}{% endset %}{{ b }}{{ b | length }}", "x12");
  /* whitespace control and transformers' trim_blocks + lstrip_blocks */
  expect_text("a  {{- ' b ' -}}  c", "a b c");
  expect_text("x\n  {% if true %}\n    y\n  {% endif %}\nz", "x\n    y\nz");
  expect_text("x\n  {%+ if true %}y{% endif +%}\nz", "x\n  y\nz");
  expect_text("a {# note #}\nb\n", "a b"); /* trailing newline of the template dropped */
  expect_text("{{ 'it''s' }} {{ \"\\u00e9\\n\" }}", "its é\n");
}

static void test_errors(void **state) {
  (void)state;
  expect_error("{{ 'x' }}\n  {{ messages | nosuch }}", 2, 15, "unknown filter 'nosuch'");
  expect_error("{{ 1 is nosuch }}", 1, 6, "unknown test 'nosuch'");
  expect_error("line one\n{{ 1 + }}", 2, 8, "syntax error: expected an expression, got '}}'");
  expect_error("{% if true %}never closed", 1, 26, "expected '{% endif %}'");
  expect_error("{% endfor %}", 1, 4, "syntax error");
  expect_error("{% frobnicate %}", 1, 4, "expected a statement");
  expect_error("{{ 'open }}", 1, 4, "unterminated string literal");
  expect_error("{{ 1 }", 1, 1, "unclosed {{ tag");
  expect_error("{# never closed", 1, 1, "unclosed comment");
  expect_error("{% break %}", 1, 4, "'break' outside a for loop");
  expect_error("{{ nothing.here }}", 1, 4, "'nothing' is undefined");
  expect_error("{{ 1 // 0 }}", 1, 6, "division by zero");
  expect_error("{{ 'a' - 1 }}", 1, 8, "unsupported operand types for -: str and int");
  expect_error("{{ 9223372036854775807 + 1 }}", 1, 24, "integer overflow");
  expect_error("{% set x = 1 %}{% set x.y = 2 %}", 1, 19, "only on a namespace");
  expect_error("{% for a, b in [[1, 2, 3]] %}{% endfor %}", 1, 4, "cannot unpack 3 values into 2 names");
  expect_error("\n\n   {{ raise_exception('Conversation roles must alternate') }}", 3, 0,
               "raise_exception: Conversation roles must alternate");
  Diag d;
  char *got = render("x{{ raise_exception('boom') }}", &d);
  assert_null(got);
  assert_int_equal(d.line, 1);
  assert_int_equal(d.col, 20); /* the call's '(' */
}

/* A hostile template is an error, never a hang, a crash or unbounded memory. */
static void test_limits(void **state) {
  (void)state;
  JinjaLimits lim = {64, 200000, 1 << 20, 64u << 20};
  Diag d;
  static const ChatMessage msg = {"user", "hi"};
  char *got = render_with("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &msg, 1, 0, &lim, &d);
  assert_null(got);
  assert_contains(d.msg, "nested deeper than 64 levels");
  got = render_with("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", &msg, 1, 0,
                    &lim, &d);
  assert_null(got);
  assert_contains(d.msg, "ran for more than 200000 steps");
  got = render_with("{% for i in range(2000) %}{{ 'x' * 1000 }}{% endfor %}", &msg, 1, 0, &lim, &d);
  assert_null(got);
  assert_contains(d.msg, "over the limit");
  got = render_with("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                    &msg, 1, 0, &lim, &d);
  assert_null(got);
  assert_contains(d.msg, "limit");
  got = render_with("{{ 'ab' * 9000000000000000000 }}", &msg, 1, 0, &lim, &d);
  assert_null(got);
  got = render_with("{{ range(1000000000000) | length }}", &msg, 1, 0, &lim, &d);
  assert_null(got);
  assert_contains(d.msg, "too long");
  /* deep nesting in the source is bounded while parsing, with the default limits too */
  char deep[5000] = "{{ ";
  for (int i = 0; i < 2000; i++) strcat(deep, "(");
  strcat(deep, "1");
  for (int i = 0; i < 2000; i++) strcat(deep, ")");
  strcat(deep, " }}");
  got = render_with(deep, &msg, 1, 0, NULL, &d);
  assert_null(got);
  assert_contains(d.msg, "nested deeper than");
  char ifs[20000] = "";
  for (int i = 0; i < 1000; i++) strcat(ifs, "{% if 1 %}");
  got = render_with(ifs, &msg, 1, 0, NULL, &d);
  assert_null(got);
  assert_contains(d.msg, "nested deeper than");
  /* values a loop nests deeply (or a namespace holding itself) print as an error with a position */
  got = render_with("{% set ns = namespace(x=1) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}\n"
                    "{{ ns.x == ns.x }} {{ ns.x }}",
                    &msg, 1, 0, &lim, &d);
  assert_null(got);
  assert_contains(d.msg, "nested deeper than");
  assert_int_equal(d.line, 2);
  got = render_with("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", &msg, 1, 0, &lim, &d);
  assert_null(got);
  assert_contains(d.msg, "nested deeper than");
  got = render_with("{{ 'abc'[1::9223372036854775807] }}{{ range(-9000000000000000000, 9000000000000000000, "
                    "6000000000000000000) | list }}{{ [1, 2][::-9223372036854775807] }}",
                    &msg, 1, 0, &lim, &d);
  if (!got) fail_msg("%s", d.msg);
  assert_string_equal(got, "b[-9000000000000000000, -3000000000000000000, 3000000000000000000][2]");
  free(got);
  /* within the limits the same shapes run */
  got = render_with("{% for i in range(3) %}{{ 'x' * 2 }}{% endfor %}", &msg, 1, 0, &lim, &d);
  assert_string_equal(got, "xxxxxx");
  free(got);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus),
      cmocka_unit_test(test_features),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
