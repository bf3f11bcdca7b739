#!/usr/bin/env bash
# Code stage through the CLI: a program whose names are the generated code's own (issue 13).
set -u
source "$(dirname "$0")/cli_lib.sh"

lt_prog="lt_M: f32[seq,256]; w: bf16[512,256]; y = linear(lt_M, w)"
expect names_lt_run_check 0 "check y: .* ok" -- run -e "$lt_prog" --check --dim seq=37
expect names_lt_cuda_param 0 "const float \*__restrict__ u_lt_M" -- compile -e "$lt_prog" --ir code --target cuda
expect names_lt_c_param 0 "const float \*restrict u_lt_M = " -- compile -e "$lt_prog" --ir code --target cpu

# a norm's factor in a quantized linear's row cache: the tile's key is its first row alone (the factors follow from
# it, so they are computed only where the tile is filled), and the rows are still right
norm_prog="x: f32[seq,64]; g: f32[64]; w: q8_0[96,64]; y = linear(rms_norm(x, g, 1e-6), w)"
expect rowcache_key_row 0 'lt_qk0\[0\] == 0\.0 \|\| lt_qk0\[1\] != \(double\)row0\) \{' -- compile -e "$norm_prog" --ir code --target cpu
expect rowcache_key_check 0 "check y: .* ok" -- run -e "$norm_prog" --check --dim seq=37
