/* Safetensors reader. The JSON header is parsed with jansson and copied into an arena; the JSON tree
 * is freed before open returns. */
#include "safetensors.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "../base/arena.h"
#include "../base/mapfile.h"

/* The format's own limit on the header size; also keeps a corrupt length from driving a huge parse. */
#define ST_MAX_HEADER (100u << 20)

struct StFile {
  FileImage im; /* first: the bytes, name and arena (base/mapfile.h) */
  StTensor *tensors;
  int n_tensors;
};

static int parse_dtype(const char *s, DType *out) {
  if (strcmp(s, "F32") == 0) {
    *out = DT_F32;
    return 1;
  }
  if (strcmp(s, "F16") == 0) {
    *out = DT_F16;
    return 1;
  }
  if (strcmp(s, "BF16") == 0) {
    *out = DT_BF16;
    return 1;
  }
  return 0;
}

/* A JSON integer in [0, 2^62]: shape entries and offsets. */
static int get_uint(json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
  *out = (uint64_t)json_integer_value(v);
  return 1;
}

static int parse_tensor(StFile *f, const char *key, json_t *v, size_t data_size, StTensor *t, Diag *d) {
  const char *fn = f->im.name;
  if (!json_is_object(v)) {
    diag_error(d, 0, 0, "%s: header entry '%s' is not an object", fn, key);
    return 0;
  }
  json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"), *jo = json_object_get(v, "data_offsets");
  if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2) {
    diag_error(d, 0, 0, "%s: tensor '%s' needs a string \"dtype\", an array \"shape\" and two \"data_offsets\"", fn,
               key);
    return 0;
  }
  t->name = arena_strdup(f->im.arena, key);
  if (!parse_dtype(json_string_value(jd), &t->dtype)) {
    diag_error(d, 0, 0, "%s: tensor '%s' has dtype '%s', which lathe does not read (supported: F32, F16, BF16)", fn,
               key, json_string_value(jd));
    return 0;
  }
  size_t rank = json_array_size(js);
  if (rank > ST_MAX_RANK) {
    diag_error(d, 0, 0, "%s: tensor '%s' has rank %zu (at most %d is supported)", fn, key, rank, ST_MAX_RANK);
    return 0;
  }
  t->rank = (int)rank;
  uint64_t nelem = 1;
  for (size_t i = 0; i < rank; i++) {
    uint64_t dim;
    if (!get_uint(json_array_get(js, i), &dim) || __builtin_mul_overflow(nelem, dim, &nelem) || nelem > (1ull << 62)) {
      diag_error(d, 0, 0, "%s: tensor '%s': shape entry %zu is not a non-negative integer or overflows", fn, key, i);
      return 0;
    }
    t->shape[i] = (int64_t)dim;
  }
  uint64_t begin, end;
  if (!get_uint(json_array_get(jo, 0), &begin) || !get_uint(json_array_get(jo, 1), &end) || begin > end) {
    diag_error(d, 0, 0,
               "%s: tensor '%s': data_offsets must be two non-negative integers [begin, end] with begin <= end", fn,
               key);
    return 0;
  }
  uint64_t want;
  if (__builtin_mul_overflow(nelem, (uint64_t)dtype_size(t->dtype), &want) || end - begin != want) {
    diag_error(d, 0, 0, "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but shape and dtype need %llu", fn,
               key, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)(end - begin),
               (unsigned long long)(nelem * dtype_size(t->dtype)));
    return 0;
  }
  if (end > data_size) {
    diag_error(d, 0, 0,
               "%s: tensor '%s' data (bytes %llu..%llu of the data section) runs past the end of the file "
               "(data section size %zu)",
               fn, key, (unsigned long long)begin, (unsigned long long)end, data_size);
    return 0;
  }
  t->data = f->im.base + (f->im.size - data_size) + begin;
  t->nbytes = (size_t)want;
  return 1;
}

static int parse(StFile *f, Diag *d) {
  if (f->im.size < 8) {
    diag_error(d, 0, 0, "%s: not a safetensors file (%zu bytes, shorter than the 8-byte header length)", f->im.name,
               f->im.size);
    return 0;
  }
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->im.base[i];
  if (hlen > f->im.size - 8 || hlen > ST_MAX_HEADER) {
    diag_error(d, 0, 0, "%s: header length %llu runs past the end of the file (size %zu) or exceeds 100 MiB",
               f->im.name, (unsigned long long)hlen, f->im.size);
    return 0;
  }
  json_error_t jerr;
  json_t *root = json_loadb((const char *)f->im.base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    diag_error(d, 0, 0, "%s: header is not valid JSON: %s (header byte %d)", f->im.name, jerr.text, jerr.position);
    return 0;
  }
  int ok = 1;
  if (!json_is_object(root)) {
    diag_error(d, 0, 0, "%s: header is not a JSON object", f->im.name);
    ok = 0;
  }
  size_t data_size = f->im.size - 8 - (size_t)hlen;
  if (ok) {
    f->tensors = ARENA_ARRAY(f->im.arena, StTensor, json_object_size(root) + 1);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
      if (strcmp(key, "__metadata__") == 0) continue;
      if (!parse_tensor(f, key, v, data_size, &f->tensors[f->n_tensors], d)) {
        ok = 0;
        break;
      }
      f->n_tensors++;
    }
  }
  json_decref(root);
  return ok;
}

static int parse_image(void *f, Diag *d) { return parse(f, d); }

StFile *st_open_memory(const void *data, size_t size, const char *name, Diag *d) {
  return file_image_open_memory(data, size, name, sizeof(StFile), parse_image, d);
}

StFile *st_open(const char *path, Diag *d) { return file_image_open(path, sizeof(StFile), parse_image, d); }

void st_close(StFile *f) { file_image_close(f); }

int st_tensor_count(const StFile *f) { return f->n_tensors; }

const StTensor *st_tensor_at(const StFile *f, int i) { return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL; }

const StTensor *st_find_tensor(const StFile *f, const char *name) {
  for (int i = 0; i < f->n_tensors; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}
