#!/usr/bin/env bash
# `lathe pull` and `lathe list` against a local stand-in for the Hugging Face Hub
# (tests/hub_fixture_server.py on 127.0.0.1): repositories and single GGUF files, redirects, resumed and
# restarted downloads, a wrong checksum, a gated model, and cached names used as MODEL.
set -u
source "$(dirname "$0")/cli_lib.sh"

export XDG_CACHE_HOME="$tmp/xdg" # the model cache under test: $XDG_CACHE_HOME/lathe/models
MODELS="$XDG_CACHE_HOME/lathe/models"
unset HF_TOKEN LATHE_MODEL
gguf_arg=()
[ -f "$DM" ] && gguf_arg=(--gguf "$DM")
python3 tests/hub_fixture_server.py --log "$tmp/hub.log" --lifetime 240 "${gguf_arg[@]}" >"$tmp/hub.port" &
hub_pid=$!
trap 'kill $hub_pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do grep -q port "$tmp/hub.port" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/^port //p' "$tmp/hub.port")
if [ -z "$port" ]; then
  fail pull_fixture_server "the fixture hub did not start"
  exit 0
fi
export LATHE_HF_ENDPOINT="http://127.0.0.1:$port"
FIX=tests/fixtures/models/llama

# A whole repository: the model's files (not the README), checked, with a manifest; printed path is MODEL.
if run_lathe pull_repo pull lathe-test/tiny-llama; then
  d="$MODELS/lathe-test/tiny-llama"
  if [ "$(cat "$tmp/out")" = "$d" ] && cmp -s "$d/model.safetensors" "$FIX/model.safetensors" &&
     cmp -s "$d/config.json" "$FIX/config.json" && [ -f "$d/.lathe-pull.json" ] && [ ! -e "$d/README.md" ] &&
     [ ! -e "$d/tiny.Q4_1.gguf" ] && ! ls "$d"/*.part >/dev/null 2>&1; then
    pass pull_repo
  else
    fail pull_repo "unexpected files: $(ls -a "$d") out=$(cat "$tmp/out")"
  fi
fi
# the LFS file went through the CDN redirect
if grep -q 'GET /cdn/lathe-test/tiny-llama/model.safetensors' "$tmp/hub.log"; then pass pull_follows_redirect
else fail pull_follows_redirect "no CDN request in the log"; fi

# Pulled again: nothing downloaded, every file reported complete.
: >"$tmp/hub.log"
if run_lathe pull_again pull lathe-test/tiny-llama; then
  if grep -q 'already complete' "$tmp/err" && ! grep -q '/resolve/\|/cdn/' "$tmp/hub.log"; then pass pull_again
  else fail pull_again "re-downloaded: $(cat "$tmp/hub.log")"; fi
fi

# The cached name works as MODEL and gives the same tokens as the directory itself.
ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('$FIX/expected.json'))['prompt_ids'])))")
if run_lathe generate_by_name generate lathe-test/tiny-llama --target cpu --prompt-tokens "$ids" --greedy --max-tokens 4 --ignore-eos --json; then
  cp "$tmp/out" "$tmp/by_name.json"
  if run_lathe generate_by_path generate "$FIX" --target cpu --prompt-tokens "$ids" --greedy --max-tokens 4 --ignore-eos --json &&
     python3 -c "import json,sys; a=json.load(open('$tmp/by_name.json')); b=json.load(open('$tmp/out')); sys.exit(a['tokens'] != b['tokens'])"; then
    pass generate_by_name
  else
    fail generate_by_name "tokens differ from the fixture path's"
  fi
fi
expect compile_by_name 0 'rms_norm' -- compile lathe-test/tiny-llama --ir graph

# A dropped connection: the download resumes with a range request and the file is whole.
: >"$tmp/hub.log"
if run_lathe pull_resume pull lathe-test/flaky; then
  if cmp -s "$MODELS/lathe-test/flaky/model.safetensors" "$FIX/model.safetensors" &&
     grep -q 'cdn/lathe-test/flaky/model.safetensors range=bytes=[1-9]' "$tmp/hub.log" && grep -q 'resuming' "$tmp/err"; then
    pass pull_resume
  else
    fail pull_resume "no resumed range request, or a wrong file: $(cat "$tmp/hub.log" | tail -5)"
  fi
fi
# A server that ignores ranges: the download starts over and still ends whole.
if run_lathe pull_norange pull lathe-test/norange; then
  if cmp -s "$MODELS/lathe-test/norange/model.safetensors" "$FIX/model.safetensors"; then pass pull_norange
  else fail pull_norange "wrong file after a restarted download"; fi
fi
# A partial file left by an interrupted pull is resumed, not restarted.
mkdir -p "$tmp/partial"
head -c 100000 "$FIX/model.safetensors" >"$tmp/partial/model.safetensors.part"
: >"$tmp/hub.log"
if run_lathe pull_resume_part pull lathe-test/tiny-llama --dir "$tmp/partial"; then
  if cmp -s "$tmp/partial/model.safetensors" "$FIX/model.safetensors" && grep -q 'range=bytes=100000-' "$tmp/hub.log"; then
    pass pull_resume_part
  else
    fail pull_resume_part "the part file was not resumed at its length: $(grep safetensors "$tmp/hub.log")"
  fi
fi
# `lathe list` shows an interrupted pull as incomplete.
mkdir -p "$MODELS/lathe-test/broken"
cp "$FIX/config.json" "$MODELS/lathe-test/broken/"
head -c 5000 "$FIX/model.safetensors" >"$MODELS/lathe-test/broken/model.safetensors.part"

# A wrong checksum: an error naming the file, exit 2, and nothing that looks downloaded.
expect_error pull_bad_checksum 'model.safetensors: SHA-256 [0-9a-f]{64} does not match the hub' -- pull lathe-test/corrupt --quiet
if [ ! -e "$MODELS/lathe-test/corrupt/model.safetensors" ] && [ ! -e "$MODELS/lathe-test/corrupt/model.safetensors.part" ] &&
   [ ! -e "$MODELS/lathe-test/corrupt/.lathe-pull.json" ]; then pass pull_bad_checksum_leaves_nothing
else fail pull_bad_checksum_leaves_nothing "$(ls -a "$MODELS/lathe-test/corrupt")"; fi

# Gated: without a token a clear error; with HF_TOKEN it works.
expect_error pull_gated_no_token 'needs a token .*HF_TOKEN' -- pull lathe-test/gated
HF_TOKEN=secret-token expect pull_gated_token 0 'lathe-test/gated' -- pull lathe-test/gated --quiet

# Unknown repository, bad names.
expect_error pull_unknown_repo "no model 'lathe-test/nope'" -- pull lathe-test/nope
expect_error pull_bad_name "not a model name" -- pull just-a-name
expect_error pull_bad_name_dots "not a model name" -- pull ../etc
expect_error pull_missing_arg "give a model as ORG/NAME" -- pull

# A repository of GGUF files only: pulled as a whole it says how to choose; by tag or by name it works.
expect_error pull_gguf_needs_file 'has no safetensors model; pull one of its GGUF files as lathe-test/gguf-only:FILE \(m-Q4_K_M.gguf, m-Q8_0.gguf\)' -- pull lathe-test/gguf-only
expect pull_gguf_tag 0 'gguf-only/m-Q4_K_M.gguf' -- pull lathe-test/gguf-only:q4_k_m --quiet
expect pull_gguf_name 0 'gguf-only/m-Q8_0.gguf' -- pull lathe-test/gguf-only:m-Q8_0.gguf --quiet
expect_error pull_gguf_ambiguous "'gguf' matches several files" -- pull lathe-test/gguf-only:gguf
expect_error pull_gguf_missing "has no file 'Q2_K'; its GGUF files: m-Q4_K_M.gguf, m-Q8_0.gguf" -- pull lathe-test/gguf-only:Q2_K
if cmp -s <(python3 -c "import sys; sys.stdout.buffer.write(open('$MODELS/lathe-test/gguf-only/m-Q8_0.gguf','rb').read()[::-1])") \
   "$MODELS/lathe-test/gguf-only/m-Q4_K_M.gguf"; then pass pull_gguf_content; else fail pull_gguf_content "wrong bytes"; fi

# lathe list: every pulled model, the interrupted one marked; --json parses.
if run_lathe list list; then
  if grep -q '^lathe-test/tiny-llama ' "$tmp/out" && grep -q '^lathe-test/gguf-only:m-Q4_K_M.gguf ' "$tmp/out" &&
     grep -q '^lathe-test/broken .*incomplete' "$tmp/out" && ! grep -q '^lathe-test/tiny-llama .*incomplete' "$tmp/out"; then
    pass list
  else
    fail list "$(cat "$tmp/out")"
  fi
fi
if run_lathe list_json list --json; then
  json_ok list_json "any(m['name'] == 'lathe-test/tiny-llama' and m['complete'] for m in j) and any(m['name'] == 'lathe-test/broken' and not m['complete'] for m in j)"
fi
XDG_CACHE_HOME="$tmp/empty" expect list_empty 0 'no models in' -- list

# A real GGUF pulled by tag works as MODEL by its cached name (with the default model, when present).
if [ -f "$DM" ]; then
  if run_lathe pull_real_gguf pull lathe-test/tiny-llama:Q4_1 --quiet && cmp -s "$(cat "$tmp/out")" "$DM"; then
    expect compile_gguf_by_name 0 'rms_norm' -- compile lathe-test/tiny-llama:Q4_1 --ir graph
    expect compile_gguf_by_tag 0 'rms_norm' -- compile lathe-test/tiny-llama:q4_1 --ir graph
  else
    fail pull_real_gguf "$(cat "$tmp/err")"
  fi
else
  skip compile_gguf_by_name "no default model at $DM"
fi
# A name that is neither a path nor cached is still an error about the path.
expect_error generate_unknown_name "cannot open model lathe-test/none" -- generate lathe-test/none --prompt hi
