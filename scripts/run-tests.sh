#!/usr/bin/env bash
# Runs each cmocka test binary given, then every shell-level CLI test script (tests/cli*_test.sh,
# each sourcing tests/cli_lib.sh), and prints one summary line.
set -u
passed=0; failed=0; failed_bins=()
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  echo "$out" | grep -E '^\[  (FAILED|ERROR)|^\[  PASSED' | sed "s|^|$(basename "$t"): |"
  p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  p=${p:-0}; f=${f:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "$out" | tail -20; fi
  [ "$f" -ne 0 ] && { failed_bins+=("$(basename "$t")"); echo "$out" | grep -B2 -A8 -E 'FAILED|ERROR|Assert|runtime error|Sanitizer' | head -60; }
  passed=$((passed + p)); failed=$((failed + f))
done
for script in tests/cli*_test.sh; do
  [ -x "$script" ] || continue
  name=$(basename "$script")
  out=$("$script" 2>&1); rc=$?
  echo "$out" | grep -E '^(ok|FAIL)' | grep FAIL
  p=$(echo "$out" | grep -c '^ok'); f=$(echo "$out" | grep -c '^FAIL')
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  [ "$f" -ne 0 ] && failed_bins+=("$name")
  echo "$name: $p passed, $f failed"
  passed=$((passed + p)); failed=$((failed + f))
done
[ ${#failed_bins[@]} -gt 0 ] && echo "failing: ${failed_bins[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
