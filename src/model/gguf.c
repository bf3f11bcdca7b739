/* GGUF reader. Every count, length and offset read from the file is checked against the bytes that
 * remain before anything is allocated, so a corrupt header fails fast with one diag. */
#include "gguf.h"
#include "../base/mem.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/arena.h"
#include "../base/mapfile.h"

#define GGUF_MAX_DIMS 4
#define ULL(x) ((unsigned long long)(x))
#define GGUF_MAX_NESTING 4

typedef struct GgufKV {
  const char *key;
  int type;      /* GgufValueType */
  int64_t i;     /* integers and bool */
  double f;      /* f32 / f64 */
  const char *s; /* string */
  int elem_type; /* arrays */
  uint64_t n;
  const uint8_t *raw;   /* arrays of scalars: first element, inside the file image */
  const char **strs;    /* arrays of strings: NUL-terminated copies */
  const uint8_t *value; /* the value's bytes as stored (gguf_kv_raw) */
  size_t value_len;
} GgufKV;

struct GgufFile {
  FileImage im; /* first: the bytes, name and arena (base/mapfile.h) */
  GgufKV *kv;
  size_t n_kv;
  GgufTensor *tensors;
  int n_tensors;
};

/* A bounds-checked cursor over the image; the first failure records a diag and sticks. */
typedef struct Reader {
  const uint8_t *p;
  size_t size, pos;
  const char *name;
  Diag *d;
  int failed;
} Reader;

static size_t remaining(const Reader *r) { return r->size - r->pos; }

static const uint8_t *take(Reader *r, size_t n, const char *what) {
  if (r->failed) return NULL;
  if (n > remaining(r)) {
    diag_error(r->d, 0, 0, "%s: truncated: %s at offset %zu needs %zu bytes, only %zu remain", r->name, what, r->pos, n,
               remaining(r));
    r->failed = 1;
    return NULL;
  }
  const uint8_t *q = r->p + r->pos;
  r->pos += n;
  return q;
}

static uint64_t rd_u64(Reader *r, const char *what) {
  const uint8_t *q = take(r, 8, what);
  uint64_t v = 0;
  if (q) memcpy(&v, q, 8);
  return v;
}

static uint32_t rd_u32(Reader *r, const char *what) {
  const uint8_t *q = take(r, 4, what);
  uint32_t v = 0;
  if (q) memcpy(&v, q, 4);
  return v;
}

