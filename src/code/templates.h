/* Kernel templates: CUDA source kept as src/code/templates/NAME.cuh, embedded in the binary at build time
 * (Makefile, scripts/embed.c) as lt_embed_NAME, each text NUL-terminated. A template holds the fixed
 * part of a kernel; the renderer writes what varies (constants as #defines, expressions as small
 * __device__ functions) before it. */
#ifndef LATHE_TEMPLATES_H
#define LATHE_TEMPLATES_H
#include <stddef.h>

struct EmbeddedFile {
  const char *name, *text; /* "NAME.cuh", its bytes */
  size_t size;
};
/* Every template, ending with {0}. */
extern const struct EmbeddedFile lt_embedded[];

extern const char lt_embed_preamble[];     /* CUDA C: helpers every kernel may call (f16/bf16, mma, cp.async) */
extern const char lt_embed_mma[];          /* tensor-core GEMM (render_mma.c) */
extern const char lt_embed_flash[];        /* flash attention on tensor cores (render_flash.c) */
extern const char lt_embed_flash_decode[]; /* flash-decoding (render_flash_decode.c) */
extern const char lt_embed_qgemv[];        /* the quantized GEMV on integer tensor cores (render_qgemv.c) */
extern const char lt_embed_sampler[];      /* the device sampler (generate/sampler_device.c) */
#endif
