# Shared helpers of the CLI test scripts (tests/cli*_test.sh): each script sources this file, then
# prints "ok NAME" or "FAIL NAME: why" per test; scripts/run-tests.sh counts those lines.
# Sets LATHE (the AddressSanitizer build unless given), the sanitizer options, $tmp (removed on exit) and
# LATHE_CACHE_DIR.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LATHE=${LATHE:-build/asan/lathe}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# A cache of this run's own unless given (make test gives one): a tuning database in the user's cache would
# change the schedules the tests expect.
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$tmp/cache}
# The default model, where `make model` put it (tests that need it skip without it).
DM=${LATHE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf}

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

skip() { echo "ok $1 # skipped: $2"; }

# run_lathe NAME ARGS...: runs lathe with stdin from $tmp/in (or /dev/null) into $tmp/out and $tmp/err;
# returns 1 after printing FAIL on a sanitizer report or a non-zero exit.
run_lathe() {
  local name=$1; shift
  local in=/dev/null; [ -f "$tmp/in" ] && in="$tmp/in"
  "$LATHE" "$@" <"$in" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then fail "$name" "sanitizer report: $(grep -m3 -E 'ERROR|runtime error|#[0-4] ' "$tmp/err")"; return 1; fi
  if [ "$rc" -ne 0 ]; then fail "$name" "exit $rc; stderr: $(tr '\r' '\n' <"$tmp/err" | tail -3)"; return 1; fi
  return 0
}

# json_ok NAME PYTHON_CONDITION: $tmp/out must be one JSON object `j` for which the condition holds.
json_ok() {
  local name=$1 cond=$2
  if ! python3 -c 'import json,sys; json.load(sys.stdin)' <"$tmp/out" 2>/dev/null; then fail "$name" "not valid JSON: $(head -c 300 "$tmp/out")"; return; fi
  if python3 -c "import json,sys; j=json.load(sys.stdin); sys.exit(0 if ($cond) else 1)" <"$tmp/out"; then pass "$name"
  else fail "$name" "JSON fails ($cond): $(head -c 400 "$tmp/out")"; fi
}

