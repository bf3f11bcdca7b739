#!/usr/bin/env bash
# Gathers a lathe binary and the shared libraries it links (all but glibc's own) into DIR, to carry to a machine
# that lacks some of them (the H200 has no libmicrohttpd): DIR/lathe and DIR/lib/. Then, there:
#   bench/serve_h200.sh DIR/lathe --libs DIR/lib
#
#   bench/carry_lathe.sh [LATHE] [DIR]     (defaults: build/lathe, .devcarry)
set -u
bin=${1:-build/lathe} dir=${2:-.devcarry}
[ -x "$bin" ] || { echo "$0: $bin is not an executable (make build/lathe)" >&2; exit 2; }
mkdir -p "$dir/lib" || exit 2
cp "$bin" "$dir/lathe" || exit 2
ldd "$bin" | awk '$3 ~ /^\// {print $3}' \
  | grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux[^/]*)\.so' \
  | while read -r lib; do cp -L "$lib" "$dir/lib/" || exit 2; done || exit 2
echo "$dir: lathe and $(ls "$dir/lib" | wc -l) libraries, $(du -sh "$dir" | cut -f1)"
