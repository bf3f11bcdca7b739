/* The library GEMM algorithms measured on a device, kept across runs in the cache directory, so a shape is
 * measured once per device and library version rather than once per process. One text line per choice:
 * "m n k" and the algorithm's 64 opaque bytes as 16 hex digits x 8. Lines are appended whole (one write with
 * O_APPEND), so concurrent processes may share the file; a line that does not parse is skipped. */
#ifndef LATHE_GEMM_ALGOS_H
#define LATHE_GEMM_ALGOS_H
#include <stddef.h>
#include <stdint.h>

typedef struct GemmAlgoRecord {
  int64_t m, n, k;
  uint64_t algo[8];
} GemmAlgoRecord;

/* The file for a device and library: <cache>/gemm-algos-<hash of the identity>.txt; 0 without a cache
 * directory. */
int gemm_algos_path(char *out, size_t n, const char *identity);
/* Up to cap records of path into recs (later lines of a shape after earlier ones); how many. A missing file is
 * 0 records; *bad counts the lines skipped as malformed. */
int gemm_algos_load(const char *path, GemmAlgoRecord *recs, int cap, int *bad);
/* Appends one record; 0 when the file cannot be written. */
int gemm_algos_append(const char *path, const GemmAlgoRecord *r);
#endif
