#!/usr/bin/env bash
# End-to-end tests of the `lathe` command line (the AddressSanitizer/UBSan build): what a user types,
# the exit codes, and one clear error line for bad input. Prints "ok NAME" or "FAIL NAME" per test.
set -u
source "$(dirname "$0")/cli_lib.sh"

P='x: f32[1,32,2048]; w: f32[2048]; y = rms_norm(x, w, 1e-6)'
for st in graph tensor loop tile kernel code; do
  expect "compile_ir_$st" 0 . -- compile -e "$P" --ir $st
done
expect compile_graph_text 0 'y = rms_norm\(x, w, eps=1e-0?6\) : f32\[1,32,2048\]' -- compile -e "$P" --ir graph
expect compile_cuda_global 0 '__global__' -- compile -e "$P" --ir code --target cuda
# --fuse-recompute on a whole model (the norm sum inside gate/up's register-blocked variant once ran
# out of kernel temporaries)
expect compile_fuse_recompute_model 0 'recomputed per point' -- compile --config llama-3.2-1b --fuse-recompute --ir loop --target cuda
expect compile_fuse_recompute_code 0 '__global__' -- compile --config llama-3.2-1b --fuse-recompute --ir code --target cuda
expect compile_c_entry 0 'void rms_norm_0\(void \*const \*lt_bufs' -- compile -e "$P" --ir code --target cpu
printf '# a program in a file\nx: f32[4, 8]\nw: f32[8]\n\ny = softmax(x * w, -1)\n' >"$tmp/prog.lt"
expect compile_file 0 'for ' -- compile "$tmp/prog.lt" --ir loop
if "$LATHE" compile "$tmp/prog.lt" -o "$tmp/out.c" >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ] && grep -q 'void softmax_0' "$tmp/out.c"; then
  pass compile_out_file
else
  fail compile_out_file "no code in the -o file, or output on stdout"
fi
expect run_check 0 'check y: max relative error .* ok' -- run -e "$P" --target cpu --check
expect run_check_file 0 'ok' -- run "$tmp/prog.lt" --check
expect run_bench 0 'bench: 1 kernel, median [0-9.]+ ms' -- run -e "$P" --bench --iters 5 --warmup 1
expect run_print 0 'y: f32\[1,32,2048\] = \[' -- run -e "$P"
expect run_dim 0 'check y: .* ok' -- run -e 'x: f32[seq, 16]; y = softmax(x, -1)' --dim seq=7 --check
expect run_dim_multi 0 'ok' -- run -e 'q: f32[1,4,seq,8]; k: f32[1,2,kv,8]; v: f32[1,2,kv,8]; y = attention(q, k, v, true)' --dim seq=3 --dim kv=9 --check
expect run_argmax 0 'check y: .* ok' -- run -e 'x: f32[seq, 300]; y = argmax(x, -1)' --dim seq=9 --check
# a linear over 9 tokens: the register-blocked variant (4 rows per pass on the CPU) and its remainder
expect run_rows_variant 0 'check y: .* ok' -- run -e 'x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)' --dim seq=9 --check
expect compile_matmul_precision 0 'matmul precision: medium' -- compile -e 'x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)' --target cuda --ir tile --matmul-precision medium
# --check knows the precision it was asked for: medium rounds the products' activations to bf16
expect run_check_medium_tolerance 0 'tolerance 0.01, f32, cpu, matmul precision medium\) ok' -- run -e 'x: f32[8, 64]; w: bf16[96, 64]; y = linear(x, w)' --target cpu --check --matmul-precision medium
expect compile_mma_parts 0 'pack A into 1 bf16 plane' -- compile -e 'x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)' --target cuda --ir kernel --matmul-precision medium
expect compile_highest_no_mma 0 'linear_0_rows8' -- compile -e 'x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)' --target cuda --ir kernel --matmul-precision highest
expect help 0 'usage: lathe' -- --help

