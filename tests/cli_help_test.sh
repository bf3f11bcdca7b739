#!/usr/bin/env bash
# The command line as a new user meets it: help for every command, errors that name the real commands and
# the nearest flag, flags a command ignores refused, prompts from standard input and files, the settings
# table (lathe env), and the small correctness items of issue 15 part 8.
set -u
source "$(dirname "$0")/cli_lib.sh"
export LATHE_CACHE_DIR=${LATHE_CACHE_DIR:-$tmp/cache}
FIX=tests/fixtures/models
P='x: f32[4]; y = exp(x)'

# expect_out NAME PATTERN -- ARGS: exit 0 and PATTERN on stdout (help goes to stdout, not stderr)
expect_out() {
  local name=$1 pat=$2; shift 3
  "$LATHE" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name" "exit $rc; stderr: $(head -3 "$tmp/err")"; return; fi
  if grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then fail "$name" "sanitizer report"; return; fi
  # help wraps long lines with a 31-column hanging indent: match the joined lines
  if ! sed -E ':a;N;$!ba;s/\n {31}/ /g' "$tmp/out" | grep -q -E -- "$pat"; then
    fail "$name" "stdout lacks /$pat/: $(head -c 300 "$tmp/out")"; return
  fi
  pass "$name"
}

# ---- Help ------------------------------------------------------------------------------------------
for cmd in generate chat bench compile run env pull list; do
  expect_out "help_$cmd" "^usage: lathe $cmd " -- $cmd --help
  expect_out "help_short_$cmd" "^usage: lathe $cmd " -- $cmd -h
done
expect_out help_command_word '^usage: lathe generate ' -- help generate
expect_out help_generate_ignore_eos 'ignore-eos' -- generate --help
expect_out help_generate_quiet '-q, --quiet' -- generate --help
expect_out help_generate_max_tokens_default 'max-tokens N .*\(default: 128\)' -- generate --help
expect_out help_generate_temperature_default 'temperature T .*\(default: 0\.7\)' -- generate --help
expect_out help_generate_top_k_default 'top-k K .*\(default: 40\)' -- generate --help
expect_out help_generate_top_p_default 'top-p P .*\(default: 0\.9\)' -- generate --help
expect_out help_generate_ctx_default 'ctx N .*\(default: ' -- generate --help
expect_out help_chat_sampling 'temperature T .*\(default: 0\.7\)' -- chat --help
expect_out help_bench_ctx '--ctx N' -- bench --help
expect_out help_bench_reps '--reps N .*\(default: 3\)' -- bench --help
expect_out help_run_iters '--iters N .*\(default: 50\)' -- run --help
expect_out help_compile_ir '--ir STAGE .*\(default: code\)' -- compile --help
expect_out help_top_commands '^  generate ' -- --help
expect_error err_unknown_command_names "unknown command 'frobnicate' \(commands: generate, chat, bench, compile, run, pull, quantize, list, env" -- frobnicate
expect_error err_pull_flag_near "did you mean --revision\?" -- pull org/name --revison main
expect_error err_unknown_command_near "did you mean generate\?" -- generat
expect_error err_unknown_flag_near "unknown option '--promt' for generate \(did you mean --prompt\?" -- generate --promt hi
expect_error err_unknown_flag_near_run "did you mean --check\?" -- run -e "$P" --chek
expect_error err_chat_prompt "unknown option '--prompt' for chat" -- chat --prompt hi
expect_error err_chat_json "unknown option '--json' for chat" -- chat --json
expect_error err_missing_argument "--prompt needs an argument" -- generate --prompt
expect_error err_system_without_chat "--system .*--chat" -- generate "$FIX/llama" --prompt-tokens 1,2 --system hi
expect_error err_iters_without_bench "--iters applies to --bench" -- run -e "$P" --iters 5
expect_error err_bench_dtype_model "--dtype applies to --config" -- bench "$FIX/llama" --dtype f16 --target cpu
expect_error err_bench_random_model "--random-weights applies to --config" -- bench "$FIX/llama" --random-weights --target cpu
expect_error err_extra_positional "unexpected argument 'world'" -- generate --prompt Hello world
expect_error err_second_positional "unexpected argument 'extra'" -- generate "$FIX/llama" extra --prompt-tokens 1,2
expect_error err_run_second_file "unexpected argument 'b.lt'" -- run a.lt b.lt
expect_error err_flag_takes_no_argument "--check takes no argument" -- run -e "$P" --check=yes
expect run_flag_equals 0 'check y: .* ok' -- run -e "$P" --check --seed=3

