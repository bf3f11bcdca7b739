#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# Quantized weight types: programs with q* inputs (random blocks, checked against the reference), their
# errors, --ir printing, and --weights native on the default model (the same greedy tokens as the f32 path).
for t in q8_0 q4_0 q4_1 q5_0 q5_1; do
  expect quant-run-$t 0 'check y: max relative error .* ok' -- run -e "w: $t[5,64]; x: f32[3,64]; y = linear(x, w)" --check
  # 19 rows: two tiles of 8 and 3 left over
  expect quant-run-tile-$t 0 'check y: max relative error .* ok' -- \
    run -e "w: $t[5,64]; x: f32[seq,64]; y = linear(x, w)" --check --dim seq=19
done
for t in q4_k q5_k q6_k; do
  expect quant-run-$t 0 'check e: max relative error 0 .* ok' -- run -e "w: $t[3,512]; i: i32[4]; e = embedding(i, w)" --check
done
expect quant-ir-tensor 0 'w = input : q4_1\[5,64\]' -- compile -e "w: q4_1[5,64]; x: f32[3,64]; y = linear(x, w)" --ir tensor
# a decode GEMV: integer dot products over int16 activation blocks; LATHE_CPU_INT_DOT=0: the blocks decoded to f32
expect quant-ir-kernel 0 'acc0 \+= qdot\(w\[i1, 0\] \.\. 2 blocks, qrow0\)' -- \
  compile -e "w: q4_1[5,64]; x: f32[3,64]; y = linear(x, w)" --ir kernel --target cpu
LATHE_CPU_INT_DOT=0 expect quant-ir-kernel-decoded 0 'f32\(w\[i1, rb[0-9]+, g[0-9]+, e[0-9]+\]\)' -- \
  compile -e "w: q4_1[5,64]; x: f32[3,64]; y = linear(x, w)" --ir kernel --target cpu
# a blocked prefill: a tile of the 8 rows quantized to int16 against each weight row (lt_qdott_FORMAT), the block of
# rows the slowest point index (the tile stays in cache while the weight rows pass); LATHE_CPU_INT_TILE=0: the
# weight row decoded once into a row cache, the sums over it as over f32 weights
expect quant-ir-kernel-tile 0 'acc0, acc0, acc0, acc0, acc0, acc0, acc0, acc0 \+= qdot tile\(w\[i1, 0\] \.\. 2 blocks, qrow0\)' -- \
  compile -e "w: q4_1[5,64]; x: f32[seq,64]; y = linear(x, w)" --ir kernel --target cpu
expect quant-code-tile 0 'lt_qdott_q4_1\(w, \(\(i1 \* 64\)\) / 32, 2, lt_q0, lt_dt\);' -- \
  compile -e "w: q4_1[5,64]; x: f32[seq,64]; y = linear(x, w)" --ir code --target cpu
if run_lathe quant-code-tile-rows-slowest compile -e "w: q4_1[5,64]; x: f32[seq,64]; y = linear(x, w)" --ir code \
  --target cpu; then
  # the blocked variant enumerates its points as the unblocked kernel does: the row (block) index slowest
  n=$(grep -c 'int64_t i0 = (p3 / 5);' "$tmp/out")
  if [ "$n" = 2 ]; then pass quant-code-tile-rows-slowest
  else fail quant-code-tile-rows-slowest "$n kernels with the rows slowest, expected 2"; fi
fi
LATHE_CPU_INT_TILE=0 expect quant-ir-kernel-rows 0 'qrow[0-9]+ = smem[0-9]+: f32 row w\[' -- \
  compile -e "w: q4_1[5,64]; x: f32[seq,64]; y = linear(x, w)" --ir kernel --target cpu
expect quant-code-cuda 0 '\+ lt_qd8_q6_k\(w \+ \(i1\) \* 210LL, ' -- compile -e "w: q6_k[5,256]; x: f32[3,256]; y = linear(x, w)" --ir code --target cuda
expect_error quant-bad-row "input 'w': a q8_0 tensor's last dimension must be a constant multiple of 32" -- \
  run -e "w: q8_0[5,40]; y = w * 2"
expect_error quant-no-cast 'cast: q4_0 is a weight format that only program inputs have' -- \
  run -e "x: f32[32]; y = cast(x, q4_0)"
expect_error quant-bad-weights "unknown --weights 'q4'.*native" -- generate "$DM" -p hi --weights q4
if [ ! -f "$DM" ]; then
  skip quant-native-default-model "default model not installed (make model)"
else
  if run_lathe quant-native-f32 generate "$DM" -p "The capital of France is" -n 8 --greedy --json -q; then
    f32=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])' <"$tmp/out")
    if run_lathe quant-native generate "$DM" -p "The capital of France is" -n 8 --greedy --json -q --weights native; then
      native=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])' <"$tmp/out")
      if [ "$f32" = "$native" ] && [ -n "$f32" ]; then pass quant-native-greedy
      else fail quant-native-greedy "native $native, f32 $f32"; fi
    fi
  fi
  expect quant-native-bench 0 '"weights_dtype": ?"native"' -- \
    bench "$DM" --weights native --prompt-len 4 --gen-len 2 --prefill-len 0 --reps 1 --json
fi
