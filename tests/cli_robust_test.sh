#!/usr/bin/env bash
set -u
source "$(dirname "$0")/cli_lib.sh"
# Faults from outside the program: damaged cache entries, allocation failure, a full cache filesystem.
# Each must end in the right answer with a one-line warning, or in one clear error line (exit 2).

P='x: f32[1,32,2048]; w: f32[2048]; y = rms_norm(x, w, 1e-6)'
Q='x: f32[1,32,2048]; w: f32[2048]; y = rms_norm(x, w, 1e-5)' # same kernel name, other code
export LATHE_CACHE_DIR="$tmp/cache"
"$LATHE" run -e "$P" --check >/dev/null 2>&1
entry=$(ls "$LATHE_CACHE_DIR"/*.so 2>/dev/null | head -1)

# damaged_run NAME [WHY]: after the entry was damaged, a run must rebuild it (one warning naming it, and WHY)
# and check ok, without hanging; the run after that must use the rebuilt entry silently.
damaged_run() {
  local name=$1 why=${2:-.}
  timeout 120 "$LATHE" run -e "$P" --check >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if grep -q -E 'Sanitizer|runtime error' "$tmp/err"; then fail "$name" "sanitizer report: $(head -3 "$tmp/err")"; return; fi
  if [ $rc -ne 0 ]; then fail "$name" "exit $rc: $(head -3 "$tmp/err")"; return; fi
  if ! grep -q 'check y: .* ok' "$tmp/out"; then fail "$name" "check did not pass: $(cat "$tmp/out")"; return; fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q "warning: cache entry $entry is damaged" "$tmp/err" ||
    ! grep -q -E -- "$why" "$tmp/err"; then
    fail "$name" "expected one warning (/$why/): $(cat "$tmp/err")"; return
  fi
  if ! run_lathe "$name" run -e "$P" --check; then return; fi
  if [ -s "$tmp/err" ] || [ ! -f "$entry" ] || [ -L "$entry" ]; then fail "$name" "not rebuilt: $(cat "$tmp/err")"; return; fi
  pass "$name"
}

if [ -z "$entry" ]; then
  for n in cache_truncated cache_overwritten cache_fifo cache_foreign cache_symlink; do fail "$n" "no cache entry written"; done
else
  size=$(stat -c %s "$entry")
  for len in 1024 4096 9000 $((size - 1)); do # every length between 1 KB and 12 KB crashed dlopen before
    truncate -s "$len" "$entry"
    damaged_run "cache_truncated_$len"
  done
  dd if=/dev/urandom of="$entry" bs=1 seek=2000 count=3000 conv=notrunc 2>/dev/null
  damaged_run cache_overwritten
  printf '\x01' | dd of="$entry" bs=1 seek=$((size - 40)) conv=notrunc 2>/dev/null # one byte, near the end
  damaged_run cache_overwritten_one_byte
  rm -f "$entry"; mkfifo "$entry"
  damaged_run cache_fifo 'not a regular file'
  # an entry of another program under this program's name (same kernel name, different code)
  "$LATHE" run -e "$Q" --check >/dev/null 2>&1
  other=$(ls "$LATHE_CACHE_DIR"/*.so | grep -v "$(basename "$entry")" | head -1)
  rm -f "$entry"; cp "$other" "$entry"
  damaged_run cache_foreign 'another program'
  rm -f "$entry"; ln -s "$other" "$entry"
  damaged_run cache_symlink 'symbolic link'
fi

# Allocation failure is one clear error line, exit 2 (the release build: ASan's shadow memory needs more
# address space than the limit allows).
REL=${LATHE_RELEASE:-build/lathe}
if [ -x "$REL" ]; then
  (ulimit -v 1100000; "$REL" run -e 'x: f32[100000000]; y = exp(x)' --target cpu >"$tmp/out" 2>"$tmp/err"); rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'error: out of memory: [0-9]* bytes for ' "$tmp/err"; then
    pass oom_ulimit_run
  else fail oom_ulimit_run "exit $rc: $(head -3 "$tmp/err")"; fi
  (ulimit -v 1100000; "$REL" run -e 'x: f32[100000000]; y = exp(x)' --target cpu --check >"$tmp/out" 2>"$tmp/err"); rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'error: out of memory: [0-9]* bytes for ' "$tmp/err"; then
    pass oom_ulimit_check
  else fail oom_ulimit_check "exit $rc: $(head -3 "$tmp/err")"; fi
else
  skip oom_ulimit_run "no release build at $REL"; skip oom_ulimit_check "no release build at $REL"
fi
# The same under ASan, with allocations over 100 MB failing (ASan prints its own warning line first).
for lim in 100 500; do
  ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=$lim "$LATHE" run -e 'x: f32[100000000]; y = exp(x)' \
    --target cpu --check >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -v 'AddressSanitizer failed to allocate' "$tmp/err" | wc -l)" -eq 1 ] &&
    grep -q 'error: out of memory: [0-9]* bytes for ' "$tmp/err" && ! grep -q 'ERROR: AddressSanitizer' "$tmp/err"; then
    pass "oom_asan_$lim"
  else fail "oom_asan_$lim" "exit $rc: $(head -3 "$tmp/err")"; fi
done

# A full cache filesystem falls back to a temporary directory with one warning (needs a tmpfs mount: root).
# Completely full, the source cannot be written; with 4 KB left the source fits and the compiler fails
# writing the object (it said only "C compiler failed with exit status 1 and no message").
full="$tmp/full"
mkdir -p "$full"
if mount -t tmpfs -o size=64k tmpfs "$full" 2>/dev/null; then
  for left in 0 4; do
    rm -rf "$full"/*; mkdir -p "$full/cache"
    dd if=/dev/zero of="$full/fill" bs=1k count=$((64 - left)) 2>/dev/null # dd stops at ENOSPC
    LATHE_CACHE_DIR="$full/cache" "$LATHE" run -e "$P" --check >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -eq 0 ] && grep -q 'check y: .* ok' "$tmp/out" && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
      grep -q 'warning: cannot use the cache directory .*temporary directory' "$tmp/err"; then
      pass "cache_full_filesystem_${left}k_left"
    else fail "cache_full_filesystem_${left}k_left" "exit $rc: $(cat "$tmp/out" "$tmp/err" | head -4)"; fi
    if ls -A "$full/cache" | grep -q .; then fail "cache_full_no_litter_${left}k" "left: $(ls -A "$full/cache")"
    else pass "cache_full_no_litter_${left}k"; fi
  done
  umount "$full"
else
  for left in 0 4; do
    skip "cache_full_filesystem_${left}k_left" "cannot mount a tmpfs (not root?)"; skip "cache_full_no_litter_${left}k" "no tmpfs"
  done
fi

# A cache directory that cannot be created, or a read-only one: the same fallback, said once.
LATHE_CACHE_DIR=/proc/lathe-no-such-dir/cache "$LATHE" run -e "$P" --check >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ] && grep -q 'check y: .* ok' "$tmp/out" && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
  grep -q 'warning: cannot use the cache directory (/proc/lathe-no-such-dir/cache: cannot be created' "$tmp/err"; then
  pass cache_dir_uncreatable
else fail cache_dir_uncreatable "exit $rc: $(cat "$tmp/out" "$tmp/err" | head -4)"; fi
ro="$tmp/ro"
mkdir -p "$ro"
if mount -t tmpfs -o size=64k,ro tmpfs "$ro" 2>/dev/null; then
  LATHE_CACHE_DIR="$ro" "$LATHE" run -e "$P" --check >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -eq 0 ] && grep -q 'check y: .* ok' "$tmp/out" && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
    grep -q "warning: cannot use the cache directory $ro (.*Read-only file system" "$tmp/err"; then
    pass cache_dir_read_only
  else fail cache_dir_read_only "exit $rc: $(cat "$tmp/out" "$tmp/err" | head -4)"; fi
  umount "$ro"
else
  skip cache_dir_read_only "cannot mount a tmpfs (not root?)"
fi