# ---- Prompts from anywhere -------------------------------------------------------------------------
"$LATHE" generate "$FIX/llama" --max-tokens 2 -q </dev/null >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && grep -q 'prompt from standard input is empty' "$tmp/err"; then pass prompt_stdin_empty
else fail prompt_stdin_empty "exit $rc: $(head -2 "$tmp/err")"; fi
expect_error err_prompt_file_missing "cannot open --prompt-file $tmp/nope.txt" -- generate "$FIX/llama" -f "$tmp/nope.txt"
expect_error err_prompt_and_file "exactly one of --prompt" -- generate "$FIX/llama" --prompt hi --prompt-file "$tmp/x"
# a model without a tokenizer prints the generated token ids
ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('$FIX/llama/expected.json'))['prompt_ids'])))")
want=$(python3 -c "import json; print(','.join(map(str, json.load(open('$FIX/llama/expected.json'))['greedy'])))")
if run_lathe prompt_tokens_print_ids generate "$FIX/llama" --prompt-tokens "$ids" --greedy --max-tokens 8 --ignore-eos -q; then
  if [ "$(cat "$tmp/out")" = "$want" ]; then pass prompt_tokens_print_ids
  else fail prompt_tokens_print_ids "stdout '$(cat "$tmp/out")', expected '$want'"; fi
fi
if [ ! -f "$DM" ]; then
  for n in prompt_stdin_pipe prompt_stdin_dash prompt_file prompt_file_short; do skip $n "no default model at $DM"; done
else
  FR="The capital of France is"
  printf '%s\n' "$FR" >"$tmp/in"
  if run_lathe prompt_stdin_pipe generate --greedy --max-tokens 4 -q; then
    if head -1 "$tmp/out" | grep -q -F "$FR Paris"; then pass prompt_stdin_pipe; else fail prompt_stdin_pipe "$(head -c 200 "$tmp/out")"; fi
  fi
  if run_lathe prompt_stdin_dash generate --prompt - --greedy --max-tokens 4 -q; then
    if head -1 "$tmp/out" | grep -q -F "$FR Paris"; then pass prompt_stdin_dash; else fail prompt_stdin_dash "$(head -c 200 "$tmp/out")"; fi
  fi
  mv "$tmp/in" "$tmp/prompt.txt"
  if run_lathe prompt_file generate --prompt-file "$tmp/prompt.txt" --greedy --max-tokens 4 -q; then
    if head -1 "$tmp/out" | grep -q -F "$FR Paris"; then pass prompt_file; else fail prompt_file "$(head -c 200 "$tmp/out")"; fi
  fi
  if run_lathe prompt_file_short generate -f "$tmp/prompt.txt" --greedy -n 4 -q; then
    if head -1 "$tmp/out" | grep -q -F "$FR Paris"; then pass prompt_file_short; else fail prompt_file_short "$(head -c 200 "$tmp/out")"; fi
  fi
fi

# ---- Settings: lathe env, lathe --help, the table is the only reader ---------------------------------
for v in LATHE_MODEL LATHE_CACHE_DIR LATHE_CC LATHE_CUDA_DEVICE LATHE_PROFILE LATHE_CUDA_GRAPHS LATHE_PDL \
         LATHE_CUBLASLT LATHE_CUBLASLT_TUNE LATHE_FLASH_DECODE LATHE_NVRTC_UNITS LATHE_CPU_BANDWIDTH LATHE_HF_ENDPOINT \
         HF_TOKEN CUDA_HOME \
         XDG_CACHE_HOME HOME; do
  expect_out "env_lists_$v" "^$v=" -- env
  expect_out "help_lists_$v" "^  $v " -- --help
  if grep -q -E "^- \`$v\`" README.md; then pass "readme_lists_$v"; else fail "readme_lists_$v" "README.md has no '- \`$v\`' line"; fi
done
LATHE_CC=my-cc expect_out env_current_value '^LATHE_CC=my-cc$' -- env
HF_TOKEN=hf_secret123 expect_out env_token_hidden '^HF_TOKEN=\(set, not shown\)$' -- env
if HF_TOKEN=hf_secret123 "$LATHE" env --json | grep -q hf_secret123; then fail env_token_hidden_json "the token is printed"
else pass env_token_hidden_json; fi
expect_out env_man '^\.B LATHE_CUDA_DEVICE$' -- env --man
if LATHE_CUDA_DEVICE=3 run_lathe env_json env --json; then
  json_ok env_json "j['LATHE_CUDA_DEVICE']['value'] == '3' and j['LATHE_CC']['value'] is None and j['LATHE_CC']['default'] == 'cc'"
