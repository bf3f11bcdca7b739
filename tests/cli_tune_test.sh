#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# lathe tune and the tuning database: schedule spaces, tuning a program on the CPU, the database commands,
# and compiles that take the measured schedules.
export LATHE_CACHE_DIR="$tmp/cache"
P='x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)'

expect candidates_cpu 0 'candidates linear_0: [0-9]+' -- compile -e "$P" --ir tile --candidates
expect candidates_default_first 0 '  default red=serial threads=1 vec=1 omp=0 rows=4 axis=0' -- compile -e "$P" --ir tile --candidates
expect candidates_cuda_gemm 0 'mma=2 flash=0 decode=0 dfill=0 fill=264 lib=1' -- compile -e 'x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)' --ir tile --candidates --target cuda
expect_error candidates_needs_tile '--candidates needs --ir tile' -- compile -e "$P" --ir code --candidates
