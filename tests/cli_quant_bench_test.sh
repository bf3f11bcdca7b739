#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# bench and compile --config NAME --weights QUANT: random weights quantized at load by lathe quantize's type rule,
# read as blocks; the dequantized reference gives the same logits; the errors of the options.
small=(--config smollm2-135m --random-weights --target cpu --prompt-len 4 --gen-len 3 --prefill-len 6 --reps 1 --json)
expect quant-bench-q8_0 0 '"weights_dtype": ?"q8_0"' -- bench "${small[@]}" --weights q8_0
expect quant-bench-dequantized 0 '"weights_dtype": ?"q4_0 dequantized to f32"' -- \
  bench "${small[@]}" --weights q4_0 --dequantized f32
# the blocks and their dequantized values: the same logits up to the order of the sums; f32 weights are others
if run_lathe quant-bench-native bench "${small[@]}" --weights q4_k_m; then
  cp "$tmp/out" "$tmp/native.json"
  if run_lathe quant-bench-ref bench "${small[@]}" --weights q4_k_m --dequantized f32; then
    cp "$tmp/out" "$tmp/ref.json"
    run_lathe quant-bench-f32 bench "${small[@]}" --dtype f32 && cp "$tmp/out" "$tmp/f32.json"
    if python3 - "$tmp/native.json" "$tmp/ref.json" "$tmp/f32.json" <<'PY'; then
import json, sys
n, r, f = (json.load(open(p)) for p in sys.argv[1:])
def dev(a, b):
    return max(abs(x - y) for x, y in zip(a["prefill_logits_sample"], b["prefill_logits_sample"])) / b["prefill_logits_rms"]
assert n["weights_dtype"] == "q4_k_m" and len(n["prefill_logits_sample"]) == 64
assert dev(n, r) < 5e-4, dev(n, r)  # sums in another order (1.1e-4 with AVX2's 8-lane forms)
assert dev(f, r) > 1e-3, dev(f, r)  # the quantization changed the weights
assert n["greedy_tokens"] == r["greedy_tokens"] and len(n["greedy_tokens"]) == 3
# smollm2's q4_k_m: q5_0 rows of 576, q4_k / q6_k down projections, q8_0 tied embeddings: under a byte per weight
assert n["weight_bytes"] < f["weight_bytes"] / 4, (n["weight_bytes"], f["weight_bytes"])
PY
      pass quant-bench-matches-reference
    else fail quant-bench-matches-reference "logits of the blocks and the dequantized reference differ"; fi
  fi
fi
expect_error quant-bench-model-weights "--weights q8_0 applies to --config only" -- bench "$DM" --weights q8_0
expect_error quant-bench-dequantized-alone "--dequantized needs --config and --weights QUANT" -- \
  bench --config smollm2-135m --random-weights --dequantized f32
expect_error quant-bench-dequantized-bad "--dequantized expects f32, f16 or bf16, got 'q4_0'" -- \
  bench --config smollm2-135m --random-weights --weights q8_0 --dequantized q4_0
expect quant-compile-config 0 'lt_dq8_q4_k\(model_layers_0_self_attn_q_proj_weight, ' -- compile --config llama-3.2-1b --weights q4_k_m --target cuda --ir code
expect quant-compile-config-q6 0 'q6_k\[2048,8192\]' -- compile --config llama-3.2-1b --weights q4_k_m --ir tensor
expect_error quant-compile-bad "unknown --weights 'q3_k' .expected one of q8_0, q4_0" -- \
  compile --config llama-3.2-1b --weights q3_k --ir tensor
expect_error quant-compile-no-config "--weights applies to a model or --config only" -- compile -e "x: f32[4]; y = x * 2" --weights q8_0
