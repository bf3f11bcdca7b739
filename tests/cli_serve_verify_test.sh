#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# bench/serve_load.py --verify finds every kind of wrong answer: a fake server (tests/serve_verify_check.py) answers
# each request with a function of it, and then breaks that on purpose in one way per run; the check must count the
# fault as its kind and exit 1, and pass the server that behaves (a last-bit logprob drift is reported, not failed).
# The real server under --verify runs in tests/cli_serve_bench_test.sh (serve_h200.sh --quick --long 3).
verify_fault() { # NAME FAULT PYTHON_CONDITION_ON_j (the summary, with j["exit"])
  python3 tests/serve_verify_check.py "$2" >"$tmp/v.txt" 2>&1
  if tail -1 "$tmp/v.txt" | python3 -c "import json, sys; j = json.load(sys.stdin); sys.exit(0 if ($3) else 1)" 2>/dev/null
  then pass "$1"; else fail "$1" "$(tail -c 700 "$tmp/v.txt")"; fi
}
ok='j["lost"] == j["truncated"] == j["mixed"] == j["mismatched"] == 0'
verify_fault verify_good none "j['exit'] == 0 and j['requests'] == 120 and j['drift'] == 0 and $ok and 0 < j['verify']['streamed'] < 120"
verify_fault verify_mixed mixed "j['exit'] == 1 and j['mixed'] > 5 and j['lost'] == 0 and j['mismatched'] == 0 and \"got entry\" in j['first_errors'][0]"
verify_fault verify_spliced spliced "j['exit'] == 1 and j['mixed'] > 5 and any('logprobs contains the start of entry' in e for e in j['first_errors'])"
verify_fault verify_truncated truncated "j['exit'] == 1 and j['truncated'] == 1 and j['errors'] == 1"
verify_fault verify_mismatch mismatch "j['exit'] == 1 and j['mismatched'] == 1 and j['mismatched_later'] == 1 and j['errors'] == 1 and 'logprobs differ' in j['first_errors'][0]"
verify_fault verify_mismatch_first mismatch_first "j['exit'] == 1 and j['mismatched'] == 1 and j['mismatched_later'] == 0 and j['errors'] == 1 and 'from token 0' in j['first_errors'][0]"
verify_fault verify_drift drift "j['exit'] == 0 and j['drift'] == 1 and j['errors'] == 0 and 'differ by up to' in j['first_drifts'][0]"
verify_fault verify_lost lost "j['exit'] == 1 and j['lost'] == 1 and j['errors'] == 1"
