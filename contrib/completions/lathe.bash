# bash completion for lathe: commands, each command's flags, and the values of the flags that take a
# fixed set. `make install` puts it in share/bash-completion/completions/lathe; or source it.
_lathe() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} opts=
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "generate chat serve bench compile run tune db pull list quantize env help --help --version" -- "$cur"))
    return
  fi
  local sampling="--max-tokens --temperature --top-p --top-k --seed --greedy --stop --ignore-eos --ctx
    --quiet -q --target --weights --matmul-precision --no-tune --system --model -m -n -c -s"
  case ${COMP_WORDS[1]} in
    generate) opts="--prompt -p --prompt-file -f --prompt-tokens --chat --chat-template --json --concurrency --batch-invariant $sampling" ;;
    chat) opts="--chat-template $sampling" ;;
    serve) opts="--model -m --host --port -p --api-key --name --max-seqs --max-queue --ctx -c --max-body --drain-s
      --pooling --target --kv-dtype --config --random-weights --dtype --quiet -q" ;;
    bench) opts="--config --random-weights --target --dtype --weights --matmul-precision --prompt-len --gen-len
      --prefill-len --reps --ctx --bandwidth --fuse-recompute --json --concurrency --requests --arrivals
      --shared-prefix --max-batch-tokens --kv-block --kv-memory --kv-dtype --batch-invariant --no-tune --dequantized" ;;
    compile) opts="-e --config --ir --target --device -o --output --fuse-recompute --no-fuse --matmul-precision
      --kv-block --candidates --no-tune --dim --weights" ;;
    run) opts="-e --target --dim --seed --check --bench --iters --warmup --fuse-recompute --no-fuse
      --matmul-precision --no-tune" ;;
    tune) opts="-e --config --random-weights --target --dim --past --max-candidates --patience --budget-s --repeats
      --warmup --timeout-s --seed --matmul-precision --db --ctx --export --commit --no-prior --device-override" ;;
    db) opts="stats export import prune --db" ;;
    fit) opts="--from --target --out --gate --bar --reach --l2 --prior" ;;
    pull) opts="--revision --dir --quiet -q" ;;
    list) opts="--json" ;;
    quantize) opts="--type -t --quiet -q" ;;
    env) opts="--man --json" ;;
    *) return ;;
  esac
  case $prev in
    --target)
      if [ "${COMP_WORDS[1]}" = compile ] || [ "${COMP_WORDS[1]}" = tune ]; then COMPREPLY=($(compgen -W "cpu cuda" -- "$cur"))
      else COMPREPLY=($(compgen -W "auto cuda cpu" -- "$cur")); fi
      return ;;
    --weights) COMPREPLY=($(compgen -W "auto native f32 bf16 f16" -- "$cur")); return ;;
    --matmul-precision) COMPREPLY=($(compgen -W "high highest medium" -- "$cur")); return ;;
    --ir) COMPREPLY=($(compgen -W "graph tensor loop tile kernel code" -- "$cur")); return ;;
    --config) COMPREPLY=($(compgen -W "qwen3-0.6b llama-3.2-1b qwen3-8b smollm2-135m" -- "$cur")); return ;;
    --dtype) COMPREPLY=($(compgen -W "bf16 f16 f32" -- "$cur")); return ;;
    --type | -t) COMPREPLY=($(compgen -W "q8_0 q4_0 q4_1 q4_k_m q5_k_m q6_k" -- "$cur")); return ;;
    --device) COMPREPLY=($(compgen -W "h200 a100 l4 t4 host" -- "$cur")); return ;;
    --pooling) COMPREPLY=($(compgen -W "last mean" -- "$cur")); return ;;
    --dir) compopt -o dirnames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")); return ;;
    -o | --chat-template | --prompt-file | -f) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --prompt | --prompt-tokens | --system | --stop | --max-tokens | --temperature | --top-p | --top-k | --seed | \
      --host | --port | --api-key | --name | --max-seqs | --max-queue | --max-body | --drain-s | \
      --ctx | --prompt-len | --gen-len | --prefill-len | --reps | --bandwidth | --dim | --iters | --warmup | -e | --revision)
      return ;; # a value of the user's own
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    # MODEL (a directory or a .gguf file) or FILE.lt
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _lathe lathe
