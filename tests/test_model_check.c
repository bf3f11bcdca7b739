/* Model metadata checked against the file (model_check.c, config_keys.c, arch/rope.c): a tiny but complete
 * llama GGUF, written with one thing wrong at a time, must be refused with one error naming the file and the
 * key or tensor; the unmodified file must open. Also the escaping of bytes that are not text in messages. */
#include "testutil.h"
#include <math.h>
#include <stdlib.h>
#include "model/config.h"
#include "model/gguf.h"
#include "model/model_check.h"
#include "model/weights.h"
#include "model_testutil.h"

enum { HIDDEN = 8, HEADS = 2, KV_HEADS = 1, HEAD_DIM = 4, FFN = 16, VOCAB = 4, MAX_T = 64 };

typedef struct Tiny {
  int block_count;               /* the metadata's block_count */
  int tensor_layers;             /* layers of tensors in the file */
  float freq_base;               /* 0: key absent */
  int rope_dims;                 /* 0: key absent */
  const char *rope_scaling_type; /* NULL: key absent */
  int k_rows;                    /* rows of blk.0.attn_k (KV_HEADS * HEAD_DIM when right) */
  const char *extra;             /* an extra tensor's name, or NULL */
} Tiny;

static Tiny tiny_ok(void) { return (Tiny){2, 2, 10000.0f, HEAD_DIM, NULL, KV_HEADS * HEAD_DIM, NULL}; }

static void kv_arch_u32(Buf *b, const char *suffix, uint32_t v) {
  char key[96];
  snprintf(key, sizeof key, "llama.%s", suffix);
  kv_u32(b, key, v);
}

/* Writes the GGUF into dir/model.gguf and returns its path (static buffer). */
static const char *write_tiny(const char *dir, const Tiny *t) {
  static float zeros[HIDDEN * FFN];
  static char names[MAX_T][96];
  static char path[512];
  GTensor ts[MAX_T];
  int n = 0;
#define ADD(NAME, NE0, NE1)                                                                                            \
  do {                                                                                                                 \
    snprintf(names[n], sizeof names[n], "%s", NAME);                                                                   \
    ts[n] = (GTensor){names[n],       GGML_F32, (NE1) ? 2 : 1,                                                         \
                      {(NE0), (NE1)}, zeros,    sizeof(float) * (size_t)(NE0) * (size_t)((NE1) ? (NE1) : 1)};          \
    n++;                                                                                                               \
  } while (0)
  ADD("token_embd.weight", HIDDEN, VOCAB);
  for (int l = 0; l < t->tensor_layers; l++) {
    char nm[96];
#define LAYER(PART, NE0, NE1)                                                                                          \
  do {                                                                                                                 \
    snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, PART);                                                              \
    ADD(nm, NE0, NE1);                                                                                                 \
  } while (0)
    LAYER("attn_norm", HIDDEN, 0);
    LAYER("attn_q", HIDDEN, HEADS * HEAD_DIM);
    int k_rows = l == 0 ? t->k_rows : KV_HEADS * HEAD_DIM;
    LAYER("attn_k", HIDDEN, k_rows);
    LAYER("attn_v", HIDDEN, KV_HEADS * HEAD_DIM);
    LAYER("attn_output", HEADS * HEAD_DIM, HIDDEN);
    LAYER("ffn_norm", HIDDEN, 0);
    LAYER("ffn_gate", HIDDEN, FFN);
    LAYER("ffn_up", HIDDEN, FFN);
    LAYER("ffn_down", FFN, HIDDEN);
  }
  ADD("output_norm.weight", HIDDEN, 0);
  if (t->extra) ADD(t->extra, HIDDEN, 0);
  int n_kv = 9 + (t->freq_base != 0) + (t->rope_dims != 0) + (t->rope_scaling_type != NULL);
  Buf b = {0};
  gguf_header(&b, 3, (uint64_t)n, (uint64_t)n_kv);
  kv_str(&b, "general.architecture", "llama");
  kv_arch_u32(&b, "block_count", (uint32_t)t->block_count);
  kv_arch_u32(&b, "embedding_length", HIDDEN);
  kv_arch_u32(&b, "feed_forward_length", FFN);
  kv_arch_u32(&b, "attention.head_count", HEADS);
  kv_arch_u32(&b, "attention.head_count_kv", KV_HEADS);
  kv_arch_u32(&b, "vocab_size", VOCAB);
  kv_arch_u32(&b, "context_length", 64);
  kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
  if (t->freq_base != 0) kv_f32(&b, "llama.rope.freq_base", t->freq_base);
  if (t->rope_dims) kv_arch_u32(&b, "rope.dimension_count", (uint32_t)t->rope_dims);
  if (t->rope_scaling_type) kv_str(&b, "llama.rope.scaling.type", t->rope_scaling_type);
  gguf_tensors(&b, ts, n, 32);
  snprintf(path, sizeof path, "%s/model.gguf", dir);
  write_file(path, b.p, b.n);
  b_free(&b);
  return path;
