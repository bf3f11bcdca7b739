/* Private to the CUDA backend: cuBLASLt, loaded at run time like libcuda (declared here by hand, so
 * lathe builds and starts without it), for the library form of tensor-core GEMMs (kernel.h KGemmLib). */
#ifndef LATHE_CUBLASLT_H
#define LATHE_CUBLASLT_H
#include <stddef.h>
#include <stdint.h>
#include "../base/diag.h"

typedef struct CublasLt CublasLt;

/* Loads libcublasLt and creates a handle that uses `workspace` (device memory of `bytes`). NULL with
 * a diag saying why when the library is missing or refuses. */
CublasLt *cublaslt_open(void *workspace, size_t bytes, Diag *d);
/* c[m][n] = sum_k a[m][k] * w[n][k] (+ c[m][n] when accumulate): a, w bf16 row-major, c f32
 * row-major, on the default stream, f32 accumulation. */
int cublaslt_gemm(CublasLt *lt, int64_t m, int64_t n, int64_t k, const void *a, const void *w, void *c, int accumulate,
                  Diag *d);
void cublaslt_close(CublasLt *lt);
#endif
