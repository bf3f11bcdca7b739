#!/usr/bin/env bash
# End-to-end tests of the `lathe` command line (the AddressSanitizer/UBSan build): what a user types,
# the exit codes, and one clear error line for bad input. Prints "ok NAME" or "FAIL NAME" per test.
set -u
cd "$(dirname "$0")/.."
LATHE=${LATHE:-build/asan/lathe}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

pass() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }

# expect NAME EXPECTED_EXIT GREP_PATTERN_IN_OUTPUT -- ARGS...
expect() {
  local name=$1 code=$2 pat=$3; shift 4
  "$LATHE" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then fail "$name" "sanitizer report: $(head -5 "$tmp/err")"; return; fi
  if [ "$rc" -ne "$code" ]; then fail "$name" "exit $rc, expected $code; stderr: $(head -3 "$tmp/err")"; return; fi
  if ! cat "$tmp/out" "$tmp/err" | grep -q -E -- "$pat"; then fail "$name" "output lacks /$pat/: $(head -c 400 "$tmp/out" "$tmp/err")"; return; fi
  pass "$name"
}

# Errors must be exactly one line on stderr, with nothing on stdout.
expect_error() {
  local name=$1 pat=$2; shift 3
  "$LATHE" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then fail "$name" "sanitizer report"; return; fi
  if [ "$rc" -ne 2 ]; then fail "$name" "exit $rc, expected 2"; return; fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -s "$tmp/out" ]; then fail "$name" "expected one error line, got: $(cat "$tmp/out" "$tmp/err" | head -5)"; return; fi
  if ! grep -q -E -- "$pat" "$tmp/err"; then fail "$name" "stderr lacks /$pat/: $(cat "$tmp/err")"; return; fi
  pass "$name"
}

P='x: f32[1,32,2048]; w: f32[2048]; y = rms_norm(x, w, 1e-6)'
for st in graph tensor loop tile kernel code; do
  expect "compile_ir_$st" 0 . -- compile -e "$P" --ir $st
done
expect compile_graph_text 0 'y = rms_norm\(x, w, eps=1e-0?6\) : f32\[1,32,2048\]' -- compile -e "$P" --ir graph
expect compile_cuda_global 0 '__global__' -- compile -e "$P" --ir code --target cuda
expect compile_c_entry 0 'void rms_norm_0\(void \*const \*bufs' -- compile -e "$P" --ir code --target cpu
printf '# a program in a file\nx: f32[4, 8]\nw: f32[8]\n\ny = softmax(x * w, -1)\n' >"$tmp/prog.lt"
expect compile_file 0 'for ' -- compile "$tmp/prog.lt" --ir loop
if "$LATHE" compile "$tmp/prog.lt" -o "$tmp/out.c" >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ] && grep -q 'void softmax_0' "$tmp/out.c"; then
  pass compile_out_file
else
  fail compile_out_file "no code in the -o file, or output on stdout"
fi
expect run_check 0 'check y: max relative error .* ok' -- run -e "$P" --target cpu --check
expect run_check_file 0 'ok' -- run "$tmp/prog.lt" --check
expect run_bench 0 'bench: 1 kernel, median [0-9.]+ ms' -- run -e "$P" --bench --iters 5 --warmup 1
expect run_print 0 'y: f32\[1,32,2048\] = \[' -- run -e "$P"
expect run_dim 0 'check y: .* ok' -- run -e 'x: f32[seq, 16]; y = softmax(x, -1)' --dim seq=7 --check
expect run_dim_multi 0 'ok' -- run -e 'q: f32[1,4,seq,8]; k: f32[1,2,kv,8]; v: f32[1,2,kv,8]; y = attention(q, k, v, true)' --dim seq=3 --dim kv=9 --check
expect help 0 'usage: lathe' -- --help

expect_error err_syntax '<-e>:1:[0-9]+: error' -- compile -e 'x: f32[4]; y = exp(x'
expect_error err_unknown_op "unknown op 'frobnicate'" -- compile -e 'x: f32[4]; y = frobnicate(x)'
expect_error err_unknown_dtype "unknown dtype 'f8'" -- compile -e 'x: f8[4]; y = exp(x)'
expect_error err_shape 'do not broadcast|broadcast' -- compile -e 'a: f32[2,3]; b: f32[4]; y = a + b'
expect_error err_matmul 'matmul' -- compile -e 'a: f32[2,3]; b: f32[4,5]; y = matmul(a, b)'
expect_error err_undefined "undefined name 'z'" -- compile -e 'x: f32[4]; y = x + z'
expect_error err_position '<-e>:2:' -- compile -e $'x: f32[4]\ny = exp(x) +'
expect_error err_missing_dim "seq" -- run -e 'x: f32[seq]; y = exp(x)'
expect_error err_bad_dim "no symbolic dimension named 'foo'" -- run -e 'x: f32[seq]; y = exp(x)' --dim seq=3 --dim foo=2
expect_error err_bad_dim_value "--dim expects NAME=N" -- run -e 'x: f32[4]; y = exp(x)' --dim seq=abc
expect_error err_stage "unknown stage 'lop'" -- compile -e "$P" --ir lop
expect_error err_target "unknown target" -- compile -e "$P" --target tpu
expect_error err_no_file "cannot open" -- compile "$tmp/nonexistent.lt"
expect_error err_no_program "no program" -- compile --ir graph
expect_error err_command "unknown command" -- frobnicate
expect_error err_option "unknown or incomplete option" -- run -e "$P" --frob
expect_error err_no_output "no output" -- compile -e 'x: f32[4]'
head -c 3000 /dev/urandom >"$tmp/garbage.lt"
"$LATHE" compile "$tmp/garbage.lt" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && ! grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then pass err_garbage_file; else fail err_garbage_file "exit $rc: $(head -3 "$tmp/err")"; fi

# The compile cache: a second run of the same program reuses the compiled object.
export LATHE_CACHE_DIR="$tmp/cache"
"$LATHE" run -e "$P" >/dev/null 2>&1
n1=$(ls "$LATHE_CACHE_DIR" | grep -c '\.so$')
"$LATHE" run -e "$P" >/dev/null 2>&1
n2=$(ls "$LATHE_CACHE_DIR" | grep -c '\.so$')
if [ "$n1" -eq 1 ] && [ "$n2" -eq 1 ]; then pass cache_reused; else fail cache_reused "objects after two runs: $n1, $n2"; fi
