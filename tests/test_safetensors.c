/* Safetensors reader: files built byte by byte, every error class, every truncation point. */
#include "testutil.h"
#include "ir/dtype.h"
#include "model/safetensors.h"
#include "model_testutil.h"

/* 8-byte length + header JSON (padded with spaces to 8 bytes, as writers do) + data. */
static void build_st(Buf *b, const char *json, const void *data, size_t n) {
  size_t len = strlen(json), padded = (len + 7) / 8 * 8;
  b_u64(b, padded);
  b_put(b, json, len);
  for (size_t i = len; i < padded; i++) b_put(b, " ", 1);
  b_put(b, data, n);
}

static const char VALID_JSON[] = "{\"__metadata__\":{\"format\":\"pt\"},"
                                 "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                                 "\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                                 "\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[32,34]}}";

static void valid_data(unsigned char data[34]) {
  float w[6] = {1, 2, 3, 4, 5, 6};
  unsigned short h[4] = {f32_to_f16(0.5f), f32_to_f16(-1), f32_to_f16(2), f32_to_f16(3)};
  unsigned short bf = f32_to_bf16(-7.0f);
  memcpy(data, w, 24);
  memcpy(data + 24, h, 8);
  memcpy(data + 32, &bf, 2);
}

static void check_valid(StFile *f) {
  assert_non_null(f);
  assert_int_equal(st_tensor_count(f), 3); /* __metadata__ is not a tensor */
  const StTensor *w = st_find_tensor(f, "w"), *h = st_find_tensor(f, "h"), *b = st_find_tensor(f, "b");
  assert_non_null(w);
  assert_int_equal(w->dtype, DT_F32);
  assert_int_equal(w->rank, 2);
  assert_int_equal(w->shape[0], 2);
  assert_int_equal(w->shape[1], 3);
  assert_int_equal(w->nbytes, 24);
  float w5;
  memcpy(&w5, (const char *)w->data + 20, 4);
  assert_true(w5 == 6.0f);
  assert_int_equal(h->dtype, DT_F16);
  unsigned short h1;
  memcpy(&h1, (const char *)h->data + 2, 2);
  assert_true(f16_to_f32(h1) == -1.0f);
  assert_int_equal(b->dtype, DT_BF16);
  assert_int_equal(b->rank, 0);
  assert_int_equal(b->nbytes, 2);
  assert_null(st_find_tensor(f, "__metadata__"));
  assert_null(st_find_tensor(f, "x"));
  assert_null(st_tensor_at(f, 3));
}

static void test_valid(void **state) {
  unsigned char data[34];
  valid_data(data);
  Buf b = {0};
  build_st(&b, VALID_JSON, data, sizeof data);
  Diag d = {0};
  StFile *f = st_open_memory(b.p, b.n, "m.safetensors", &d);
  check_valid(f);
  st_close(f);
  char *dir = make_temp_dir();
  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  write_file(path, b.p, b.n);
  f = st_open(path, &d);
  check_valid(f);
  assert_false(d.set);
  st_close(f);
  remove_dir(dir);
  b_free(&b);
}

static const char *open_fails(const void *p, size_t n, Diag *d) {
  unsigned char *copy = malloc(n ? n : 1);
  if (n) memcpy(copy, p, n);
  memset(d, 0, sizeof *d);
  StFile *f = st_open_memory(copy, n, "m.safetensors", d);
  assert_null(f);
  assert_true(d->set);
  free(copy);
  return d->msg;
}

static const char *fails_with_json(const char *json, size_t data_bytes, Diag *d) {
  static unsigned char zeros[256];
  Buf b = {0};
  build_st(&b, json, zeros, data_bytes);
  static char msg[512];
  snprintf(msg, sizeof msg, "%s", open_fails(b.p, b.n, d));
  b_free(&b);
  return msg;
}

static void test_truncated_everywhere(void **state) {
  unsigned char data[34];
  valid_data(data);
  Buf b = {0};
  build_st(&b, VALID_JSON, data, sizeof data);
  Diag d;
  for (size_t n = 0; n < b.n; n++) open_fails(b.p, n, &d);
  b_free(&b);
}

static void test_bad_header(void **state) {
  Diag d;
  assert_contains(open_fails("abc", 3, &d), "not a safetensors file");
  unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
  assert_contains(open_fails(huge, sizeof huge, &d), "header length 9223372036854775807 runs past the end");
  assert_contains(fails_with_json("{\"w\": [", 0, &d), "header is not valid JSON");
  assert_contains(fails_with_json("[1,2]", 0, &d), "header is not a JSON object");
  assert_contains(fails_with_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                  "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                                  4, &d),
                  "not valid JSON");
  assert_contains(fails_with_json("{\"w\":3}", 0, &d), "header entry 'w' is not an object");
  assert_contains(fails_with_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, &d), "tensor 'w' needs");
}

static void test_bad_tensors(void **state) {
  Diag d;
  assert_contains(fails_with_json("{\"x\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16, &d),
                  "tensor 'x' has dtype 'I64', which lathe does not read (supported: F32, F16, BF16)");
  assert_contains(fails_with_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16, &d),
                  "data_offsets [0, 12] hold 12 bytes but shape and dtype need 16");
  assert_contains(fails_with_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 16, &d),
                  "tensor 'x' data (bytes 8..24 of the data section) runs past the end of the file");
  assert_contains(fails_with_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 16, &d),
                  "begin <= end");
  assert_contains(fails_with_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 16, &d),
                  "shape entry 0");
  assert_contains(fails_with_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 16, &d),
                  "rank 5");
  assert_contains(fails_with_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                                  "\"data_offsets\":[0,4]}}",
                                  16, &d),
                  "overflows");
  assert_contains(
      fails_with_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}", 16, &d),
      "not valid JSON");
  memset(&d, 0, sizeof d);
  assert_null(st_open("/nonexistent/m.safetensors", &d));
  assert_contains(d.msg, "/nonexistent/m.safetensors: cannot open");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_truncated_everywhere),
      cmocka_unit_test(test_bad_header),
      cmocka_unit_test(test_bad_tensors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
