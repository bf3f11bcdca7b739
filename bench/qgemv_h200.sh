#!/usr/bin/env bash
# Decode GEMV over quantized blocks on the H200, per form (issue 18): for each form (a name and environment
# settings, e.g. old= and new=LATHE_QUANT_GEMV=1), each weight type and each shape w [N, K], y = linear(x, w) at one
# row is checked against lathe run's float64 reference (--check) and timed (--bench, median), then Llama-3.2-1B
# decode is timed per form for q4_k_m and q8_0 (lathe bench, 128 tokens, no prefill). A table last (OUT/table.md),
# the raw lines under OUT.
#
#   bench/qgemv_h200.sh [--lathe PATH] [--forms 'old=;new=LATHE_QUANT_GEMV=1'] [--types q4_0,q4_k,q6_k,q8_0,bf16]
#                       [--shapes 12288x4096,4096x4096,2048x8192,8192x2048] [--target cuda|cpu] [--no-decode]
#                       [--config NAME] [--out DIR] [--bandwidth GB/s] [--no-check]
#
# --no-check skips the float64 check (its reference takes seconds a shape on the host): each shape is then one run.
# Per-kernel settings to compare: LATHE_GEMV_ROWS=1|2|4|8 (output rows a warp), LATHE_QUANT_UNROLL, LATHE_QUANT_DOT,
# e.g. --forms 'r1=LATHE_GEMV_ROWS=1;r2=LATHE_GEMV_ROWS=2;r4=LATHE_GEMV_ROWS=4;r8=LATHE_GEMV_ROWS=8;auto='.
#
# A form's settings are NAME=VALUE words separated by commas ('new=LATHE_QUANT_GEMV=1,LATHE_QUANT_UNROLL=8').
# Default forms: old= only; the tensor-core form is new=LATHE_QUANT_GEMV=1. Each run is limited to 60 s and none starts
# after $QGEMV_BENCH_BUDGET (180) s. CPU smoke test:
#   bench/qgemv_h200.sh --target cpu --shapes 256x512 --types q4_0,q8_0 --no-decode
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lathe=$root/build/lathe
forms='old='
config=llama-3.2-1b
types=q4_0,q4_k,q6_k,q8_0,bf16
shapes=12288x4096,4096x4096,2048x8192,8192x2048
target=cuda
decode=1
check=1
out=${OUT:-}
bandwidth=4130 # GB/s: an H200's copy bandwidth, the bytes floor below
budget=${QGEMV_BENCH_BUDGET:-180}
while [ $# -gt 0 ]; do
  case $1 in
    --lathe) lathe=$2; shift 2 ;;
    --forms) forms=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --no-decode) decode=0; shift ;;
    --no-check) check=0; shift ;;
    --config) config=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bandwidth) bandwidth=$2; shift 2 ;;
    -h|--help) sed -n 2,19p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "qgemv_h200: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$lathe" ]; then
  (cd "$root" && make -j"$(nproc)" build/lathe >/dev/null) || { echo "qgemv_h200: make build/lathe failed" >&2; exit 2; }
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/lathe-qgemv.XXXXXX)
mkdir -p "$out"
: >"$out/gemv.jsonl"
: >"$out/decode.jsonl"
: >"$out/errors.log"
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$out/cache}
IFS=';' read -r -a fs <<<"$forms"
IFS=, read -r -a ts <<<"$types"
IFS=, read -r -a ss <<<"$shapes"
t0=$(date +%s)
late() { [ $(($(date +%s) - t0)) -gt "$budget" ]; }

# bytes per weight element, for the floor (block bytes / block elements)
bytes_per() {
  case $1 in
    q4_0) echo 0.5625 ;; q4_1) echo 0.625 ;; q5_0) echo 0.6875 ;; q5_1) echo 0.75 ;; q8_0) echo 1.0625 ;;
    q4_k) echo 0.5625 ;; q5_k) echo 0.6875 ;; q6_k) echo 0.8203125 ;; bf16) echo 2 ;; *) echo 0 ;;
  esac
}

