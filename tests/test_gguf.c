/* GGUF reader and ggml dequantization: files built byte by byte here, every error class, every
 * truncation point, each block format against hand-built blocks and a small quantize round trip. */
#include "testutil.h"
#include <math.h>
#include "model/gguf.h"
#include "ir/dtype.h"
#include "model_testutil.h"

static const float T0_DATA[6] = {1, 2, 3, 4, 5, 6};

/* A small valid file: every scalar type, arrays (strings, ints, nested), two tensors. */
static void build_valid(Buf *b, uint32_t version, size_t align) {
  gguf_header(b, version, 2, 17 + (align != 32));
  if (align != 32) kv_u32(b, "general.alignment", (uint32_t)align);
  kv_str(b, "general.architecture", "llama");
  kv_u32(b, "llama.block_count", 3);
  kv_f32(b, "llama.rope.freq_base", 500000.0f);
  b_str(b, "k.u8");
  b_u32(b, T_U8);
  b_put(b, "\xfe", 1);
  b_str(b, "k.i8");
  b_u32(b, T_I8);
  b_put(b, "\xfe", 1);
  b_str(b, "k.u16");
  b_u32(b, T_U16);
  b_put(b, "\x01\x02", 2);
  b_str(b, "k.i16");
  b_u32(b, T_I16);
  b_put(b, "\xff\xff", 2);
  b_str(b, "k.i32");
  b_u32(b, T_I32);
  b_u32(b, (uint32_t)-7);
  b_str(b, "k.bool");
  b_u32(b, T_BOOL);
  b_put(b, "\x01", 1);
  b_str(b, "k.u64");
  b_u32(b, T_U64);
  b_u64(b, 1ull << 40);
  b_str(b, "k.i64");
  b_u32(b, T_I64);
  b_u64(b, (uint64_t)-5);
  double f64 = 0.125;
  b_str(b, "k.f64");
  b_u32(b, T_F64);
  b_put(b, &f64, 8);
  static const char *const toks[] = {"<s>", "hello", ""};
  kv_str_arr(b, "tokenizer.ggml.tokens", toks, 3);
  b_str(b, "k.iarr");
  b_u32(b, T_ARRAY);
  b_u32(b, T_I32);
  b_u64(b, 3);
  b_u32(b, 10);
  b_u32(b, (uint32_t)-20);
  b_u32(b, 30);
  b_str(b, "k.farr");
  b_u32(b, T_ARRAY);
  b_u32(b, T_F32);
  b_u64(b, 2);
  b_f32(b, 1.5f);
  b_f32(b, -2.5f);
  /* [[1,2],["x"]] : nested arrays are skipped but must parse */
  b_str(b, "k.nested");
  b_u32(b, T_ARRAY);
  b_u32(b, T_ARRAY);
  b_u64(b, 2);
  b_u32(b, T_U8);
  b_u64(b, 2);
  b_put(b, "\x01\x02", 2);
  b_u32(b, T_STRING);
  b_u64(b, 1);
  b_str(b, "x");
  kv_str(b, "k.after", "still here");
  unsigned short h[64];
  for (int i = 0; i < 64; i++) h[i] = f32_to_f16((float)i * 0.5f);
  GTensor t[2] = {{"t0", 0, 2, {3, 2}, T0_DATA, sizeof T0_DATA}, {"blk.0.attn_q.weight", 1, 2, {32, 2}, h, sizeof h}};
  gguf_tensors(b, t, 2, align);
}

