#!/usr/bin/env bash
# Fewer launches in the batched CUDA step (issue 16): the RMSNorm statistics (and the final norm) computed by the
# GEMM pre-passes that read them, RoPE of q and the K and V cache scatters as one kernel per layer.
set -u
source "$(dirname "$0")/cli_lib.sh"

# count NAME PATTERN WANT: $tmp/out has WANT lines matching PATTERN
count() {
  local got
  got=$(grep -c -E -- "$2" "$tmp/out")
  if [ "$got" -eq "$3" ]; then pass "$1"; else fail "$1" "$got lines match /$2/, expected $3"; fi
}

if run_lathe fuse_batched_llama compile --config llama-3.2-1b --target cuda --kv-block 16 --ir kernel; then
  # 16 layers x 2 norms, and the final norm before the LM head
  count fuse_norm_stat_in_pack "^nothing: [a-z]+_[0-9]+_mma_pack computes it$" 33
  # printed once per distinct code: layer 0's input norm (over the embedding), the other layers' input norm, the
  # post-attention norm, the final norm
  count fuse_pack_stat_kernels "first, one block per row: stat = sum over " 4
  count fuse_rope_scatters_merged "^kernel cache_scatter_[0-9]+: nothing: rope_[0-9]+_plus_2 computes it$" 32
  count fuse_merged_kernels "^kernel rope_[0-9]+_plus_2\(" 16
fi
# one sequence: q, k and v read the input norm's statistic separately, so only the post-attention norm's moves
if run_lathe fuse_one_sequence compile --config llama-3.2-1b --target cuda --ir kernel; then
  count fuse_one_sequence_stat "^nothing: mul_[0-9]+_mma_pack computes it$" 16
  count fuse_one_sequence_no_merge "_plus_[0-9]+ computes it" 0
fi
# the CPU has neither (its attention's scores and softmax are computed by the flash kernel: 2 a layer)
if run_lathe fuse_cpu compile --config llama-3.2-1b --target cpu --kv-block 16 --ir kernel; then
  count fuse_cpu_none "(_mma_pack|_plus_[0-9]+) computes it$" 0
  count fuse_cpu_flash "^kernel attention_[0-9]+: nothing: reshape_[0-9]+ computes it$" 32
fi
