#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# lathe quantize: usage errors, a fixture directory to each type, and the default model to q8_0, q4_k_m
# and f16, generated from and checked with the PyPI gguf package (scripts/gguf-py-check.sh).
F=tests/fixtures/models
expect_error quantize-needs-type 'needs --type' -- quantize $F/llama "$tmp/x.gguf"
expect_error quantize-bad-type "unknown --type 'q3_k'.*q4_k_m" -- quantize $F/llama "$tmp/x.gguf" --type q3_k
expect_error quantize-needs-out 'needs IN and OUT' -- quantize $F/llama --type q8_0
expect_error quantize-missing-in 'nope' -- quantize "$tmp/nope" "$tmp/x.gguf" --type q8_0
expect_error quantize-unwritable 'cannot create' -- quantize $F/llama "$tmp/no/dir/x.gguf" --type q8_0 -q
for t in q8_0 q4_0 q4_1 q4_k_m q5_k_m q6_k; do
  expect quantize-fixture-$t 0 "quantize: .*\\($t\\): 21 tensors" -- quantize $F/llama "$tmp/llama_$t.gguf" --type $t
done
# the float types: every matrix (the LM head too) in that type; f32 keeps the fixture's values, so its tokens
for t in f16 bf16 f32; do
  m="f32 5 $t 16"; [ $t = f32 ] && m="f32 21"
  expect quantize-fixture-$t 0 "quantize: .*\\($t\\): 21 tensors.*; $m;" -- quantize $F/llama "$tmp/llama_$t.gguf" --type $t
done
if run_lathe quantize-f32-ref generate $F/llama --prompt-tokens 1,2,3 -n 6 --greedy -q; then
  ref=$(cat "$tmp/out")
  expect quantize-f32-same-tokens 0 "^$ref\$" -- generate "$tmp/llama_f32.gguf" --prompt-tokens 1,2,3 -n 6 --greedy -q
fi
expect_error quantize-bad-float "unknown --type 'f8'.*bf16, f32" -- quantize $F/llama "$tmp/x.gguf" --type f8
expect quantize-fixture-fallback 0 'q5_0 13.*by row-length fallback; no tokenizer' -- \
  quantize $F/llama "$tmp/l.gguf" --type q4_k_m
expect quantize-fixture-runs 0 '[0-9]' -- generate "$tmp/llama_q4_k_m.gguf" --prompt-tokens 1,2,3 -n 4 --greedy -q
if [ ! -f "$DM" ]; then
  skip quantize-default-model "default model not installed (make model)"
else
  for t in q8_0 q4_k_m f16; do
    if run_lathe quantize-dm-$t quantize "$DM" "$tmp/dm_$t.gguf" --type $t; then pass quantize-dm-$t; fi
    expect quantize-dm-$t-generate 0 'Paris' -- generate "$tmp/dm_$t.gguf" -p "The capital of France is" -n 4 --greedy -q
  done
  out=$(scripts/gguf-py-check.sh "$tmp/dm_q4_k_m.gguf" --expect-key tokenizer.ggml.tokens \
        --expect-key llama.block_count --expect-key general.file_type 2>&1); rc=$?
  if [ $rc -eq 77 ]; then skip quantize-gguf-py "$out"
  elif [ $rc -eq 0 ] && echo "$out" | grep -q 'Q4_K.*Q6_K'; then pass quantize-gguf-py
  else fail quantize-gguf-py "$out"; fi
  # the f16 copy holds f16 matrices and f32 vectors only (the reader lists the types sorted)
  out=$(scripts/gguf-py-check.sh "$tmp/dm_f16.gguf" --expect-key general.file_type 2>&1); rc=$?
  if [ $rc -eq 77 ]; then skip quantize-gguf-py-f16 "$out"
  elif [ $rc -eq 0 ] && echo "$out" | grep -q 'tensors (F16, F32)'; then pass quantize-gguf-py-f16
  else fail quantize-gguf-py-f16 "$out"; fi
  rm -f "$tmp"/dm_*.gguf
fi
