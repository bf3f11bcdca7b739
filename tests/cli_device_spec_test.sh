#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# a cache of this script's own: the tune below writes tune.db, which other scripts' compiles must not see
export LATHE_CACHE_DIR="$tmp/cache"
# --device NAME:FIELD=V,...: a built-in description with fields changed; the schedules follow it.
N='x: f32[32,4096,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)'
S=h200:sms=66,smem_per_sm=64K
expect spec_printed 0 'device h200:sms=66,smem_per_sm=64K: sm_90, 66 SMs, .*64 KB/SM' -- compile -e "$N" --device $S --ir tile --no-tune
# a long-row RMSNorm keeps its rows in flight within half of L2: 256 threads per row on 132 SMs, 128 on 66
expect spec_h200_norm 0 'thread\(256\) reduce=block-tree' -- compile -e "$N" --device h200 --ir tile --no-tune
expect spec_small_norm 0 'thread\(128\) reduce=block-tree' -- compile -e "$N" --device $S --ir tile --no-tune
# split-k fills the blocks the device holds at once: 2 x 132 on the h200, 1 x 66 with 64 KB per SM
L='x: f32[seq, 1024]; w: bf16[96, 1024]; y = linear(x, w)'
expect spec_small_split_k 0 'split-k-fill=66 ' -- compile -e "$L" --device $S --ir tile --no-tune
expect spec_small_candidates 0 'fill=66 lib=1' -- compile -e "$L" --device $S --ir tile --candidates --no-tune
# the same program compiled for the two descriptions: different CUDA code
if "$LATHE" compile --config qwen3-0.6b --target cuda --no-tune >"$tmp/a" 2>&1 &&
  "$LATHE" compile --config qwen3-0.6b --device $S --no-tune >"$tmp/b" 2>&1 && ! cmp -s "$tmp/a" "$tmp/b"; then
  pass spec_model_code_differs
else fail spec_model_code_differs "same code or a failed compile: $(head -c 300 "$tmp/b")"; fi
expect spec_host 0 'device host:cores=1,vector_bytes=16: 1 cores, 16-byte vectors' -- compile -e "$N" --device host:cores=1,vector_bytes=16 --ir tile
expect_error spec_unknown_field "--device h200:warps=3: device override 'warps': no such cuda field" -- compile -e "$N" --device h200:warps=3
expect_error spec_bad_value "--device h200:sms=half: device override sms: 'half' is not a count" -- compile -e "$N" --device h200:sms=half
expect_error spec_impossible "--device h200:sms=0: device h200:sms=0: multiprocessors is 0" -- compile -e "$N" --device h200:sms=0
expect_error spec_wrong_target '--device host:cores=2 is a cpu device, not --target cuda' -- compile -e "$N" --device host:cores=2 --target cuda

# lathe tune --device-override: the measured device's description changed; its measurements are kept apart
P='x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)'
if run_lathe tune_override tune -e "$P" --dim seq=8 --max-candidates 2 --repeats 2 --target cpu --device-override cores=1; then
  if grep -q '^tuned on host:cores=1 (cpu)' "$tmp/out"; then pass tune_override; else fail tune_override "$(head -c 300 "$tmp/out")"; fi
  # the assembled step against the sum of its parts (one part: the linear's kernels alone)
  if grep -q -E '^parts: default [0-9.]+ us, tuned [0-9.]+ us .*assembled / parts: [0-9.]+ tuned, [0-9.]+ default$' "$tmp/out"
  then pass tune_parts_line; else fail tune_parts_line "$(tail -c 300 "$tmp/out")"; fi
fi
"$LATHE" db export "$tmp/db.json" >/dev/null 2>&1
if grep -q '"device": "cpu .*, 1 cores, as host:cores=1"' "$tmp/db.json"; then pass tune_override_identity
else fail tune_override_identity "$(grep -o '"device": "[^"]*"' "$tmp/db.json" | head -2)"; fi
expect compile_override_measured 0 '\[measured: [0-9.]+ us, its kernels alone' -- compile -e "$P" --ir tile --dim seq=8 --device host:cores=1
expect compile_host_not_measured 0 'no measurement' -- compile -e "$P" --ir tile --dim seq=8
expect_error tune_override_bad "--device-override sms=3: device override 'sms': no such cpu field" -- tune -e "$P" --dim seq=8 --target cpu --device-override sms=3
