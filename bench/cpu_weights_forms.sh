#!/usr/bin/env bash
# The weights' forms of a quantized GGUF model on the CPU (issue 18): for each form (`--weights` value; "default"
# passes none), alternating per round (f32 bf16 native f32 bf16 native ...), with the 1-minute load average
# before each run:
#   - lathe bench --target cpu --prompt-len 128 --gen-len G --prefill-len 512: a 512-token prefill, decode tok/s;
#   - lathe bench --target cpu --prompt-len 8 --gen-len 8 --prefill-len 128: a 128-token prefill;
#   - lathe generate -n 1 --greedy under /usr/bin/time: the load time it prints ("loaded in": compile from the
#     warm cache and weights), the whole process's wall time and its peak resident memory.
# Then the medians per form, one table row each.
#
#   bench/cpu_weights_forms.sh [--lathe PATH] [--forms 'f32 bf16 native'] [--rounds N] [--threads T] [--gen-len G]
#
# --threads T: OMP_NUM_THREADS (default 2). The model is $LATHE_MODEL, else the default model.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
lathe=$root/build/lathe forms='f32 bf16 native' rounds=3 threads=2 gen=64
while [ $# -gt 0 ]; do
  case $1 in
    --lathe) lathe=$2; shift 2 ;;
    --forms) forms=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --gen-len) gen=$2; shift 2 ;;
    *) echo "cpu_weights_forms: unknown option '$1'" >&2; exit 2 ;;
  esac
done
model=${LATHE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -s "$model" ] || { echo "cpu_weights_forms: model $model missing (run make model)" >&2; exit 2; }
[ -x "$lathe" ] || { echo "cpu_weights_forms: $lathe is not executable" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "cpu_weights_forms: needs /usr/bin/time (GNU time)" >&2; exit 2; }

median() { sort -g | awk '{v[NR]=$1} END {if (!NR) print "?"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
load() { cut -d' ' -f1 /proc/loadavg; }
field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" | awk '{printf "%.1f", $1}'; } # a number of bench --json's
weights_arg() { [ "$1" = default ] || printf -- '--weights\n%s\n' "$1"; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cores=$(nproc) # before OMP_NUM_THREADS, which nproc honours
export OMP_NUM_THREADS=$threads
echo "$model on the CPU, OMP_NUM_THREADS=$threads, $cores cores, decode $gen tokens after 128, $rounds rounds"
for r in $(seq "$rounds"); do
  for f in $forms; do
    mapfile -t w < <(weights_arg "$f")
    l1=$(load)
    j=$("$lathe" bench "$model" --target cpu "${w[@]}" --json --prompt-len 128 --gen-len "$gen" --prefill-len 512)
    p512=$(field prefill_ms <<<"$j") dec=$(field decode_tok_s <<<"$j")
    l2=$(load)
    j=$("$lathe" bench "$model" --target cpu "${w[@]}" --json --prompt-len 8 --gen-len 8 --prefill-len 128)
    p128=$(field prefill_ms <<<"$j")
    l3=$(load)
    /usr/bin/time -f 'rss %M wall %e' -o "$tmp/time" "$lathe" generate "$model" --target cpu "${w[@]}" --greedy -n 1 \
      -p 'The capital of France is' >/dev/null 2>"$tmp/err"
    ld=$(sed -n 's/.* loaded in \([0-9.]*\) ms.*/\1/p' "$tmp/err")
    rss=$(awk '/^rss/ {printf "%.0f", $2 / 1024}' "$tmp/time") wall=$(awk '/^rss/ {print $4}' "$tmp/time")
    printf '%-8s round %d: prefill-512 %s ms (load %s), decode %s tok/s, prefill-128 %s ms (load %s), ' "$f" "$r" \
      "$p512" "$l1" "$dec" "$p128" "$l2"
    printf 'generate: loaded in %s ms, wall %s s, peak RSS %s MB (load %s)\n' "$ld" "$wall" "$rss" "$l3"
    for k in p512 dec p128 ld wall rss; do echo "${!k:-0}" >>"$tmp/$f.$k"; done
  done
done
echo
echo "| weights | prefill 128 (ms) | prefill 512 (ms) | decode (tok/s) | load (ms) | process wall (s) | peak RSS (MB) |"
echo "|---|---|---|---|---|---|---|"
for f in $forms; do
  printf '| %s |' "$f"
  for k in p128 p512 dec ld wall rss; do printf ' %s |' "$(median <"$tmp/$f.$k")"; done
  echo
done
