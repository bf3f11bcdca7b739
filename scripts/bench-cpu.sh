#!/usr/bin/env bash
# CPU benchmark of lathe on the default model (SmolLM2-135M-Instruct, Q4_1 GGUF), beside
# llama.cpp's llama-bench on the same GGUF when a llama.cpp build is available.
#
#   scripts/bench-cpu.sh [--reps N] [--lathe PATH] [--model GGUF] [--build-llama DIR]
#
# lathe: a fixed 128-token prompt (one sentence repeated) and 64 generated tokens
# (--greedy --ignore-eos), one untimed warm-up run (fills the kernel compile cache), then N timed
# runs (default 3); prints each run and the median prompt and decode tokens/s.
# llama.cpp: `llama-bench -m GGUF -p 128 -n 64 -t <online cores> -r N` if $LLAMA_CPP_DIR holds a build
# (bin/llama-bench or build/bin/llama-bench under it).
# --build-llama DIR (opt-in, the only thing that downloads): fetches the llama-cpp-python sdist from
# PyPI with `pip download` (it vendors llama.cpp's source), builds llama-bench for the CPU into DIR
# (outside the repo) and uses it. Not part of `make test`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
reps=3
lathe=$root/build/lathe
model=${LATHE_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/lathe/models/SmolLM2-135M-Instruct.Q4_1.gguf}
build_llama=
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --lathe) lathe=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --build-llama) build_llama=$2; shift 2 ;;
    -h|--help) sed -n 2,14p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-cpu: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$lathe" ] || { echo "bench-cpu: $lathe not built (run make)" >&2; exit 2; }
[ -s "$model" ] || { echo "bench-cpu: model $model missing (run make model)" >&2; exit 2; }

# Builds llama-bench from the llama-cpp-python sdist into $1; prints nothing on success.
build_llama_cpp() {
  local dir=$1 src
  case $dir in "$root"|"$root"/*) echo "bench-cpu: --build-llama must be outside the repo" >&2; exit 2 ;; esac
  mkdir -p "$dir/sdist"
  if ! ls "$dir"/sdist/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
    python3 -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
      llama-cpp-python -d "$dir/sdist"
  fi
  src=$(ls -d "$dir"/sdist/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | head -1 || true)
  if [ -z "$src" ]; then
    tar xzf "$(ls "$dir"/sdist/llama_cpp_python-*.tar.gz | head -1)" -C "$dir/sdist"
    src=$(ls -d "$dir"/sdist/llama_cpp_python-*/vendor/llama.cpp | head -1)
  fi
  cmake -S "$src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DGGML_CUDA=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$dir/build" --target llama-bench -j"$(getconf _NPROCESSORS_ONLN)" >/dev/null
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# 12 sentences of 10 tokens + 8 more tokens = 128 prompt tokens with SmolLM2's tokenizer
# (lathe prints the count, so a different tokenizer shows up in the output).
sentence="The quick brown fox jumps over the lazy dog."
prompt=$sentence
for _ in $(seq 11); do prompt="$prompt $sentence"; done
prompt="$prompt The quick brown fox jumps over the lazy"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "lathe: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')${OMP_NUM_THREADS:+, OMP_NUM_THREADS=$OMP_NUM_THREADS}; model: $model"

run_lathe() {
  "$lathe" generate "$model" --prompt "$prompt" --greedy --ignore-eos --max-tokens 64 --target cpu 2>&1 >/dev/null |
    grep '^lathe: prompt '
}
run_lathe >/dev/null  # warm-up: compiles (or loads cached) kernels, pages the model in
pp=() tg=()
for r in $(seq "$reps"); do
  line=$(run_lathe)
  echo "  run $r: ${line#lathe: }"
  pp+=("$(sed -E 's/.*tokens in [0-9.]+ ms \(([0-9.]+) tok\/s\); generated.*/\1/' <<<"$line")")
  tg+=("$(sed -E 's/.*generated [0-9]+ tokens in [0-9.]+ ms \(([0-9.]+) tok\/s\).*/\1/' <<<"$line")")
done
echo "lathe median of $reps: prompt $(printf '%s\n' "${pp[@]}" | median) tok/s, decode $(printf '%s\n' "${tg[@]}" | median) tok/s"

if [ -n "$build_llama" ]; then
  build_llama_cpp "$build_llama"
  LLAMA_CPP_DIR=$build_llama
fi
bench=
for c in "${LLAMA_CPP_DIR:-}/bin/llama-bench" "${LLAMA_CPP_DIR:-}/build/bin/llama-bench"; do
  if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$c" ]; then bench=$c; break; fi
done
if [ -z "$bench" ]; then
  echo "llama.cpp: no llama-bench under \$LLAMA_CPP_DIR (set it, or pass --build-llama DIR); skipped"
  exit 0
fi
echo "llama.cpp: $bench -m $model -p 128 -n 64 -t $(getconf _NPROCESSORS_ONLN) -r $reps"
"$bench" -m "$model" -p 128 -n 64 -t "$(getconf _NPROCESSORS_ONLN)" -r "$reps"
