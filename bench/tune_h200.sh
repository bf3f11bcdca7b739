#!/usr/bin/env bash
# lathe tune on the H200 in one device call (under 9 minutes): the issue-19 standalone kernels (f32 RMSNorm
# over 32x4096x4096, LayerNorm over 8192x8192, softmax over 4096x32000) timed by `lathe run --bench` with the
# earlier default schedules (LATHE_ROWS_IN_L2=0), today's defaults, tuned, timed again (each with its % of the
# bandwidth floor), and beside torch.compile when
# torch is there; then a model's decode step (and its 512-token prefill when the time allows) tuned under
# --budget-s, and `lathe bench` with the default schedules (--no-tune) against the tuned ones, alternating.
#
# OUT gets exactly four files (the device tool returns at most 8, none deeper than OUT/a/b/file):
#   table.md        the table, also printed last
#   goldens.tar.gz  every tuned program's goldens (`lathe tune --export`), as goldens/TAG-NAME.json
#   tune-db.json    the tuning database (`lathe db export`; `lathe db import` reads it)
#   log.txt         every phase's stdout and stderr, each under a "==== NAME" header, and the db stats
# Everything else is written under a scratch directory and removed (--keep-work keeps it and says where).
#
#   bench/tune_h200.sh [--lathe PATH] [--target cuda|cpu] [--config NAME] [--quick] [--tag NAME]
#                      [--kernel-budget S] [--decode-budget S] [--prefill-budget S] [--total S] [--out DIR]
#                      [--no-model] [--no-kernels] [--bandwidth GB/s] [--keep-work]
#
# --quick: small shapes, smollm2-135m, budgets of 5 / 20 / 15 s, for checking the script itself (on the CPU:
# --target cpu --quick; with --no-model too it takes seconds: tests/cli_tune_h200_test.sh).
# --no-model: the standalone kernels only (no decode / prefill tuning, no `lathe bench`).
# --no-kernels: the model only (no standalone kernels).
# --bandwidth: the floors' memory bandwidth (default 4130 GB/s on cuda, none on the CPU).
# Defaults: build/lathe, cuda, qwen3-0.6b, tag h200 (cpu with --target cpu), budgets 20 s per kernel (35 s for
# the RMSNorm), 120 s decode, 75 s prefill, everything aimed at --total 500 s (a phase that would not fit is
# skipped and says so), OUT=$OUT or a new temporary directory. The cache (compiled kernels and tune.db) is
# LATHE_CACHE_DIR, else a fresh directory under /tmp, so the "default" runs see no earlier tuning.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lathe=$root/build/lathe
target=cuda
config=qwen3-0.6b
quick=0
tag=
kernel_budget=20
decode_budget=120
prefill_budget=75
total=500
out=${OUT:-}
model=1
kernels_on=1
keep_work=0
bandwidth=
while [ $# -gt 0 ]; do
  case $1 in
    --lathe) lathe=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --tag) tag=$2; shift 2 ;;
    --kernel-budget) kernel_budget=$2; shift 2 ;;
    --decode-budget) decode_budget=$2; shift 2 ;;
    --prefill-budget) prefill_budget=$2; shift 2 ;;
    --total) total=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-model) model=0; shift ;;
    --no-kernels) kernels_on=0; shift ;;
    --bandwidth) bandwidth=$2; shift 2 ;;
    --keep-work) keep_work=1; shift ;;
    *) echo "tune_h200: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$bandwidth" ] || { [ "$target" = cuda ] && bandwidth=4130; }
[ -n "$tag" ] || { [ "$target" = cuda ] && tag=h200 || tag=$target; }
[ -n "$out" ] || out=$(mktemp -d /tmp/lathe-tune.XXXXXX)
mkdir -p "$out" || exit 2
final=$out
# the phases write under a scratch directory; only the four files named above reach OUT
out=$(mktemp -d /tmp/lathe-tune-work.XXXXXX)
mkdir -p "$out/goldens"
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$(mktemp -d /tmp/lathe-tune-cache.XXXXXX)}
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((total - $(elapsed))); }
log() { echo "[tune_h200 $(elapsed) s] $*" >&2; [ -d "$out" ] && echo "[tune_h200 $(elapsed) s] $*" >>"$out/script.log"; }
rows=()  # table rows, "| ... |"