static void check_valid(GgufFile *f) {
  assert_non_null(f);
  const char *s;
  int64_t i;
  double x;
  int bo;
  assert_true(gguf_get_str(f, "general.architecture", &s));
  assert_string_equal(s, "llama");
  assert_true(gguf_get_int(f, "llama.block_count", &i));
  assert_int_equal(i, 3);
  assert_true(gguf_get_float(f, "llama.rope.freq_base", &x));
  assert_true(x == 500000.0);
  assert_true(gguf_get_int(f, "k.u8", &i));
  assert_int_equal(i, 254);
  assert_true(gguf_get_int(f, "k.i8", &i));
  assert_int_equal(i, -2);
  assert_true(gguf_get_int(f, "k.u16", &i));
  assert_int_equal(i, 0x0201);
  assert_true(gguf_get_int(f, "k.i16", &i));
  assert_int_equal(i, -1);
  assert_true(gguf_get_int(f, "k.i32", &i));
  assert_int_equal(i, -7);
  assert_true(gguf_get_int(f, "k.u64", &i));
  assert_true(i == (int64_t)1 << 40);
  assert_true(gguf_get_int(f, "k.i64", &i));
  assert_int_equal(i, -5);
  assert_true(gguf_get_float(f, "k.f64", &x));
  assert_true(x == 0.125);
  assert_true(gguf_get_bool(f, "k.bool", &bo));
  assert_int_equal(bo, 1);
  /* type mismatches and absent keys */
  assert_false(gguf_get_int(f, "general.architecture", &i));
  assert_false(gguf_get_str(f, "llama.block_count", &s));
  assert_false(gguf_get_bool(f, "k.u8", &bo));
  assert_false(gguf_get_int(f, "no.such.key", &i));
  GgufValueType et;
  size_t n;
  assert_true(gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n));
  assert_int_equal(et, GGUF_STRING);
  assert_int_equal(n, 3);
  assert_string_equal(gguf_arr_str(f, "tokenizer.ggml.tokens", 1), "hello");
  assert_string_equal(gguf_arr_str(f, "tokenizer.ggml.tokens", 2), "");
  assert_null(gguf_arr_str(f, "tokenizer.ggml.tokens", 3));
  assert_null(gguf_arr_str(f, "k.iarr", 0));
  assert_int_equal(gguf_arr_int(f, "k.iarr", 1), -20);
  assert_int_equal(gguf_arr_int(f, "k.iarr", 2), 30);
  assert_true(gguf_arr_float(f, "k.farr", 1) == -2.5);
  assert_true(gguf_get_arr(f, "k.nested", &et, &n));
  assert_int_equal(et, GGUF_ARRAY);
  assert_int_equal(n, 2);
  assert_true(gguf_get_str(f, "k.after", &s));
  assert_string_equal(s, "still here");

  assert_int_equal(gguf_tensor_count(f), 2);
  const GgufTensor *t0 = gguf_find_tensor(f, "t0");
  assert_non_null(t0);
  assert_int_equal(t0->type, GGML_F32);
  assert_int_equal(t0->n_dims, 2);
  assert_int_equal(t0->ne[0], 3);
  assert_int_equal(t0->ne[1], 2);
  assert_int_equal(t0->nbytes, 24);
  assert_memory_equal(t0->data, T0_DATA, 24);
  const GgufTensor *t1 = gguf_tensor_at(f, 1);
  assert_string_equal(t1->name, "blk.0.attn_q.weight");
  assert_int_equal(t1->nbytes, 128);
  float out[64];
  Diag d = {0};
  assert_true(ggml_dequantize(t1->type, t1->data, out, 64, &d));
  assert_true(out[63] == 31.5f);
  assert_null(gguf_find_tensor(f, "nope"));
  assert_null(gguf_tensor_at(f, 2));
}

static void test_valid_from_memory_and_file(void **state) {
  Buf b = {0};
  build_valid(&b, 3, 32);
  Diag d = {0};
  GgufFile *f = gguf_open_memory(b.p, b.n, "mem.gguf", &d);
  check_valid(f);
  gguf_close(f);
  char *dir = make_temp_dir();
  char path[512];
  snprintf(path, sizeof path, "%s/model.gguf", dir);
  write_file(path, b.p, b.n);
  f = gguf_open(path, &d);
  check_valid(f);
  assert_int_equal(d.set, 0);
  gguf_close(f);
  remove_dir(dir);
  b_free(&b);
}

static void test_version2_and_alignment(void **state) {
  Buf b = {0};
  build_valid(&b, 2, 64);
  Diag d = {0};
  GgufFile *f = gguf_open_memory(b.p, b.n, "v2.gguf", &d);
  check_valid(f);
  /* data section starts at a multiple of 64 */
  assert_int_equal(((const unsigned char *)gguf_find_tensor(f, "t0")->data - b.p) % 64, 0);
  gguf_close(f);
  b_free(&b);
}