static void fail(Reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(Reader *r, const char *fmt, ...) {
  if (r->failed) return;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(r->d, 0, 0, "%s: %s", r->name, msg);
  r->failed = 1;
}

/* A GGUF string: u64 length, bytes (no NUL). Returns an arena copy or NULL. */
static const char *rd_string(Reader *r, Arena *a, const char *what) {
  uint64_t len = rd_u64(r, what);
  if (r->failed) return NULL;
  if (len > remaining(r)) {
    fail(r, "%s: string length %llu at offset %llu runs past the end of the file", what, ULL(len), ULL(r->pos - 8));
    return NULL;
  }
  const uint8_t *q = take(r, (size_t)len, what);
  return q ? arena_strndup(a, (const char *)q, (size_t)len) : NULL;
}

static size_t scalar_size(int t) {
  switch (t) {
  case GGUF_U8:
  case GGUF_I8:
  case GGUF_BOOL: return 1;
  case GGUF_U16:
  case GGUF_I16: return 2;
  case GGUF_U32:
  case GGUF_I32:
  case GGUF_F32: return 4;
  case GGUF_U64:
  case GGUF_I64:
  case GGUF_F64: return 8;
  default: return 0;
  }
}

static int64_t scalar_int(int t, const uint8_t *q) {
  switch (t) {
  case GGUF_U8: return *q;
  case GGUF_I8: return (int8_t)*q;
  case GGUF_BOOL: return *q != 0;
  case GGUF_U16: {
    uint16_t v;
    memcpy(&v, q, 2);
    return v;
  }
  case GGUF_I16: {
    int16_t v;
    memcpy(&v, q, 2);
    return v;
  }
  case GGUF_U32: {
    uint32_t v;
    memcpy(&v, q, 4);
    return v;
  }
  case GGUF_I32: {
    int32_t v;
    memcpy(&v, q, 4);
    return v;
  }
  case GGUF_U64: {
    uint64_t v;
    memcpy(&v, q, 8);
    return (int64_t)v;
  }
  case GGUF_I64: {
    int64_t v;
    memcpy(&v, q, 8);
    return v;
  }
  default: return 0;
  }
}

static double scalar_float(int t, const uint8_t *q) {
  if (t == GGUF_F32) {
    float v;
    memcpy(&v, q, 4);
    return v;
  }
  if (t == GGUF_F64) {
    double v;
    memcpy(&v, q, 8);
    return v;
  }
  return (double)scalar_int(t, q);
}

static int is_int_type(int t) { return scalar_size(t) && t != GGUF_F32 && t != GGUF_F64 && t != GGUF_BOOL; }

/* Skips an array's elements (used for nested arrays, whose contents lathe never reads). */
static void skip_array(Reader *r, const char *key, int depth) {
  uint32_t et = rd_u32(r, "array element type");
  uint64_t n = rd_u64(r, "array length");
  if (r->failed) return;
  if (depth > GGUF_MAX_NESTING) {
    fail(r, "key '%s': arrays nested deeper than %d", key, GGUF_MAX_NESTING);
    return;
  }
  size_t es = scalar_size((int)et);
  if (es) {
    if (n > remaining(r) / es) fail(r, "key '%s': array of %llu elements runs past the end of the file", key, ULL(n));
    else take(r, (size_t)(n * es), "array");
  } else if (et == GGUF_STRING) {
    for (uint64_t i = 0; i < n && !r->failed; i++) {
      uint64_t len = rd_u64(r, "string length");
      if (!r->failed && len > remaining(r))
        fail(r, "key '%s': string of %llu bytes in element %llu runs past the end of the file", key, ULL(len), ULL(i));
      else take(r, (size_t)len, "string");
    }
  } else if (et == GGUF_ARRAY) {
    for (uint64_t i = 0; i < n && !r->failed; i++) skip_array(r, key, depth + 1);
  } else {
    fail(r, "key '%s': unknown array element type %u", key, et);
  }
}

static void read_value(Reader *r, Arena *a, GgufKV *kv) {
  size_t es = scalar_size(kv->type);
  if (es) {
    const uint8_t *q = take(r, es, kv->key);
    if (!q) return;
    kv->i = scalar_int(kv->type, q);
    kv->f = scalar_float(kv->type, q);
    return;
  }
  if (kv->type == GGUF_STRING) {
    kv->s = rd_string(r, a, kv->key);
    return;
  }
  if (kv->type != GGUF_ARRAY) {
    fail(r, "key '%s' has unknown value type %d", kv->key, kv->type);
    return;
  }
  size_t at = r->pos;
  kv->elem_type = (int)rd_u32(r, "array element type");
  kv->n = rd_u64(r, "array length");
  if (r->failed) return;
  es = scalar_size(kv->elem_type);
  if (es) {
    if (kv->n > remaining(r) / es) {
      fail(r, "key '%s': array of %llu elements (at offset %llu) runs past the end of the file", kv->key, ULL(kv->n),
           ULL(at));
      return;
    }
    kv->raw = take(r, (size_t)(kv->n * es), kv->key);
  } else if (kv->elem_type == GGUF_STRING) {
    /* Every string needs at least its 8-byte length: bounds the allocation below by the file size. */
    if (kv->n > remaining(r) / 8) {
      fail(r, "key '%s': array of %llu strings (at offset %llu) runs past the end of the file", kv->key, ULL(kv->n),
           ULL(at));
      return;
    }
    kv->strs = ARENA_ARRAY(a, const char *, kv->n ? kv->n : 1);
    for (uint64_t i = 0; i < kv->n && !r->failed; i++) kv->strs[i] = rd_string(r, a, kv->key);
  } else if (kv->elem_type == GGUF_ARRAY) {
    if (kv->n > remaining(r) / 12) {
      fail(r, "key '%s': array of %llu arrays (at offset %llu) runs past the end of the file", kv->key, ULL(kv->n),
           ULL(at));
      return;
    }
    for (uint64_t i = 0; i < kv->n && !r->failed; i++) skip_array(r, kv->key, 1);
  } else {
    fail(r, "key '%s': unknown array element type %d", kv->key, kv->elem_type);
  }
}

static const GgufKV *find_kv(const GgufFile *f, const char *key) {
  for (size_t i = 0; i < f->n_kv; i++)
    if (strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
  return NULL;
}

static int read_kvs(Reader *r, GgufFile *f, uint64_t n_kv) {
  /* Smallest pair: 8-byte key length + 4-byte type + 1-byte value. */
  if (n_kv > remaining(r) / 13) {
    fail(r, "header claims %llu metadata pairs, more than the file (size %llu) can hold", ULL(n_kv), ULL(r->size));
    return 0;
  }
  f->kv = ARENA_ARRAY(f->im.arena, GgufKV, n_kv ? n_kv : 1);
  for (uint64_t i = 0; i < n_kv && !r->failed; i++) {
    GgufKV *kv = &f->kv[i];
    kv->key = rd_string(r, f->im.arena, "metadata key");
    kv->type = (int)rd_u32(r, "metadata value type");
    if (r->failed) break;
    f->n_kv = i; /* so find_kv sees only the pairs read so far */
    if (find_kv(f, kv->key)) {
      fail(r, "duplicate metadata key '%s'", kv->key);
      break;
    }
    size_t at = r->pos;
    read_value(r, f->im.arena, kv);
    kv->value = r->p + at;
    kv->value_len = r->pos - at;
    f->n_kv = i + 1;
  }
  return !r->failed;
}

static int read_tensor_infos(Reader *r, GgufFile *f, uint64_t n_tensors, uint64_t *offsets) {
  for (uint64_t i = 0; i < n_tensors && !r->failed; i++) {
    GgufTensor *t = &f->tensors[i];
    t->name = rd_string(r, f->im.arena, "tensor name");
    uint32_t n_dims = rd_u32(r, "tensor dimension count");
    if (r->failed) break;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
      fail(r, "tensor '%s' has %u dimensions (at most %d are supported)", t->name, n_dims, GGUF_MAX_DIMS);
      break;
    }
    t->n_dims = (int)n_dims;
    int64_t nelem = 1;
    for (int k = 0; k < GGUF_MAX_DIMS; k++) t->ne[k] = 1;
    for (uint32_t k = 0; k < n_dims; k++) {
      uint64_t ne = rd_u64(r, "tensor dimension");
      if (r->failed) break;
      if (ne > (uint64_t)INT64_MAX || __builtin_mul_overflow(nelem, (int64_t)ne, &nelem)) {
        fail(r, "tensor '%s': dimension %u (%llu) makes the element count overflow", t->name, k, ULL(ne));
        break;
      }
      t->ne[k] = (int64_t)ne;
    }
    uint32_t type = rd_u32(r, "tensor type");
    offsets[i] = rd_u64(r, "tensor data offset");
    if (r->failed) break;
    t->type = (int)type;
    int blk;
    size_t bbytes;
    if (!ggml_type_block((int)type, &blk, &bbytes)) {
      fail(r,
           "tensor '%s' has ggml type %u (%s), which lathe does not read (supported: f32, f16, bf16, q8_0, q4_0, q4_1, "
           "q5_0, q5_1, q4_k, q5_k, q6_k)",
           t->name, type, ggml_type_name((int)type));
      break;
    }
    if (t->ne[0] % blk) {
      fail(r, "tensor '%s': row length %llu is not a multiple of the block size %d", t->name, ULL(t->ne[0]), blk);
      break;
    }
    uint64_t nb;
    if (__builtin_mul_overflow((uint64_t)(nelem / blk), (uint64_t)bbytes, &nb) || nb > SIZE_MAX) {
      fail(r, "tensor '%s': byte size overflows (%llu elements)", t->name, ULL(nelem));
      break;
    }
    t->nbytes = (size_t)nb;
    for (uint64_t j = 0; j < i; j++)
      if (strcmp(f->tensors[j].name, t->name) == 0) {
        fail(r, "duplicate tensor name '%s'", t->name);
        break;
      }
  }
  return !r->failed;
}

static int parse(GgufFile *f, Diag *d) {
  Reader r = {f->im.base, f->im.size, 0, f->im.name, d, 0};
  const uint8_t *magic = r.size >= 4 ? r.p : NULL;
  if (!magic || memcmp(magic, "GGUF", 4) != 0) {
    diag_error(d, 0, 0, "%s: not a GGUF file (bad magic)", f->im.name);
    return 0;
  }
  r.pos = 4;
  uint32_t version = rd_u32(&r, "version");
  if (r.failed) return 0;
  if (version != 2 && version != 3) {
    diag_error(d, 0, 0, "%s: GGUF version %u is not supported (lathe reads versions 2 and 3)", f->im.name, version);
    return 0;
  }
  uint64_t n_tensors = rd_u64(&r, "tensor count");
  uint64_t n_kv = rd_u64(&r, "metadata count");
  if (r.failed) return 0;
  /* Smallest tensor info: name length 8 + n_dims 4 + one dim 8 + type 4 + offset 8. */
  if (n_tensors > remaining(&r) / 32 || n_tensors > INT32_MAX) {
    fail(&r, "header claims %llu tensors, more than the file (size %llu) can hold", ULL(n_tensors), ULL(r.size));
    return 0;
  }
  if (!read_kvs(&r, f, n_kv)) return 0;

  uint64_t alignment = 32;
  const GgufKV *al = find_kv(f, "general.alignment");
  if (al) {
    if (!is_int_type(al->type) || al->i <= 0 || (al->i & (al->i - 1)) || al->i > (1 << 24)) {
      fail(&r, "general.alignment %lld is not a power of two up to 2^24", (long long)al->i);
      return 0;
    }
    alignment = (uint64_t)al->i;
  }
  if (n_tensors > remaining(&r) / 32) {
    fail(&r, "header claims %llu tensors, more than the file (size %llu) can hold", ULL(n_tensors), ULL(r.size));
    return 0;
  }
  f->tensors = ARENA_ARRAY(f->im.arena, GgufTensor, n_tensors ? n_tensors : 1);
  uint64_t *offsets = mem_calloc(d, n_tensors, sizeof *offsets, "the GGUF tensor offsets");
  if (!offsets) return 0;
  int ok = read_tensor_infos(&r, f, n_tensors, offsets);
  if (ok) {
    f->n_tensors = (int)n_tensors;
    uint64_t data_start = (r.pos + alignment - 1) / alignment * alignment;
    for (int i = 0; i < f->n_tensors && ok; i++) {
      GgufTensor *t = &f->tensors[i];
      uint64_t off = offsets[i];
      if (off % alignment) {
        fail(&r, "tensor '%s' data offset %llu is not a multiple of the alignment %llu", t->name, ULL(off),
             ULL(alignment));
        ok = 0;
      } else if (data_start > r.size || off > r.size - data_start || t->nbytes > r.size - data_start - off) {
        fail(&r, "tensor '%s' data (offset %llu, %zu bytes) runs past the end of the file (size %zu)", t->name,
             ULL(data_start + off), t->nbytes, r.size);
        ok = 0;
      } else {
        t->data = f->im.base + data_start + off;
      }
    }
  }
  free(offsets);
  return ok;
}

static int parse_image(void *f, Diag *d) { return parse(f, d); }

GgufFile *gguf_open_memory(const void *data, size_t size, const char *name, Diag *d) {
  return file_image_open_memory(data, size, name, sizeof(GgufFile), parse_image, d);
}

GgufFile *gguf_open(const char *path, Diag *d) { return file_image_open(path, sizeof(GgufFile), parse_image, d); }

void gguf_close(GgufFile *f) { file_image_close(f); }

int gguf_get_int(const GgufFile *f, const char *key, int64_t *out) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || !is_int_type(kv->type)) return 0;
  *out = kv->i;
  return 1;
}

