#!/usr/bin/env bash
# The serving benchmark's tools on the CPU: lathe serve --config --random-weights (token-id prompts, no tokenizer:
# a chunk per step's tokens with empty text), bench/serve_load.py (streaming clients, --duration, exact max_tokens
# checked) and bench/serve_h200.sh end to end in its --quick mode (the release build, a tiny preset, 1-2 s runs),
# with its verified long run (a --batch-invariant server, serve_load.py --verify) and its done marker; serve's
# --kv-memory and --batch-invariant.
set -u
source "$(dirname "$0")/cli_lib.sh"
REL=${LATHE_RELEASE:-build/lathe}
expect_error serve_config_needs_random 'add --random-weights' -- serve --config smollm2-135m
expect_error serve_config_unknown "unknown --config 'nope'" -- serve --config nope --random-weights
expect_error serve_config_and_model 'not both' -- serve "$tmp/x.gguf" --config smollm2-135m --random-weights
expect_error serve_dtype_needs_config '--dtype applies to --config only' -- serve --dtype f16
expect_error serve_kv_dtype_bad "--kv-dtype expects f32, bf16 or auto, got 'f16'" -- \
  serve --config smollm2-135m --random-weights --kv-dtype f16 --port 0
expect_error serve_kv_memory_zero "--kv-memory expects a number in \[1e-06, 1e\+06\], got '0'" -- serve --kv-memory 0
expect_error serve_kv_memory_word "--kv-memory expects a number .*got 'lots'" -- serve --kv-memory lots
expect_error serve_kv_memory_tiny 'no room for a KV cache block' -- \
  serve --config smollm2-135m --random-weights --target cpu --ctx 64 --kv-memory 1e-5 --port 0
# both taken: a pool of exactly 0.01 GB (13 blocks of 16 positions of 46080 bytes), batch-invariant schedules
"$LATHE" serve --config smollm2-135m --random-weights --target cpu --ctx 64 --port 0 --kv-memory 0.01 \
  --batch-invariant 2>"$tmp/flags.log" &
fpid=$!
for _ in $(seq 300); do grep -q 'listening on' "$tmp/flags.log" && break; kill -0 $fpid 2>/dev/null || break; sleep 0.1; done
kill -TERM $fpid 2>/dev/null; wait $fpid
grep -q '13 KV blocks of 16, f32, 0.01 GB, batch-invariant) on cpu' "$tmp/flags.log" && pass serve_kv_memory_batch_invariant \
  || fail serve_kv_memory_batch_invariant "$(head -3 "$tmp/flags.log")"

out=$tmp/sb
if OUT=$out WORK=$tmp/work SERVE_S1=1 SERVE_S16=1 SERVE_S64=1 SERVE_STTFT=1 bench/serve_h200.sh "$REL" --quick --long 3 \
    >"$tmp/sb.txt" 2>&1; then
  pass serve_bench_quick_runs
else
  fail serve_bench_quick_runs "$(tail -5 "$tmp/sb.txt")"
fi
python3 - "$out/summary.json" <<'PY' && pass serve_bench_quick_summary || fail serve_bench_quick_summary "$(tail -12 "$tmp/sb.txt")"
import json, sys
s = json.load(open(sys.argv[1]))["configs"]["smollm2-135m"]
runs = [s[k] for k in ("c1", "c4", "c8", "ttft", "long")]
# every run completed requests, none with an error (each exactly its max_tokens), and tokens were streamed
assert all(r and r["completed"] > 0 and r["errors"] == 0 and r["ttft_ms_p50"] is not None for r in runs), runs
assert s["offline"]["requests"] == max(s["c8"]["completed"], 8) and s["offline"]["output_tok_s"] > 0
assert s["served_over_offline"] > 0
# the long run verified every answer against its reference alone, streamed and whole
v = s["long"]
assert v["verify"]["pool"] == 8 and v["verify"]["reference_errors"] == 0 and v["verify"]["logprobs"], v
assert 0 < v["verify"]["streamed"] < v["requests"], v
assert v["lost"] == v["truncated"] == v["mixed"] == v["mismatched"] == 0, v
PY
[ "$(cat "$out/done" 2>/dev/null)" = 0 ] && grep -q 'smollm2-135m long run: .* 0 lost, 0 truncated, 0 mixed, 0 mismatched (0 after' \
  "$out/table.md" && pass serve_bench_quick_done || fail serve_bench_quick_done "done: $(cat "$out/done" 2>&1)"
grep -q '^| smollm2-135m | offline (lathe bench) | 8 |' "$tmp/sb.txt" && pass serve_bench_quick_table \
  || fail serve_bench_quick_table "$(tail -8 "$tmp/sb.txt")"