expect_error err_matmul_precision "unknown --matmul-precision 'fast' \(expected highest, high or medium\)" -- compile -e "$P" --matmul-precision fast
expect_error err_matmul_precision_bench "unknown --matmul-precision 'fast'" -- bench --config smollm2-135m --random-weights --target cpu --matmul-precision fast
expect_error err_syntax '<-e>:1:[0-9]+: error' -- compile -e 'x: f32[4]; y = exp(x'
expect_error err_unknown_op "unknown op 'frobnicate'" -- compile -e 'x: f32[4]; y = frobnicate(x)'
expect_error err_argmax_axes 'argmax: give exactly one axis' -- compile -e 'x: f32[4,5]; y = argmax(x)'
expect_error err_unknown_dtype "unknown dtype 'f8'" -- compile -e 'x: f8[4]; y = exp(x)'
expect_error err_shape 'do not broadcast|broadcast' -- compile -e 'a: f32[2,3]; b: f32[4]; y = a + b'
expect_error err_matmul 'matmul' -- compile -e 'a: f32[2,3]; b: f32[4,5]; y = matmul(a, b)'
expect_error err_undefined "undefined name 'z'" -- compile -e 'x: f32[4]; y = x + z'
expect_error err_position '<-e>:2:' -- compile -e $'x: f32[4]\ny = exp(x) +'
expect_error err_missing_dim "seq" -- run -e 'x: f32[seq]; y = exp(x)'
expect_error err_bad_dim "no symbolic dimension named 'foo'" -- run -e 'x: f32[seq]; y = exp(x)' --dim seq=3 --dim foo=2
expect_error err_bad_dim_value "--dim expects NAME=N" -- run -e 'x: f32[4]; y = exp(x)' --dim seq=abc
expect_error err_stage "unknown stage 'lop'" -- compile -e "$P" --ir lop
expect_error err_target "unknown target" -- compile -e "$P" --target tpu
expect_error err_no_file "cannot open" -- compile "$tmp/nonexistent.lt"
expect_error err_no_program "no program" -- compile --ir graph
expect_error err_command "unknown command" -- frobnicate
expect_error err_option "unknown option '--frob' for run" -- run -e "$P" --frob
expect_error err_no_output "no output" -- compile -e 'x: f32[4]'
head -c 3000 /dev/urandom >"$tmp/garbage.lt"
"$LATHE" compile "$tmp/garbage.lt" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && ! grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then pass err_garbage_file; else fail err_garbage_file "exit $rc: $(head -3 "$tmp/err")"; fi

# The compile cache: a second run of the same program reuses the compiled object.
export LATHE_CACHE_DIR="$tmp/cache"
"$LATHE" run -e "$P" >/dev/null 2>&1
n1=$(ls "$LATHE_CACHE_DIR" | grep -c '\.so$')
"$LATHE" run -e "$P" >/dev/null 2>&1
n2=$(ls "$LATHE_CACHE_DIR" | grep -c '\.so$')
if [ "$n1" -eq 1 ] && [ "$n2" -eq 1 ]; then pass cache_reused; else fail cache_reused "objects after two runs: $n1, $n2"; fi

# ---- Models: generate, chat and compile on real weights -------------------------------------------
# LATHE_CACHE_DIR (set above, inside $tmp) keeps the compiled model, so only the first run of each
# model pays for the C compiler.
FIX=tests/fixtures/models
for mdl in llama qwen3; do
  ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('$FIX/$mdl/expected.json'))['prompt_ids'])))")
  want=$(python3 -c "import json; print(json.load(open('$FIX/$mdl/expected.json'))['greedy'])")
  if run_lathe "generate_fixture_$mdl" generate "$FIX/$mdl" --prompt-tokens "$ids" --greedy --max-tokens 8 --ignore-eos --json; then
    json_ok "generate_fixture_$mdl" "j['tokens'] == $want and j['prompt_tokens'] == [$ids] and j['stop_reason'] == 'length'"
  fi
done

if run_lathe compile_model_loop compile "$FIX/llama" --ir loop; then
  nk=$(grep -c '^kernel ' "$tmp/out")
  if [ "$nk" -gt 10 ] && grep -q 'model.embed_tokens.weight' "$tmp/out"; then pass compile_model_loop; else fail compile_model_loop "$nk kernels"; fi
fi
if run_lathe compile_model_cuda compile "$FIX/qwen3" --ir code --target cuda; then
  nk=$(grep -c '__global__' "$tmp/out")
  if [ "$nk" -gt 10 ]; then pass compile_model_cuda; else fail compile_model_cuda "$nk __global__ functions"; fi
fi

# The default model (SmolLM2-135M-Instruct, Q4_1 GGUF): skipped when `make model` has not fetched it.
DEFAULT_TESTS="generate_greedy_paris generate_stats_line generate_json_stop generate_seed_reproducible generate_chat_template generate_max_tokens_0 chat_two_turns chat_eof generate_weights_bf16"
if [ ! -f "$DM" ]; then
  for n in $DEFAULT_TESTS; do skip "$n" "no default model at $DM"; done
