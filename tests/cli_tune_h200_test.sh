#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# bench/tune_h200.sh's packaging, on the CPU with small shapes and no model: OUT gets exactly the four files the
# device tool can return (table, goldens archive, database, log), each holding what it should.
export LATHE_CACHE_DIR="$tmp/cache"
out="$tmp/out4"
if bench/tune_h200.sh --lathe "$LATHE" --target cpu --quick --no-model --kernel-budget 2 --bandwidth 20 --out "$out" \
    >"$tmp/script.out" 2>"$tmp/script.err"; then pass tune_h200_runs
else fail tune_h200_runs "exit $?: $(tail -3 "$tmp/script.err")"; fi
got=$(cd "$out" && ls | tr '\n' ' ')
if [ "$got" = "goldens.tar.gz log.txt table.md tune-db.json " ]; then pass tune_h200_four_files
else fail tune_h200_four_files "OUT holds: $got"; fi
mkdir -p "$tmp/unpacked" && tar -C "$tmp/unpacked" -xzf "$out/goldens.tar.gz" 2>/dev/null
n=$(ls "$tmp/unpacked/goldens/"cpu-*.json 2>/dev/null | wc -l)
if [ "$n" -eq 3 ] && python3 -c 'import json,sys; [json.load(open(f))["kernels"] for f in sys.argv[1:]]' \
    "$tmp/unpacked/goldens/"*.json 2>/dev/null; then pass tune_h200_goldens
else fail tune_h200_goldens "$n goldens in the archive: $(tar tzf "$out/goldens.tar.gz" 2>&1 | head -5)"; fi
if python3 -c 'import json,sys; sys.exit(0 if len(json.load(open(sys.argv[1]))["measurements"]) > 0 else 1)' \
    "$out/tune-db.json" 2>/dev/null; then pass tune_h200_db
else fail tune_h200_db "$(head -c 300 "$out/tune-db.json")"; fi
if [ "$(grep -c -E '^\| (rms_norm|layernorm|softmax) [0-9x]+ \| [0-9.]+ \([0-9]+%\) \| [0-9.]+ \([0-9]+%\) \| [0-9.]+ \([0-9]+%\) \|' "$out/table.md")" -eq 3 ] &&
    grep -q '| rows-in-L2 off ms | default ms | tuned ms | floor ms |' "$out/table.md"; then pass tune_h200_table_floor
else fail tune_h200_table_floor "$(cat "$out/table.md")"; fi
if grep -q '^==== tune-softmax-64x1000.err' "$out/log.txt" && grep -q '^==== script.log' "$out/log.txt" &&
    grep -q 'tune rms_norm 8x64x256' "$out/log.txt"; then pass tune_h200_log
else fail tune_h200_log "$(grep '^====' "$out/log.txt")"; fi
scratch=$(sed -n 's/.*, out \(\/tmp\/lathe-tune-work\.[A-Za-z0-9]*\),.*/\1/p' "$tmp/script.err" | head -1)
if [ -n "$scratch" ] && [ ! -e "$scratch" ]; then pass tune_h200_scratch_removed
else fail tune_h200_scratch_removed "scratch '$scratch' not named or not removed"; fi
bench/tune_h200.sh --bogus >"$tmp/o" 2>"$tmp/e"; rc=$?
if [ $rc -eq 2 ] && grep -q "unknown option '--bogus'" "$tmp/e"; then pass tune_h200_bad_option
else fail tune_h200_bad_option "exit $rc: $(cat "$tmp/e")"; fi
