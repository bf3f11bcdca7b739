#!/usr/bin/env bash
# CPU schedules of the batched step: 8-row register blocking whose blocked axis varies fastest, and OpenMP
# decided from the run-time sizes (Schedule.omp / rows_omp = 2: an `if` clause), on both sides of it.
set -u
source "$(dirname "$0")/cli_lib.sh"

lin="x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)"
att="q: f32[1,4,seq,8]; k: f32[1,2,kv,8]; v: f32[1,2,kv,8]; y = attention(q, k, v, true)"
expect cpub_rows8_tile 0 "kernel linear_0: .* rows=8\(i0\) rows-omp-if-large" -- compile -e "$lin" --ir tile --no-tune
# the blocks of rows are the fastest-varying point index: one weight row for all of them
expect cpub_rows_fastest 0 "int64_t i0 = \(p3 % \(\(seq \+ 7\) / 8\)\);" -- compile -e "$lin" --ir code --no-tune
expect cpub_rows_omp_if 0 "#pragma omp parallel for schedule\(static\) if\(\(32768 <= " -- \
  compile -e "$lin" --ir code --no-tune
# attention is one kernel, its (row, head) items a team from 32768 elements of work (rows x heads x keys x (d + values))
expect cpub_flash_omp_if 0 "#pragma omp parallel for schedule\(static, 1\) if \(32768 <= lt_M \* 4LL \* lt_T \* 16LL\)" -- \
  compile -e "$att" --ir code --no-tune
# as three kernels (LATHE_FLASH_DECODE=0), decode's P x V (one query row, its keys a run-time length) takes a team
# from 32768 elements: 57 keys of SmolLM2
LATHE_FLASH_DECODE=0 expect cpub_pv_omp_if 0 \
  "#pragma omp parallel for schedule\(static\) if\(\(32768 <= \(v0 \* lt_maxi\(kv, 1\)\)\)\)" -- \
  compile -e "$att" --ir code --no-tune
LATHE_FLASH_DECODE=0 expect cpub_softmax_omp_if 0 "kernel attention_1: .* -> omp-if-large\(" -- \
  compile -e "$att" --ir tile --no-tune
# the same results with one thread and with a team: the attention below and above the run-time threshold
# (OMP_MIN_RUNTIME_WORK), the blocked linear above it at 13 and 203 tokens
expect cpub_lin_small 0 "check y: .* ok" -- run -e "$lin" --check --dim seq=13
expect cpub_lin_large 0 "check y: .* ok" -- run -e "$lin" --check --dim seq=203
expect cpub_att_small 0 "check y: .* ok" -- run -e "$att" --check --dim seq=9 --dim kv=40
expect cpub_att_large 0 "check y: .* ok" -- run -e "$att" --check --dim seq=64 --dim kv=1100
LATHE_FLASH_DECODE=0 expect cpub_att3_small 0 "check y: .* ok" -- run -e "$att" --check --dim seq=9 --dim kv=40
LATHE_FLASH_DECODE=0 expect cpub_att3_large 0 "check y: .* ok" -- run -e "$att" --check --dim seq=64 --dim kv=1100
