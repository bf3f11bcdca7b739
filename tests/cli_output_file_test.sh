#!/usr/bin/env bash
# Files lathe writes (compile -o, fit -o): whole or not at all. The text goes to a temporary file beside the
# target, renamed over it only when complete, so a failed write leaves an earlier file intact and no debris.
set -u
source "$(dirname "$0")/cli_lib.sh"
P="x: f32[4]; return x + 1.0"

if "$LATHE" compile -e "$P" -o "$tmp/k.c" >"$tmp/out" 2>"$tmp/err" && [ ! -s "$tmp/out" ] && grep -q "lt_f16_to_f32\|int64_t" "$tmp/k.c" && [ "$(tail -c 1 "$tmp/k.c" | od -An -c | tr -d ' ')" = '\n' ]; then
  pass compile_o_content
else
  fail compile_o_content "$(head -c 200 "$tmp/k.c")"
fi
expect_error compile_o_missing_dir "cannot write .*/no/such/dir/k.c: No such file" -- compile -e "$P" -o "$tmp/no/such/dir/k.c"
# the target is a directory: the rename fails, the directory and its file stay, no temporary file is left
mkdir -p "$tmp/adir" && echo keep >"$tmp/adir/inside"
expect_error compile_o_onto_dir "cannot write .*adir" -- compile -e "$P" -o "$tmp/adir"
if [ "$(cat "$tmp/adir/inside")" = keep ] && ! ls "$tmp"/adir.tmp.* >/dev/null 2>&1; then pass compile_o_onto_dir_intact
else fail compile_o_onto_dir_intact "$(ls -la "$tmp")"; fi
# an earlier file survives a failed compile untouched (the program is wrong: nothing is written)
echo earlier >"$tmp/keep.c"
expect_error compile_o_bad_program "error" -- compile -e "x: f32[4]; return y" -o "$tmp/keep.c"
if [ "$(cat "$tmp/keep.c")" = earlier ]; then pass compile_o_bad_program_intact
else fail compile_o_bad_program_intact "$(head -c 200 "$tmp/keep.c")"; fi