/* Opens an image that must fail; returns the message. */
static const char *open_fails(const Buf *b, Diag *d) {
  /* An exact-size copy, so ASan sees any read past the end. */
  unsigned char *copy = malloc(b->n ? b->n : 1);
  if (b->n) memcpy(copy, b->p, b->n);
  memset(d, 0, sizeof *d);
  GgufFile *f = gguf_open_memory(copy, b->n, "model.gguf", d);
  assert_null(f);
  assert_true(d->set);
  free(copy);
  return d->msg;
}

static void test_bad_magic_and_version(void **state) {
  Buf b = {0};
  build_valid(&b, 3, 32);
  Diag d;
  memcpy(b.p, "GGUG", 4);
  assert_contains(open_fails(&b, &d), "model.gguf: not a GGUF file (bad magic)");
  memcpy(b.p, "GGUF", 4);
  uint32_t v = 4;
  memcpy(b.p + 4, &v, 4);
  assert_contains(open_fails(&b, &d), "GGUF version 4 is not supported");
  v = 1;
  memcpy(b.p + 4, &v, 4);
  assert_contains(open_fails(&b, &d), "GGUF version 1 is not supported");
  Buf empty = {0};
  assert_contains(open_fails(&empty, &d), "bad magic");
  b_free(&b);
  /* a missing file is an error naming it */
  memset(&d, 0, sizeof d);
  assert_null(gguf_open("/nonexistent/x.gguf", &d));
  assert_contains(d.msg, "/nonexistent/x.gguf");
}

static void test_truncated_everywhere(void **state) {
  Buf b = {0};
  build_valid(&b, 3, 32);
  for (size_t n = 0; n < b.n; n++) {
    Buf cut = {b.p, n, n};
    Diag d;
    open_fails(&cut, &d);
  }
  b_free(&b);
}

static void test_tensor_past_end(void **state) {
  Buf b = {0};
  gguf_header(&b, 3, 1, 0);
  b_str(&b, "blk.3.attn_q.weight");
  b_u32(&b, 2);
  b_u64(&b, 32);
  b_u64(&b, 32);
  b_u32(&b, GGML_F32);
  b_u64(&b, 0);
  while (b.n % 32) b_put(&b, "", 1);
  b_put(&b, T0_DATA, 24); /* far fewer than 4096 bytes */
  Diag d;
  const char *m = open_fails(&b, &d);
  char want[200];
  snprintf(
      want, sizeof want,
      "model.gguf: tensor 'blk.3.attn_q.weight' data (offset %zu, 4096 bytes) runs past the end of the file (size %zu)",
      b.n - 24, b.n);
  assert_contains(m, want);
  b_free(&b);

  /* An offset that would wrap around when added */
  gguf_header(&b, 3, 1, 0);
  b_str(&b, "w");
  b_u32(&b, 1);
  b_u64(&b, 8);
  b_u32(&b, GGML_F32);
  b_u64(&b, UINT64_MAX - 31);
  while (b.n % 32) b_put(&b, "", 1);
  b_put(&b, T0_DATA, 24);
  b_put(&b, T0_DATA, 24);
  assert_contains(open_fails(&b, &d), "runs past the end of the file");
  b_free(&b);
}

static void test_huge_counts(void **state) {
  Diag d;
  Buf b = {0};
  gguf_header(&b, 3, 1ull << 60, 0);
  assert_contains(open_fails(&b, &d), "claims 1152921504606846976 tensors");
  b_free(&b);
  gguf_header(&b, 3, 0, 1ull << 60);
  assert_contains(open_fails(&b, &d), "claims 1152921504606846976 metadata pairs");
  b_free(&b);
  /* a string length of 2^60 */
  gguf_header(&b, 3, 0, 1);
  b_u64(&b, 1ull << 60);
  b_put(&b, "abcdefghijklmnop", 16);
  assert_contains(open_fails(&b, &d), "string length 1152921504606846976");
  b_free(&b);
  /* arrays of 2^60 ints and strings */
  gguf_header(&b, 3, 0, 1);
  b_str(&b, "a");
  b_u32(&b, T_ARRAY);
  b_u32(&b, T_U32);
  b_u64(&b, 1ull << 60);
  b_put(&b, "abcdefghijklmnop", 16);
  assert_contains(open_fails(&b, &d), "key 'a': array of 1152921504606846976 elements");
  b_free(&b);
  gguf_header(&b, 3, 0, 1);
  b_str(&b, "a");
  b_u32(&b, T_ARRAY);
  b_u32(&b, T_STRING);
  b_u64(&b, UINT64_MAX);
  assert_contains(open_fails(&b, &d), "strings");
  b_free(&b);
  /* nested arrays claiming huge inner counts */
  gguf_header(&b, 3, 0, 1);
  b_str(&b, "a");
  b_u32(&b, T_ARRAY);
  b_u32(&b, T_ARRAY);
  b_u64(&b, 1);
  b_u32(&b, T_U64);
  b_u64(&b, 1ull << 62);
  assert_contains(open_fails(&b, &d), "runs past the end");
  b_free(&b);
}

