/* libFuzzer target: parse arbitrary bytes as a safetensors file and touch every byte of every tensor
 * (AddressSanitizer flags any tensor the reader let point outside the input). */
#include <stdint.h>
#include <stdlib.h>
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Diag d = {0};
  StFile *f = st_open_memory(data, size, "fuzz.safetensors", &d);
  if (!f) return 0;
  unsigned sum = 0;
  for (int i = 0; i < st_tensor_count(f); i++) {
    const StTensor *t = st_tensor_at(f, i);
    size_t n = 1;
    for (int k = 0; k < t->rank; k++)
      n *= (size_t)t->shape[k];
    if (n * dtype_size(t->dtype) != t->nbytes) abort();
    for (size_t k = 0; k < t->nbytes; k++)
      sum += ((const uint8_t *)t->data)[k];
  }
  st_close(f);
  return (int)(sum & 0);
}