int gguf_get_float(const GgufFile *f, const char *key, double *out) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || !scalar_size(kv->type) || kv->type == GGUF_BOOL) return 0;
  *out = kv->f;
  return 1;
}

int gguf_get_bool(const GgufFile *f, const char *key, int *out) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || kv->type != GGUF_BOOL) return 0;
  *out = kv->i != 0;
  return 1;
}

int gguf_get_str(const GgufFile *f, const char *key, const char **out) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || kv->type != GGUF_STRING) return 0;
  *out = kv->s;
  return 1;
}

int gguf_get_arr(const GgufFile *f, const char *key, GgufValueType *elem_type, size_t *n) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || kv->type != GGUF_ARRAY) return 0;
  if (elem_type) *elem_type = (GgufValueType)kv->elem_type;
  if (n) *n = (size_t)kv->n;
  return 1;
}

const char *gguf_arr_str(const GgufFile *f, const char *key, size_t i) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || kv->type != GGUF_ARRAY || !kv->strs || i >= kv->n) return NULL;
  return kv->strs[i];
}

int64_t gguf_arr_int(const GgufFile *f, const char *key, size_t i) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || kv->type != GGUF_ARRAY || !kv->raw || !is_int_type(kv->elem_type) || i >= kv->n) return 0;
  return scalar_int(kv->elem_type, kv->raw + i * scalar_size(kv->elem_type));
}

