#!/usr/bin/env bash
# Builds and runs the GPU test programs (tests/gpu/*.c; plain C, no cmocka) and prints one summary
# line "N passed, M failed"; exits non-zero on any failure. Needs an NVIDIA GPU, its driver and
# libnvrtc at run time; building needs only a C compiler.
#
#   scripts/run-gpu-tests.sh               build into $LATHE_GPU_BIN (default build/gpu), then run
#   scripts/run-gpu-tests.sh --build-only  build only (e.g. here, to carry the binaries to a GPU box)
#   scripts/run-gpu-tests.sh --no-build    run binaries already in $LATHE_GPU_BIN
#
# To add a test: put tests/gpu/NAME.c here, add NAME to GPU_TESTS, and give its library sources in
# SOURCES[NAME] if it must not link every library source (default: all of src/ except src/cli).
set -u
cd "$(dirname "$0")/.."

GPU_TESTS=(test_cuda_gpu)
# cmocka test programs from tests/ that also run on the GPU when LATHE_TEST_TARGET=cuda (the
# differential suite: every generated program on the CUDA backend against the float64 reference).
CMOCKA_GPU_TESTS=(test_differential test_models test_batch_step test_engine test_engine_sampling test_space)
declare -A SOURCES=(
  [test_cuda_gpu]="src/base/*.c src/target/target.c src/backend/cache.c src/backend/cuda.c src/backend/cuda_gemm.c src/backend/gemm_algos.c src/backend/cuda_graph.c src/backend/cuda_driver.c src/backend/cublaslt.c src/backend/nvrtc.c src/backend/source_units.c src/generate/sampler.c src/generate/sampler_device.c build/gen/templates.c"
)

CC=${CC:-cc}
BIN=${LATHE_GPU_BIN:-build/gpu}
CFLAGS="-std=c11 -D_GNU_SOURCE -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 -Wall -Wextra -Wno-unused-parameter -Wshadow -Wno-missing-field-initializers -O2 -g"
mode=${1:-all}

# every library source (src/*/ and src/*/*/, not the CLI) and the embedded kernel templates
all_lib_sources() { ls src/*/*.c src/*/*/*.c 2>/dev/null | grep -v '^src/cli/'; echo build/gen/templates.c; }

build() {
  mkdir -p "$BIN" || return 1
  make -s build/gen/templates.c || return 1
  local t srcs
  for t in "${GPU_TESTS[@]}"; do
    srcs=${SOURCES[$t]:-$(all_lib_sources)}
    # shellcheck disable=SC2086 # the source lists are globs, split on purpose
    if ! $CC $CFLAGS -Isrc -o "$BIN/$t" "tests/gpu/$t.c" $srcs -ldl -lm -lpthread; then
      echo "build of $t failed"
      return 1
    fi
  done
  for t in "${CMOCKA_GPU_TESTS[@]}"; do
    # shellcheck disable=SC2046
    if ! $CC $CFLAGS -Isrc -Itests -o "$BIN/$t" "tests/$t.c" $(all_lib_sources) -lcmocka -ldl -lm -lpthread -lpcre2-8 -ljansson -lutf8proc -lcurl -lcrypto -lmicrohttpd -lsqlite3; then
      echo "build of $t failed"
      return 1
    fi
  done
}

if [ "$mode" != "--no-build" ]; then
  build || { echo "0 passed, 1 failed"; exit 1; }
  [ "$mode" = "--build-only" ] && exit 0
fi

# NVRTC often lives in the toolkit's lib64 without being in the loader's path.
for dir in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64; do
  [ -d "$dir" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done

passed=0; failed=0; failed_bins=()
for t in "${GPU_TESTS[@]}"; do
  echo "== $t"
  out=$("$BIN/$t" 2>&1); rc=$?
  echo "$out"
  summary=$(echo "$out" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1 \2/p' | tail -1)
  p=${summary% *}; f=${summary#* }
  [ -z "$summary" ] && { p=0; f=0; }
  # A crash or a silent non-zero exit counts as a failure even when no check failed.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  [ "$f" -ne 0 ] && failed_bins+=("$t")
  passed=$((passed + p)); failed=$((failed + f))
done
# Twice: prefill GEMMs through cuBLASLt where it loads, then through lathe's own tensor-core kernels.
for run in "${CMOCKA_GPU_TESTS[@]/%/:1}" "${CMOCKA_GPU_TESTS[@]/%/:0}"; do
  t=${run%:*}; lib=${run##*:}
  echo "== $t (cuda, LATHE_CUBLASLT=$lib)"
  out=$(LATHE_CUBLASLT=$lib LATHE_TEST_TARGET=cuda "$BIN/$t" 2>&1); rc=$?
  echo "$out" | grep -E '^\[  (FAILED|ERROR|PASSED)|^ERROR|error' | head -80
  p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
  p=${p:-0}; f=${f:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "$out" | tail -20; fi
  [ "$f" -ne 0 ] && failed_bins+=("$t:LATHE_CUBLASLT=$lib")
  passed=$((passed + p)); failed=$((failed + f))
done
[ ${#failed_bins[@]} -gt 0 ] && echo "failing: ${failed_bins[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
