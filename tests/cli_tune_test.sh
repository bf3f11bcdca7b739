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

# ---- lathe db ----
expect db_stats_empty 0 'measurements: 0' -- db stats
expect db_stats_path 0 "database $tmp/cache/tune.db \(schema 1\)" -- db stats
expect db_export 0 'exported 0 measurements' -- db export "$tmp/empty.json"
expect db_import 0 'imported 0 measurements' -- db import "$tmp/empty.json"
expect db_prune 0 'removed 0 measurements of other lathe versions' -- db prune
expect_error db_no_action 'lathe db needs an action' -- db
expect_error db_export_needs_file 'lathe db export needs a FILE' -- db export
echo "{\"schema\": 2}" >"$tmp/v2.json"
expect_error db_import_bad "not a lathe tune export of schema 1" -- db import "$tmp/v2.json"
printf 'garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage' >"$tmp/bad.db"
expect_error db_corrupt 'tune database .*bad.db.*not a database' -- db stats --db "$tmp/bad.db"
