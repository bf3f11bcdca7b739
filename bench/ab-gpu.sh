#!/usr/bin/env bash
# A/B of two lathe builds on the GPU, alternating in one run: for each built-in config (random bf16
# weights), `lathe bench --json` with A, then B, repeated ROUNDS times, so drift of the card shows as
# spread within a column rather than as a difference between them. Prints a markdown table of decode
# tok/s, sampled decode tok/s, 512-token prefill ms and warm compile s per run; raw JSON lines in OUT.
#
#   bench/ab-gpu.sh A_LATHE B_LATHE [--configs a,b,c] [--rounds N] [--out DIR]
set -euo pipefail
a=${1:?usage: ab-gpu.sh A_LATHE B_LATHE [--configs a,b,c] [--rounds N] [--out DIR]}
b=${2:?usage: ab-gpu.sh A_LATHE B_LATHE [--configs a,b,c] [--rounds N] [--out DIR]}
shift 2
configs=llama-3.2-1b,qwen3-0.6b,qwen3-8b
rounds=2
out=${OUT:-$(mktemp -d /tmp/lathe-ab.XXXXXX)}
while [ $# -gt 0 ]; do
  case $1 in
    --configs) configs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "ab-gpu: unknown option '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
: >"$out/ab.jsonl"
IFS=, read -r -a cfgs <<<"$configs"
for ((r = 1; r <= rounds; r++)); do
  for cfg in "${cfgs[@]}"; do
    for side in A B; do
      bin=$a; [ $side = B ] && bin=$b
      if line=$("$bin" bench --config "$cfg" --random-weights --target cuda --json 2>>"$out/ab.err"); then
        echo "{\"side\": \"$side\", \"round\": $r, \"result\": $line}" >>"$out/ab.jsonl"
      else
        echo "ab-gpu: $side $cfg round $r failed (see $out/ab.err)" >&2
      fi
    done
  done
done
python3 - "$out/ab.jsonl" <<'PY' | tee "$out/ab.md"
import json, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    j = json.loads(line)
    runs[(j["result"]["model"], j["side"])].append(j["result"])
def cells(rs, key, fmt, scale=1.0):
    return ", ".join(fmt % (r[key] * scale) for r in rs if isinstance(r.get(key), (int, float))) or "-"
print("| config | side | decode tok/s | sampled tok/s | prefill 512 ms | warm compile s |")
print("|---|---|---|---|---|---|")
for (model, side), rs in sorted(runs.items()):
    print(f"| {model} | {side} | {cells(rs, 'decode_tok_s', '%.1f')} | {cells(rs, 'sampled_decode_tok_s', '%.1f')} | "
          f"{cells(rs, 'prefill_ms', '%.2f')} | {cells(rs, 'warm_compile_ms', '%.2f', 1e-3)} |")
PY
