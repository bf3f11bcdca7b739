#!/usr/bin/env bash
# The batched engine from the command line: generate --concurrency (one completion per prompt line, each
# equal to the prompt's own greedy completion), bench --concurrency, and their usage errors.
set -u
source "$(dirname "$0")/cli_lib.sh"

# usage errors need no model
expect_error gen_concurrency_tokens "not --prompt-tokens" -- generate --prompt-tokens 1,2 --concurrency 2
expect_error gen_invariant_alone "add --concurrency" -- generate -p hi --batch-invariant
expect_error bench_requests_alone "add --concurrency" -- bench --requests 4
expect_error bench_range_alone "needs --concurrency" -- bench --prompt-len 32-64
expect_error bench_bad_range "MIN-MAX" -- bench --concurrency 2 --gen-len 9-3
expect_error bench_bad_arrivals "poisson:RATE" -- bench --concurrency 2 --arrivals poisson:-1
expect_error bench_bad_kv_dtype "f32 or bf16" -- bench --config smollm2-135m --random-weights --target cpu \
  --concurrency 2 --kv-dtype f16

if [ ! -f "$DM" ]; then
  for t in gen_batched_equals_solo gen_batched_json gen_batched_invariant gen_batched_cr_line gen_batched_empty \
    bench_batched_json; do
    skip $t "no default model at $DM"
  done
  exit 0
fi

printf 'The capital of France is\n\nOnce upon a time\n1, 2, 3,\n' >"$tmp/prompts.txt"
# each line's completion, alone
solo=()
for p in "The capital of France is" "Once upon a time" "1, 2, 3,"; do
  "$LATHE" generate "$DM" -p "$p" -n 6 --greedy --json -q >"$tmp/solo.json" 2>"$tmp/err" || fail gen_solo "exit $?"
  solo+=("$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])' <"$tmp/solo.json")")
done
if run_lathe gen_batched_json generate "$DM" --prompt-file "$tmp/prompts.txt" --concurrency 2 -n 6 --greedy --json; then
  got=$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["index"] for r in rows] == [0, 1, 2], rows
assert all(r["stop_reason"] == "length" and len(r["tokens"]) == 6 for r in rows), rows
for r in rows: print(r["tokens"])' "$tmp/out" 2>&1)
  want=$(printf '%s\n' "${solo[@]}")
  if [ "$got" = "$want" ]; then pass gen_batched_json; else fail gen_batched_json "batched $got, alone $want"; fi
fi
if run_lathe gen_batched_equals_solo generate "$DM" --prompt-file "$tmp/prompts.txt" --concurrency 3 -n 6 --greedy; then
  n=$(wc -l <"$tmp/out")
  if [ "$n" -eq 3 ] && grep -q "lathe: 3 prompts, 18 tokens generated" "$tmp/err"; then pass gen_batched_equals_solo
  else fail gen_batched_equals_solo "$n lines: $(cat "$tmp/out") / $(tail -1 "$tmp/err")"; fi
fi
if run_lathe gen_batched_invariant generate "$DM" --prompt-file "$tmp/prompts.txt" --concurrency 3 -n 6 --greedy \
  --batch-invariant --json; then
  got=$(python3 -c 'import json,sys; [print(json.loads(l)["tokens"]) for l in open(sys.argv[1])]' "$tmp/out")
  if [ "$got" = "$(printf '%s\n' "${solo[@]}")" ]; then pass gen_batched_invariant
  else fail gen_batched_invariant "$got"; fi
fi
# a last line ending in a carriage return and no newline (it once made the line splitter loop forever)
if timeout 60 "$LATHE" generate "$DM" -p $'Hello\r' --concurrency 2 -n 2 -q >"$tmp/out" 2>"$tmp/err" &&
  [ "$(wc -l <"$tmp/out")" -eq 1 ]; then pass gen_batched_cr_line
else fail gen_batched_cr_line "exit $?, $(head -c 200 "$tmp/out" "$tmp/err")"; fi
printf '\n\n' >"$tmp/empty.txt"
expect_error gen_batched_empty "no non-empty lines" -- generate "$DM" --prompt-file "$tmp/empty.txt" --concurrency 2 -q
if run_lathe bench_batched_json bench "$DM" --concurrency 3 --requests 4 --prompt-len 3-9 --gen-len 2-4 \
  --shared-prefix 2 --json; then
  json_ok bench_batched_json 'j["requests"] == 4 and j["output_tokens"] >= 8 and j["output_tok_s"] > 0 and
    j["kv_blocks_peak"] >= 1 and j["ttft_ms_p99"] >= j["ttft_ms_p50"] >= 0 and j["preemptions"] == 0'
fi