/* One tensor info with the given fields, data of `nbytes` zero bytes. */
static void one_tensor(Buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
  gguf_header(b, 3, 1, 0);
  b_str(b, name);
  b_u32(b, n_dims);
  for (uint32_t k = 0; k < n_dims && k < 8; k++) b_u64(b, ne[k]);
  b_u32(b, type);
  b_u64(b, off);
  static const unsigned char zeros[512];
  while (b->n % 32) b_put(b, "", 1);
  b_put(b, zeros, sizeof zeros);
}

static void test_bad_tensor_infos(void **state) {
  Diag d;
  Buf b = {0};
  uint64_t ne[8] = {32, 2, 1, 1, 1, 1, 1, 1};
  one_tensor(&b, "w", 5, ne, GGML_F32, 0);
  assert_contains(open_fails(&b, &d), "tensor 'w' has 5 dimensions");
  b_free(&b);
  one_tensor(&b, "w", 0, ne, GGML_F32, 0);
  assert_contains(open_fails(&b, &d), "tensor 'w' has 0 dimensions");
  b_free(&b);
  one_tensor(&b, "w", 2, ne, 10, 0);
  assert_contains(open_fails(&b, &d), "tensor 'w' has ggml type 10 (q2_k), which lathe does not read");
  b_free(&b);
  one_tensor(&b, "w", 2, ne, 99, 0);
  assert_contains(open_fails(&b, &d), "ggml type 99 (unknown)");
  b_free(&b);
  uint64_t big[4] = {1ull << 32, 1ull << 32, 1ull << 32, 1};
  one_tensor(&b, "w", 3, big, GGML_F32, 0);
  assert_contains(open_fails(&b, &d), "overflow");
  b_free(&b);
  uint64_t odd[2] = {33, 2};
  one_tensor(&b, "w", 2, odd, GGML_Q8_0, 0);
  assert_contains(open_fails(&b, &d), "row length 33 is not a multiple of the block size 32");
  b_free(&b);
  uint64_t small[2] = {4, 1};
  one_tensor(&b, "w", 2, small, GGML_F32, 8);
  assert_contains(open_fails(&b, &d), "offset 8 is not a multiple of the alignment 32");
  b_free(&b);
  /* duplicate tensor names and keys */
  gguf_header(&b, 3, 2, 0);
  for (int i = 0; i < 2; i++) {
    b_str(&b, "w");
    b_u32(&b, 1);
    b_u64(&b, 4);
    b_u32(&b, GGML_F32);
    b_u64(&b, 0);
  }
  while (b.n % 32) b_put(&b, "", 1);
  b_put(&b, T0_DATA, 16);
  assert_contains(open_fails(&b, &d), "duplicate tensor name 'w'");
  b_free(&b);
  gguf_header(&b, 3, 0, 2);
  kv_u32(&b, "k", 1);
  kv_u32(&b, "k", 2);
  assert_contains(open_fails(&b, &d), "duplicate metadata key 'k'");
  b_free(&b);
  /* bad alignment, unknown value type */
  gguf_header(&b, 3, 0, 1);
  kv_u32(&b, "general.alignment", 48);
  assert_contains(open_fails(&b, &d), "general.alignment 48 is not a power of two");
  b_free(&b);
  gguf_header(&b, 3, 0, 1);
  b_str(&b, "k");
  b_u32(&b, 13);
  b_u64(&b, 0);
  assert_contains(open_fails(&b, &d), "key 'k' has unknown value type 13");
  b_free(&b);
}

