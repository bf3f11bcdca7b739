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
