#!/usr/bin/env bash
# Front end and reference edge cases (issue 14): errors with positions, exact integer literals,
# saturating casts, empty reductions, size overflow.
set -u
source "$(dirname "$0")/cli_lib.sh"
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$tmp/cache}

# ---- a cache updated in place has no other reader; the error says where ----
expect_error cache_read_after_write '^lathe: <-e>:1:65: error: add: the cache .kc. is updated in place by the cache_write at line 1, column 32' \
  -- compile -e 'kc: f32[4,8]; x: f32[1,8]; y = cache_write(kc, x, 0, 1); z = kc + 1'
expect_error cache_read_before_write '^lathe: <-e>:1:44: error: cache_write: the cache .kc. is also read by the add at line 1, column 35' \
  -- compile -e 'kc: f32[4,8]; x: f32[1,8]; z = kc + 1; y = cache_write(kc, x, 0, 1)'
expect_error cache_returned '^lathe: <-e>:1:32: error: cache_write: the cache .kc. is read or written elsewhere' \
  -- compile -e 'kc: f32[4,8]; x: f32[1,8]; y = cache_write(kc, x, 0, 1); return y, kc'

# ---- integer literals are exact 64-bit integers; one that does not fit its dtype is an error ----
expect int_literal_max 0 '^y: i64\[2\] = \[9223372036854775807, 9223372036854775807\]$' \
  -- run -e 'x: i64[2]; y = x * 0 + 9223372036854775807' --target cpu
expect int_literal_2p53_run 0 '^y: i64\[2\] = \[9007199254740993, 9007199254740993\]$' \
  -- run -e 'x: i64[2]; y = x * 0 + 9007199254740993' --target cpu
expect int_literal_2p53_graph 0 'y = add\(x, 9007199254740993\) : i64\[2\]' \
  -- compile -e 'x: i64[2]; y = x + 9007199254740993' --ir graph
expect int_literal_2p53_code 0 '9007199254740993LL' -- compile -e 'x: i64[2]; y = x + 9007199254740993' --target cpu --ir code
expect int_literal_min 0 '^y: i64\[1\] = \[-9223372036854775808\]$' \
  -- run -e 'x: i64[1]; y = x * 0 - 9223372036854775807 - 1' --target cpu
expect_error int_literal_i32 '^lathe: <-e>:1:24: error: integer literal 3000000000 does not fit the i32 operand of add' \
  -- run -e 'x: i32[2]; y = x * 0 + 3000000000'
expect_error int_literal_i32_left '^lathe: <-e>:1:16: error: integer literal -2147483649 does not fit the i32 operand of mul' \
  -- compile -e 'x: i32[2]; y = -2147483649 * x'
expect int_literal_i32_edge 0 '^y: i32\[2\] = \[-2147483648, -2147483648\]$' \
  -- run -e 'x: i32[2]; y = x * 0 + -2147483648' --target cpu
