#!/usr/bin/env bash
# Installs the Debian packages lathe needs to build and test. Idempotent; quiet when all are present.
set -euo pipefail
pkgs=(build-essential clang-format libcmocka-dev libjansson-dev libpcre2-dev libutf8proc-dev libcurl4-openssl-dev libssl-dev libedit-dev libmicrohttpd-dev libsqlite3-dev)
# The tests drive the interactive chat through tmux, render the man page with groff and check the zsh
# completion's syntax.
pkgs+=(tmux groff-base zsh)
# Optional lists, installed only when asked for: `install-deps.sh fuzz` (used by `make fuzz`) adds
# clang and its libFuzzer runtime.
fuzz_pkgs=(clang libclang-rt-14-dev)
if [ "${1:-}" = fuzz ]; then pkgs+=("${fuzz_pkgs[@]}"); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