fi
# every variable the sources read is in the table: getenv is called only by the settings module
readers=$(grep -rln 'getenv(' src | grep -v '^src/base/settings.c$')
if [ -z "$readers" ]; then pass getenv_only_in_settings; else fail getenv_only_in_settings "getenv in: $readers"; fi
setters=$(grep -rln -E '\b(setenv|unsetenv|putenv)\(' src)
if [ -z "$setters" ]; then pass no_setenv_channel; else fail no_setenv_channel "setenv in: $setters"; fi
printers=$(grep -rn -E '\b(printf|puts|putchar|fputs|fputc|fprintf|vfprintf|perror)\(' src --include=*.c | grep -v '^src/cli/' | grep -v -E 'sb_printf|arena_printf')
if [ -z "$printers" ]; then pass library_never_prints; else fail library_never_prints "$(echo "$printers" | head -3)"; fi
# every variable README.md lists is in the table
for v in $(grep -o -E '^- `[A-Z_]+`' README.md | tr -d '`-' ); do
  expect_out "env_has_readme_$v" "^$v=" -- env
done

# ---- Small correctness items -----------------------------------------------------------------------
expect_error err_ctx_too_big 'needs [0-9.]+ GB .* free; a context of up to [0-9]+ positions fits' -- bench --config qwen3-8b --random-weights --target cpu --ctx 4000000
expect ctx_beyond_trained 0 'warning: --ctx 1000 is beyond the 256 positions' -- generate "$FIX/llama" --prompt-tokens 1,2 --max-tokens 2 --ctx 1000 -q
expect seed_printed 0 'seed [0-9]+ \(random' -- generate "$FIX/llama" --prompt-tokens 1,2 --max-tokens 2
expect seed_given_printed 0 'seed 77$' -- generate "$FIX/llama" --prompt-tokens 1,2 --max-tokens 2 --seed 77
if run_lathe seed_in_json generate "$FIX/llama" --prompt-tokens 1,2 --max-tokens 2 --seed 77 --json -q; then
  json_ok seed_in_json "j['sampling']['seed'] == 77 and j['sampling']['defaults_from'] == 'lathe'"
fi
# sampling defaults from generation_config.json; the command line still wins
cp -r "$FIX/llama" "$tmp/gc"
python3 - "$tmp/gc/generation_config.json" <<'PY'
import json, sys
p = sys.argv[1]; g = json.load(open(p)); g.update(temperature=0.25, top_k=7, top_p=0.5, do_sample=True)
json.dump(g, open(p, "w"))
PY
if run_lathe generation_config_defaults generate "$tmp/gc" --prompt-tokens 1,2 --max-tokens 2 --json -q; then
  json_ok generation_config_defaults "j['sampling']['temperature'] == 0.25 and j['sampling']['top_k'] == 7 and j['sampling']['top_p'] == 0.5 and j['sampling']['defaults_from'] == 'generation_config.json'"
fi
if run_lathe generation_config_overridden generate "$tmp/gc" --prompt-tokens 1,2 --max-tokens 2 --json -q --temperature 0.9; then
  json_ok generation_config_overridden "j['sampling']['temperature'] == 0.9 and j['sampling']['top_k'] == 7"
fi
expect generation_config_printed 0 'temperature 0.25, top-k 7, top-p 0.5 \(from generation_config.json\)' -- generate "$tmp/gc" --prompt-tokens 1,2 --max-tokens 2
# bench on the CPU: no floor from the H200's bandwidth; one from LATHE_CPU_BANDWIDTH; the untied
# embedding table (the llama fixture's) is read one row per token
B=(bench "$FIX/llama" --target cpu --prompt-len 4 --gen-len 2 --prefill-len 0 --json)
if run_lathe bench_cpu_no_floor "${B[@]}"; then
  json_ok bench_cpu_no_floor "j['floor_tok_s'] is None and j['pct_of_floor'] is None and j['bandwidth_gbs'] is None"
fi
if LATHE_CPU_BANDWIDTH=20 run_lathe bench_cpu_bandwidth_setting "${B[@]}"; then
  json_ok bench_cpu_bandwidth_setting "j['bandwidth_gbs'] == 20 and abs(j['floor_tok_s'] - 20e9 / j['step_read_bytes']) < 1e-6 * j['floor_tok_s']"
  # llama fixture: vocab 256, hidden 64, f32 weights, untied: the table minus one row is not read
  json_ok bench_floor_untied_embedding "j['weight_bytes'] - j['step_read_bytes'] == 256 * 64 * 4 - 64 * 4"
fi
LATHE_CPU_BANDWIDTH=fast expect_error err_cpu_bandwidth_bad "LATHE_CPU_BANDWIDTH=fast" -- "${B[@]}"
