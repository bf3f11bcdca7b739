#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# The tuner's goldens and learned prior: the reproduction gate of the prior lathe was built with against the
# committed goldens (with no measurements in scope, its pick is in the measured best half for >= 90% of the
# kernels; the figure is printed), lathe tune --export and lathe fit on them, and their errors.
export LATHE_CACHE_DIR="$tmp/cache"
goldens="$(cd "$(dirname "$0")/.." && pwd)/goldens"

if run_lathe prior_gate fit --gate --from "$goldens"; then
  echo "  $(head -1 "$tmp/out")"
  if grep -q -E '^prior gate: for [0-9]+ of [0-9]+ kernels \([0-9.]+%\)' "$tmp/out"; then pass prior_gate_figure
  else fail prior_gate_figure "$(head -c 300 "$tmp/out")"; fi
fi
# CUDA's prior against the CUDA goldens, once both are committed (H200 goldens from bench/tune_h200.sh, then lathe fit
# --target cuda): the same bar
if grep -l -s '"target": "cuda"' "$goldens"/*.json >/dev/null && [ -s "$goldens/prior-cuda.json" ]; then
  if run_lathe prior_gate_cuda fit --gate --target cuda --from "$goldens"; then echo "  cuda: $(head -1 "$tmp/out")"; pass prior_gate_cuda; fi
else skip prior_gate_cuda "no CUDA goldens and prior committed yet"; fi
# the bar is what decides the exit status: at 100% only a perfect prior passes (the shipped one is not)
if grep -q -E '\(100.0%\)' "$tmp/out"; then skip prior_gate_bar "the built-in prior is perfect on these goldens"
else expect prior_gate_bar 1 'prior gate: ' -- fit --gate --from "$goldens" --bar 100; fi
expect_error fit_missing 'nowhere.json: no such file or directory' -- fit --from "$tmp/nowhere.json"
echo '{"format": "something else"}' >"$tmp/bad.json"
expect_error fit_not_goldens 'bad.json: not a lathe goldens file' -- fit --from "$tmp/bad.json"

# tune a small program, export it, fit on the export
P='x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)'
expect export_nothing 0 'exported 0 kernel structures \(0 measurements\)' -- tune -e "$P" --dim seq=8 --export "$tmp/none.json"
expect tune_small 0 'program: default' -- tune -e "$P" --dim seq=8 --max-candidates 6 --repeats 3 --target cpu
# six candidates measured, then the near-ties measured again (search.c): 6 to 12 measurements, as the timings fall
expect export_small 0 'exported 1 kernel structures \(([6-9]|1[0-2]) measurements\)' -- tune -e "$P" --dim seq=8 --export "$tmp/g.json"
if python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["kernels"][0]["pool"] else 1)' "$tmp/g.json" &&
   grep -q '"format": "lathe-goldens"' "$tmp/g.json" && grep -q '"pool"' "$tmp/g.json" &&
   grep -q '"best"' "$tmp/g.json" && grep -q '"commit"' "$tmp/g.json"; then pass export_format
else fail export_format "$(head -c 300 "$tmp/g.json")"; fi
# what follows fits on that export with its timings spread apart (each 25% slower than the one before): a live
# tuning of a 2 us kernel can leave every measurement within 3% of the others, which gives a fit no pairs
python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))
for i, m in enumerate(j["kernels"][0]["pool"]): m.update(status="ok", median_us=10.0 * 1.25 ** i, min_us=10.0 * 1.25 ** i, max_us=10.0 * 1.25 ** i)
json.dump(j, open(sys.argv[1], "w"), indent=1)' "$tmp/g.json"
expect fit_small 0 'prior fitted on [0-9]+ pairs of 1 kernels written to' -- fit --from "$tmp/g.json" --out "$tmp/prior.json"
if grep -q '"format": "lathe-prior"' "$tmp/prior.json"; then pass fit_writes_prior; else fail fit_writes_prior "no prior"; fi
# a given prior file under the gate (the held-out check of bench/prior_holdout.sh), its reach stored and read back
expect gate_given_prior 0 'prior gate: for [01] of 1 kernels' -- fit --gate --bar 0 --prior "$tmp/prior.json" --from "$tmp/g.json"
expect fit_reach 0 'prior fitted on' -- fit --from "$tmp/g.json" --out "$tmp/reach1.json" --reach 1 --l2 0.001
if grep -q '"reach": 1' "$tmp/reach1.json"; then pass fit_reach_stored; else fail fit_reach_stored "$(head -c 200 "$tmp/reach1.json")"; fi
sed 's/"reach": 1/"reach": -2/' "$tmp/reach1.json" >"$tmp/badreach.json"
expect_error gate_bad_reach 'badreach.json: "reach" must be a whole number >= 0' -- fit --gate --prior "$tmp/badreach.json" --from "$tmp/g.json"
: >"$tmp/empty-prior.json"
expect_error gate_empty_prior 'empty-prior.json: an empty prior' -- fit --gate --prior "$tmp/empty-prior.json" --from "$tmp/g.json"
expect_error prior_needs_gate '--prior names a prior to check: it needs --gate' -- fit --prior "$tmp/prior.json" --from "$tmp/g.json"

# each target its own prior: a directory of one CPU and one CUDA goldens file (and priors, which are not goldens)
mkdir -p "$tmp/mixed"
cp "$tmp/g.json" "$tmp/mixed/cpu-g.json"
sed 's/"target": "cpu"/"target": "cuda"/' "$tmp/g.json" >"$tmp/mixed/h200-g.json"
cp "$tmp/prior.json" "$tmp/mixed/prior.json"
cp "$tmp/prior.json" "$tmp/mixed/prior-cuda.json"
expect fit_cuda 0 'prior fitted on [0-9]+ pairs of 1 kernels written to .*/pc.json' -- fit --from "$tmp/mixed" --target cuda --out "$tmp/pc.json"
expect fit_cpu_skips_cuda 0 'prior fitted on [0-9]+ pairs of 1 kernels' -- fit --from "$tmp/mixed" --out "$tmp/pcpu.json"
mkdir -p "$tmp/cpuonly" && cp "$tmp/g.json" "$tmp/cpuonly/cpu-g.json"
expect_error fit_cuda_none 'no goldens measured on cuda' -- fit --from "$tmp/cpuonly" --target cuda --out "$tmp/none.json"
expect_error fit_bad_target "--target: 'gpu' is not cpu or cuda" -- fit --target gpu
expect_error tune_past_beyond_ctx 'past \(256\) \+ seq \(1\) exceed the context of 72 positions' -- tune --config smollm2-135m --random-weights --ctx 72 --past 256