if [ "$quick" = 1 ]; then
  kernels=("rms_norm 8x64x256|x: f32[8,64,256]; w: f32[256]; y = rms_norm(x, w, 1e-6)|$((2 * 8 * 64 * 256 * 4))"
           "layernorm 256x512|x: f32[256,512]; w: f32[512]; b: f32[512]; y = layer_norm(x, w, b, 1e-5)|$((2 * 256 * 512 * 4))"
           "softmax 64x1000|x: f32[64,1000]; y = softmax(x, -1)|$((2 * 64 * 1000 * 4))")
  iters=10
  tune_args=(--max-candidates 6 --patience 3 --repeats 3 --warmup 1)
  [ "$config" = qwen3-0.6b ] && config=smollm2-135m
  kernel_budget=5 decode_budget=20 prefill_budget=15
else
  # name|program|bytes moved|budget share (the RMSNorm's 4.3 GB make each candidate's copies and check cost seconds)
  kernels=("rms_norm 32x4096x4096|x: f32[32,4096,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)|$((2 * 32 * 4096 * 4096 * 4))|1.75"
           "layernorm 8192x8192|x: f32[8192,8192]; w: f32[8192]; b: f32[8192]; y = layer_norm(x, w, b, 1e-5)|$((2 * 8192 * 8192 * 4))"
           "softmax 4096x32000|x: f32[4096,32000]; y = softmax(x, -1)|$((2 * 4096 * 32000 * 4))")
  iters=20
  tune_args=(--max-candidates 64 --patience 16 --repeats 7 --warmup 3 --timeout-s 60)
fi
[ "$kernels_on" = 1 ] || kernels=()
log "lathe $lathe, target $target, config $config, out $out, cache $LATHE_CACHE_DIR"

# `lathe run --bench`'s median in ms ("bench: 1 kernel, median 1.5620 ms over 50 runs ...")
run_ms() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' | head -1; }

# floor / measured as a percentage ("-" where either is missing)
pct() { python3 -c "import sys; print('%.0f%%' % (100 * float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2" 2>/dev/null || echo -; }

# ---- the standalone kernels ----
k=0
for entry in "${kernels[@]}"; do
  IFS='|' read -r name prog bytes share <<<"$entry"
  kb=$(python3 -c "print(round($kernel_budget * ${share:-1}))")
  k=$((k + 1))
  slug=$(echo "$name" | tr ' ' '-')
  # the defaults before 2026-12-02 (a warp per row for rows too many for L2), then today's
  prior=$(LATHE_ROWS_IN_L2=0 "$lathe" run -e "$prog" --target "$target" --bench --iters $iters --no-tune 2>>"$out/run.err" | run_ms)
  before=$("$lathe" run -e "$prog" --target "$target" --bench --iters $iters --no-tune 2>>"$out/run.err" | run_ms)
  if [ $(left) -gt $((kb + 30)) ]; then
    log "tune $name (budget $kb s)"
    "$lathe" tune -e "$prog" --target "$target" --budget-s "$kb" "${tune_args[@]}" \
      >"$out/tune-$slug.txt" 2>"$out/tune-$slug.err" || log "tune $name failed (see $out/tune-$slug.err)"
    "$lathe" tune -e "$prog" --target "$target" --export "$out/goldens/$tag-$slug.json" >>"$out/export.txt" 2>&1 ||
      log "export $name failed"
  else
    log "tune $name skipped: $(left) s left"
  fi
  after=$("$lathe" run -e "$prog" --target "$target" --bench --iters $iters 2>>"$out/run.err" | run_ms)
  floor=-
  # the issue's floors: bytes moved at 4.13 TB/s on cuda (the H200's measured copy bandwidth; 1.040 ms for the
  # RMSNorm), at --bandwidth GB/s where given
  [ -n "$bandwidth" ] && floor=$(python3 -c "print('%.3f' % ($bytes / ($bandwidth * 1e9) * 1e3))")
  rows+=("| $name | ${prior:-?} ($(pct "$floor" "$prior")) | ${before:-?} ($(pct "$floor" "$before")) | ${after:-?} ($(pct "$floor" "$after")) | $floor | TORCH$k |")
