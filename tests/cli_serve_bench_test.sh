#!/usr/bin/env bash
# The serving benchmark's tools on the CPU: lathe serve --config --random-weights (token-id prompts, no tokenizer:
# a chunk per step's tokens with empty text), bench/serve_load.py (streaming clients, --duration, exact max_tokens
# checked) and bench/serve_h200.sh end to end in its --quick mode (the release build, a tiny preset, 1-2 s runs).
set -u
source "$(dirname "$0")/cli_lib.sh"
REL=${LATHE_RELEASE:-build/lathe}
expect_error serve_config_needs_random 'add --random-weights' -- serve --config smollm2-135m
expect_error serve_config_unknown "unknown --config 'nope'" -- serve --config nope --random-weights
expect_error serve_config_and_model 'not both' -- serve "$tmp/x.gguf" --config smollm2-135m --random-weights
expect_error serve_dtype_needs_config '--dtype applies to --config only' -- serve --dtype f16
expect_error serve_kv_dtype_bad "--kv-dtype expects f32, bf16 or auto, got 'f16'" -- \
  serve --config smollm2-135m --random-weights --kv-dtype f16 --port 0

out=$tmp/sb
if OUT=$out WORK=$tmp/work SERVE_S1=1 SERVE_S16=1 SERVE_S64=1 SERVE_STTFT=1 bench/serve_h200.sh "$REL" --quick --long 1 \
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
PY
grep -q '^| smollm2-135m | offline (lathe bench) | 8 |' "$tmp/sb.txt" && pass serve_bench_quick_table \
  || fail serve_bench_quick_table "$(tail -8 "$tmp/sb.txt")"
