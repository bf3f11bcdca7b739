#!/usr/bin/env bash
# Files lathe writes (compile -o, fit -o): whole or not at all. The text goes to a temporary file beside the
# target, renamed over it only when complete, so a failed write leaves an earlier file intact and no debris; a
# target that is not a regular file (a device, a FIFO, a symbolic link) is written in place.
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
# what is not a regular file is written in place, as other tools write it (a rename over /dev/null would replace
# the device node): a FIFO stays a FIFO and its reader gets the text; a symbolic link stays a link to its file
mkfifo "$tmp/pipe"
timeout 20 cat "$tmp/pipe" >"$tmp/pipe.out" &
reader=$!
if "$LATHE" compile -e "$P" -o "$tmp/pipe" 2>"$tmp/err" && wait "$reader" && [ -p "$tmp/pipe" ] &&
    grep -q "int64_t" "$tmp/pipe.out"; then pass compile_o_fifo
else fail compile_o_fifo "$(ls -la "$tmp/pipe") $(head -c 200 "$tmp/err")"; fi
echo earlier >"$tmp/real.c" && ln -s "$tmp/real.c" "$tmp/link.c"
if "$LATHE" compile -e "$P" -o "$tmp/link.c" 2>"$tmp/err" && [ -L "$tmp/link.c" ] && grep -q "int64_t" "$tmp/real.c"; then
  pass compile_o_symlink
else fail compile_o_symlink "$(ls -la "$tmp/link.c") $(head -c 200 "$tmp/real.c")"; fi
