/* Size arithmetic that reports overflow instead of wrapping: every product of sizes (element counts,
 * byte counts, strides, grid sizes) is formed with these, at compile time for constant sizes and at run
 * time once the symbols have values. */
#ifndef LATHE_CHECKED_H
#define LATHE_CHECKED_H
#include <stddef.h>
#include <stdint.h>

/* Largest element count of any tensor or buffer: far above any real one, low enough that an index
 * times an element size (at most 8 bytes) plus an offset cannot overflow int64. */
#define LT_MAX_NUMEL ((int64_t)1 << 56)

/* *r = a op b; 0 (and *r unspecified) when the exact result does not fit int64. */
static inline int ck_mul(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline int ck_add(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline int ck_sub(int64_t a, int64_t b, int64_t *r) { return !__builtin_sub_overflow(a, b, r); }

/* Product of n non-negative dims; 0 when it overflows or exceeds LT_MAX_NUMEL. */
static inline int ck_numel(int n, const int64_t *dims, int64_t *numel) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0) return 0;
    if (dims[i] == 0) p = 0; /* an empty tensor is empty whatever its other dims */
  }
  for (int i = 0; p && i < n; i++)
    if (!ck_mul(p, dims[i], &p)) return 0;
  *numel = p;
  return p <= LT_MAX_NUMEL;
}

/* numel * elem_size as a byte count; 0 when it exceeds LT_MAX_NUMEL elements. */
static inline int ck_bytes(int64_t numel, size_t elem_size, size_t *bytes) {
  if (numel < 0 || numel > LT_MAX_NUMEL) return 0;
  *bytes = (size_t)numel * elem_size;
  return 1;
}
#endif