double gguf_arr_float(const GgufFile *f, const char *key, size_t i) {
  const GgufKV *kv = find_kv(f, key);
  if (!kv || kv->type != GGUF_ARRAY || !kv->raw || kv->elem_type == GGUF_BOOL || i >= kv->n) return 0;
  return scalar_float(kv->elem_type, kv->raw + i * scalar_size(kv->elem_type));
}

size_t gguf_kv_count(const GgufFile *f) { return f->n_kv; }

const char *gguf_kv_key(const GgufFile *f, size_t i) { return i < f->n_kv ? f->kv[i].key : NULL; }

int gguf_kv_raw(const GgufFile *f, size_t i, GgufValueType *type, const void **bytes, size_t *len) {
  if (i >= f->n_kv) return 0;
  *type = (GgufValueType)f->kv[i].type;
  *bytes = f->kv[i].value;
  *len = f->kv[i].value_len;
  return 1;
}

int gguf_tensor_count(const GgufFile *f) { return f->n_tensors; }

const GgufTensor *gguf_tensor_at(const GgufFile *f, int i) {
  return i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const GgufTensor *gguf_find_tensor(const GgufFile *f, const char *name) {
  for (int i = 0; i < f->n_tensors; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}

const char *gguf_file_name(const GgufFile *f) { return f->im.name; }

int gguf_has_key(const GgufFile *f, const char *key) { return find_kv(f, key) != NULL; }
