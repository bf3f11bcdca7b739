#!/usr/bin/env bash
# CPU goldens: a set of programs tuned on this machine's CPU (lathe tune --target cpu, wall-clock timing) and
# exported as goldens/cpu-NAME.json, so the prior's reproduction gate (lathe fit --gate, run by make test)
# has real measurements until the H200's goldens (bench/tune_h200.sh) are committed. Minutes on 2 cores.
#
#   bench/tune_cpu_goldens.sh [--lathe PATH] [--out DIR] [--max-candidates N]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lathe=$root/build/lathe
out=$root/goldens
maxc=24
while [ $# -gt 0 ]; do
  case $1 in
    --lathe) lathe=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --max-candidates) maxc=$2; shift 2 ;;
    *) echo "tune_cpu_goldens: unknown option '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$(mktemp -d /tmp/lathe-cpu-goldens.XXXXXX)}
mkdir -p "$LATHE_CACHE_DIR"
db=$LATHE_CACHE_DIR/tune.db
# name|program|dims
programs=(
  "rms-norm-64x4096|x: f32[64,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)|"
  "layernorm-512x1024|x: f32[512,1024]; w: f32[1024]; b: f32[1024]; y = layer_norm(x, w, b, 1e-5)|"
  "softmax-256x4000|x: f32[256,4000]; y = softmax(x, -1)|"
  "softmax-8x32000|x: f32[8,32000]; y = softmax(x, -1)|"
  "gemv-1x1024x2048|x: f32[seq,1024]; w: f32[2048,1024]; y = linear(x, w)|seq=1"
  "gemm-64x1024x2048|x: f32[seq,1024]; w: f32[2048,1024]; y = linear(x, w)|seq=64"
  "gemv-bf16-1x2048x1024|x: f32[seq,2048]; w: bf16[1024,2048]; y = linear(x, w)|seq=1"
  "norm-linear-16|x: f32[seq,512]; g: f32[512]; w: f32[1024,512]; h = rms_norm(x, g, 1e-6); y = linear(h, w)|seq=16"
  "swiglu-1x8192|g: f32[1,8192]; u: f32[1,8192]; y = silu(g) * u|"
  "scale-add-512x4096|a: f32[512,4096]; b: f32[4096]; y = a * b + 1|"
  "attention-64|q: f32[1,8,seq,64]; k: f32[1,8,seq,64]; v: f32[1,8,seq,64]; y = attention(q, k, v, true)|seq=64"
  "attention-decode|q: f32[1,8,1,64]; k: f32[1,8,seq,64]; v: f32[1,8,seq,64]; y = attention(q, k, v, false)|seq=512"
)
for entry in "${programs[@]}"; do
  IFS='|' read -r name prog dims <<<"$entry"
  dim_args=()
  for d in $dims; do dim_args+=(--dim "$d"); done
  echo "tune_cpu_goldens: $name" >&2
  "$lathe" tune -e "$prog" "${dim_args[@]}" --target cpu --db "$db" --max-candidates "$maxc" --patience 0 \
    --repeats 5 --warmup 2 >"$LATHE_CACHE_DIR/$name.txt" 2>"$LATHE_CACHE_DIR/$name.err" ||
    { echo "tune_cpu_goldens: $name failed: $(tail -1 "$LATHE_CACHE_DIR/$name.err")" >&2; continue; }
  "$lathe" tune -e "$prog" "${dim_args[@]}" --target cpu --db "$db" --export "$out/cpu-$name.json" >&2
done