done

# ---- the model: decode (past 256, amid lathe bench's 128..384), then the 512-token prefill ----
# lathe bench's plan has a KV cache of max(prompt + gen, prefill) + 8 positions: the tuned kernels' keys must match
ctx=$((512 + 8))
bench_args=(--config "$config" --random-weights --target "$target" --json)
[ "$quick" = 1 ] && bench_args+=(--prompt-len 16 --gen-len 16 --prefill-len 64) && ctx=$((64 + 8))
prefill_len=512
past=256
[ "$quick" = 1 ] && prefill_len=64 past=32
bench_json() { "$lathe" bench "${bench_args[@]}" "$@" 2>>"$out/bench.err" | tail -1; }
field() { python3 -c "import json,sys; j=json.loads(sys.argv[1]); print('%.2f' % j['$1'])" "$2" 2>/dev/null || echo "?"; }

default1= tuned1= default2= tuned2=
if [ "$model" = 1 ]; then
  default1=$(bench_json --no-tune)
  log "bench default: $(field decode_tok_s "$default1") tok/s decode, $(field prefill_ms "$default1") ms prefill"
  if [ $(left) -gt $((decode_budget + 60)) ]; then
    log "tune $config decode (budget $decode_budget s)"
    "$lathe" tune --config "$config" --random-weights --target "$target" --ctx $ctx --past $past --budget-s "$decode_budget" \
      "${tune_args[@]}" >"$out/tune-$config-decode.txt" 2>"$out/tune-$config-decode.err" ||
      log "tune decode failed (see $out/tune-$config-decode.err)"
    "$lathe" tune --config "$config" --random-weights --target "$target" --ctx $ctx --past $past \
      --export "$out/goldens/$tag-$config-decode.json" >>"$out/export.txt" 2>&1 || log "export decode failed"
  else
    log "tune decode skipped: $(left) s left"
  fi
  if [ $(left) -gt $((prefill_budget + 60)) ]; then
    log "tune $config prefill $prefill_len (budget $prefill_budget s)"
    "$lathe" tune --config "$config" --random-weights --target "$target" --ctx $ctx --dim seq=$prefill_len --dim past=0 \
      --budget-s "$prefill_budget" "${tune_args[@]}" >"$out/tune-$config-prefill.txt" 2>"$out/tune-$config-prefill.err" ||
      log "tune prefill failed (see $out/tune-$config-prefill.err)"
    "$lathe" tune --config "$config" --random-weights --target "$target" --ctx $ctx --dim seq=$prefill_len --dim past=0 \
      --export "$out/goldens/$tag-$config-prefill$prefill_len.json" >>"$out/export.txt" 2>&1 || log "export prefill failed"
  else
    log "tune prefill skipped: $(left) s left"
  fi
  tuned1=$(bench_json)
  log "bench tuned: $(field decode_tok_s "$tuned1") tok/s decode, $(field prefill_ms "$tuned1") ms prefill"
  default2= tuned2=
  if [ $(left) -gt 40 ]; then default2=$(bench_json --no-tune); tuned2=$(bench_json); fi
fi
"$lathe" db export "$out/tune-db.json" >>"$out/export.txt" 2>&1 || log "db export failed"
"$lathe" db stats >"$out/db-stats.txt" 2>&1

