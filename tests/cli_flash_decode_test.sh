#!/usr/bin/env bash
# Flash-decoding's 16-byte form in the batched CUDA step over a bf16 paged cache (issue 16), and lathe compile
# --kv-dtype, which prints that step as lathe bench --concurrency runs it.
set -u
source "$(dirname "$0")/cli_lib.sh"

# count NAME PATTERN WANT: $tmp/out has WANT lines matching PATTERN
count() {
  local got
  got=$(grep -c -E -- "$2" "$tmp/out")
  if [ "$got" -eq "$3" ]; then pass "$1"; else fail "$1" "$got lines match /$2/, expected $3"; fi
}

if run_lathe fd_bf16_code compile --config llama-3.2-1b --target cuda --kv-block 16 --kv-dtype bf16; then
  # one flash-decoding function for the 16 layers (code_dedupe), reading the bf16 pool 8 elements a load
  count fd_bf16_vec_call "lt_flash_decode_vec<64, 64, 4, 8LL, 1024, true, 1, 1>\(" 1
  count fd_bf16_pool "const unsigned short \*__restrict__ cache_k_0" 1
  count fd_bf16_bounds "__launch_bounds__\(128, 5\)" 1
fi
if LATHE_DECODE_VEC=0 run_lathe fd_bf16_scalar compile --config llama-3.2-1b --target cuda --kv-block 16 \
  --kv-dtype bf16; then
  count fd_bf16_rows_call "lt_flash_decode_rows<64, 64, 4, 8LL, 1024, true>\(" 1
  count fd_bf16_no_vec "lt_flash_decode_vec<64" 0
fi
if run_lathe fd_f32_default compile --config llama-3.2-1b --target cuda --kv-block 16; then
  count fd_f32_pool "const float \*__restrict__ cache_k_0" 1
  count fd_f32_vec_call "lt_flash_decode_vec<64, 64, 4, 8LL, 1024, true, 0, 0>\(" 1
fi
expect fd_kernel_print 0 "k and v 8 elements a load" -- compile --config llama-3.2-1b --target cuda --kv-block 16 \
  --kv-dtype bf16 --ir kernel
expect_error fd_kv_dtype_needs_block "needs --kv-block" -- compile --config llama-3.2-1b --kv-dtype bf16
expect_error fd_kv_dtype_bad "--kv-dtype expects f32 or bf16, got 'f16'" -- compile --config llama-3.2-1b \
  --kv-block 16 --kv-dtype f16