/* ---- dequantization ---- */

static void put_half(unsigned char *p, float v) {
  unsigned short h = f32_to_f16(v);
  memcpy(p, &h, 2);
}

static void test_dequant_plain_types(void **state) {
  Diag d = {0};
  float src[3] = {1.5f, -2.0f, 3.25f}, out[3];
  assert_true(ggml_dequantize(GGML_F32, src, out, 3, &d));
  assert_memory_equal(src, out, sizeof src);
  unsigned short h[3] = {f32_to_f16(1.5f), f32_to_f16(-2.0f), f32_to_f16(65504.0f)};
  assert_true(ggml_dequantize(GGML_F16, h, out, 3, &d));
  assert_true(out[0] == 1.5f && out[1] == -2.0f && out[2] == 65504.0f);
  unsigned short bh[2] = {0x3fc0, 0xc040}; /* 1.5, -3.0 */
  assert_true(ggml_dequantize(GGML_BF16, bh, out, 2, &d));
  assert_true(out[0] == 1.5f && out[1] == -3.0f);
}

static void test_dequant_q8_0(void **state) {
  unsigned char blk[2 * 34];
  for (int b = 0; b < 2; b++) {
    put_half(blk + 34 * b, b ? 0.25f : 0.5f);
    for (int i = 0; i < 32; i++) blk[34 * b + 2 + i] = (unsigned char)(signed char)(i - 16);
  }
  float out[64];
  Diag d = {0};
  assert_true(ggml_dequantize(GGML_Q8_0, blk, out, 64, &d));
  for (int i = 0; i < 32; i++) {
    assert_true(out[i] == (float)(i - 16) * 0.5f);
    assert_true(out[32 + i] == (float)(i - 16) * 0.25f);
  }
}

static void test_dequant_q4_0_and_q4_1(void **state) {
  unsigned char b0[18], b1[20];
  put_half(b0, 2.0f);
  put_half(b1, 0.5f);
  put_half(b1 + 2, -1.0f);
  for (int i = 0; i < 16; i++) {
    b0[2 + i] = (unsigned char)(i | (15 - i) << 4); /* element i: i, element 16+i: 15-i */
    b1[4 + i] = (unsigned char)(i | (15 - i) << 4);
  }
  float out[32];
  Diag d = {0};
  assert_true(ggml_dequantize(GGML_Q4_0, b0, out, 32, &d));
  for (int i = 0; i < 16; i++) {
    assert_true(out[i] == (float)(i - 8) * 2.0f);
    assert_true(out[16 + i] == (float)(7 - i) * 2.0f);
  }
  assert_true(ggml_dequantize(GGML_Q4_1, b1, out, 32, &d));
  for (int i = 0; i < 16; i++) {
    assert_true(out[i] == (float)i * 0.5f - 1.0f);
    assert_true(out[16 + i] == (float)(15 - i) * 0.5f - 1.0f);
  }
}

