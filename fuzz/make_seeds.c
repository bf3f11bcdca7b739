/* Writes the seed corpora for `make fuzz`: small valid GGUF and safetensors files (every scalar and
 * array type, each supported tensor type) into the two directories named on the command line. */
#include <stdio.h>
#include "model/gguf.h"
#include "../tests/model_testutil.h"

static void save(const char *dir, const char *name, const Buf *b) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  write_file(path, b->p, b->n);
}

static void gguf_seeds(const char *dir) {
  static unsigned char data[4096];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (unsigned char)(i * 37 + 11);
  static const struct {
    int type;
    uint64_t ne0;
    size_t nbytes;
  } kinds[] = {{GGML_F32, 8, 32},   {GGML_F16, 8, 16},   {GGML_BF16, 8, 16},    {GGML_Q8_0, 32, 34},
               {GGML_Q4_0, 32, 18}, {GGML_Q4_1, 32, 20}, {GGML_Q4_K, 256, 144}, {GGML_Q6_K, 256, 210}};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    Buf b = {0};
    gguf_header(&b, 3, 2, 9);
    kv_str(&b, "general.architecture", k % 2 ? "llama" : "qwen3");
    const char *arch = k % 2 ? "llama" : "qwen3";
    char key[64];
    snprintf(key, sizeof key, "%s.block_count", arch);
    kv_u32(&b, key, 1);
    snprintf(key, sizeof key, "%s.embedding_length", arch);
    kv_u32(&b, key, 8);
    snprintf(key, sizeof key, "%s.feed_forward_length", arch);
    kv_u32(&b, key, 16);
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    kv_u32(&b, key, 2);
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    kv_f32(&b, key, 1e-5f);
    static const char *const toks[] = {"a", "bc", ""};
    kv_str_arr(&b, "tokenizer.ggml.tokens", toks, 3);
    b_str(&b, "tokenizer.ggml.scores");
    b_u32(&b, T_ARRAY);
    b_u32(&b, T_F32);
    b_u64(&b, 2);
    b_f32(&b, 1);
    b_f32(&b, 2);
    b_str(&b, "k.nested");
    b_u32(&b, T_ARRAY);
    b_u32(&b, T_ARRAY);
    b_u64(&b, 1);
    b_u32(&b, T_I16);
    b_u64(&b, 1);
    b_put(&b, "\x01\x02", 2);
    GTensor t[2] = {{"token_embd.weight", (uint32_t)kinds[k].type, 2, {kinds[k].ne0, 2}, data, 2 * kinds[k].nbytes},
                    {"blk.0.attn_q.weight", GGML_F32, 1, {4}, data, 16}};
    gguf_tensors(&b, t, 2, 32);
    char name[32];
    snprintf(name, sizeof name, "seed_%s.gguf", ggml_type_name(kinds[k].type));
    save(dir, name, &b);
    b_free(&b);
  }
}

static void st_seed(const char *dir, const char *name, const char *json, size_t data_bytes) {
  static unsigned char data[256];
  Buf b = {0};
  size_t len = strlen(json), padded = (len + 7) / 8 * 8;
  b_u64(&b, padded);
  b_put(&b, json, len);
  for (size_t i = len; i < padded; i++)
    b_put(&b, " ", 1);
  b_put(&b, data, data_bytes);
  save(dir, name, &b);
  b_free(&b);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: make_seeds GGUF_DIR SAFETENSORS_DIR\n");
    return 2;
  }
  gguf_seeds(argv[1]);
  st_seed(argv[2], "seed_f32.safetensors",
          "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",
          24);
  st_seed(argv[2], "seed_mixed.safetensors",
          "{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[8,10]},"
          "\"c\":{\"dtype\":\"F32\",\"shape\":[1,1,2],\"data_offsets\":[12,20]}}",
          20);
  return 0;
}
