/* Goldens files (goldens.h): {"format": "lathe-goldens", "version": 1, "device", "target", "date", "commit",
 * "compiler", "program", "sizes", "kernels": [{"key", "name", "members", "bucket", "features": [...],
 * "pool": [{"schedule", "status", "median_us", "min_us", "max_us", "samples"}, ...], "best": {...}}]}. */
#include "goldens.h"
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "../tile/space.h"
#include "key.h"

typedef struct Pool {
  const char *key, *bucket, *device;
  json_t *list;
  TuneRecord best;
  int have_best;
} Pool;

static int pool_add(void *ctx, const TuneRecord *r) {
  Pool *p = ctx;
  if (strcmp(r->kernel, p->key) || strcmp(r->bucket, p->bucket) || strcmp(r->device, p->device) ||
      strcmp(r->compiler, TUNE_COMPILER_IDENTITY))
    return 1;
  json_array_append_new(p->list, json_pack("{s:s, s:s, s:f, s:f, s:f, s:i}", "schedule", r->schedule, "status",
                                           tune_status_name(r->status), "median_us", r->median_us, "min_us", r->min_us,
                                           "max_us", r->max_us, "samples", r->samples));
  if (r->status == TS_OK && (!p->have_best || r->median_us < p->best.median_us)) p->best = *r, p->have_best = 1;
  return 1;
}

int tune_goldens_export(const Compilation *c, const SymEnv *env, TuneDb *db, const GoldensInfo *info, const char *file,
                        int *kernels, int *measurements, Diag *d) {
  const LProgram *p = c->loop;
  char device[256], date[32], sizes[256] = "";
  tune_device_identity(&c->device, info->driver, device, sizeof device);
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  for (int i = 0; env && i < env->n; i++)
    snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%s=%lld", i ? " " : "", env->names[i],
             (long long)env->values[i]);
  json_t *list = json_array();
  char(*keys)[24] = calloc((size_t)p->nkernels + 1, sizeof *keys);
  *kernels = *measurements = 0;
  int ok = keys != NULL;
  for (int i = 0; ok && i < p->nkernels; i++) {
    tune_kernel_key(p, &p->kernels[i], c->matmul, keys[i]);
    int first = 1, members = 0;
    for (int j = 0; j < i; j++) first &= strcmp(keys[i], keys[j]) != 0;
    if (!first) continue;
    for (int j = i; j < p->nkernels; j++) {
      char kj[24];
      tune_kernel_key(p, &p->kernels[j], c->matmul, kj);
      members += !strcmp(kj, keys[i]);
    }
    char bucket[128];
    tune_kernel_bucket(p, &p->kernels[i], env, bucket, sizeof bucket);
    Pool pool = {keys[i], bucket, device, json_array(), {{0}}, 0};
    ok = tune_db_each(db, pool_add, &pool, d);
    if (!ok || !json_array_size(pool.list)) {
      json_decref(pool.list);
      continue;
    }
    double kf[PRIOR_KERNEL_FEATURES];
    prior_kernel_features(&p->kernels[i], env, &c->device, kf);
    json_t *features = json_array();
    for (int f = 0; f < PRIOR_KERNEL_FEATURES; f++) json_array_append_new(features, json_real(kf[f]));
    json_t *best = pool.have_best ? json_pack("{s:s, s:f, s:i}", "schedule", pool.best.schedule, "median_us",
                                              pool.best.median_us, "samples", pool.best.samples)
                                  : json_null();
    *measurements += (int)json_array_size(pool.list);
    json_array_append_new(list, json_pack("{s:s, s:s, s:i, s:s, s:o, s:o, s:o}", "key", keys[i], "name",
                                          p->kernels[i].name, "members", members, "bucket", bucket, "features",
                                          features, "pool", pool.list, "best", best));
    (*kernels)++;
  }
  free(keys);
  json_t *root = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "format", "lathe-goldens", "version",
                           1, "device", device, "target", target_name(c->device.kind), "date", date, "commit",
                           info->commit ? info->commit : "", "compiler", TUNE_COMPILER_IDENTITY, "program",
                           info->program ? info->program : "", "sizes", sizes, "kernels", list);
  if (ok && json_dump_file(root, file, JSON_INDENT(1)) != 0) {
    diag_error(d, 0, 0, "cannot write %s", file);
    ok = 0;
  }
  json_decref(root);
  return ok;
}

void prior_kernels_free(PriorKernel *k, int n) {
  for (int i = 0; i < n; i++) free(k[i].s), free(k[i].us);
  free(k);
}

