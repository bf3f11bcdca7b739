#!/usr/bin/env bash
# lathe serve under load (the release build: the sanitized one is too slow for 32 clients on the CI's two
# cores, and ASan's quarantine of freed memory would read as RSS growth): 32 concurrent streaming clients get
# what they get alone, a soak of SOAK_S seconds (20 here; `make soak` runs 120) with 16 clients and random
# lengths has no error and a flat VmRSS, and a stream that the drain cuts off ends with an error event.
set -u
source "$(dirname "$0")/cli_lib.sh"
REL=${LATHE_RELEASE:-build/lathe}
if [ ! -f "$DM" ]; then
  skip serve_load "the default model is not installed (make model)"
  exit 0
fi
log=$tmp/load.log
"$REL" serve "$DM" --port 0 --max-seqs 32 --max-queue 64 --ctx 256 --drain-s 0.3 2>"$log" &
SPID=$!
PORT=
for _ in $(seq 600); do
  PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
  [ -n "$PORT" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ] && break
  kill -0 "$SPID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$PORT" ] || ! kill -0 "$SPID" 2>/dev/null; then
  fail serve_load_starts "$(tail -3 "$log")"
  exit 0
fi
t0=$(date +%s); python3 tests/serve_load_check.py "$PORT" clients32; echo "# clients32: $(( $(date +%s) - t0 )) s"
# the same on the default (not batch-invariant) server through bench/serve_load.py --verify: text prompts drawn
# from a pool of 8 (greedy and seeded), streamed or whole, each answer's text, finish_reason and token count
# exactly its request's answer alone
if python3 bench/serve_load.py --port "$PORT" --verify --pool 8 --clients 8 --requests 24 --prompt-len 2:10 \
    --output-len 2:8 --json "$tmp/verify.json" >"$tmp/verify.txt" 2>&1 && python3 - "$tmp/verify.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
v = j["verify"]
assert v["prompts"] == "text" and not v["logprobs"] and v["reference_errors"] == 0 and j["requests"] == 24, j
assert j["lost"] == j["truncated"] == j["mixed"] == j["mismatched"] == j["errors"] == 0, j
assert 0 < v["streamed"] < 24, v
PY
then pass serve_load_verify_default; else fail serve_load_verify_default "$(tail -5 "$tmp/verify.txt")"; fi
python3 tests/serve_load_check.py "$PORT" soak "$SPID" "${SOAK_S:-20}"

# a failure after a stream started: the drain (0.3 s) runs out and cancels it; the client gets OpenAI's error
# object as an event, then [DONE], never a silently truncated stream
curl -sN "http://127.0.0.1:$PORT/v1/completions" \
  -d '{"prompt": "Tell me a long story", "max_tokens": 200, "ignore_eos": true, "stream": true}' >"$tmp/cut.txt" &
cpid=$!
for _ in $(seq 300); do [ "$(grep -c '"text"' "$tmp/cut.txt")" -ge 2 ] && break; sleep 0.05; done
kill -TERM "$SPID"
wait "$SPID"; rc=$?
wait "$cpid"
last=$(grep '^data: ' "$tmp/cut.txt" | tail -2)
if [ "$rc" -ne 0 ]; then fail serve_load_drain_exit "exit $rc: $(tail -3 "$log")"
elif echo "$last" | head -1 | grep -q '"error":{"message":"the request was cancelled.*"code":"cancelled"' \
     && [ "$(echo "$last" | tail -1)" = "data: [DONE]" ] && grep -q '"text"' "$tmp/cut.txt"; then
  pass serve_stream_error_event
else
  fail serve_stream_error_event "$(tail -c 600 "$tmp/cut.txt")"
fi