for f in "${fs[@]}"; do
  name=${f%%=*}
  settings=${f#*=}
  IFS=, read -r -a envs <<<"$settings"
  [ -z "$settings" ] && envs=()
  for t in "${ts[@]}"; do
    for s in "${ss[@]}"; do
      n=${s%x*} k=${s#*x}
      if late; then echo "qgemv_h200: $name $t $s skipped: past ${budget} s" | tee -a "$out/errors.log" >&2; continue; fi
      prog="x: f32[1,$k]; w: $t[$n,$k]; y = linear(x, w)"
      verdict=skipped
      if [ "$check" = 1 ]; then
        timeout 60 env "${envs[@]}" "$lathe" run -e "$prog" --target "$target" --check >/dev/null 2>>"$out/errors.log"
        case $? in 0) verdict=ok ;; 1) verdict=mismatch ;; *) verdict=error ;; esac # --check exits 1 on a mismatch
      fi
      ms=null
      if line=$(timeout 60 env "${envs[@]}" "$lathe" run -e "$prog" --target "$target" --bench --iters 50 --warmup 3 \
        2>>"$out/errors.log"); then
        ms=$(sed -n 's/.*median \([0-9.e+-]*\) ms.*/\1/p' <<<"$line")
        [ -n "$ms" ] || ms=null
      fi
      echo "{\"form\": \"$name\", \"weights\": \"$t\", \"n\": $n, \"k\": $k, \"check\": \"$verdict\", \"ms\": $ms}" \
        >>"$out/gemv.jsonl"
      echo "  $(($(date +%s) - t0)) s: $name $t $s check=$verdict ms=$ms" >&2
    done
  done
done

if [ "$decode" = 1 ]; then
  for f in "${fs[@]}"; do
    name=${f%%=*}
    settings=${f#*=}
    IFS=, read -r -a envs <<<"$settings"
    [ -z "$settings" ] && envs=()
    for q in q4_k_m q8_0; do
      if late; then echo "qgemv_h200: decode $name $q skipped: past ${budget} s" | tee -a "$out/errors.log" >&2; continue; fi
      if line=$(timeout 90 env "${envs[@]}" "$lathe" bench --config "$config" --random-weights --target "$target" \
        --weights "$q" --gen-len 128 --prefill-len 0 --json 2>>"$out/errors.log"); then
        echo "{\"form\": \"$name\", \"weights\": \"$q\", \"result\": $line}" >>"$out/decode.jsonl"
      else
        echo "qgemv_h200: decode $name $q failed (see $out/errors.log)" | tee -a "$out/errors.log" >&2
      fi
      echo "  $(($(date +%s) - t0)) s: decode $name $q" >&2
    done
  done
fi

{
  echo "| form | weights | w [N, K] | check | us | % of floor at $bandwidth GB/s |"
  echo "|---|---|---|---|---|---|"
  while IFS= read -r l; do
    fm=$(sed -n 's/.*"form": "\([^"]*\)".*/\1/p' <<<"$l")
    w=$(sed -n 's/.*"weights": "\([^"]*\)".*/\1/p' <<<"$l")
    n=$(sed -n 's/.*"n": \([0-9]*\).*/\1/p' <<<"$l")
    k=$(sed -n 's/.*"k": \([0-9]*\).*/\1/p' <<<"$l")
    c=$(sed -n 's/.*"check": "\([^"]*\)".*/\1/p' <<<"$l")
    ms=$(sed -n 's/.*"ms": \([^}]*\)}.*/\1/p' <<<"$l")
    awk -v fm="$fm" -v w="$w" -v n="$n" -v k="$k" -v c="$c" -v ms="$ms" -v b="$(bytes_per "$w")" -v bw="$bandwidth" \
      'BEGIN { if (ms == "null") { printf "| %s | %s | [%s, %s] | %s | - | - |\n", fm, w, n, k, c; exit }
               us = ms * 1000; floor = n * k * b / (bw * 1e3);
               printf "| %s | %s | [%s, %s] | %s | %.1f | %.1f |\n", fm, w, n, k, c, us, 100 * floor / us }'
  done <"$out/gemv.jsonl"
  if [ -s "$out/decode.jsonl" ]; then
    echo
    echo "| form | $config decode | tok/s |"
    echo "|---|---|---|"
    while IFS= read -r l; do
      fm=$(sed -n 's/.*"form": "\([^"]*\)".*/\1/p' <<<"$l")
      w=$(sed -n 's/.*"weights": "\([^"]*\)".*/\1/p' <<<"$l")
      tps=$(grep -o '"decode_tok_s": *[0-9.e+-]*' <<<"$l" | head -1 | sed 's/.*: *//')
      echo "| $fm | $w | ${tps:-see decode.jsonl} |"
    done <"$out/decode.jsonl"
  fi
} >"$out/table.md"
echo "raw results: $out" >&2
cat "$out/table.md"
