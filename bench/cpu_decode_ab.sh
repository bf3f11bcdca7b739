#!/usr/bin/env bash
# CPU decode A/B of two lathe binaries on the default model (SmolLM2-135M-Instruct Q4_1, --weights native):
# alternating runs (A B A B ...) of `lathe bench --target cpu --prompt-len 32 --gen-len G --prefill-len 0`, each
# run's decode tok/s with the 1-minute load average before it, then the medians and B / A.
#
#   bench/cpu_decode_ab.sh A B [--rounds N] [--threads T] [--gen-len G] [--batched]
#
# --threads T: OMP_NUM_THREADS (default: unset, OpenMP's default: every core). On a machine that other work keeps
# busy (load average at or above the cores), a team of two spends most of a step waiting at barriers for a
# descheduled partner: compare with --threads 1 there, or wait for a quiet machine.
# --batched: also issue 16's CPU ratio per binary, `--concurrency 8` against `--concurrency 1` (--prompt-len 32
# --gen-len 32, the file's weights as `lathe bench` takes them by default), output tok/s, medians over the rounds.
set -euo pipefail

[ $# -ge 2 ] || { sed -n 2,12p "$0" | sed 's/^# \{0,1\}//'; exit 2; }
a=$1 b=$2
shift 2
rounds=5 threads= gen=128 batched=0
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --gen-len) gen=$2; shift 2 ;;
    --batched) batched=1; shift ;;
    *) echo "cpu_decode_ab: unknown option '$1'" >&2; exit 2 ;;
  esac
done
model=${LATHE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -s "$model" ] || { echo "cpu_decode_ab: model $model missing (run make model)" >&2; exit 2; }
for x in "$a" "$b"; do [ -x "$x" ] || { echo "cpu_decode_ab: $x is not executable" >&2; exit 2; }; done

median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
load() { cut -d' ' -f1 /proc/loadavg; }
run() { # BINARY ARGS...: under OMP_NUM_THREADS=--threads when given
  local bin=$1; shift
  if [ -n "$threads" ]; then OMP_NUM_THREADS=$threads "$bin" "$@"; else "$bin" "$@"; fi
}

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "decode: $model, --weights native, prompt 32, $gen tokens, threads ${threads:-default}, $(nproc) cores"
for r in $(seq "$rounds"); do
  for side in a b; do
    bin=$a; [ $side = b ] && bin=$b
    l=$(load)
    v=$(run "$bin" bench "$model" --target cpu --weights native --prompt-len 32 --gen-len "$gen" --prefill-len 0 2>&1 |
      sed -n 's/.*decode after [0-9]*: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p')
    echo "round $r $side: ${v:-?} tok/s (load $l)"
    echo "${v:-0}" >>"$tmp/$side"
    if [ $batched = 1 ]; then
      for c in 1 8; do
        v=$(run "$bin" bench "$model" --target cpu --concurrency $c --prompt-len 32 --gen-len 32 2>&1 |
          sed -n 's/.*output: .*: \([0-9.]*\) tok\/s.*/\1/p')
        echo "round $r $side --concurrency $c: ${v:-?} tok/s"
        echo "${v:-0}" >>"$tmp/$side.c$c"
      done
    fi
  done
done
ma=$(median <"$tmp/a") mb=$(median <"$tmp/b")
echo "median decode: A $ma tok/s, B $mb tok/s, B/A $(awk -v x="$ma" -v y="$mb" 'BEGIN {printf "%.2f", (x > 0 ? y / x : 0)}')"
if [ $batched = 1 ]; then
  for side in a b; do
    c1=$(median <"$tmp/$side.c1") c8=$(median <"$tmp/$side.c8")
    echo "median $side: --concurrency 1 $c1 tok/s, 8 $c8 tok/s, ratio $(awk -v x="$c1" -v y="$c8" 'BEGIN {printf "%.2f", (x > 0 ? y / x : 0)}')"
  done
fi
