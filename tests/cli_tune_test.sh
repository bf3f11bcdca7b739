#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# lathe tune and the tuning database: schedule spaces, tuning a program on the CPU, the database commands,
# and compiles that take the measured schedules.
export LATHE_CACHE_DIR="$tmp/cache"
P='x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)'

expect compile_without_db_no_origin 0 'rows=8\(i0\) rows-omp-if-large => loop \+ variant rows$' -- compile -e "$P" --ir tile
if [ -e "$tmp/cache/tune.db" ]; then fail compile_makes_no_db "a compile created tune.db"; else pass compile_makes_no_db; fi
expect candidates_cpu 0 'candidates linear_0: [0-9]+' -- compile -e "$P" --ir tile --candidates
expect candidates_default_first 0 '  default red=serial threads=1 vec=1 omp=2 rows=8 axis=0' -- compile -e "$P" --ir tile --candidates
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

# ---- lathe tune on the CPU, and compiles that take what it measured ----
if run_lathe tune_cpu tune -e "$P" --dim seq=8 --max-candidates 4 --repeats 3 --target cpu; then
  if grep -q -E '^linear_0 +1 +4/[0-9]+ ' "$tmp/out" && grep -q -E '^  best: red=serial ' "$tmp/out" &&
     grep -q -E '^program: default [0-9.]+ us, tuned [0-9.]+ us' "$tmp/out"; then pass tune_cpu
  else fail tune_cpu "table: $(head -c 400 "$tmp/out")"; fi
  if grep -q -E '^lathe: tune 1/1 linear_0 \(x1\): 4/[0-9]+ tried, best [0-9.]+ us \(default [0-9.]+ us\)$' "$tmp/err"; then
    pass tune_progress
  else fail tune_progress "stderr: $(head -c 400 "$tmp/err")"; fi
fi
expect tune_db_kept 0 'measurements: [4-9]' -- db stats
expect compile_tuned_origin 0 '\[default: measured only at seq=8' -- compile -e "$P" --ir tile
expect compile_tuned_at_size 0 '\[measured: [0-9.]+ us, its kernels alone, [0-9]+ samples, at seq=8\]' -- compile -e "$P" --ir tile --dim seq=8
expect compile_tuned_bucket 0 '\[(default|prior): .*no measurement' -- compile -e "$P" --ir tile --dim seq=4096
expect compile_no_tune 0 'variant rows$' -- compile -e "$P" --ir tile --no-tune
expect run_tuned_check 0 'check y: .* ok' -- run -e "$P" --dim seq=8 --check
expect tune_budget 0 'stopped by|budget' -- tune -e "$P" --dim seq=8 --budget-s 0.001 --repeats 1
expect_error tune_needs_dims "symbolic dimension 'seq' has no value; pass --dim seq=N" -- tune -e "$P"
expect_error tune_config_needs_random "--config smollm2-135m tunes with random weights: add --random-weights" -- tune --config smollm2-135m
if [ -e /dev/nvidia0 ]; then skip tune_cuda_no_gpu "a GPU is present"
else expect_error tune_cuda_no_gpu 'CUDA|cuda|GPU' -- tune -e "$P" --dim seq=8 --target cuda; fi
# a damaged database: compiles warn and go on with the defaults; tune refuses it
printf 'garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage' >"$tmp/cache/tune.db"
rm -f "$tmp/cache/tune.db-wal" "$tmp/cache/tune.db-shm"
expect compile_corrupt_db_warns 0 'lathe: warning: tune database .*not a database: compiling with the default schedules' -- compile -e "$P" --ir tile
expect compile_corrupt_db_defaults 0 'variant rows$' -- compile -e "$P" --ir tile
expect_error tune_corrupt_db 'not a database' -- tune -e "$P" --dim seq=8
# the model commands take the database's schedules too, unless --no-tune
expect generate_no_tune_flag 0 '--no-tune +the default schedules, ignoring the tuning database' -- generate --help
expect bench_no_tune_flag 0 '--no-tune +the default schedules, ignoring the tuning database' -- bench --help
