/* libFuzzer target: parse arbitrary bytes as GGUF; on success, read all metadata the loaders read,
 * derive a config and dequantize the start of every tensor, so every accessor meets fuzzed data. */
#include <stdint.h>
#include <stdlib.h>
#include "model/config.h"
#include "model/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Diag d = {0};
  GgufFile *f = gguf_open_memory(data, size, "fuzz.gguf", &d);
  if (!f) return 0;
  ModelConfig c;
  Diag cd = {0};
  model_config_from_gguf(f, &c, &cd);
  GgufValueType et;
  size_t n;
  if (gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n))
    for (size_t i = 0; i < n && i < 64; i++)
      (void)gguf_arr_str(f, "tokenizer.ggml.tokens", i);
  if (gguf_get_arr(f, "tokenizer.ggml.scores", &et, &n))
    for (size_t i = 0; i < n && i < 64; i++)
      (void)gguf_arr_float(f, "tokenizer.ggml.scores", i);
  if (gguf_get_arr(f, "tokenizer.ggml.token_type", &et, &n))
    for (size_t i = 0; i < n && i < 64; i++)
      (void)gguf_arr_int(f, "tokenizer.ggml.token_type", i);
  float *buf = malloc(sizeof(float) * 1024);
  for (int i = 0; i < gguf_tensor_count(f); i++) {
    const GgufTensor *t = gguf_tensor_at(f, i);
    int be;
    size_t bb;
    if (!ggml_type_block(t->type, &be, &bb)) abort(); /* the reader must refuse unknown types */
    int64_t blocks = (int64_t)(t->nbytes / bb);
    if (blocks * be > 1024) blocks = 1024 / be;
    Diag dd = {0};
    if (!ggml_dequantize(t->type, t->data, buf, blocks * be, &dd)) abort();
  }
  free(buf);
  gguf_close(f);
  return 0;
}
