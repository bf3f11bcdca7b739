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
expect int_literal_min_literal 0 '^y: i64\[1\] = \[-9223372036854775808\]$' \
  -- run -e 'x: i64[1]; y = x * 0 + -9223372036854775808' --target cpu
expect_error int_literal_2p63 "^lathe: <-e>:1:24: error: integer literal '9223372036854775808' is too large" \
  -- compile -e 'x: i64[1]; y = x * 0 + 9223372036854775808'
expect_error int_literal_i32 '^lathe: <-e>:1:24: error: integer literal 3000000000 does not fit the i32 operand of add' \
  -- run -e 'x: i32[2]; y = x * 0 + 3000000000'
expect_error int_literal_i32_left '^lathe: <-e>:1:16: error: integer literal -2147483649 does not fit the i32 operand of mul' \
  -- compile -e 'x: i32[2]; y = -2147483649 * x'
expect int_literal_i32_edge 0 '^y: i32\[2\] = \[-2147483648, -2147483648\]$' \
  -- run -e 'x: i32[2]; y = x * 0 + -2147483648' --target cpu

# ---- float -> integer casts saturate (NaN -> 0), the same in the kernel and the reference ----
expect cast_saturate_i32_hi 0 '^y: i32\[2\] = \[2147483647, 2147483647\]$' -- run -e 'x: f32[2]; y = cast(x * 0 + 1e30, i32)' --target cpu
expect cast_saturate_i32_lo 0 '^y: i32\[2\] = \[-2147483648, -2147483648\]$' -- run -e 'x: f32[2]; y = cast(x * 0 - 3e9, i32)' --target cpu
expect cast_saturate_i64_hi 0 '^y: i64\[2\] = \[9223372036854775807, 9223372036854775807\]$' -- run -e 'x: f32[2]; y = cast(x * 0 + 1e30, i64)' --target cpu
expect cast_nan_to_zero 0 '^y: i32\[2\] = \[0, 0\]$' -- run -e 'x: f32[2]; y = cast(sqrt(x * 0 - 1.0), i32)' --target cpu
expect cast_saturate_check 0 'check y: max relative error 0 .*ok' -- run -e 'x: f32[64]; y = cast(x * 1e30, i32)' --target cpu --check
expect cast_saturate_check_bf16 0 'check y: max relative error 0 .*ok' -- run -e 'x: bf16[64]; y = cast(x * 1e30, i64)' --target cpu --check

# ---- argmax over an empty axis and attention without keys are errors, at run time, with a position ----
expect_error argmax_empty_axis '^lathe: <-e>:1:19: error: argmax: axis 1 is empty at k=0' \
  -- run -e 'x: f32[4, k]; y = argmax(x, -1)' --dim k=0 --target cpu
expect_error attention_no_keys '^lathe: <-e>:1:56: error: attention: no keys' \
  -- run -e 'q: f32[1,2,3,8]; k: f32[1,2,t,8]; v: f32[1,2,t,8]; y = attention(q, k, v)' --dim t=0 --target cpu --check
expect argmax_nonempty 0 'ok' -- run -e 'x: f32[4, k]; y = argmax(x, -1)' --dim k=3 --target cpu --check

# ---- sizes that overflow are errors (compile time for constants, run time for symbols) ----
expect_error numel_overflow_const '^lathe: <-e>:1:1: error: input .x.: f32\[4294967296,4294967296\] has more than 2\^56 elements' \
  -- run -e 'x: f32[4294967296, 4294967296]; y = exp(x)' --check
expect_error numel_overflow_broadcast '^lathe: <-e>:1:59: error: add: the result f32\[1099511627776,1099511627776\] has more' \
  -- compile -e 'x: f32[1099511627776, 1]; w: f32[1, 1099511627776]; y = x + w'
expect_error numel_overflow_sym '^lathe: <-e>:1:1: error: input .x.: f32\[seq,seq\] has more than 2\^56 elements at seq=4294967296' \
  -- run -e 'x: f32[seq, seq]; y = exp(x)' --dim seq=4294967296 --check
expect_error numel_overflow_sym_wrap '^lathe: <-e>:1:1: error: input .x.: .* at seq=4294967296' \
  -- run -e 'x: f32[seq, seq, seq]; y = exp(x)' --dim seq=4294967296
expect_error numel_overflow_intermediate 'error: buffer .* would have more than 2\^56 elements at these sizes' \
  -- run -e 'q: f32[1,1,s,2]; k: f32[1,1,s,2]; v: f32[1,1,s,2]; y = attention(q, k, v)' --dim s=1073741824 --target cpu
expect_error numel_overflow_view '^lathe: <-e>:1:80: error: attention: an intermediate .* has more than 2\^56 elements' \
  -- compile -e 'q: f32[1,1,536870912,2]; k: f32[1,1,536870912,2]; v: f32[1,1,536870912,2]; y = attention(q, k, v)'
