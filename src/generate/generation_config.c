#include "generation_config.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int number(json_t *o, const char *key, double *out) {
  json_t *v = json_object_get(o, key);
  if (!json_is_number(v)) return 0;
  *out = json_number_value(v);
  return 1;
}

int generation_config_read(const char *model_dir, GenerationConfig *g, Diag *d) {
  memset(g, 0, sizeof *g);
  struct stat st;
  if (stat(model_dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/generation_config.json", model_dir);
  if (stat(path, &st) != 0) return 0;
  json_error_t err;
  json_t *o = json_load_file(path, 0, &err);
  if (!json_is_object(o)) {
    diag_error(d, 0, 0, "%s:%d: not a JSON object (%s)", path, err.line, o ? "" : err.text);
    json_decref(o);
    return -1;
  }
  double v;
  if (number(o, "temperature", &v) && v >= 0 && v <= 100) g->has_temperature = 1, g->temperature = v;
  if (number(o, "top_p", &v) && v >= 0 && v <= 1) g->has_top_p = 1, g->top_p = v;
  if (number(o, "top_k", &v) && v >= 0 && v <= 1e9) g->has_top_k = 1, g->top_k = (int)v;
  json_t *ds = json_object_get(o, "do_sample");
  if (json_is_boolean(ds)) g->has_do_sample = 1, g->do_sample = json_is_true(ds);
  json_decref(o);
  return 1;
}
