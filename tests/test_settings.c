/* The settings table (base/settings.h): every entry declared with a name, type, default and doc; values
 * from the environment or an override; the cache directory's precedence. Notices (base/notice.h) reach the
 * installed sink and nothing else. The model sizes bench's floor and the memory check use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "base/notice.h"
#include "base/settings.h"
#include "generate/model.h"
#include "model/presets.h"

static void table_is_complete(void **state) {
  (void)state;
  for (int i = 0; i < SET_COUNT; i++) {
    const SettingInfo *s = setting_info((SettingId)i);
    assert_non_null(s);
    assert_int_equal(s->id, i); /* rows in SettingId order */
    assert_true(s->name && s->name[0]);
    assert_true(s->doc && strlen(s->doc) > 10);
    assert_non_null(s->def);
    assert_ptr_equal(setting_find(s->name), s);
    assert_string_not_equal(setting_type_name(s->type), "?");
    for (int j = 0; j < i; j++) assert_string_not_equal(setting_info((SettingId)j)->name, s->name);
  }
  assert_null(setting_find("LATHE_NO_SUCH"));
  assert_null(setting_info(SET_COUNT));
  /* the variables issue 15 found undocumented are in it */
  assert_non_null(setting_find("LATHE_CC"));
  assert_non_null(setting_find("LATHE_CUDA_DEVICE"));
  assert_non_null(setting_find("CUDA_HOME"));
}

static void values_env_and_override(void **state) {
  (void)state;
  unsetenv("LATHE_CC");
  assert_null(setting_str(SET_CC));
  assert_string_equal(setting_source(SET_CC), "default");
  setenv("LATHE_CC", "", 1); /* empty is unset */
  assert_null(setting_str(SET_CC));
  setenv("LATHE_CC", "clang", 1);
  assert_string_equal(setting_str(SET_CC), "clang");
  assert_string_equal(setting_source(SET_CC), "env");
  setting_set(SET_CC, "gcc"); /* the override wins over the environment */
  assert_string_equal(setting_str(SET_CC), "gcc");
  assert_string_equal(setting_source(SET_CC), "set");
  assert_string_equal(getenv("LATHE_CC"), "clang"); /* and does not touch it */
  setting_set(SET_CC, NULL);
  assert_string_equal(setting_str(SET_CC), "clang");
  unsetenv("LATHE_CC");
}

static void typed_values(void **state) {
  (void)state;
  int ok;
  unsetenv("LATHE_PDL");
  assert_int_equal(setting_bool(SET_PDL, 1), 1);
  assert_int_equal(setting_bool(SET_PDL, 0), 0);
  const char *falses[] = {"0", "false", "No", "OFF"};
  for (int i = 0; i < 4; i++) {
    setenv("LATHE_PDL", falses[i], 1);
    assert_int_equal(setting_bool(SET_PDL, 1), 0);
  }
  setenv("LATHE_PDL", "1", 1);
  assert_int_equal(setting_bool(SET_PDL, 0), 1);
  unsetenv("LATHE_PDL");
  setenv("LATHE_NVRTC_UNITS", "3", 1);
  assert_int_equal(setting_int(SET_NVRTC_UNITS, 16, &ok), 3);
  assert_int_equal(ok, 1);
  setenv("LATHE_NVRTC_UNITS", "3x", 1);
  assert_int_equal(setting_int(SET_NVRTC_UNITS, 16, &ok), 16);
  assert_int_equal(ok, 0);
  unsetenv("LATHE_NVRTC_UNITS");
  assert_int_equal(setting_int(SET_NVRTC_UNITS, 16, &ok), 16);
  assert_int_equal(ok, 1);
  setting_set(SET_CPU_BANDWIDTH, "25.5");
  assert_true(setting_number(SET_CPU_BANDWIDTH, 0, &ok) == 25.5 && ok);
  setting_set(SET_CPU_BANDWIDTH, "fast");
  assert_true(setting_number(SET_CPU_BANDWIDTH, 0, &ok) == 0 && !ok);
  setting_set(SET_CPU_BANDWIDTH, NULL);
}

