/* NVRTC, loaded at run time (libnvrtc.so*), so lathe starts without the CUDA toolkit. */
#ifndef LATHE_NVRTC_H
#define LATHE_NVRTC_H
#include <stddef.h>
#include "../base/diag.h"

/* 1 if libnvrtc could be loaded. */
int nvrtc_available(void);
/* Compiles CUDA C to a cubin for `arch` (e.g. "sm_90"). On success *cubin is malloc'ed (caller frees).
 * On failure the diag holds the first lines of NVRTC's log. */
int nvrtc_compile(const char *source, const char *arch, void **cubin, size_t *size, Diag *d);
#endif
