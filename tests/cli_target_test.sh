#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# --device: the built-in description the schedules are chosen for, printed by --ir tile.
L='x: f32[seq, 1024]; w: bf16[96, 1024]; y = linear(x, w)'
expect device_default_h200 0 'device h200: sm_90, 132 SMs' -- compile -e "$L" --target cuda --ir tile
expect device_a100 0 'device a100: sm_80, 108 SMs' -- compile -e "$L" --device a100 --ir tile
expect device_l4_split_k 0 'split-k-fill=116' -- compile -e "$L" --target cuda --device l4 --ir tile
expect device_t4_no_mma 0 'device t4: .*no bf16 mma' -- compile -e "$L" --device t4 --ir tile
expect device_host 0 'device host: [0-9]+ cores' -- compile -e "$L" --ir tile
expect_error device_unknown "--device x100: unknown device 'x100' \(known: h200, a100, l4, t4 for cuda; host for cpu\)" -- compile -e "$L" --device x100
expect_error device_wrong_target '--device a100 is a cuda device, not --target cpu' -- compile -e "$L" --device a100 --target cpu
# the h200 is the default: the same code either way
if "$LATHE" compile -e "$L" --target cuda >"$tmp/a" 2>&1 && "$LATHE" compile -e "$L" --device h200 >"$tmp/b" 2>&1 &&
  cmp -s "$tmp/a" "$tmp/b"; then pass device_h200_is_default; else fail device_h200_is_default "code differs"; fi
# another device changes the schedule: the split GEMM's grid fills 116 blocks instead of 264
expect device_l4_grid 0 'linear_0_mma\(.*grid=.*min\(116 //' -- compile -e "$L" --device l4 --ir kernel
expect device_h200_grid 0 'linear_0_mma\(.*grid=.*min\(264 //' -- compile -e "$L" --ir kernel --target cuda