static void cache_root_precedence(void **state) {
  (void)state;
  char dir[512];
  setenv("HOME", "/home/u", 1);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("LATHE_CACHE_DIR");
  assert_true(settings_cache_root(dir, sizeof dir));
  assert_string_equal(dir, "/home/u/.cache/lathe");
  setenv("XDG_CACHE_HOME", "/x/", 1);
  assert_true(settings_cache_root(dir, sizeof dir));
  assert_string_equal(dir, "/x//lathe");
  setenv("LATHE_CACHE_DIR", "/c/d//", 1);
  assert_true(settings_cache_root(dir, sizeof dir));
  assert_string_equal(dir, "/c/d"); /* trailing slashes dropped */
  setting_set(SET_CACHE_DIR, "/tmp/cold");
  assert_true(settings_cache_root(dir, sizeof dir));
  assert_string_equal(dir, "/tmp/cold");
  setting_set(SET_CACHE_DIR, NULL);
  unsetenv("LATHE_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  assert_false(settings_cache_root(dir, sizeof dir));
}

typedef struct Seen {
  int n, last_kind, done, total;
  char text[256];
} Seen;

static void sink(void *ctx, const Notice *n) {
  Seen *s = ctx;
  s->n++;
  s->last_kind = n->kind;
  s->done = n->done;
  s->total = n->total;
  snprintf(s->text, sizeof s->text, "%s", n->text);
}

static void notices_reach_the_sink(void **state) {
  (void)state;
  notice(NOTICE_WARNING, "dropped %d", 1); /* no sink: nothing happens */
  Seen s = {0};
  notice_set_sink(sink, &s);
  notice(NOTICE_WARNING, "fallback %s", "taken");
  assert_int_equal(s.n, 1);
  assert_int_equal(s.last_kind, NOTICE_WARNING);
  assert_string_equal(s.text, "fallback taken");
  notice_progress("loading weights", 3, 10);
  assert_int_equal(s.last_kind, NOTICE_PROGRESS);
  assert_int_equal(s.done, 3);
  assert_int_equal(s.total, 10);
  notice_set_sink(NULL, NULL);
  notice(NOTICE_PROFILE, "x");
  assert_int_equal(s.n, 2);
}

/* Qwen3-8B with bf16 weights: 8.19e9 parameters; a decode step reads all but the untied embedding table
 * (one row per token), so an H200's 4130 GB/s floor is 273 tok/s, not the 252 of all the bytes. */
static void floor_counts_bytes_read(void **state) {
  (void)state;
  ModelConfig c;
  assert_true(model_preset("qwen3-8b", &c));
  int64_t params = model_param_count(&c);
  assert_true(params > 8.18e9 && params < 8.20e9);
  size_t wb = (size_t)params * 2;
  size_t read = model_step_read_bytes(&c, wb, DT_BF16);
  assert_int_equal(wb - read, (size_t)c.vocab * c.hidden * 2 - (size_t)c.hidden * 2);
  assert_int_equal((int)(4130e9 / (double)wb + 0.5), 252);
  assert_int_equal((int)(4130e9 / (double)read + 0.5), 273);
  /* a q4_k table: its own blocks (144 bytes per 256 elements) are what is not read */
  size_t q4k = (size_t)c.vocab * c.hidden / 256 * 144;
  assert_int_equal(wb - model_step_read_bytes(&c, wb, DT_Q4_K), q4k - (size_t)c.hidden / 256 * 144);
  /* tied (SmolLM2): the lm_head reads the whole table */
  assert_true(model_preset("smollm2-135m", &c));
  assert_int_equal(model_step_read_bytes(&c, 1000000000, DT_BF16), 1000000000);
  assert_int_equal(model_kv_bytes_per_position(&c), (size_t)30 * 2 * 3 * 64 * 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(table_is_complete),      cmocka_unit_test(values_env_and_override),
      cmocka_unit_test(typed_values),           cmocka_unit_test(cache_root_precedence),
      cmocka_unit_test(notices_reach_the_sink), cmocka_unit_test(floor_counts_bytes_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
