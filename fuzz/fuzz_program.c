/* libFuzzer target: program text through the whole compiler (parse, tensor, loop, tile, kernel, code) for both
 * targets, so both renderers (C and CUDA C) meet every program the parser accepts; the output is printed at
 * every stage but never compiled. Bad input must end in a Diag, never a crash or undefined behaviour. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "driver/pipeline.h"

static void compile_for(Target t, const char *src) {
  Compilation *c = compilation_new(t, NULL);
  Diag d = {0};
  int ok = compile_source(c, src, ST_CODE, &d);
  if (!ok && !d.set) abort(); /* a failure must say why */
  if (ok) {
    StrBuf b = {0};
    for (int s = 0; s < ST_COUNT; s++) print_stage(&b, c, (Stage)s);
    sb_free(&b);
  }
  compilation_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = '\0';
  compile_for(TARGET_CPU, src);
  compile_for(TARGET_CUDA, src);
  free(src);
  return 0;
}