else
  FR="The capital of France is"
  if run_lathe generate_greedy_paris generate --prompt "$FR" --greedy --max-tokens 8; then
    if head -1 "$tmp/out" | grep -q -F "$FR Paris."; then pass generate_greedy_paris; else fail generate_greedy_paris "stdout: $(head -c 200 "$tmp/out")"; fi
    if grep -q -E 'prompt [0-9]+ tokens .*\([0-9.]+ tok/s\); generated 8 tokens .*\([0-9.]+ tok/s\)' "$tmp/err" && ! grep -q 'tok/s' "$tmp/out"
    then pass generate_stats_line; else fail generate_stats_line "stderr: $(tr '\r' '\n' <"$tmp/err" | tail -2)"; fi
  fi
  if run_lathe generate_json_stop generate --prompt "$FR" --greedy --max-tokens 16 --stop "." --json -q; then
    json_ok generate_json_stop "j['stop_reason'] == 'stop' and j['text'].strip() == 'Paris.' and len(j['tokens']) < 16 and len(j['prompt_tokens']) == 5"
  fi
  for i in 1 2; do
    if run_lathe generate_seed_reproducible generate --prompt "Once upon a time" --temperature 0.8 --seed 1234 --max-tokens 12 -q; then
      cp "$tmp/out" "$tmp/seed$i"
    else
      : >"$tmp/seed$i.failed"
    fi
  done
  if [ ! -e "$tmp/seed1.failed" ] && [ ! -e "$tmp/seed2.failed" ]; then
    if cmp -s "$tmp/seed1" "$tmp/seed2" && [ "$(wc -c <"$tmp/seed1")" -gt 20 ]; then pass generate_seed_reproducible
    else fail generate_seed_reproducible "runs differ: '$(cat "$tmp/seed1")' vs '$(cat "$tmp/seed2")'"; fi
  fi
  # --chat: the prompt goes through the ChatML template (<|im_start|> is token 1), and the model answers.
  if run_lathe generate_chat_template generate --chat --prompt "What is the capital of France?" --greedy --max-tokens 12 --json -q; then
    json_ok generate_chat_template "j['prompt_tokens'][0] == 1 and j['prompt_tokens'].count(1) >= 3 and len(j['prompt_tokens']) > 20 and 'Paris' in j['text']"
  fi
  if run_lathe generate_max_tokens_0 generate --prompt "$FR" --max-tokens 0; then
    if [ "$(cat "$tmp/out")" = "$FR" ] && grep -q 'generated 0 tokens' "$tmp/err"; then pass generate_max_tokens_0
    else fail generate_max_tokens_0 "stdout: '$(cat "$tmp/out")'"; fi
  fi
  # the dequantized weights stored as bf16 (half the bytes): still the same answer
  if run_lathe generate_weights_bf16 generate --prompt "$FR" --greedy --max-tokens 4 --weights bf16; then
    if head -1 "$tmp/out" | grep -q -F "$FR Paris"; then pass generate_weights_bf16; else fail generate_weights_bf16 "stdout: $(head -c 200 "$tmp/out")"; fi
  fi
  printf 'What is the capital of France?\nAnd of Germany?\n/exit\n' >"$tmp/in"
  if run_lathe chat_two_turns chat --greedy --max-tokens 24 -q; then
    if [ "$(grep -c . "$tmp/out")" -eq 2 ] && sed -n 1p "$tmp/out" | grep -q Paris && sed -n 2p "$tmp/out" | grep -q Berlin
    then pass chat_two_turns; else fail chat_two_turns "replies: $(head -c 300 "$tmp/out")"; fi
  fi
  printf 'What is the capital of France?\n' >"$tmp/in"
  if run_lathe chat_eof chat --greedy --max-tokens 24 -q; then
    if grep -q Paris "$tmp/out"; then pass chat_eof; else fail chat_eof "reply: $(head -c 200 "$tmp/out")"; fi
  fi
  rm -f "$tmp/in"
fi

# Bad models and bad generate options: one error line, exit 2, nothing on stdout.
PT=1,17,42,99,3,250,7,64,128,5,200,33
mkdir -p "$tmp/models"
cp -r "$FIX/llama" "$tmp/models/truncated"
head -c "$(( $(stat -c %s "$FIX/llama/model.safetensors") * 2 / 3 ))" "$FIX/llama/model.safetensors" >"$tmp/models/truncated/model.safetensors"
expect_error err_model_truncated_safetensors 'model.safetensors.*(past the end|truncated)' -- generate "$tmp/models/truncated" --prompt-tokens $PT
if [ -f "$DM" ]; then
  head -c 1000 "$DM" >"$tmp/models/short.gguf"
  expect_error err_model_truncated_gguf 'short.gguf' -- generate "$tmp/models/short.gguf" --prompt-tokens $PT
else
  skip err_model_truncated_gguf "no default model at $DM"