/* Packs 8 (scale, min) 6-bit pairs the q4_k way (written from the format description). */
static void pack_q4k_scales(unsigned char s[12], const int sc[8], const int mn[8]) {
  memset(s, 0, 12);
  for (int j = 0; j < 4; j++) {
    s[j] = (unsigned char)(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = (unsigned char)(mn[j] | (mn[j + 4] >> 4) << 6);
    s[j + 8] = (unsigned char)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
  }
}

static void test_dequant_q4_k(void **state) {
  unsigned char blk[144];
  put_half(blk, 1.0f);
  put_half(blk + 2, 0.5f);
  int sc[8], mn[8];
  for (int j = 0; j < 8; j++) sc[j] = 8 * j + 5, mn[j] = 63 - 8 * j; /* 6-bit values using the top bits */
  pack_q4k_scales(blk + 4, sc, mn);
  /* element e of sub-block j has quant (e + j) % 16; sub-blocks 2p, 2p+1 share 32 bytes (lo, hi). */
  for (int p = 0; p < 4; p++)
    for (int l = 0; l < 32; l++)
      blk[16 + 32 * p + l] = (unsigned char)(((l + 2 * p) % 16) | ((l + 2 * p + 1) % 16) << 4);
  float out[256];
  Diag d = {0};
  assert_true(ggml_dequantize(GGML_Q4_K, blk, out, 256, &d));
  for (int j = 0; j < 8; j++)
    for (int l = 0; l < 32; l++) {
      float want = 1.0f * (float)sc[j] * (float)((l + j) % 16) - 0.5f * (float)mn[j];
      if (out[32 * j + l] != want) fail_msg("q4_k element %d: %g, want %g", 32 * j + l, out[32 * j + l], want);
    }
  /* golden values of a patterned block, computed independently with gguf-py */
  for (int i = 0; i < 144; i++) blk[i] = (unsigned char)((i * 37 + 11) & 255);
  put_half(blk, 0.25f);
  put_half(blk + 2, 0.125f);
  assert_true(ggml_dequantize(GGML_Q4_K, blk, out, 256, &d));
  static const struct {
    int i;
    float v;
  } gold[] = {{0, 78.875f},    {1, -6.375f},   {31, 40.125f},  {32, 2.0f},    {63, 10.0f},
              {64, 105.125f},  {100, 23.75f},  {128, 105.75f}, {150, 86.25f}, {191, 11.25f},
              {192, 132.625f}, {200, 34.625f}, {224, 0.125f},  {255, 12.125f}};
  for (size_t k = 0; k < sizeof gold / sizeof gold[0]; k++) assert_true(out[gold[k].i] == gold[k].v);
}

static void test_dequant_q6_k(void **state) {
  unsigned char blk[210];
  memset(blk, 0, sizeof blk);
  /* element e: q = e % 64, scale of its 16-element group g: g - 8 */
  for (int e = 0; e < 256; e++) {
    int q = e % 64, half = e / 128, r = e % 128, k = r / 32, l = r % 32;
    unsigned char *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
    int lo = q & 15, hi = q >> 4;
    int qi = l + (k & 1) * 32; /* ql byte */
    ql[qi] |= (unsigned char)(k < 2 ? lo : lo << 4);
    qh[l] |= (unsigned char)(hi << (2 * k));
  }
  for (int g = 0; g < 16; g++) blk[192 + g] = (unsigned char)(signed char)(g - 8);
  put_half(blk + 208, 0.5f);
  float out[256];
  Diag d = {0};
  assert_true(ggml_dequantize(GGML_Q6_K, blk, out, 256, &d));
  for (int e = 0; e < 256; e++) {
    float want = 0.5f * (float)(e / 16 - 8) * (float)(e % 64 - 32);
    if (out[e] != want) fail_msg("q6_k element %d: %g, want %g", e, out[e], want);
  }
  for (int i = 0; i < 210; i++) blk[i] = (unsigned char)((i * 37 + 11) & 255);
  put_half(blk + 208, 0.0625f);
  assert_true(ggml_dequantize(GGML_Q6_K, blk, out, 256, &d));
  static const struct {
    int i;
    float v;
  } gold[] = {{0, -89.4375f}, {1, 106.0f},      {31, -6.0f},      {32, 14.4375f}, {63, -36.25f},
              {64, -190.0f},  {100, 157.6875f}, {128, -21.9375f}, {150, -10.5f},  {191, -61.25f},
              {192, -30.25f}, {200, 68.0625f},  {224, 52.875f},   {255, -3.75f}};
  for (size_t k = 0; k < sizeof gold / sizeof gold[0]; k++) assert_true(out[gold[k].i] == gold[k].v);
}

/* Round trip: quantize a ramp with a simple quantizer written here, dequantize, compare. */
static void test_quantize_round_trip(void **state) {
  enum { N = 128 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = sinf((float)i * 0.37f) * 3.0f + (float)(i % 7) * 0.1f;
  unsigned char q8[N / 32 * 34], q4[N / 32 * 18], q41[N / 32 * 20];
  float tol8[N / 32], tol4[N / 32], tol41[N / 32];
  for (int b = 0; b < N / 32; b++) {
    const float *v = x + 32 * b;
    float amax = 0, vmin = v[0], vmax = v[0];
    for (int i = 0; i < 32; i++) {
      if (fabsf(v[i]) > amax) amax = fabsf(v[i]);
      if (v[i] < vmin) vmin = v[i];
      if (v[i] > vmax) vmax = v[i];
    }
    float d8 = f16_to_f32(f32_to_f16(amax / 127)), d4 = f16_to_f32(f32_to_f16(amax / 7));
    float d41 = f16_to_f32(f32_to_f16((vmax - vmin) / 15)), m41 = f16_to_f32(f32_to_f16(vmin));
    put_half(q8 + 34 * b, d8);
    put_half(q4 + 18 * b, d4);
    put_half(q41 + 20 * b, d41);
    put_half(q41 + 20 * b + 2, m41);
    for (int i = 0; i < 32; i++) {
      int a = (int)lrintf(v[i] / d8);
      q8[34 * b + 2 + i] = (unsigned char)(signed char)(a > 127 ? 127 : a < -127 ? -127 : a);
      int c = (int)lrintf(v[i] / d4) + 8, e = (int)lrintf((v[i] - m41) / d41);
      c = c < 0 ? 0 : c > 15 ? 15 : c;
      e = e < 0 ? 0 : e > 15 ? 15 : e;
      unsigned char *p4 = q4 + 18 * b + 2 + i % 16, *p41 = q41 + 20 * b + 4 + i % 16;
      if (i < 16) *p4 = (unsigned char)c, *p41 = (unsigned char)e;
      else *p4 |= (unsigned char)(c << 4), *p41 |= (unsigned char)(e << 4);
    }
    tol8[b] = d8 * 0.51f + 1e-3f;
    tol4[b] = d4 * 1.01f + 1e-3f; /* the top value clips at q = 15 → 7*d */
    tol41[b] = d41 * 0.51f + fabsf(m41 - vmin) + 1e-2f;
  }
  Diag d = {0};
  assert_true(ggml_dequantize(GGML_Q8_0, q8, y, N, &d));
  for (int i = 0; i < N; i++) assert_true(fabsf(y[i] - x[i]) <= tol8[i / 32]);
  assert_true(ggml_dequantize(GGML_Q4_0, q4, y, N, &d));
  for (int i = 0; i < N; i++) assert_true(fabsf(y[i] - x[i]) <= tol4[i / 32]);
  assert_true(ggml_dequantize(GGML_Q4_1, q41, y, N, &d));
  for (int i = 0; i < N; i++) assert_true(fabsf(y[i] - x[i]) <= tol41[i / 32]);
}

static void test_dequant_errors(void **state) {
  unsigned char blk[34] = {0};
  float out[64];
  Diag d = {0};
  assert_false(ggml_dequantize(GGML_Q8_0, blk, out, 31, &d));
  assert_contains(d.msg, "31 elements is not a multiple of the block size 32");
  memset(&d, 0, sizeof d);
  assert_false(ggml_dequantize(11, blk, out, 32, &d));
  assert_contains(d.msg, "q3_k");
  int be;
  size_t bb;
  assert_true(ggml_type_block(GGML_Q6_K, &be, &bb));
  assert_int_equal(be, 256);
  assert_int_equal(bb, 210);
  assert_true(ggml_type_block(GGML_Q5_1, &be, &bb));
  assert_int_equal(bb, 24);
  assert_false(ggml_type_block(10, &be, &bb)); /* q2_k */
  assert_string_equal(ggml_type_name(GGML_Q4_1), "q4_1");
  assert_string_equal(ggml_type_name(4), "unknown");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_from_memory_and_file),
      cmocka_unit_test(test_version2_and_alignment),
      cmocka_unit_test(test_bad_magic_and_version),
      cmocka_unit_test(test_truncated_everywhere),
      cmocka_unit_test(test_tensor_past_end),
      cmocka_unit_test(test_huge_counts),
      cmocka_unit_test(test_bad_tensor_infos),
      cmocka_unit_test(test_dequant_plain_types),
      cmocka_unit_test(test_dequant_q8_0),
      cmocka_unit_test(test_dequant_q4_0_and_q4_1),
      cmocka_unit_test(test_dequant_q4_k),
      cmocka_unit_test(test_dequant_q6_k),
      cmocka_unit_test(test_quantize_round_trip),
      cmocka_unit_test(test_dequant_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
