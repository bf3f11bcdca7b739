/* Range-checked hyperparameter reads (config_keys.h). */
#include "config_keys.h"
#include <math.h>
#include <stdio.h>
#include "gguf.h"

static int json_int_of(json_t *v, long long *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 1;
  }
  if (json_is_real(v)) { /* 4096.0 */
    double x = json_real_value(v);
    if (x == floor(x) && fabs(x) < 9e18) {
      *out = (long long)x;
      return 1;
    }
  }
  return 0;
}

static int int_in_range(long long x, long long lo, long long hi, const char *file, const char *prefix, const char *key,
                        Diag *d) {
  if (x < lo) {
    diag_error(d, 0, 0, "%s: key '%s%s' = %lld is too small (at least %lld)", file, prefix, key, x, lo);
    return 0;
  }
  if (x > hi) {
    diag_error(d, 0, 0, "%s: key '%s%s' = %lld is too large (at most %lld)", file, prefix, key, x, hi);
    return 0;
  }
  return 1;
}

static int num_in_range(double x, double lo, double hi, const char *file, const char *prefix, const char *key,
                        Diag *d) {
  if (!isfinite(x) || x < lo || x > hi) {
    diag_error(d, 0, 0, "%s: key '%s%s' = %g is out of range (a finite number in [%g, %g])", file, prefix, key, x, lo,
               hi);
    return 0;
  }
  return 1;
}

static json_t *present(const HfObj *o, const char *key, int required, Diag *d) {
  json_t *v = json_object_get(o->obj, key);
  if (v && !json_is_null(v)) return v;
  if (required) diag_error(d, 0, 0, "%s: missing required key '%s%s'", o->file, o->prefix, key);
  return NULL;
}

int hf_int(const HfObj *o, const char *key, int required, long long lo, long long hi, int *out, Diag *d) {
  json_t *v = present(o, key, required, d);
  if (!v) return !required;
  long long x;
  if (!json_int_of(v, &x)) {
    diag_error(d, 0, 0, "%s: key '%s%s' must be an integer", o->file, o->prefix, key);
    return 0;
  }
  if (!int_in_range(x, lo, hi, o->file, o->prefix, key, d)) return 0;
  *out = (int)x;
  return 1;
}

int hf_num(const HfObj *o, const char *key, int required, double lo, double hi, double *out, Diag *d) {
  json_t *v = present(o, key, required, d);
  if (!v) return !required;
  if (!json_is_number(v)) {
    diag_error(d, 0, 0, "%s: key '%s%s' must be a number", o->file, o->prefix, key);
    return 0;
  }
  double x = json_number_value(v);
  if (!num_in_range(x, lo, hi, o->file, o->prefix, key, d)) return 0;
  *out = x;
  return 1;
}

int hf_bool(const HfObj *o, const char *key, int *out, Diag *d) {
  json_t *v = present(o, key, 0, d);
  if (!v) return 1;
  if (!json_is_boolean(v)) {
    diag_error(d, 0, 0, "%s: key '%s%s' must be true or false", o->file, o->prefix, key);
    return 0;
  }
  *out = json_is_true(v);
  return 1;
}

int hf_str(const HfObj *o, const char *key, const char **out, Diag *d) {
  json_t *v = present(o, key, 0, d);
  *out = NULL;
  if (!v) return 1;
  if (!json_is_string(v)) {
    diag_error(d, 0, 0, "%s: key '%s%s' must be a string", o->file, o->prefix, key);
    return 0;
  }
  *out = json_string_value(v);
  return 1;
}

static void gguf_key(char *key, size_t n, const char *arch, const char *suffix) {
  snprintf(key, n, "%s.%s", arch, suffix);
}

int gguf_key_int(const GgufFile *f, const char *arch, const char *suffix, int required, long long lo, long long hi,
                 int *out, Diag *d) {
  char key[160];
  int64_t v;
  gguf_key(key, sizeof key, arch, suffix);
  if (!gguf_get_int(f, key, &v)) {
    if (gguf_has_key(f, key)) diag_error(d, 0, 0, "%s: metadata key '%s' must be an integer", gguf_file_name(f), key);
    else if (required) diag_error(d, 0, 0, "%s: missing required key '%s'", gguf_file_name(f), key);
    return !required && !gguf_has_key(f, key);
  }
  if (!int_in_range(v, lo, hi, gguf_file_name(f), "", key, d)) return 0;
  *out = (int)v;
  return 1;
}

int gguf_key_num(const GgufFile *f, const char *arch, const char *suffix, int required, double lo, double hi,
                 double *out, Diag *d) {
  char key[160];
  double x;
  int64_t i;
  gguf_key(key, sizeof key, arch, suffix);
  if (gguf_get_int(f, key, &i)) x = (double)i;
  else if (!gguf_get_float(f, key, &x)) {
    if (gguf_has_key(f, key)) diag_error(d, 0, 0, "%s: metadata key '%s' must be a number", gguf_file_name(f), key);
    else if (required) diag_error(d, 0, 0, "%s: missing required key '%s'", gguf_file_name(f), key);
    return !required && !gguf_has_key(f, key);
  }
  if (!num_in_range(x, lo, hi, gguf_file_name(f), "", key, d)) return 0;
  *out = x;
  return 1;
}

int gguf_key_str(const GgufFile *f, const char *arch, const char *suffix, const char **out, Diag *d) {
  char key[160];
  gguf_key(key, sizeof key, arch, suffix);
  *out = NULL;
  if (gguf_get_str(f, key, out) || !gguf_has_key(f, key)) return 1;
  diag_error(d, 0, 0, "%s: metadata key '%s' must be a string", gguf_file_name(f), key);
  return 0;
}
