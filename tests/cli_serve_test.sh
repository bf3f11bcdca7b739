#!/usr/bin/env bash
# lathe serve: the OpenAI-compatible server on the default model (CPU, ASan build), driven with curl, the
# stdlib checks of tests/serve_check.py and, when PyPI is reachable, the official `openai` client
# (tests/serve_openai_check.py, in a venv under build/). Small max_tokens keep it quick under ASan.
set -u
source "$(dirname "$0")/cli_lib.sh"

expect serve_help 0 '--max-seqs' -- serve --help
expect_error serve_bad_port 'port' -- serve --port 70000
if [ ! -f "$DM" ]; then
  skip serve "the default model is not installed (make model)"
  exit 0
fi
expect_error serve_bad_host 'cannot resolve --host' -- serve "$DM" --host no.such.host.invalid --port 0
expect_error serve_no_model 'cannot open model' -- serve "$tmp/none.gguf" --port 0

# start_server LOG ARGS...: starts lathe serve on a free port; sets SPID and PORT once /health says 200.
start_server() {
  local log=$1; shift
  : >"$log"
  "$LATHE" serve "$DM" --port 0 "$@" 2>"$log" &
  SPID=$!
  PORT=
  for _ in $(seq 600); do
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
    [ -n "$PORT" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ] && return 0
    kill -0 "$SPID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# stop_server NAME SIGNAL LOG: the server exits 0 on the signal, with no sanitizer report.
stop_server() {
  kill "-$2" "$SPID"
  wait "$SPID"; local rc=$?
  if grep -q -E 'Sanitizer|runtime error' "$3"; then fail "$1" "sanitizer report: $(grep -m3 -E 'ERROR|runtime error|#[0-4] ' "$3")"
  elif [ "$rc" -ne 0 ]; then fail "$1" "exit $rc after SIG$2: $(tail -3 "$3")"
  else pass "$1"; fi
}

prompt="The capital of France is"
"$LATHE" generate "$DM" --greedy -n 6 --json -q -p "$prompt" >"$tmp/gen.json" 2>"$tmp/gen.err" &
gpid=$!
if ! start_server "$tmp/a.log" --max-seqs 8 --max-body 4096 --ctx 256; then
  fail serve_starts "no healthy server: $(tail -3 "$tmp/a.log")"
  kill "$SPID" 2>/dev/null
  exit 0
fi
pass serve_starts
grep -q 'listening on http://127.0.0.1:' "$tmp/a.log" && pass serve_listening_line || fail serve_listening_line "$(cat "$tmp/a.log")"
wait "$gpid" || fail generate_reference "$(cat "$tmp/gen.err")"
url="http://127.0.0.1:$PORT"
expect_error serve_port_in_use "cannot listen on 127.0.0.1 port $PORT" -- serve "$DM" --port "$PORT"

# curl, as the README shows it
out=$(curl -s "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "stream": true}')
echo "$out" | grep -q '^data: \[DONE\]$' && echo "$out" | grep -q '"chat.completion.chunk"' && pass serve_curl_stream \
  || fail serve_curl_stream "$out"

python3 tests/serve_check.py "$PORT" main "$tmp/gen.json"

# the official openai client, from PyPI into a venv under build/ (skipped when PyPI is unreachable)
venv=build/venv-openai
if ! "$venv/bin/python" -c 'import openai' 2>/dev/null; then
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check openai; } >"$tmp/pip.log" 2>&1
fi
if "$venv/bin/python" -c 'import openai' 2>/dev/null; then
  model=$(basename "$DM" .gguf)
  "$venv/bin/python" tests/serve_openai_check.py "$PORT" "$model" "$tmp/gen.json"
  "$venv/bin/python" tests/serve_openai_extra.py "$PORT" "$model"
else
  skip serve_openai "cannot install the PyPI openai package: $(tail -1 "$tmp/pip.log")"
fi

# one log line per request: method, path, status, tokens, latency
grep -q -E '^lathe: POST /v1/completions 200, prompt [0-9]+ tokens, generated [0-9]+, [0-9.]+ ms$' "$tmp/a.log" \
  && grep -q -E '^lathe: GET /v1/nothing 404' "$tmp/a.log" && grep -q -E '^lathe: POST /v1/completions 499' "$tmp/a.log" \
  && pass serve_request_log || fail serve_request_log "$(grep -v '^lathe: POST' "$tmp/a.log" | tail -5)"

# SIGTERM while a request runs: it finishes (within --drain-s), then the server exits 0
curl -s "$url/v1/completions" -d '{"prompt": "Hello", "max_tokens": 3, "temperature": 0}' >"$tmp/drain.json" &
cpid=$!
for _ in $(seq 100); do grep -q 'requests in flight' "$tmp/a.log" && break; \
  [ "$(curl -s "$url/metrics" | sed -n 's/^lathe_running_sequences //p')" = 1 ] && break; sleep 0.05; done
stop_server serve_sigterm_exit_0 TERM "$tmp/a.log"
wait "$cpid"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j["choices"][0]["finish_reason"] != "length")' \
  "$tmp/drain.json" 2>/dev/null && pass serve_drain_finishes || fail serve_drain_finishes "$(head -c 300 "$tmp/drain.json")"

# --api-key and a full queue (--max-queue 1)
key=s3cret-key
if start_server "$tmp/b.log" --api-key "$key" --max-queue 1 --max-seqs 2; then
  python3 tests/serve_check.py "$PORT" auth "$key"
  if "$venv/bin/python" -c 'import openai' 2>/dev/null; then
    "$venv/bin/python" - "$PORT" "$key" <<'EOF'
import sys, openai
port, key = sys.argv[1], sys.argv[2]
try:
    openai.OpenAI(base_url="http://127.0.0.1:%s/v1" % port, api_key="wrong", max_retries=0).models.list()
    print("FAIL openai_auth: a wrong key was accepted")
except openai.AuthenticationError as e:
    print("ok openai_auth" if e.status_code == 401 else "FAIL openai_auth: %s" % e)
ids = [m.id for m in openai.OpenAI(base_url="http://127.0.0.1:%s/v1" % port, api_key=key).models.list()]
print("ok openai_auth_key" if len(ids) == 1 else "FAIL openai_auth_key: %s" % ids)
EOF
  fi
  stop_server serve_sigint_exit_0 INT "$tmp/b.log"
else
  fail serve_api_key_starts "$(tail -3 "$tmp/b.log")"
fi