fi
head -c 4096 /dev/urandom >"$tmp/models/x.gguf"
expect_error err_model_garbage_gguf 'x.gguf.*(not a GGUF|magic)' -- generate "$tmp/models/x.gguf" --prompt-tokens $PT
cp -r "$FIX/llama" "$tmp/models/nohidden"
python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); del c['hidden_size']; json.dump(c, open(p, 'w'))" "$tmp/models/nohidden/config.json"
expect_error err_model_missing_key "hidden_size" -- generate "$tmp/models/nohidden" --prompt-tokens $PT
cp -r "$FIX/llama" "$tmp/models/gpt2"
python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['architectures']=['GPT2LMHeadModel']; json.dump(c, open(p, 'w'))" "$tmp/models/gpt2/config.json"
expect_error err_model_architecture "GPT2LMHeadModel" -- generate "$tmp/models/gpt2" --prompt-tokens $PT
expect_error err_model_missing "cannot open model" -- generate "$tmp/models/nonexistent" --prompt-tokens $PT
expect_error err_weights_dtype "unknown --weights 'q4'" -- generate "$FIX/llama" --prompt-tokens $PT --weights q4
expect_error err_model_compile_bad "GPT2LMHeadModel" -- compile "$tmp/models/gpt2" --ir loop
P40=$(python3 -c "print(','.join(str(3 + i * 5 % 250) for i in range(40)))")
expect_error err_prompt_too_long 'context' -- generate "$FIX/llama" --prompt-tokens "$P40" --ctx 16 -q
expect_error err_prompt_too_long_json 'context' -- generate "$FIX/llama" --prompt-tokens "$P40" --ctx 16 -q --json
expect_error err_token_out_of_vocab 'token id 999.*vocabulary' -- generate "$FIX/llama" --prompt-tokens 1,2,999 -q
expect_error err_token_not_a_number 'prompt-tokens' -- generate "$FIX/llama" --prompt-tokens 1,x,3
expect_error err_prompt_both 'exactly one of --prompt' -- generate "$FIX/llama" --prompt hi --prompt-tokens 1,2
# (with a non-terminal standard input lathe reads the prompt from it: here empty)
expect_error err_prompt_neither 'exactly one of --prompt|prompt from standard input is empty' -- generate "$FIX/llama"
expect_error err_prompt_no_tokenizer 'tokenizer' -- generate "$FIX/llama" --prompt hi -q
expect_error err_chat_no_tokenizer 'tokenizer' -- chat "$FIX/llama" -q
expect_error err_temperature "--temperature expects a number.*'abc'" -- generate "$FIX/llama" --prompt-tokens $PT --temperature abc
expect_error err_top_p "--top-p expects a number in \[0, 1\].*'2'" -- generate "$FIX/llama" --prompt-tokens $PT --top-p 2
expect_error err_max_tokens "--max-tokens" -- generate "$FIX/llama" --prompt-tokens $PT --max-tokens -3
expect_error err_gen_option "unknown option '--frob' for generate" -- generate "$FIX/llama" --prompt-tokens $PT --frob

# lathe bench: on the CPU with a fixture model and with a built-in config, and its errors.
if out=$("$LATHE" bench tests/fixtures/models/llama --target cpu --prompt-len 4 --gen-len 4 --prefill-len 8 --json 2>"$tmp/err") &&
   echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["decode_tok_s"] > 0 and d["prefill_ms"] > 0 and d["weights_dtype"] == "f32" and d["kernels"] > 10, d' 2>/dev/null &&
   ! grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then
  pass bench_fixture_json
else
  fail bench_fixture_json "$(echo "$out" | head -c 300) $(head -3 "$tmp/err")"
fi
expect bench_text 0 'decode after 4: 4 tokens' -- bench tests/fixtures/models/qwen3 --target cpu --prompt-len 4 --gen-len 4 --prefill-len 8
# LATHE_PROFILE=1: the prefill's own report (the warm-up run not counted), then the rest at the end
LATHE_PROFILE=1 expect bench_profile_prefill 0 'lathe profile of the 8-token prefill: 2 runs, [0-9.]+ ms per run in [0-9]+ kernels' -- bench tests/fixtures/models/qwen3 --target cpu --prompt-len 4 --gen-len 2 --prefill-len 8 --reps 2
LATHE_PROFILE=1 expect bench_profile_decode 0 'lathe profile: [0-9]+ runs' -- bench tests/fixtures/models/qwen3 --target cpu --prompt-len 4 --gen-len 2 --prefill-len 8 --reps 2
expect bench_fuse_recompute 0 '"fuse_recompute": ?true' -- bench tests/fixtures/models/qwen3 --target cpu --prompt-len 4 --gen-len 2 --prefill-len 8 --fuse-recompute --json
expect_error bench_unknown_config "unknown --config 'gpt5'" -- bench --config gpt5 --random-weights --target cpu
expect_error bench_config_needs_random "add --random-weights" -- bench --config qwen3-0.6b --target cpu
expect_error bench_both "not both" -- bench tests/fixtures/models/llama --config qwen3-0.6b --random-weights
