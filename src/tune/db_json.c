/* The tuning database as JSON: `lathe db export FILE` / `import FILE` (moving measurements between machines,
 * goldens). {"schema": 1, "measurements": [{"kernel": ..., "bucket": ..., ...}, ...]} */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "db.h"

typedef struct Export {
  json_t *list;
} Export;

static int add_json(void *ctx, const TuneRecord *r) {
  Export *e = ctx;
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:i, s:I}", "kernel", r->kernel, "bucket",
                        r->bucket, "device", r->device, "compiler", r->compiler, "schedule", r->schedule, "name",
                        r->name, "status", tune_status_name(r->status), "median_us", r->median_us, "min_us", r->min_us,
                        "max_us", r->max_us, "samples", r->samples, "time", (json_int_t)r->time);
  return o && json_array_append_new(e->list, o) == 0;
}

int tune_db_export(TuneDb *db, const char *file, int *count, Diag *d) {
  Export e = {json_array()};
  int ok = tune_db_each(db, add_json, &e, d);
  *count = (int)json_array_size(e.list);
  json_t *root = json_pack("{s:i, s:o}", "schema", TUNE_DB_SCHEMA, "measurements", e.list);
  if (ok && json_dump_file(root, file, JSON_INDENT(1)) != 0) {
    diag_error(d, 0, 0, "cannot write %s", file);
    ok = 0;
  }
  json_decref(root);
  return ok;
}

static int text_field(json_t *o, const char *key, char *dst, size_t n, const char *file, int i, Diag *d) {
  const char *s = json_string_value(json_object_get(o, key));
  if (!s || strlen(s) >= n) {
    diag_error(d, 0, 0, "%s: measurement %d: \"%s\" is missing, not a string or too long", file, i, key);
    return 0;
  }
  snprintf(dst, n, "%s", s);
  return 1;
}

static int num_field(json_t *o, const char *key, double *v, const char *file, int i, Diag *d) {
  json_t *x = json_object_get(o, key);
  if (!json_is_number(x) || json_number_value(x) < 0) {
    diag_error(d, 0, 0, "%s: measurement %d: \"%s\" is missing or not a number >= 0", file, i, key);
    return 0;
  }
  *v = json_number_value(x);
  return 1;
}

/* Whether the same measurement (key, schedule, status, time, median) is in db already. */
typedef struct Dup {
  const TuneRecord *r;
  int found;
} Dup;
static int same_fn(void *ctx, const TuneRecord *x) {
  Dup *u = ctx;
  const TuneRecord *r = u->r;
  if (!strcmp(x->kernel, r->kernel) && !strcmp(x->bucket, r->bucket) && !strcmp(x->device, r->device) &&
      !strcmp(x->compiler, r->compiler) && !strcmp(x->schedule, r->schedule) && x->status == r->status &&
      x->time == r->time && x->median_us == r->median_us)
    u->found = 1;
  return !u->found;
}

int tune_db_import(TuneDb *db, const char *file, int *added, Diag *d) {
  *added = 0;
  json_error_t err;
  json_t *root = json_load_file(file, 0, &err);
  if (!root) {
    diag_error(d, err.line > 0 ? err.line : 0, err.column > 0 ? err.column : 0, "%s: %s", file, err.text);
    return 0;
  }
  json_t *schema = json_object_get(root, "schema"), *list = json_object_get(root, "measurements");
  int ok = 1;
  if (!json_is_integer(schema) || json_integer_value(schema) != TUNE_DB_SCHEMA || !json_is_array(list)) {
    diag_error(d, 0, 0, "%s: not a lathe tune export of schema %d ({\"schema\": %d, \"measurements\": [...]})", file,
               TUNE_DB_SCHEMA, TUNE_DB_SCHEMA);
    ok = 0;
  }
  for (size_t i = 0; ok && i < json_array_size(list); i++) {
    json_t *o = json_array_get(list, i);
    TuneRecord r = {0};
    char status[16];
    double samples = 0, t = 0;
    ok = json_is_object(o) && text_field(o, "kernel", r.kernel, sizeof r.kernel, file, (int)i, d) &&
         text_field(o, "bucket", r.bucket, sizeof r.bucket, file, (int)i, d) &&
         text_field(o, "device", r.device, sizeof r.device, file, (int)i, d) &&
         text_field(o, "compiler", r.compiler, sizeof r.compiler, file, (int)i, d) &&
         text_field(o, "schedule", r.schedule, sizeof r.schedule, file, (int)i, d) &&
         text_field(o, "name", r.name, sizeof r.name, file, (int)i, d) &&
         text_field(o, "status", status, sizeof status, file, (int)i, d) &&
         num_field(o, "median_us", &r.median_us, file, (int)i, d) &&
         num_field(o, "min_us", &r.min_us, file, (int)i, d) && num_field(o, "max_us", &r.max_us, file, (int)i, d) &&
         num_field(o, "samples", &samples, file, (int)i, d) && num_field(o, "time", &t, file, (int)i, d);
    if (ok && !json_is_object(o)) ok = 0;
    if (ok && !tune_status_parse(status, &r.status)) {
      diag_error(d, 0, 0, "%s: measurement %d: status \"%s\" (ok, wrong, fault or timeout)", file, (int)i, status);
      ok = 0;
    }
    if (!ok) {
      if (!d->msg[0]) diag_error(d, 0, 0, "%s: measurement %d is not an object", file, (int)i);
      break;
    }
    r.samples = (int)samples;
    r.time = (int64_t)t;
    Dup u = {&r, 0};
    ok = tune_db_each(db, same_fn, &u, d);
    if (ok && !u.found) {
      ok = tune_db_add(db, &r, d);
      *added += ok;
    }
  }
  json_decref(root);
  return ok;
}
