#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# Quantized weight types: programs with q* inputs (random blocks, checked against the reference), their
# errors, --ir printing, and the default model's blocks read natively by default on the CPU (the same greedy
# tokens as its f32 dequantization).
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
# The default model (Q4_1) on the CPU: by default (--weights auto) its blocks are read as they are (native), with the
# greedy tokens of their exact f32 dequantization (--weights f32).
tokens() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["weights"], j["tokens"])' "$1"; }
# peak_rss_mb ARGS...: the peak resident memory of `lathe ARGS`, in MB
peak_rss_mb() {
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' "$LATHE" "$@"
}
if [ ! -f "$DM" ]; then
  for t in quant-default-greedy-1 quant-default-greedy-2 quant-default-bench quant-default-rss quant-native-bench quant-compile-model-cpu \
    quant-compile-model-cuda quant-compile-model-f32; do skip $t "default model not installed (make model)"; done
else
  i=0
  for p in "The capital of France is" "Once upon a time"; do
    i=$((i + 1)) t=quant-default-greedy-$i
    if run_lathe $t generate "$DM" -p "$p" -n 16 --greedy --json -q --target cpu; then
      cp "$tmp/out" "$tmp/default.json"
      if run_lathe $t generate "$DM" -p "$p" -n 16 --greedy --json -q --target cpu --weights f32; then
        d=$(tokens "$tmp/default.json") f=$(tokens "$tmp/out")
        if [ "${d#native }" = "${f#f32 }" ] && [ "${d%% *}" = native ] && [ "${f%% *}" = f32 ]; then
          pass $t
        else fail $t "'$p': default: $d; --weights f32: $f"; fi
      fi
    fi
  done
  small=(--target cpu --prompt-len 4 --gen-len 2 --prefill-len 0 --reps 1 --json)
  if run_lathe quant-default-bench bench "$DM" "${small[@]}" && cp "$tmp/out" "$tmp/default.json" &&
    run_lathe quant-default-bench bench "$DM" "${small[@]}" --weights f32; then
    # the blocks: 4.5-5 bits a weight of the matrices (q4_1, the embedding q8_0) against f32's 32
    if python3 -c 'import json,sys; n, f = (json.load(open(a)) for a in sys.argv[1:])
assert n["weights_dtype"] == "native" and f["weights_dtype"] == "f32", (n["weights_dtype"], f["weights_dtype"])
assert n["weight_bytes"] * 4 < f["weight_bytes"], (n["weight_bytes"], f["weight_bytes"])' "$tmp/default.json" "$tmp/out"
    then pass quant-default-bench; else fail quant-default-bench "$(head -c 300 "$tmp/default.json")"; fi
  fi
  # the f32 copy of the matrices is ~440 MB more than their blocks, which are read where the file is mapped
  n=$(peak_rss_mb generate "$DM" -p hi -n 1 --greedy -q --target cpu) f=$(peak_rss_mb generate "$DM" -p hi -n 1 \
    --greedy -q --target cpu --weights f32)
  if [ -n "$n" ] && [ -n "$f" ] && [ "$n" -lt $((f - 300)) ]; then pass quant-default-rss
  else fail quant-default-rss "peak RSS: default ${n:-?} MB, --weights f32 ${f:-?} MB"; fi
  expect quant-native-bench 0 '"weights_dtype": ?"native"' -- \
    bench "$DM" --weights native --prompt-len 4 --gen-len 2 --prefill-len 0 --reps 1 --json
  # lathe compile builds the types generate loads: the blocks on the CPU and on CUDA, f32 with --weights f32
  q='model\.layers\.0\.self_attn\.q_proj\.weight = input : '
  expect quant-compile-model-cpu 0 "${q}q4_1\[576,576\]" -- compile "$DM" --ir tensor
  expect quant-compile-model-cuda 0 "${q}q4_1\[576,576\]" -- compile "$DM" --ir tensor --target cuda
  expect quant-compile-model-f32 0 "${q}f32\[576,576\]" -- compile "$DM" --ir tensor --weights f32
fi