# ---- torch.compile on the same kernels, last (its compiles are slow), when there is time and torch ----
torch_ms=("-" "-" "-")
if [ ${#rows[@]} -gt 0 ] && [ "$target" = cuda ] && [ $(left) -gt 45 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  log "torch.compile on the standalone kernels"
  if timeout $(($(left) - 5)) python3 - "$quick" >"$out/torch.txt" 2>"$out/torch.err" <<'PY'; then
import sys, torch
quick = sys.argv[1] == "1"
t = torch
shapes = [(8, 64, 256), (256, 512), (64, 1000)] if quick else [(32, 4096, 4096), (8192, 8192), (4096, 32000)]
def rms(x, w): return x * t.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
def ln(x, w, b): return t.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
def sm(x): return t.softmax(x, -1)
cases = [(rms, [t.randn(*shapes[0], device="cuda"), t.randn(shapes[0][-1], device="cuda")]),
         (ln, [t.randn(*shapes[1], device="cuda"), t.randn(shapes[1][-1], device="cuda"), t.randn(shapes[1][-1], device="cuda")]),
         (sm, [t.randn(*shapes[2], device="cuda")])]
for fn, args in cases:
    f = t.compile(fn)
    for _ in range(5): f(*args)
    t.cuda.synchronize()
    ts = []
    for _ in range(50):
        a, b = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        a.record(); f(*args); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    print("%.4f" % ts[len(ts) // 2], flush=True)
PY
    mapfile -t got <"$out/torch.txt"
    for i in 0 1 2; do torch_ms[$i]=${got[$i]:--}; done
  else
    log "torch.compile failed or ran out of time (see $out/torch.err)"
    mapfile -t got <"$out/torch.txt"
    for i in 0 1 2; do torch_ms[$i]=${got[$i]:--}; done
  fi
fi

# ---- the table ----
{
  echo "lathe tune, $tag ($target), $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo ?), $(elapsed) s in all"
  if [ ${#rows[@]} -gt 0 ]; then
    echo
    echo "ms (% of the bandwidth floor); rows-in-L2 off: the defaults before it (LATHE_ROWS_IN_L2=0 --no-tune: a warp"
    echo "per row, softmax 64 threads), default: --no-tune"
    echo
    echo "| kernel (f32) | rows-in-L2 off ms | default ms | tuned ms | floor ms | torch.compile ms |"
    echo "|---|---|---|---|---|---|"
    for i in "${!rows[@]}"; do echo "${rows[$i]}" | sed "s/TORCH$((i + 1))/${torch_ms[$i]}/"; done
  fi
  if [ "$model" = 1 ]; then
    echo
    echo "| $config | decode tok/s | prefill $prefill_len ms |"
    echo "|---|---|---|"
    echo "| default (--no-tune) | $(field decode_tok_s "$default1")${default2:+, $(field decode_tok_s "$default2")} | $(field prefill_ms "$default1")${default2:+, $(field prefill_ms "$default2")} |"
    echo "| tuned | $(field decode_tok_s "$tuned1")${tuned2:+, $(field decode_tok_s "$tuned2")} | $(field prefill_ms "$tuned1")${tuned2:+, $(field prefill_ms "$tuned2")} |"
  fi
  for f in "$out"/tune-*.txt; do
    [ -e "$f" ] || continue
    echo
    echo "$(basename "$f" .txt): $(grep -E '^program:' "$f" || echo 'no program line')"
  done
} | tee "$final/table.md"

# ---- the four files: goldens archived, every log under one header each ----
tar -C "$out" -czf "$final/goldens.tar.gz" goldens || log "archiving the goldens failed"
if [ -e "$out/tune-db.json" ]; then cp "$out/tune-db.json" "$final/tune-db.json"; else echo '{}' >"$final/tune-db.json"; fi
{
  for f in "$out"/*; do
    [ -f "$f" ] || continue
    case $(basename "$f") in tune-db.json) continue ;; esac
    echo "==== $(basename "$f")"
    cat "$f"
  done
} >"$final/log.txt"
log "wrote $final: $(cd "$final" && ls | tr '\n' ' ')"
if [ "$keep_work" = 1 ]; then log "scratch kept in $out"; else rm -rf "$out"; fi
