#!/usr/bin/env bash
# Writes the generated code (and tile stage) of the built-in configs and a few programs into DIR, so that
# a refactoring can show its generated code is unchanged: run it before and after, then `diff -r`.
#   scripts/codegen-snapshot.sh DIR [LATHE]
set -euo pipefail
dir=${1:?usage: codegen-snapshot.sh DIR [LATHE]}
lathe=${2:-build/lathe}
mkdir -p "$dir"
for cfg in qwen3-0.6b llama-3.2-1b qwen3-8b smollm2-135m; do
  for t in cuda cpu; do
    "$lathe" compile --config "$cfg" --target "$t" --ir code >"$dir/$cfg.$t.code"
    "$lathe" compile --config "$cfg" --target "$t" --ir tile >"$dir/$cfg.$t.tile"
  done
  "$lathe" compile --config "$cfg" --target cuda --ir code --matmul-precision medium >"$dir/$cfg.cuda-medium.code"
done
i=0
while IFS= read -r prog; do
  [ -n "$prog" ] || continue
  i=$((i + 1))
  for t in cuda cpu; do "$lathe" compile -e "$prog" --target "$t" --ir code >"$dir/prog$i.$t.code"; done
done <<'PROGS'
x: f32[1,32,2048]; w: f32[2048]; y = rms_norm(x, w, 1e-6)
x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)
x: f32[8192, 8192]; w: f32[8192]; b: f32[8192]; y = layer_norm(x, w, b, 1e-5)
x: f32[4096, 32000]; y = softmax(x, -1)
q: f32[1,4,seq,8]; k: f32[1,2,kv,8]; v: f32[1,2,kv,8]; y = attention(q, k, v, true)
x: f32[seq, 300]; y = argmax(x, -1)
PROGS
echo "wrote $(ls "$dir" | wc -l) files to $dir"
