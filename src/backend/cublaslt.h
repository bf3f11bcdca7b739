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
/* c[m][n] = sum_k a[m][k] * w[n][k] (+ add[m][n] when add is not NULL): a, w bf16 row-major, c and add f32
 * row-major, on `stream` (a CUstream; NULL: the default stream), f32 accumulation, with candidate algorithm
 * `which` of the shape (-1: the chosen one). */
int cublaslt_gemm(CublasLt *lt, int64_t m, int64_t n, int64_t k, const void *a, const void *w, const void *add, void *c,
                  int which, void *stream, Diag *d);
/* The shape's candidate algorithms, best first by the library's heuristic: how many (0 with a diag
 * when there is none), and in *chosen the one a caller chose after measuring them (-1: none yet,
 * the heuristic's first runs). */
#define CUBLASLT_CANDIDATES 16
int cublaslt_candidates(CublasLt *lt, int64_t m, int64_t n, int64_t k, int *chosen, Diag *d);
void cublaslt_choose(CublasLt *lt, int64_t m, int64_t n, int64_t k, int which);
/* A choice measured before (another process's, gemm_algos.h): a new shape (m, n, k) takes it when it is among its
 * candidates, a new shape of its row-count bucket likewise. */
void cublaslt_remember(CublasLt *lt, int64_t m, int64_t n, int64_t k, const uint64_t algo[8]);
/* The measured choice of shape (m, n, k) as its 64 bytes; 0 when there is none. */
int cublaslt_chosen_algo(CublasLt *lt, int64_t m, int64_t n, int64_t k, uint64_t algo[8]);
/* cublasLtGetVersion(), or 0. */
size_t cublaslt_version(const CublasLt *lt);
void cublaslt_close(CublasLt *lt);
#endif