#undef ADD
#undef LAYER
}

/* Opens the variant as a model; returns 1 if it opened. d gets the error otherwise. */
static int open_tiny(const Tiny *t, Diag *d, char *path_out) {
  char *dir = make_temp_dir();
  const char *path = write_tiny(dir, t);
  if (path_out) snprintf(path_out, 512, "%s", path);
  ModelConfig c;
  memset(d, 0, sizeof *d);
  WeightStore *w = model_weights_open(path, &c, d);
  weights_close(w);
  remove_dir(dir);
  return w != NULL;
}

static void expect_refused(const Tiny *t, const char *what) {
  Diag d;
  char path[512], want[1024];
  assert_false(open_tiny(t, &d, path));
  snprintf(want, sizeof want, "%s: %s", path, what); /* names the file first */
  assert_contains(d.msg, want);
}

static void the_complete_file_opens(void **state) {
  Tiny t = tiny_ok();
  Diag d;
  if (!open_tiny(&t, &d, NULL)) fail_msg("%s", d.msg);
  t.freq_base = 0; /* optional keys absent: defaults */
  t.rope_dims = 0;
  t.rope_scaling_type = "none";
  if (!open_tiny(&t, &d, NULL)) fail_msg("%s", d.msg);
}

static void block_count_smaller_than_the_tensors(void **state) {
  Tiny t = tiny_ok();
  t.block_count = 1;
  expect_refused(&t, "tensor 'blk.1.attn_norm.weight' is for layer 1, but 'llama.block_count' = 1");
}

static void block_count_larger_than_the_tensors(void **state) {
  Tiny t = tiny_ok();
  t.block_count = 3;
  expect_refused(&t, "no tensor 'blk.2.attn_norm.weight' for layer 2, which 'llama.block_count' = 3 implies");
}

static void a_tensor_of_the_wrong_shape(void **state) {
  Tiny t = tiny_ok();
  t.k_rows = 2 * HEAD_DIM; /* two kv heads' worth of rows, the metadata says one */
  expect_refused(&t, "tensor 'blk.0.attn_k.weight' has shape [8, 8], but the model's hyperparameters give [4, 8]");
}

static void an_unread_tensor(void **state) {
  Tiny t = tiny_ok();
  t.extra = "blk.0.attn_sinks.weight";
  expect_refused(&t, "tensor 'blk.0.attn_sinks.weight' is not read by a llama model with this configuration");
}

static void rope_values_are_checked(void **state) {
  Tiny t = tiny_ok();
  t.freq_base = INFINITY;
  expect_refused(&t, "key 'llama.rope.freq_base' = inf is out of range");
  t.freq_base = -1.0f;
  expect_refused(&t, "key 'llama.rope.freq_base' = -1 is out of range");
  t = tiny_ok();
  t.rope_dims = HEAD_DIM / 2; /* partial rotary: not what the graph computes */
  expect_refused(&t, "metadata key 'llama.rope.dimension_count' = 2, but the heads are 4 wide");
  t = tiny_ok();
  t.rope_scaling_type = "yarn";
  expect_refused(&t, "metadata key 'llama.rope.scaling.type' = 'yarn' is not supported");
}

static void sizes_are_checked(void **state) {
  Tiny t = tiny_ok();
  t.block_count = 100000;
  expect_refused(&t, "key 'llama.block_count' = 100000 is too large (at most 4096)");
  t.block_count = 0;
  expect_refused(&t, "key 'llama.block_count' = 0 is too small (at least 1)");
}

/* A name from the file with bytes that are not text is printed escaped, the rest of the message intact. */
static void bad_bytes_in_a_tensor_name_are_escaped(void **state) {
  Tiny t = tiny_ok();
  t.extra = "blk.0.odd\xff\x01\x1b[2J.weight";
  expect_refused(&t, "tensor 'blk.0.odd\\xff\\x01\\x1b[2J.weight' is not read");
}

static void diag_escapes_only_what_is_not_text(void **state) {
  Diag d = {0};
  diag_error(&d, 0, 0, "a %s b", "caf\xc3\xa9 \xe2\x82\xac \xc3 \xed\xa0\x80 \x7f\t\n");
  assert_string_equal(d.msg, "a caf\xc3\xa9 \xe2\x82\xac \\xc3 \\xed\\xa0\\x80 \\x7f\\x09\\x0a b");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_complete_file_opens),
      cmocka_unit_test(block_count_smaller_than_the_tensors),
      cmocka_unit_test(block_count_larger_than_the_tensors),
      cmocka_unit_test(a_tensor_of_the_wrong_shape),
      cmocka_unit_test(an_unread_tensor),
      cmocka_unit_test(rope_values_are_checked),
      cmocka_unit_test(sizes_are_checked),
      cmocka_unit_test(bad_bytes_in_a_tensor_name_are_escaped),
      cmocka_unit_test(diag_escapes_only_what_is_not_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