static int load_file(const char *file, const char *target, PriorKernel **out, int *n, int *cap, Diag *d) {
  json_error_t err;
  json_t *root = json_load_file(file, 0, &err);
  if (!root) {
    diag_error(d, err.line > 0 ? err.line : 0, err.column > 0 ? err.column : 0, "%s: %s", file, err.text);
    return 0;
  }
  const char *format = json_string_value(json_object_get(root, "format"));
  json_t *list = json_object_get(root, "kernels");
  if (!format || strcmp(format, "lathe-goldens") || json_integer_value(json_object_get(root, "version")) != 1 ||
      !json_is_array(list)) {
    diag_error(d, 0, 0, "%s: not a lathe goldens file ({\"format\": \"lathe-goldens\", \"version\": 1, ...})", file);
    json_decref(root);
    return 0;
  }
  int ok = 1;
  const char *measured_on = json_string_value(json_object_get(root, "target"));
  if (target && (!measured_on || strcmp(measured_on, target))) json_array_clear(list); /* another target's */
  for (size_t i = 0; ok && i < json_array_size(list); i++) {
    json_t *k = json_array_get(list, i), *features = json_object_get(k, "features"), *pool = json_object_get(k, "pool");
    if (!json_is_array(features) || json_array_size(features) != PRIOR_KERNEL_FEATURES || !json_is_array(pool)) {
      diag_error(d, 0, 0, "%s: kernel %zu: needs \"features\" (%d numbers) and \"pool\"", file, i,
                 PRIOR_KERNEL_FEATURES);
      ok = 0;
      break;
    }
    if (*n == *cap) {
      *cap = *cap ? 2 * *cap : 32;
      PriorKernel *grown = realloc(*out, sizeof **out * (size_t)*cap);
      if (!grown) {
        diag_error(d, 0, 0, "out of memory reading %s", file);
        ok = 0;
        break;
      }
      *out = grown;
    }
    PriorKernel *pk = &(*out)[*n];
    memset(pk, 0, sizeof *pk);
    snprintf(pk->name, sizeof pk->name, "%s",
             json_string_value(json_object_get(k, "name")) ? json_string_value(json_object_get(k, "name")) : "?");
    for (int f = 0; f < PRIOR_KERNEL_FEATURES; f++) pk->kf[f] = json_number_value(json_array_get(features, (size_t)f));
    size_t np = json_array_size(pool);
    pk->s = calloc(np + 1, sizeof *pk->s);
    pk->us = calloc(np + 1, sizeof *pk->us);
    (*n)++;
    for (size_t j = 0; j < np; j++) {
      json_t *m = json_array_get(pool, j);
      const char *text = json_string_value(json_object_get(m, "schedule")),
                 *status = json_string_value(json_object_get(m, "status"));
      double us = json_number_value(json_object_get(m, "median_us"));
      Schedule s;
      Diag pd = {0};
      if (!text || !status || strcmp(status, "ok") || !(us > 0) || !schedule_parse(text, &s, &pd)) continue;
      int at = pk->n;
      for (int e = 0; e < pk->n; e++)
        if (schedule_equal(&pk->s[e], &s)) at = e; /* measured again (a near-tie): the latest */
      pk->s[at] = s;
      pk->us[at] = us;
      if (at == pk->n) pk->n++;
    }
  }
  json_decref(root);
  return ok;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int tune_goldens_load(const char *path, const char *target, PriorKernel **out, int *n, Diag *d) {
  *out = NULL;
  *n = 0;
  int cap = 0;
  struct stat st;
  if (stat(path, &st) != 0) {
    diag_error(d, 0, 0, "%s: no such file or directory", path);
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) return load_file(path, target, out, n, &cap, d);
  DIR *dir = opendir(path);
  if (!dir) {
    diag_error(d, 0, 0, "%s: cannot read the directory", path);
    return 0;
  }
  char **names = NULL;
  int nn = 0, ok = 1;
  for (struct dirent *e; (e = readdir(dir));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".json") || !strncmp(e->d_name, "prior", 5)) continue;
    names = realloc(names, sizeof *names * (size_t)(nn + 1));
    names[nn++] = strdup(e->d_name);
  }
  closedir(dir);
  qsort(names, (size_t)nn, sizeof *names, by_name);
  for (int i = 0; ok && i < nn; i++) {
    char file[4096];
    snprintf(file, sizeof file, "%s/%s", path, names[i]);
    ok = load_file(file, target, out, n, &cap, d);
  }
  for (int i = 0; i < nn; i++) free(names[i]);
  free(names);
  return ok;
}
