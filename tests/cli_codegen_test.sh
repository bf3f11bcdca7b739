#!/usr/bin/env bash
# Code stage through the CLI: a program whose names are the generated code's own (issue 13).
set -u
source "$(dirname "$0")/cli_lib.sh"

lt_prog="lt_M: f32[seq,256]; w: bf16[512,256]; y = linear(lt_M, w)"
expect names_lt_run_check 0 "check y: .* ok" -- run -e "$lt_prog" --check --dim seq=37
expect names_lt_cuda_param 0 "const float \*__restrict__ u_lt_M" -- compile -e "$lt_prog" --ir code --target cuda
expect names_lt_c_param 0 "const float \*restrict u_lt_M = " -- compile -e "$lt_prog" --ir code --target cpu
