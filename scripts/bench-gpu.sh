#!/usr/bin/env bash
# GPU benchmark of lathe beside PyTorch in one run, the comparison bench/RESULTS.md records: for each
# built-in config (random bf16 weights), lathe's 512-token prefill at --matmul-precision high and
# medium, its decode (prompt 128, 256 tokens) greedy and sampled, compile times and memory; then
# bench/torch_decode.py's eager and torch.compile rows for the same configs. Prints a markdown table
# (also in OUT/table.md) with every raw result under OUT.
#
#   scripts/bench-gpu.sh [--lathe PATH] [--configs a,b,c] [--torch-budget SECONDS] [--no-torch]
#                        [--target cuda|cpu] [--out DIR]
#
# Defaults: build/lathe, llama-3.2-1b,qwen3-0.6b,qwen3-8b, 420 s for PyTorch, OUT=$OUT or a new
# temporary directory. Needs python3 for the table (and torch + transformers for the PyTorch rows).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lathe=$root/build/lathe
configs=llama-3.2-1b,qwen3-0.6b,qwen3-8b
budget=420
torch=1
target=cuda
out=${OUT:-}
while [ $# -gt 0 ]; do
  case $1 in
    --lathe) lathe=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --torch-budget) budget=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --target) target=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n 2,12p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-gpu: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$lathe" ] || { echo "bench-gpu: no lathe binary at $lathe (run make)" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/lathe-bench-gpu.XXXXXX)
mkdir -p "$out"
: >"$out/lathe.jsonl"
: >"$out/lathe-medium.jsonl"
IFS=, read -r -a cfgs <<<"$configs"
for cfg in "${cfgs[@]}"; do
  echo "lathe $cfg ..." >&2
  if ! "$lathe" bench --config "$cfg" --random-weights --target "$target" --json >>"$out/lathe.jsonl" 2>>"$out/lathe.err"; then
    echo "bench-gpu: lathe bench $cfg failed (see $out/lathe.err)" >&2
    exit 1
  fi
  [ "$target" = cuda ] || continue # the precision knob is CUDA's
  "$lathe" bench --config "$cfg" --random-weights --target cuda --gen-len 8 --prompt-len 16 --matmul-precision medium \
    --json >>"$out/lathe-medium.jsonl" 2>>"$out/lathe.err" || echo "bench-gpu: medium-precision prefill of $cfg failed" >&2
done
if [ "$torch" = 1 ]; then
  echo "PyTorch (eager, torch.compile) ..." >&2
  PYTHONUNBUFFERED=1 python3 "$root/bench/torch_decode.py" --configs "$configs" --modes eager,compile --repeats 1 \
    --budget-s "$budget" --json "$out/torch.json" >"$out/torch.log" 2>&1 || echo "bench-gpu: PyTorch run failed (see $out/torch.log)" >&2
fi
python3 - "$out" "$configs" <<'EOF' | tee "$out/table.md"
import json, os, sys
out, cfgs = sys.argv[1], sys.argv[2].split(",")
def rows(path):
    r = {}
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                j = json.loads(line)
                r[j["model"]] = j
    return r
hi, med = rows(f"{out}/lathe.jsonl"), rows(f"{out}/lathe-medium.jsonl")
torch = {}
if os.path.exists(f"{out}/torch.json"):
    for r in json.load(open(f"{out}/torch.json")).get("rows", []):
        torch[(r.get("config"), r.get("mode"))] = r
def cell(v, fmt):
    return fmt % v if isinstance(v, (int, float)) else "-"
def line(name, vals):
    print("| " + name + " | " + " | ".join(vals) + " |")
print("| | " + " | ".join(cfgs) + " |")
print("|---" * (len(cfgs) + 1) + "|")
line("lathe prefill 512, high, ms", [cell(hi.get(c, {}).get("prefill_ms"), "%.2f") for c in cfgs])
line("lathe prefill 512, medium, ms", [cell(med.get(c, {}).get("prefill_ms"), "%.2f") for c in cfgs])
line("PyTorch eager prefill 512, ms", [cell(torch.get((c, "eager"), {}).get("prefill_ms"), "%.2f") for c in cfgs])
line("torch.compile prefill 512, ms", [cell(torch.get((c, "compile"), {}).get("prefill_ms"), "%.2f") for c in cfgs])
line("lathe decode greedy, tok/s (% of floor)",
     [cell(hi.get(c, {}).get("decode_tok_s"), "%.1f") + cell(hi.get(c, {}).get("pct_of_floor"), " (%.1f%%)") for c in cfgs])
line("lathe decode sampled, tok/s", [cell(hi.get(c, {}).get("sampled_decode_tok_s"), "%.1f") for c in cfgs])
line("torch.compile decode, tok/s", [cell(torch.get((c, "compile"), {}).get("decode_tok_s"), "%.1f") for c in cfgs])
line("lathe cold / warm compile, s",
     [cell(hi.get(c, {}).get("cold_compile_ms", 0) / 1e3 if c in hi else None, "%.1f") + " / " +
      cell(hi.get(c, {}).get("warm_compile_ms", 0) / 1e3 if c in hi else None, "%.2f") for c in cfgs])
def over(c):
    j = hi.get(c)
    return 100.0 * j["workspace_bytes"] / (j["weight_bytes"] + j["kv_cache_bytes"]) if j else None
line("device memory over weights + KV", [cell(over(c), "%.1f%%") for c in cfgs])
EOF
echo "results in $out" >&2
